"""The fleet screen's reads: one query for all nodes' last hour, closed minutes cached per
node, the header's figures, and the housekeeping a polling dashboard shares with collect."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.config.sections import Config
from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.fleet.data import FleetReader, MinuteCache, ReadRequest
from leases.fleet.header import countdown, header, header_line, next_end
from leases.fleet.sparkline import Reading
from leases.ledger.store import Ledger
from leases.sim.demoledger import build_demo_ledger
from leases.sim.ledger import register_sim_nodes
from leases.telemetry.history import (
    _MINUTE_V1,
    GpuMinute,
    NodeMinute,
    minute_util_mean,
    pack_minute,
    unpack_minute,
)
from leases.telemetry.housekeeping import Housekeeping
from leases.telemetry.rollups import HistoryStore

NOW = datetime(2026, 11, 30, 9, 30, 20, tzinfo=UTC)
NOW_MIN = int(NOW.timestamp()) // 60


def write(store: HistoryStore, node: str, minutes: range, util: float = 50.0) -> None:
    store.write_minutes(
        [
            NodeMinute(node, m, (GpuMinute(0, 12, util, util, 2000.0, 200.0, 400.0),))
            for m in minutes
        ]
    )


@pytest.fixture
def fleet(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(tmp_path / "f.db", clock=lambda: NOW)
    register_sim_nodes(ledger, 5, NOW)
    store = HistoryStore(ledger)
    for n in ledger.nodes():
        write(store, n.name, range(NOW_MIN - 90, NOW_MIN))
    return ledger


def ids(ledger: Ledger) -> dict[int, str]:
    return {n.id: n.name for n in ledger.nodes() if n.id is not None}


def selects(ledger: Ledger) -> list[str]:
    seen: list[str] = []
    ledger.conn.set_trace_callback(lambda sql: seen.append(sql) if "gpu_minute" in sql else None)
    return seen


def test_one_query_for_all_nodes_then_only_unsettled_minutes(fleet: Ledger) -> None:
    cache = MinuteCache(window_min=60, settle_min=3)
    seen = selects(fleet)
    cache.refresh(fleet.conn, ids(fleet), NOW)
    assert len(seen) == 1  # five nodes, one query
    assert cache.rows_read == 5 * 60  # the hour, not the 90 minutes stored
    seen.clear()
    cache.refresh(fleet.conn, ids(fleet), NOW + timedelta(seconds=2))
    assert len(seen) == 1
    assert cache.rows_read == 5 * 3  # only the minutes that may still change
    node_id = next(iter(ids(fleet)))
    assert len(cache.readings(node_id)) == 60
    assert cache.last_minute(node_id) == NOW_MIN - 1


def test_the_query_seeks_each_node_by_primary_key(fleet: Ledger) -> None:
    """Not a scan of every stored minute (90 days of a fleet is tens of millions)."""
    plan = fleet.conn.execute(
        "EXPLAIN QUERY PLAN SELECT g.node_id, g.minute, g.gpus FROM json_each(?) AS j"
        " CROSS JOIN gpu_minute AS g ON g.node_id = j.value WHERE g.minute >= ? AND g.minute < ?",
        ("[1, 2]", 0, 1),
    ).fetchall()
    details = " | ".join(str(row[-1]) for row in plan)
    assert "SEARCH g USING PRIMARY KEY" in details, details


def test_a_late_minute_and_a_new_node_are_picked_up(fleet: Ledger) -> None:
    cache = MinuteCache(window_min=60, settle_min=3)
    cache.refresh(fleet.conn, ids(fleet), NOW)
    store = HistoryStore(fleet)
    first = fleet.nodes()[0]
    assert first.id is not None
    write(store, first.name, range(NOW_MIN, NOW_MIN + 1), util=90.0)  # the minute closes
    later = NOW + timedelta(minutes=1)
    cache.refresh(fleet.conn, ids(fleet), later)
    assert cache.readings(first.id)[-1].value == 90.0
    assert len(cache.readings(first.id)) == 60  # the oldest minute left the window
    [added] = register_sim_nodes(fleet, 6, NOW)[5:]
    write(store, added.name, range(NOW_MIN - 30, NOW_MIN))
    cache.refresh(fleet.conn, ids(fleet), later)
    assert added.id is not None and len(cache.readings(added.id)) == 30


def test_a_refresh_that_came_late_rereads_what_settled_meanwhile(fleet: Ledger) -> None:
    cache = MinuteCache(window_min=60, settle_min=3)
    cache.refresh(fleet.conn, ids(fleet), NOW)
    first = fleet.nodes()[0]
    assert first.id is not None
    # Ten minutes pass without a refresh (a suspended terminal); minutes land meanwhile.
    write(HistoryStore(fleet), first.name, range(NOW_MIN, NOW_MIN + 10), util=7.0)
    cache.refresh(fleet.conn, ids(fleet), NOW + timedelta(minutes=10))
    got = {r.at // 60: r.value for r in cache.readings(first.id)}
    assert all(got[m] == 7.0 for m in range(NOW_MIN, NOW_MIN + 10))


def test_a_released_node_is_forgotten(fleet: Ledger) -> None:
    cache = MinuteCache()
    all_ids = ids(fleet)
    cache.refresh(fleet.conn, all_ids, NOW)
    gone = next(iter(all_ids))
    cache.refresh(fleet.conn, {i: n for i, n in all_ids.items() if i != gone}, NOW)
    assert cache.readings(gone) == ()


def test_the_reader_uses_its_own_connection_from_another_thread(tmp_path: Path) -> None:
    """FleetReader.read runs on the dashboard's reader thread: it opens the ledger there."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "demo.db"
    build_demo_ledger(path, date(2026, 11, 30)).close()
    with ThreadPoolExecutor(1) as pool:

        def read() -> object:
            reader = FleetReader(Ledger.open(path, create=False), Config())
            try:
                return reader.read(ReadRequest(NOW))
            finally:
                reader.ledger.close()

        data = pool.submit(read).result()
    assert len(data.facts.nodes) == 12  # type: ignore[attr-defined]
    assert data.money is not None and data.money.cost > 0  # type: ignore[attr-defined]


