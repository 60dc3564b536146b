"""History: minute accumulation, packing, hour roll-ups, storage, busy card-hours, retention."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from leases.core.models import GpuSample, NodeHealth
from leases.fleet.sparkline import Reading, sparkline
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.history import (
    MIB_STEPS,
    POWER_STEPS,
    UTIL_STEPS,
    GpuHour,
    GpuMinute,
    MinuteAccumulator,
    NodeMinute,
    RecentHistory,
    hour_of,
    pack_hour,
    pack_minute,
    unpack_hour,
    unpack_minute,
)
from leases.telemetry.rollups import HistoryStore

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def sample(at: datetime, index: int, util: float | None, mem: float | None = 1000.0) -> GpuSample:
    return GpuSample("n1", at, index, util_gpu=util, mem_used_mib=mem, power_w=100.0)


def test_minutes_close_when_the_next_begins() -> None:
    acc = MinuteAccumulator("n1")
    assert acc.add([sample(T0, 0, 10), sample(T0, 1, None)]) == []
    assert acc.add([sample(T0 + timedelta(seconds=30), 0, 30)]) == []
    closed = acc.add([sample(T0 + timedelta(seconds=61), 0, 90)])
    assert len(closed) == 1
    g0, g1 = closed[0].gpus
    assert (g0.readings, g0.util_mean, g0.util_max) == (2, 20.0, 30.0)
    assert g1.util_mean is None and g1.busy is None  # unknown stays unknown
    assert closed[0].minute == int(T0.timestamp()) // 60
    assert acc.flush(int(T0.timestamp()) // 60 + 1) is None  # minute still open
    late = acc.flush(int(T0.timestamp()) // 60 + 2)
    assert late is not None and late.gpus[0].util_mean == 90.0


def _retimed(readings: list[GpuSample], at: datetime) -> list[GpuSample]:
    return [GpuSample(s.node, at, s.index, util_gpu=s.util_gpu, mem_used_mib=s.mem_used_mib,
                      power_w=s.power_w, power_limit_w=s.power_limit_w) for s in readings]  # fmt: skip


_reading = st.lists(
    st.tuples(st.integers(0, 3), st.none() | st.floats(0, 100, allow_nan=False),
              st.none() | st.floats(0, 80_000), st.none() | st.floats(0, 700)),
    min_size=1, max_size=4, unique_by=lambda r: r[0],
)  # fmt: skip


@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 150), _reading), min_size=1, max_size=40),
    st.integers(0, 3),
)
def test_a_reading_again_closes_the_same_minutes_as_adding_it(
    steps: list[tuple[bool, int, list[tuple[int, float | None, float | None, float | None]]]],
    flush_every: int,
) -> None:
    """again (the samples last added, read again at a later time) gives, bit for bit, the
    minutes add gives for copies of them at that time: through minutes closing, flushes
    between readings, late readings and unknown values."""
    plain, counted = MinuteAccumulator("n1"), MinuteAccumulator("n1")
    got_plain: list[NodeMinute] = []
    got_counted: list[NodeMinute] = []
    last: list[GpuSample] | None = None
    at = T0
    for i, (repeat, seconds, rows) in enumerate(steps):
        at = at + timedelta(seconds=seconds - 20)  # now and then a late one
        if repeat and last is not None:
            got_plain += plain.add(_retimed(last, at))
            got_counted += counted.again(last, at)  # the samples themselves, not copies
        else:
            readings = [GpuSample("n1", at, g, util_gpu=u, mem_used_mib=m, power_w=p,
                                  power_limit_w=400.0) for g, u, m, p in rows]  # fmt: skip
            got_plain += plain.add(readings)
            got_counted += counted.add(readings)
            last = readings
        if flush_every and i % (flush_every + 1) == flush_every:
            now_minute = int(at.timestamp()) // 60 + 1
            for acc, got in ((plain, got_plain), (counted, got_counted)):
                closed = acc.flush(now_minute)
                if closed is not None:
                    got.append(closed)
    end = int(at.timestamp()) // 60 + 5
    for acc, got in ((plain, got_plain), (counted, got_counted)):
        closed = acc.flush(end)
        if closed is not None:
            got.append(closed)
    assert got_counted == got_plain


def test_readings_again_count_in_their_minute() -> None:
    """Worked by hand: 10 % then the same reading three times (one of them in the next
    minute), then 50 %: minute one 4 readings at 10 %, minute two 10 and 50, mean 30."""
    acc = MinuteAccumulator("n1")
    first = [sample(T0, 0, 10)]
    assert acc.add(first) == []
    assert acc.again(first, T0 + timedelta(seconds=20)) == []
    assert acc.again(first, T0 + timedelta(seconds=40)) == []
    assert acc.again(first, T0 + timedelta(seconds=50)) == []
    closed = acc.again(first, T0 + timedelta(seconds=65))  # the next minute: first closes
    assert [(m.gpus[0].readings, m.gpus[0].util_mean) for m in closed] == [(4, 10.0)]
    assert acc.add([sample(T0 + timedelta(seconds=80), 0, 50)]) == []
    late = acc.flush(int(T0.timestamp()) // 60 + 2)
    assert late is not None and (late.gpus[0].readings, late.gpus[0].util_mean) == (2, 30.0)


maybe = st.none() | st.floats(0, 100, allow_nan=False)


@given(
    st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 255), maybe, maybe,
                  st.none() | st.floats(0, 200_000), st.none() | st.floats(0, 2000)),
        max_size=8,
    )
)  # fmt: skip
@example([(0, 6, 0.5, 99.5, 0.5, 0.35)])  # 0.35 W came back 0.4 W: a flake
@example([(7, 255, 100.0, 0.0, 200_000.0, 0.05), (0, 0, 2.5, None, 1.5, 0.15)])
def test_minute_packing_round_trips(rows: list[tuple]) -> None:  # type: ignore[type-arg]
    gpus = [GpuMinute(*r) for r in rows]
    back = unpack_minute(pack_minute(gpus))
    assert len(back) == len(gpus)
    for a, b in zip(gpus, back, strict=True):
        assert (a.index, a.readings) == (b.index, b.readings)
        for x, y, steps in ((a.util_mean, b.util_mean, UTIL_STEPS), (a.util_max, b.util_max, UTIL_STEPS),
                            (a.mem_mean_mib, b.mem_mean_mib, MIB_STEPS),
                            (a.power_mean_w, b.power_mean_w, POWER_STEPS)):  # fmt: skip
            assert (x is None) == (y is None)
            if x is not None and y is not None:
                assert abs(x - y) <= packing_tolerance(x, steps), (x, y)


def packing_tolerance(value: float, steps: int) -> float:
    """Half a packing step, plus the float error of scaling by `steps` and back (0.35 W
    is stored as 3.5 tenths, rounds to 4, and 0.4 - 0.35 is 0.05 plus a few ulps)."""
    return 0.5 / steps + 4 * math.ulp(max(abs(value), 1.0))


def test_hour_counts_busy_and_known_minutes() -> None:
    minutes = [
        NodeMinute("n1", 1000 * 60 + i, (GpuMinute(0, 6, 50.0 if i < 15 else 2.0, 60.0, 9e3, 300.0),
                                         GpuMinute(1, 6, None, None, None, None)))
        for i in range(60)
    ]  # fmt: skip
    hour = hour_of("n1", 1000, minutes)
    g0, g1 = hour.gpus
    assert (g0.known_minutes, g0.busy_minutes) == (60, 15)
    assert (g1.known_minutes, g1.busy_minutes, g1.util_mean) == (0, 0, None)
    assert (hour.busy_card_minutes, hour.known_card_minutes) == (15, 60)
    assert unpack_hour(pack_hour(hour.gpus))[0].busy_minutes == 15


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h", "gpu_count": 2}))
    ledger.add_lease(records.lease_from({
        "node": "n1", "billing_type": "monthly", "unit_price": "50000",
        "start": (T0 - timedelta(days=3)).isoformat(), "end": (T0 + timedelta(days=27)).isoformat(),
    }))  # fmt: skip
    return ledger


def test_store_minutes_hours_and_busy_card_hours(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    store = HistoryStore(ledger)
    base = int(T0.timestamp()) // 60
    store.write_minutes([
        NodeMinute("n1", base + i, (GpuMinute(0, 12, 80.0, 95.0, 4e4, 350.0),
                                    GpuMinute(1, 12, 0.0 if i % 2 else 50.0, 50.0, 500.0, 60.0)))
        for i in range(120)
    ])  # fmt: skip
    assert len(store.minutes("n1", T0, T0 + timedelta(hours=2))) == 120
    hours = store.hours("n1", T0, T0 + timedelta(hours=2))
    assert [h.busy_card_minutes for h in hours] == [90, 90]  # GPU0 60 + GPU1 30 per hour
    busy = store.busy_card_hours(T0 - timedelta(days=30), T0 + timedelta(hours=2))
    assert len(busy) == 1
    assert busy[0].busy_card_hours == 3.0 and busy[0].known_card_hours == 4.0
    # Retention drops minutes, never hours.
    assert store.purge(T0 + timedelta(days=15), minute_days=14) == 120
    assert store.minutes("n1", T0, T0 + timedelta(hours=2)) == []
    assert len(store.hours("n1", T0, T0 + timedelta(hours=2))) == 2


def test_busy_hours_respect_lease_spans(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    store = HistoryStore(ledger)
    h0 = int(T0.timestamp()) // 3600
    store.write_hours(hour_of("n1", h, [NodeMinute("n1", h * 60 + m, (GpuMinute(0, 1, 90.0, 90.0, 1.0, 1.0),))
                                        for m in range(60)])
                      for h in range(h0 - 24 * 5, h0))  # fmt: skip
    busy = store.busy_card_hours(T0 - timedelta(days=30), T0)
    # The lease started 3 days before T0: the 2 days before it are not this lease's.
    assert busy[0].busy_card_hours == 72.0


def test_gaps_are_opened_once(tmp_path: Path) -> None:
    store = HistoryStore(_ledger(tmp_path))
    store.open_gap("n1", T0, NodeHealth.UNREACHABLE, "refused")
    store.open_gap("n1", T0 + timedelta(minutes=1), NodeHealth.UNREACHABLE, "refused")
    store.close_gap("n1", T0 + timedelta(minutes=5))
    gaps = store.gaps("n1")
    assert len(gaps) == 1 and gaps[0][1] == T0 + timedelta(minutes=5)


def test_recent_history_keeps_one_hour() -> None:
    recent = RecentHistory(window_s=3600)
    for i in range(0, 7200, 10):
        recent.add([sample(T0 + timedelta(seconds=i), 0, float(i % 100))])
    series = recent.series("n1", 0)
    assert series[-1].at - series[0].at <= 3600
    assert len(series) == 361


def test_sparkline_marks_unknown_as_blank() -> None:
    end = T0.timestamp()
    assert sparkline([Reading(end - 120, 60, 0), Reading(end - 60, 60, 100)], end=end,
                     span_s=120, cells=2) == "▁█"  # fmt: skip
    assert sparkline([Reading(end - 60, 60, 50)], end=end, span_s=120, cells=2)[0] == " "
    assert len(sparkline([Reading(end - 60, 60, 50)], end=end, cells=20)) == 20
    assert isinstance(GpuHour(0, 0, 0, None, None, None, None).util_mean, type(None))


def test_a_rename_and_a_reused_name_while_the_poller_runs(tmp_path: Path) -> None:
    """The collector keeps running across `node edit A --rename B` and a new `node add A`:
    once it re-reads the fleet (Poller.set_nodes), the new A's minutes, gaps and latest
    row go to the new A, and B keeps only its own."""
    from leases.core.models import NodeStatus
    from leases.ssh.pool import SshPool
    from leases.telemetry.poller import Poller

    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": "A", "local": True}))
    store = HistoryStore(ledger)
    poller = Poller(ledger.nodes(), pool=SshPool(), store=store)
    base = int(T0.timestamp()) // 60

    def minute(m: int) -> NodeMinute:
        return NodeMinute("A", m, (GpuMinute(0, 1, 90.0, 90.0, 1.0, 1.0),))

    store.write_minutes([minute(base)])
    old_id = ledger.node("A").id
    ledger.update_node("A", {"name": "B"})
    new_id = ledger.add_node(records.node_from({"name": "A", "local": True})).id
    poller.set_nodes(ledger.nodes())
    store.write_minutes([minute(base + 1)])
    store.open_gap("A", T0, NodeHealth.UNREACHABLE, "down")
    store.write_latest([NodeStatus("A", NodeHealth.OK, "", checked=T0)])
    assert [m.minute for m in store.minutes("B", T0, T0 + timedelta(hours=1))] == [base]
    assert [m.minute for m in store.minutes("A", T0, T0 + timedelta(hours=1))] == [base + 1]
    assert [g[3] for g in store.gaps("A")] == ["down"] and store.gaps("B") == []
    rows = ledger.conn.execute("SELECT node_id FROM node_latest").fetchall()
    assert rows == [(new_id,)] and new_id != old_id
    ledger.close()
