"""The time-true sparkline: one cell per fixed slice of time, gaps as gaps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.fleet.sparkline import BARS, GAP, Reading, cell_means, sparkline, window_end

END = 1_800_000_000.0  # a whole hour in Unix seconds


def minutes(values: list[float | None], end: float = END) -> list[Reading]:
    """Minute roll-ups ending at `end`, the oldest first."""
    start = end - 60 * len(values)
    return [Reading(start + 60 * i, 60, v) for i, v in enumerate(values)]


def test_a_node_down_for_half_an_hour_shows_half_a_line_of_gaps() -> None:
    readings = minutes([100.0] * 30 + [None] * 30)
    line = sparkline(readings, end=END, cells=12)
    assert line == BARS[-1] * 6 + GAP * 6


def test_missing_minutes_are_gaps_not_squeezed_away() -> None:
    # Only the last 10 minutes were stored: the old sample-count line drew them over
    # the whole width; a time-true one keeps them at the end.
    line = sparkline(minutes([50.0] * 10), end=END, cells=6)
    assert line[:5] == GAP * 5 and line[5] != GAP


def test_a_known_zero_is_the_lowest_bar_not_a_gap() -> None:
    assert sparkline(minutes([0.0] * 60), end=END, cells=4) == BARS[0] * 4


def test_live_readings_and_minutes_share_one_scale() -> None:
    """The same utilisation as minute roll-ups or as 5 s readings draws the same line."""
    values = [float((i * 17) % 101) for i in range(60)]
    live = [
        Reading(END - 3600 + 60 * i + 5 * k, 5, v) for i, v in enumerate(values) for k in range(12)
    ]
    assert sparkline(minutes(values), end=END, cells=20) == sparkline(live, end=END, cells=20)


def test_a_reading_across_a_cell_boundary_counts_in_both_by_time() -> None:
    # Cell 0 is [END-120, END-60), cell 1 [END-60, END): 30 s of 100 % in each.
    means = cell_means([Reading(END - 90, 60, 100.0)], end=END, span_s=120, cells=2)
    assert means == [100.0, 100.0]
    means = cell_means(
        [Reading(END - 120, 60, 0.0), Reading(END - 90, 60, 100.0)], end=END, span_s=120, cells=2
    )
    # Cell 0 holds 60 s of 0 % and 30 s of 100 %: weighted by time, not by reading.
    assert means[0] == pytest.approx(100 * 30 / 90)


def test_readings_outside_the_window_are_ignored() -> None:
    old = [Reading(END - 7200, 60, 100.0), Reading(END + 10, 60, 100.0)]
    assert sparkline(old, end=END, cells=3) == GAP * 3


@given(
    st.lists(
        st.tuples(
            st.floats(END - 4000, END + 100),
            st.floats(0, 600),
            st.none() | st.floats(0, 100),
        ),
        max_size=50,
    ),
    st.integers(1, 40),
)
def test_always_cells_wide_and_within_the_scale(
    raw: list[tuple[float, float, float | None]], cells: int
) -> None:
    readings = [Reading(a, s, v) for a, s, v in raw]
    line = sparkline(readings, end=END, cells=cells)
    assert len(line) == cells
    assert set(line) <= set(BARS) | {GAP}
    for m in cell_means(readings, end=END, cells=cells):
        assert m is None or -1e-9 <= m <= 100 + 1e-9


def test_the_window_ends_at_the_end_of_the_slice_in_progress() -> None:
    assert window_end(END) == END  # on a boundary: the hour just ended
    assert window_end(END + 1) == END + 300  # the next 5-minute slice has begun
    assert window_end(END + 299.5) == END + 300