def test_reads_reload_facts_only_when_due_or_asked(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        reader = FleetReader(ledger, Config())
        assert reader.read(ReadRequest(NOW)).reloaded
        assert not reader.read(ReadRequest(NOW + timedelta(seconds=2))).reloaded
        assert reader.read(ReadRequest(NOW + timedelta(seconds=2), reload=True)).reloaded
        # Nobody edited the ledger: RELOAD_S later, the facts read before still hold...
        assert not reader.read(ReadRequest(NOW + timedelta(seconds=30))).reloaded
        # ...until someone does (every edit is an audit entry)...
        ledger.update_node(ledger.nodes()[0].name, {"notes": "moved to rack 2"})
        assert reader.read(ReadRequest(NOW + timedelta(seconds=50))).reloaded
        # ...or FACTS_S pass (a lease starts or ends by the clock, not by an edit).
        assert not reader.read(ReadRequest(NOW + timedelta(seconds=80))).reloaded
        assert reader.read(ReadRequest(NOW + timedelta(seconds=111))).reloaded


def test_a_ledger_row_it_cannot_read_is_said_and_the_rest_read(tmp_path: Path) -> None:
    """One lease row the ledger refuses costs that lease (more in test_fleet_hostile_rows)."""
    path = tmp_path / "demo.db"
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        reader = FleetReader(ledger, Config())
        before = reader.read(ReadRequest(NOW)).facts
        # Behind zuka's back: another connection, as sqlite3 is.
        with closing(sqlite3.connect(path)) as other, other:
            other.execute("UPDATE leases SET unit_price = 'lots' WHERE id = 1")
        data = reader.read(ReadRequest(NOW, reload=True))
        assert data.reloaded and data.facts.polled == before.polled
        (bad_id,) = set(before.billing) - set(data.facts.billing)
        bad = next(n.name for n in before.nodes if n.id == bad_id)
        lease, month = data.problems  # the row, and the month's cost it keeps off
        assert (
            lease == f"lease 1 of node '{bad}' not read: unit_price: is not a number (got 'lots')"
        )
        assert month.startswith("month's cost not computed: ledger: 1 row changed outside zuka")
        assert data.money is None


def test_header_figures(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        data = FleetReader(ledger, Config()).read(ReadRequest(NOW))
        nodes = data.facts.nodes
        busy_node, idle_node = nodes[0], nodes[1]
        sample = GpuSample(busy_node.name, NOW, 0, util_gpu=90.0, mem_used_mib=9000.0)
        idle = GpuSample(idle_node.name, NOW, 0, util_gpu=0.0, mem_used_mib=300.0, power_w=50.0)
        assert busy_node.id is not None and idle_node.id is not None
        statuses = {
            busy_node.id: NodeStatus(busy_node.name, NodeHealth.OK, "", NOW, NOW, (sample,)),
            idle_node.id: NodeStatus(idle_node.name, NodeHealth.OK, "", NOW, NOW, (idle,)),
        }
        h = header(nodes, statuses, data.facts.billing, data.money, "demo.db", NOW)
    assert h.busy == 1 and h.read == 2
    assert h.total == sum(n.gpu_count for n in nodes)  # the ledger's count where unread
    assert h.next_end is not None and h.next_end[1] > NOW
    line = header_line(h, NOW)
    # Unread nodes' cards are not in the total (they are neither busy nor idle): said apart.
    assert line.startswith(f"1/2 GPUs busy ({h.total - 2} not read) · ")
    assert "this month" in line and "idle" in line and line.endswith("demo.db")
    assert next_end({}, NOW) is None


def test_countdown_units() -> None:
    assert countdown(NOW + timedelta(days=3, hours=5), NOW) == "3d"
    assert countdown(NOW + timedelta(hours=5, minutes=1), NOW) == "5h"
    assert countdown(NOW + timedelta(minutes=40, seconds=5), NOW) == "40m"
    assert countdown(NOW - timedelta(seconds=1), NOW) == "past"


def test_housekeeping_purges_at_most_every_six_hours(fleet: Ledger) -> None:
    store = HistoryStore(fleet)
    house = Housekeeping(minute_days=0)  # every stored minute is old
    polled, refused = house.run(fleet, store, NOW)
    assert len(polled) == 5 and refused == []
    assert fleet.conn.execute("SELECT count(*) FROM gpu_minute").fetchone()[0] == 0
    write(store, polled[0].name, range(NOW_MIN - 5, NOW_MIN))
    assert house.purge_if_due(store, NOW + timedelta(hours=1)) is None
    assert fleet.conn.execute("SELECT count(*) FROM gpu_minute").fetchone()[0] == 5
    assert house.purge_if_due(store, NOW + timedelta(hours=7)) == 5


def test_money_is_decimal(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        data = FleetReader(ledger, Config()).read(ReadRequest(NOW))
    assert data.money is not None
    assert isinstance(data.money.cost, Decimal) and data.money.month == "2026-11"


def test_readings_are_read_again_only_when_another_connection_wrote(fleet: Ledger) -> None:
    """PRAGMA data_version: with no write since the last refresh, node_latest is not read
    and parsed again, nor gpu_minute queried within the same minute."""
    path = fleet.path
    assert path is not None
    reader = FleetReader(Ledger.open(path, create=False), Config())
    seen: list[str] = []
    reader.ledger.conn.set_trace_callback(seen.append)
    reader.read(ReadRequest(NOW))
    assert any("node_latest" in s for s in seen) and any("gpu_minute" in s for s in seen)
    seen.clear()
    reader.read(ReadRequest(NOW + timedelta(seconds=2)))
    assert not any("node_latest" in s or "gpu_minute" in s for s in seen), seen
    first = fleet.nodes()[0]
    HistoryStore(fleet).write_latest([NodeStatus(first.name, NodeHealth.OK, checked=NOW)])
    data = reader.read(ReadRequest(NOW + timedelta(seconds=4)))
    assert any("node_latest" in s for s in seen)
    assert data.statuses[first.id or 0].checked == NOW
    reader.ledger.close()


def _mean_of_unpacked(blob: bytes) -> float | None:
    known = [g.util_mean for g in unpack_minute(blob) if g.util_mean is not None]
    return sum(known) / len(known) if known else None


@given(st.lists(st.one_of(st.none(), st.integers(0, 100)), max_size=8))
def test_minute_util_mean_agrees_with_unpack_minute(utils: list[int | None]) -> None:
    # The dashboard's shortcut must read a stored minute exactly as unpack_minute does:
    # today's format and the one written before the power limit was kept.
    gpus = [GpuMinute(i, 12, u, u, 1000.0, 300.0, 700.0) for i, u in enumerate(utils)]
    blob = pack_minute(gpus)
    old = b"".join(_MINUTE_V1.pack(i, 12, 255 if u is None else u, 0, 1000, 3000)
                   for i, u in enumerate(utils))  # fmt: skip
    for b in (blob, old):
        assert minute_util_mean(b) == _mean_of_unpacked(b)
    assert (minute_util_mean(blob) is None) == all(u is None for u in utils)


def test_the_months_cost_is_recomputed_after_an_edit_not_at_every_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import leases.fleet.data as fleetdata

    computed: list[datetime] = []
    real = fleetdata.month_money

    def counting(ledger: Ledger, now: datetime, tz: str, currency: str) -> object:
        computed.append(now)
        return real(ledger, now, tz, currency)

    monkeypatch.setattr(fleetdata, "month_money", counting)
    path = tmp_path / "demo.db"
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        reader = FleetReader(ledger, Config())
        reader.read(ReadRequest(NOW))
        assert len(computed) == 1
        # FACTS_S later the facts are read again, nobody having edited: the cost stands.
        assert reader.read(ReadRequest(NOW + timedelta(seconds=61))).reloaded
        assert len(computed) == 1
        ledger.update_node(ledger.nodes()[0].name, {"notes": "moved to rack 2"})
        assert reader.read(ReadRequest(NOW + timedelta(seconds=80))).reloaded
        assert len(computed) == 2


def test_a_first_paint_reads_the_first_nodes_only_and_the_next_read_all(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "big.db", clock=lambda: NOW) as ledger:
        register_sim_nodes(ledger, 12, NOW)
        store = HistoryStore(ledger)
        names = [n.name for n in ledger.nodes()]
        store.write_latest([NodeStatus(name, NodeHealth.OK, checked=NOW) for name in names])
        ids = {n.name: n.id for n in ledger.nodes()}
        # A node released is not in the fleet, so not among the first nodes either.
        ledger.conn.execute("UPDATE nodes SET state = 'released' WHERE name = ?", [names[0]])
        ledger.conn.commit()
        reader = FleetReader(ledger, Config())
        seen: list[str] = []
        ledger.conn.set_trace_callback(seen.append)
        first = reader.read(ReadRequest(NOW, history=False, first=4))
        assert [n.name for n in first.facts.nodes] == names[1:5]
        assert first.total == 11 and first.reloaded
        assert set(first.statuses) == {ids[n] for n in names[1:5]}
        assert set(first.facts.billing) <= {ids[n] for n in names[1:5]} and first.facts.billing
        # Four nodes' rows read, not twelve: the nodes, leases and readings are asked by id.
        assert not any("FROM nodes n" in q and "LIMIT" not in q and "WHERE n.name" not in q
                       for q in seen)  # fmt: skip
        whole = reader.read(ReadRequest(NOW, history=False, first=4))  # first: once only
        assert whole.total is None and whole.reloaded
        assert [n.name for n in whole.facts.nodes] == names[1:]
        # The released node's reading is not the fleet's: no status stands for it.
        assert set(whole.statuses) == {ids[n] for n in names[1:]}


def test_the_first_paints_header_says_the_rest_is_being_read(tmp_path: Path) -> None:
    from tui.screens.fleetview import build

    with Ledger.open(tmp_path / "big.db", clock=lambda: NOW) as ledger:
        register_sim_nodes(ledger, 6, NOW)
        first = FleetReader(ledger, Config()).read(ReadRequest(NOW, history=False, first=2))
    done = build(first, NOW, "/tmp/x.db", limit=2)
    assert len(done.rows) == 2
    assert done.header.startswith("reading 6 nodes…")


def test_ledger_nodes_with_a_limit_are_the_first_by_name_in_those_states(tmp_path: Path) -> None:
    from leases.telemetry.housekeeping import FLEET_STATES

    with Ledger.open(tmp_path / "l.db", clock=lambda: NOW) as ledger:
        register_sim_nodes(ledger, 5, NOW)
        everyone = [n.name for n in ledger.nodes(FLEET_STATES)]
        assert [n.name for n in ledger.nodes(FLEET_STATES, limit=3)] == everyone[:3]
        assert [n.name for n in ledger.nodes(limit=2)] == everyone[:2]
        assert ledger.count_nodes(FLEET_STATES) == 5


def test_a_new_node_of_a_released_nodes_name_shows_none_of_its_reading(tmp_path: Path) -> None:
    """Issue 19: the fleet read model joins readings by node id. The released node `sim-001`
    last read 'needs reboot'; the new `sim-001` has no reading yet and must not show it."""
    from tui.screens.fleetview import build

    with Ledger.open(tmp_path / "l.db", clock=lambda: NOW) as ledger:
        (old,) = register_sim_nodes(ledger, 1, NOW)
        HistoryStore(ledger).write_latest(
            [NodeStatus(old.name, NodeHealth.DRIVER_MISMATCH, "reboot", checked=NOW)]
        )
        ledger.conn.execute("UPDATE nodes SET state = 'released' WHERE id = ?", [old.id])
        ledger.conn.commit()
        new = ledger.add_node(replace(old, id=None))
        assert new.id != old.id and new.name == old.name
        data = FleetReader(ledger, Config()).read(ReadRequest(NOW))
        assert [n.id for n in data.facts.nodes] == [new.id]
        assert data.statuses == {}  # not the released node's 'needs reboot'
        (row,) = build(data, NOW, "l.db").rows
        assert row.cells["state"].plain == "connecting"


def test_a_nodes_hour_cells_are_kept_until_its_minutes_or_live_readings_change(
    fleet: Ledger,
) -> None:
    path = fleet.path
    assert path is not None
    reader = FleetReader(Ledger.open(path, create=False), Config())
    first = fleet.nodes()[0]
    i = first.id or 0
    a = reader.read(ReadRequest(NOW)).hour[i]
    assert reader.read(ReadRequest(NOW + timedelta(seconds=2))).hour[i] is a  # kept
    # A live reading after the last stored minute moves the last cell; the next read
    # without it shows the stored minutes' cells again, not the live one's.
    hot = [Reading(NOW.timestamp() + 3, 5.0, 100.0)]
    live = reader.read(ReadRequest(NOW + timedelta(seconds=4), live={i: hot})).hour[i]
    assert live[-1] != a[-1]
    assert reader.read(ReadRequest(NOW + timedelta(seconds=6))).hour[i] == a
    # A new stored minute (another connection wrote it) is in the cells.
    write(HistoryStore(fleet), first.name, range(NOW_MIN, NOW_MIN + 1), util=100.0)
    later = reader.read(ReadRequest(NOW + timedelta(seconds=61))).hour[i]
    assert later != a
    reader.ledger.close()
