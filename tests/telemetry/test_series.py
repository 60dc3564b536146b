"""leases.telemetry.series: time-true slices over a span, gaps kept as gaps, live readings on the
roll-ups' scale; and the node screen's chart lines and ticks built from them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.telemetry import series
from leases.telemetry.history import GpuHour, GpuMinute, NodeHour, NodeMinute, Point
from leases.telemetry.series import Span
from tui.screens.nodeview import charts, ticks

NOW = datetime(2026, 11, 30, 9, 30, 20, tzinfo=UTC)
THIS_MINUTE = int(NOW.timestamp()) // 60


def minute(m: int, util: float | None, mem: float | None = 1024.0, power: float | None = 100.0,
           gpus: int = 2) -> NodeMinute:  # fmt: skip
    return NodeMinute("n", m, tuple(GpuMinute(i, 6, util, util, mem, power) for i in range(gpus)))


def test_the_last_hour_is_sixty_minutes_ending_with_the_minute_in_progress() -> None:
    g = series.grid(Span.HOUR, NOW)
    assert (g.step, g.count) == (60, 60)
    assert g.slice_of(NOW.timestamp()) == 59
    assert g.end == (THIS_MINUTE + 1) * 60
    assert g.slice_of(g.start - 1) is None and g.slice_of(g.end) is None
    # Slices sit on whole minutes: ten seconds later the grid is the same.
    assert series.grid(Span.HOUR, NOW + timedelta(seconds=10)) == g


@pytest.mark.parametrize(("span", "step", "count"), [(Span.DAY, 600, 144), (Span.WEEK, 3600, 168)])
def test_day_and_week_grids(span: Span, step: int, count: int) -> None:
    g = series.grid(span, NOW)
    assert (g.step, g.count) == (step, count)
    assert g.start % step == 0 and g.slice_of(NOW.timestamp()) == count - 1


def test_a_lease_life_is_cut_into_at_most_lease_slices_whole_hours() -> None:
    start = NOW - timedelta(days=200, minutes=17)
    g = series.grid(Span.LEASE, NOW, (start, NOW))
    assert g.count <= series.LEASE_SLICES and g.step % 3600 == 0
    assert g.slice_of(start.timestamp()) == 0 and g.slice_of(NOW.timestamp()) == g.count - 1
    short = series.grid(Span.LEASE, NOW, (NOW - timedelta(minutes=5), NOW))
    assert (short.step, short.count) == (3600, 1)
    ended = series.grid(Span.LEASE, NOW, (start, start + timedelta(days=3)))
    assert ended.end <= int((start + timedelta(days=3)).timestamp()) + 3600
    with pytest.raises(ValueError, match="lease"):
        series.grid(Span.LEASE, NOW)


def test_minutes_without_readings_are_gaps_not_zero() -> None:
    g = series.grid(Span.HOUR, NOW)
    first = g.start // 60
    rows = [minute(first + i, 50.0) for i in range(60) if not 20 <= i < 30]
    s = series.from_minutes(Span.HOUR, g, rows)
    assert s.util[20:30] == (None,) * 10
    assert s.util[:20] == (50.0,) * 20
    assert s.known == 50
    assert s.mem_gib[0] == 2.0 and s.power_w[0] == 200.0  # summed over both GPUs
    assert series.runs(s.util) == [(0, 19), (30, 59)]


def test_memory_of_one_gpu_unknown_makes_the_node_memory_unknown_not_smaller() -> None:
    g = series.grid(Span.HOUR, NOW)
    m = NodeMinute("n", g.start // 60, (GpuMinute(0, 6, 80.0, 90.0, 1024.0, 300.0),
                                        GpuMinute(1, 6, None, None, None, 200.0)))  # fmt: skip
    s = series.from_minutes(Span.HOUR, g, [m])
    assert s.util[0] == 80.0  # the mean of the GPUs read
    assert s.mem_gib[0] is None and s.power_w[0] == 500.0


def test_a_minute_without_any_reading_is_a_gap() -> None:
    g = series.grid(Span.HOUR, NOW)
    silent = NodeMinute("n", g.start // 60, (GpuMinute(0, 0, None, None, None, None),))
    assert series.from_minutes(Span.HOUR, g, [silent]).util[0] is None


def test_live_readings_fill_the_minute_in_progress_only() -> None:
    g = series.grid(Span.HOUR, NOW)
    stored = [minute(THIS_MINUTE - 1, 10.0)]
    live = series.live_minutes(
        "n",
        {
            0: [Point((THIS_MINUTE - 1) * 60 + 5, 90.0, 1024.0, 100.0),  # stored already
                Point(THIS_MINUTE * 60 + 2, 40.0, 1024.0, 100.0),
                Point(THIS_MINUTE * 60 + 4, 60.0, None, 100.0)],
            1: [Point(THIS_MINUTE * 60 + 2, 20.0, 2048.0, 50.0)],
        },
    )  # fmt: skip
    s = series.from_minutes(Span.HOUR, g, stored, live)
    assert s.util[58] == 10.0  # the roll-up, not the live reading of that minute
    assert s.util[59] == pytest.approx((50.0 + 20.0) / 2)  # per GPU means, then the node's
    assert s.mem_gib[59] == pytest.approx(3.0)
    assert s.power_w[59] == pytest.approx(150.0)


def test_hours_weigh_by_the_minutes_they_hold() -> None:
    start = NOW - timedelta(days=29)  # 697 hours: 4 a slice, at most 180 slices
    g = series.grid(Span.LEASE, NOW, (start, NOW))
    assert g.step == 4 * 3600
    first = g.start // 3600
    rows = [
        NodeHour("n", first, (GpuHour(0, 60, 60, 90.0, 100.0, 1024.0, 300.0),)),
        NodeHour("n", first + 1, (GpuHour(0, 6, 0, 0.0, 0.0, 1024.0, 60.0),)),
    ]
    s = series.from_hours(Span.LEASE, g, rows)
    assert s.util[0] == pytest.approx((90.0 * 60 + 0.0 * 6) / 66)
    assert s.util[1] is None


@given(st.sets(st.integers(0, 59)), st.floats(0, 100))
def test_every_minute_read_is_one_known_slice(read: set[int], util: float) -> None:
    g = series.grid(Span.HOUR, NOW)
    s = series.from_minutes(Span.HOUR, g, [minute(g.start // 60 + i, util) for i in read])
    assert {i for i, v in enumerate(s.util) if v is not None} == read
    assert all(v == pytest.approx(util) for v in s.util if v is not None)
    assert sum(b - a + 1 for a, b in series.runs(s.util)) == len(read)


@given(st.floats(-1e4, 1e4), st.floats(0.5, 1e4))
def test_ticks_are_round_and_inside(left: float, width: float) -> None:
    found = ticks(left, left + width)
    assert 1 <= len(found) <= 5 or width < 1
    for x, label in found:
        assert left - 1e-6 <= x <= left + width + 1e-6 and label == f"{int(x)}"


def test_chart_lines_leave_gaps_blank() -> None:
    g = series.grid(Span.HOUR, NOW)
    first = g.start // 60
    rows = [minute(first + i, float(i)) for i in range(60) if i not in (10, 11)]
    util, mem, power = charts(series.from_minutes(Span.HOUR, g, rows), NOW, 80.0, 800.0)
    assert len(util.lines) == 2  # one line each side of the gap: never drawn across it
    assert len(util.lines[0][0]) == 10 and util.lines[1][1][0] == 12.0
    assert util.ylim == (0.0, 100.0) and mem.ylim == (0.0, 80.0) and power.ylim[1] == 800.0
    assert "2 of 60 slices unread" in util.title
    assert util.xlim[0] < -59 and util.xlim[1] > 0  # minutes before now
    empty = charts(series.from_minutes(Span.HOUR, g, []), NOW)[0]
    assert empty.lines == () and "no readings" in empty.title


def hour(h: int, util: float, gpus: int = 2) -> NodeHour:
    return NodeHour(
        "n", h, tuple(GpuHour(i, 60, 0, util, util, 1024.0, 100.0) for i in range(gpus))
    )


def test_a_day_reads_the_hours_where_the_minutes_are_gone() -> None:
    """Minutes kept for the last 6 hours only (purged before, or history written as hours):
    the day is drawn whole, from the hour roll-ups before the first minute held; a gap
    among the minutes stays a gap."""
    g = series.grid(Span.DAY, NOW)
    first = THIS_MINUTE - 6 * 60
    rows = [minute(m, 50.0) for m in range(first, THIS_MINUTE + 1) if not 0 < m - first <= 30]
    hours = [hour(h, 20.0) for h in range(g.start // 3600, THIS_MINUTE // 60 + 1)]
    s = series.from_minutes(Span.DAY, g, rows, hours=hours)
    gaps = [i for i, v in enumerate(s.util) if v is None]
    assert len(gaps) == 2  # the 30 minutes unread after the first minute held, no more
    assert all(g.at(i).timestamp() > first * 60 for i in gaps)
    before = [
        v for i, v in enumerate(s.util) if g.at(i + 1).timestamp() <= first * 60 // 3600 * 3600
    ]
    assert len(before) >= 17 * 6 and before == [pytest.approx(20.0)] * len(before)
    assert s.util[-1] == pytest.approx(50.0)
    # Without the hours, as before: only the last 6 hours are drawn.
    assert series.from_minutes(Span.DAY, g, rows).known < 40


@pytest.mark.parametrize(
    ("life", "label"),
    [(timedelta(hours=12), r"(\d\d-\d\d )?\d\d:00"), (timedelta(days=30), r"\d\d-\d\d")],
)
def test_a_lease_life_is_labelled_with_dates(life: timedelta, label: str) -> None:
    """Not a count from the start (a lease of half a day had one label, '0')."""
    import re

    g = series.grid(Span.LEASE, NOW, (NOW - life, NOW))
    util, _, _ = charts(series.from_hours(Span.LEASE, g, []), NOW, tz="Asia/Shanghai")
    assert 3 <= len(util.ticks) <= 5
    assert all(re.fullmatch(label, text) for _, text in util.ticks), util.ticks
    assert all(util.xlim[0] <= x <= util.xlim[1] for x, _ in util.ticks)
    xs = [x for x, _ in util.ticks]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)


def test_the_charts_say_they_are_the_node_over_its_gpus() -> None:
    g = series.grid(Span.HOUR, NOW)
    util, mem, power = charts(series.from_minutes(Span.HOUR, g, []), NOW, gpus=8)
    assert "mean of 8 GPUs" in util.title
    assert "all 8 GPUs" in mem.title and "all 8 GPUs" in power.title
