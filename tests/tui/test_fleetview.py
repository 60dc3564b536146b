"""The fleet screen's pure parts: column priority, urgency colours."""

from __future__ import annotations

from datetime import UTC, datetime

from tui.screens.fleetview import (
    CELL_PADDING,
    COLUMNS,
    end_day,
    urgency_style,
    visible_columns,
)

END = 1_800_000_000.0


def test_narrow_terminals_keep_the_columns_that_matter() -> None:
    keys = [c.key for c in visible_columns(78, 18)]
    assert keys[:1] == ["node"] and {"state", "util", "ends", "alerts"} <= set(keys)
    assert [c.key for c in visible_columns(500, 18)] == [c.key for c in COLUMNS]
    assert [c.key for c in visible_columns(10, 18)] == ["node"]  # always the name


def test_urgency() -> None:
    day = 86400.0
    assert urgency_style(-1) == urgency_style(0.5 * day) == "bold red"
    assert urgency_style(2 * day) == "dark_orange"
    assert urgency_style(6 * day) == "yellow"
    assert urgency_style(30 * day) == ""
    assert urgency_style(None) == "dim"


def _width(cols: tuple[object, ...]) -> int:
    return sum(c.width + CELL_PADDING for c in cols)  # type: ignore[attr-defined]


def test_room_to_spare_widens_the_columns_whose_text_is_cut() -> None:
    # At 200 columns 'colo/Jiangning I' and 'stopped: gpu' were cut at their fixed widths.
    wide = {c.key: c.width for c in visible_columns(200, 18)}
    base = {c.key: c.width for c in COLUMNS}
    assert wide["channel"] > base["channel"] and wide["gpus"] > base["gpus"]
    assert wide["offboard"] == base["offboard"]  # dashes only: no plan in force
    busy = {c.key: c.width for c in visible_columns(200, 18, offboarding=True)}
    assert busy["offboard"] > base["offboard"]
    assert _width(visible_columns(200, 18)) <= 200
    # Exactly filled: nothing to spare, nothing widened.
    natural = sum((18 if c.key == "node" else c.width) + CELL_PADDING for c in COLUMNS)
    assert {c.key: c.width for c in visible_columns(natural, 18)} == {**base, "node": 18}


def test_the_offboard_column_ranks_high_while_a_node_is_offboarding() -> None:
    assert "offboard" not in [c.key for c in visible_columns(120, 18)]
    shown = [c.key for c in visible_columns(120, 18, offboarding=True)]
    assert "offboard" in shown and {"state", "util", "ends", "alerts"} <= set(shown)
    assert _width(visible_columns(120, 18, offboarding=True)) <= 120


def test_a_lease_end_day_reads_one_way() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert end_day(datetime(2026, 12, 16, tzinfo=UTC), now) == "16 Dec"
    assert end_day(datetime(2027, 6, 2, tzinfo=UTC), now) == "2 Jun"  # not '27-06-02'
    assert end_day(datetime(2028, 1, 3, tzinfo=UTC), now) == "Jan 2028"
