"""The unfinished clock hour while a collector writes: what has been read of it so far
counts (busy and known card-minutes), not unknown; the clock is injected (`until`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.history import GpuMinute, NodeMinute
from leases.telemetry.rollups import HistoryStore

HOUR = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # an hour's start; "now" is within it


def _store(tmp_path: Path) -> HistoryStore:
    ledger = Ledger.open(tmp_path / "l.db", clock=lambda: HOUR)
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h", "gpu_count": 2}))
    ledger.add_lease(records.lease_from({
        "node": "n1", "billing_type": "monthly", "unit_price": "50000",
        "start": (HOUR - timedelta(days=3)).isoformat(),
        "end": (HOUR + timedelta(days=27)).isoformat(),
    }))  # fmt: skip
    return HistoryStore(ledger)


def _write(store: HistoryStore, first: int, count: int) -> None:
    """`count` minutes from `first` minutes after HOUR - 1 h: GPU0 busy, GPU1 idle."""
    base = int(HOUR.timestamp()) // 60 - 60
    store.write_minutes([
        NodeMinute("n1", base + first + i, (GpuMinute(0, 12, 80.0, 95.0, 4e4, 350.0),
                                            GpuMinute(1, 12, 0.0, 0.0, 500.0, 60.0)))
        for i in range(count)
    ])  # fmt: skip


def test_the_current_hour_counts_what_was_read_so_far(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _write(store, 0, 60 + 30)  # the last hour whole, then 9:00-9:29 as a collector wrote
    now = HOUR + timedelta(minutes=30, seconds=20)
    busy, known = store.card_minutes("n1", HOUR - timedelta(hours=1), now)
    assert (busy, known) == (60 + 30, 120 + 60)  # the unfinished hour read, not unknown
    # Only the minutes before `until`: a lease that ended at 9:10 counts ten of them.
    assert store.card_minutes("n1", HOUR, HOUR + timedelta(minutes=10)) == (10, 20)
    # On the hour: nothing of the next hour.
    assert store.card_minutes("n1", HOUR - timedelta(hours=1), HOUR) == (60, 120)
    lease = store.ledger.leases("n1")[0]
    usage = store.lease_usage(lease, HOUR - timedelta(hours=1), now, cards=2)
    # Paid 1.5 h (and 20 s) of 2 cards; the unknown is the 20 s not yet closed in a minute.
    assert usage.unknown < 1


def test_a_minute_not_read_in_the_current_hour_stays_unknown(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _write(store, 60, 10)  # 9:00-9:09 read, then nothing (the node went down)
    now = HOUR + timedelta(minutes=40)
    assert store.card_minutes("n1", HOUR, now) == (10, 20)


def test_the_chart_marks_the_slice_being_read_as_so_far() -> None:
    from leases.telemetry import series
    from tui.screens.nodeview import charts

    now = HOUR + timedelta(minutes=30)
    g = series.grid(series.Span.DAY, now)
    util = (None,) * (g.count - 2) + (50.0, 40.0)
    s = series.Series(series.Span.DAY, g, util, util, util)
    title = charts(s, now)[0].title
    assert "last slice so far" in title
    done = series.Series(series.Span.DAY, g, (*util[:-1], None), util, util)
    assert "so far" not in charts(done, now)[0].title  # the slice with now not read
