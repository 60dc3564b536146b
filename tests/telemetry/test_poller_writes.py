"""What a warm poller spends on a reading: a GPU row sent again unchanged is not parsed
again (its sample still takes its own time), JSON of values that did not change is not
made again, and a flush is one transaction. Over in-process SSH servers answering as
simulated nodes, a real SQLite ledger; the readings stay what the node said."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from leases.core.models import GpuProcess, Node, NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.gpu import Scenario
from leases.ssh.pool import SshPool
from leases.telemetry import nvsmi, rollups
from leases.telemetry.flushes import GapEvent
from leases.telemetry.nvsmistream import StreamParser
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.rowmemo import RowMemo
from tests.support.clock import SetClock
from tests.support.sshfixtures import FakeNode, TestKeys, node_options

KEYS = TestKeys.generate()
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@dataclass
class Fleet:
    servers: list[FakeNode]
    poller: Poller
    ledger: Ledger
    node_clock: SetClock  # what the simulated nodes read their GPUs at
    clock: SetClock  # the poller's


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    node_clock, clock = SetClock(T0), SetClock(T0)
    sims = [SimNode(f"w{i}", "A100", 2, Scenario.BUSY, seed=i) for i in range(2)]
    servers = [await FakeNode(KEYS, sim=s, sim_clock=node_clock).start() for s in sims]
    ledger = Ledger.open(tmp_path / "l.db")
    nodes: list[Node] = []
    for server, sim in zip(servers, sims, strict=True):
        node = server.as_node(sim.name)
        nodes.append(ledger.add_node(records.node_from(
            {**records.node_record(node), "gpu_model": "A100", "gpu_count": 2})))  # fmt: skip
    options = node_options(KEYS, tmp_path, servers, command_timeout=2.0)
    poller = Poller(
        nodes, pool=SshPool(options), store=HistoryStore(ledger), clock=clock,
        interval_s=0.2, apps_every=1000,
    )  # fmt: skip
    yield Fleet(servers, poller, ledger, node_clock, clock)
    await poller.close()
    for s in servers:
        await s.stop()
    ledger.close()


class Counted:
    """nvsmi.row_values, counting the rows whose tokens it really reads (the row memo's
    way in: a row held is not read; of one that changed, the tokens that changed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[str] = []
        real = nvsmi.row_values

        def row_values(tokens: list[str], *args: Any, **kwargs: Any) -> dict[str, object]:
            self.rows.append(", ".join(tokens))
            return real(tokens, *args, **kwargs)

        monkeypatch.setattr(nvsmi, "row_values", row_values)


def _said(server: FakeNode, poller: Poller, name: str, at: datetime) -> list[object]:
    """What a fresh parse of the node's answer now gives, as the samples' values."""
    fields = poller._nodes[name].fields
    assert fields is not None
    out = server.answer(nvsmi.query_command(fields))[0]
    return [replace(s, at=at) for s in nvsmi.parse_query(out, fields, name, at)]


async def test_an_unchanged_row_is_not_parsed_again_and_takes_its_own_time(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await fleet.poller.sweep()  # connect, probe, first reading
    counted = Counted(monkeypatch)
    fleet.clock.now = T0 + timedelta(seconds=5)
    second = await fleet.poller.sweep()
    assert counted.rows == []  # the nodes said the same: nothing parsed
    for name, server in zip(("w0", "w1"), fleet.servers, strict=True):
        status = second[name]
        assert status.health is NodeHealth.OK and status.at == fleet.clock.now
        # The samples the same answer gave before, read again now: no copies made.
        assert status.samples is first[name].samples and first[name].samples_at is None
        assert [status.sample_time(s) for s in status.samples] == [fleet.clock.now] * 2
        now = [replace(s, at=status.sample_time(s)) for s in status.samples]
        assert now == _said(server, fleet.poller, name, fleet.clock.now)
    # The GPUs move on: every changed row is parsed, and the reading is the new one.
    fleet.node_clock.now = T0 + timedelta(minutes=7)
    fleet.clock.now = T0 + timedelta(seconds=10)
    third = await fleet.poller.sweep()
    assert counted.rows, "a changed row was not parsed"
    for name, server in zip(("w0", "w1"), fleet.servers, strict=True):
        said = _said(server, fleet.poller, name, fleet.clock.now)
        assert list(third[name].samples) == said
        assert said != [replace(s, at=fleet.clock.now) for s in second[name].samples]


def test_a_stream_parses_only_the_rows_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = SimNode("s", "A100", 2, Scenario.BUSY, seed=4)
    fields = nvsmi.QUERY_FIELDS
    text = sim_answer(sim, nvsmi.query_command(fields), T0).stdout
    changed = sim_answer(sim, nvsmi.query_command(fields), T0 + timedelta(minutes=9)).stdout
    assert text != changed
    times = (T0 + timedelta(seconds=5 * i) for i in range(100))
    parser = StreamParser(fields, "s", lambda: next(times), gpu_count=2)
    counted = Counted(monkeypatch)
    rounds = parser.feed(text) + parser.feed(text) + parser.feed(changed)
    assert [r[0].at for r in rounds] == [T0, T0 + timedelta(seconds=5), T0 + timedelta(seconds=10)]
    assert len(counted.rows) == 2 + sum(
        a != b for a, b in zip(text.splitlines(), changed.splitlines(), strict=True)
    )
    assert rounds[2] == nvsmi.parse_query(changed, fields, "s", T0 + timedelta(seconds=10))
    assert rounds[1] == nvsmi.parse_query(text, fields, "s", T0 + timedelta(seconds=5))
    # A hostile row is refused every time it comes, never remembered as good.
    util = fields.index("utilization.gpu")
    rows = [line.split(", ") for line in text.splitlines()]
    hostile = "".join(", ".join([*r[:util], "1e999", *r[util + 1 :]]) + "\n" for r in rows)
    for _ in range(2):
        with pytest.raises(nvsmi.NvsmiParseError, match="utilization"):
            parser.feed(hostile)
        with pytest.raises(nvsmi.NvsmiParseError, match="utilization"):
            parser.feed("")  # the other GPU's row, refused too


def test_a_row_memo_holds_one_row_a_gpu_and_forgets_on_new_fields() -> None:
    # A busy GPU's row changes every reading: what is held must not grow with them (a
    # 1,000-node poller holds one memo a node).
    memo = RowMemo()
    fields = ("index", "utilization.gpu")
    for i in range(3 * nvsmi.MAX_GPUS):
        memo.parse(f"{i % 2}, {i % 100}", 1, fields)
        assert len(memo) <= 2
    assert memo.parse("1, 99", 1, fields) == {"index": 1, "util_gpu": 99.0, "extra": {}}
    first = memo.parse("0, 5", 1, fields)
    other = memo.parse("0, 5", 1, ("utilization.gpu", "index"))
    assert (first["index"], first["util_gpu"]) == (0, 5.0)
    assert (other["index"], other["util_gpu"]) == (5, 0.0)
    assert len(memo) == 1


async def test_unchanged_host_and_processes_are_not_serialised_again(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    real = rollups.host_record
    monkeypatch.setattr(rollups, "host_record", lambda h: made.append(h) or real(h))
    await fleet.poller.sweep()  # reads the host figures (the first reading does)
    assert len(made) == 2
    for step in range(1, 4):  # host figures not read again: the same objects handed on
        fleet.clock.now = T0 + timedelta(seconds=5 * step)
        await fleet.poller.sweep()
    assert len(made) == 2
    latest = {s.node: s for s in HistoryStore(fleet.ledger).latest_by_id().values()}
    assert latest["w0"].host == fleet.poller.statuses["w0"].host is not None
    assert latest["w0"].checked == fleet.clock.now  # the row itself was written
    # A changed value is written, and read back as it is now.
    store = fleet.poller.store
    assert store is not None
    status = fleet.poller.statuses["w0"]
    host = status.host
    assert host is not None
    moved = replace(status, host=replace(host, load1=77.5), checked=T0 + timedelta(minutes=1))
    proc = GpuProcess("w0", status.samples[0].uuid, 4242, "python", 100.0, owner="bob")
    store.write(latest=[moved])
    store.write(latest=[replace(moved, processes=(proc,))])
    back = {s.node: s for s in HistoryStore(fleet.ledger).latest_by_id().values()}["w0"]
    assert back.host is not None and back.host.load1 == 77.5
    assert [p.pid for p in back.processes] == [4242]
    assert len(made) == 3


async def test_a_flush_is_one_transaction_with_its_gaps_in_order(fleet: Fleet) -> None:
    await fleet.poller.sweep()
    fleet.clock.now = T0 + timedelta(seconds=5)
    await fleet.servers[1].stop()
    statements: list[str] = []
    fleet.ledger.conn.set_trace_callback(statements.append)
    try:
        result = await fleet.poller.sweep()
    finally:
        fleet.ledger.conn.set_trace_callback(None)
    assert result["w1"].health is not NodeHealth.OK
    assert sum(s.startswith("BEGIN") for s in statements) == 1, statements
    gaps = HistoryStore(fleet.ledger).gaps("w1")
    assert [(g[0], g[1]) for g in gaps] == [(fleet.clock.now, None)]
    # The node comes back: the gap closes at the time of the reading that ended it.
    await fleet.servers[1].start()
    fleet.clock.now = T0 + timedelta(seconds=30)
    fleet.poller.retry_now("w1")
    result = await fleet.poller.sweep()
    assert result["w1"].health is NodeHealth.OK, result["w1"]
    assert HistoryStore(fleet.ledger).gaps("w1")[-1][1] == T0 + timedelta(seconds=30)


def test_open_and_close_in_one_write_keep_their_order(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.db")
    try:
        ledger.add_node(records.node_from({"name": "g", "ssh_host": "10.0.0.9"}))
        store = HistoryStore(ledger)
        a, b, c = (T0 + timedelta(minutes=m) for m in (0, 3, 9))
        store.write(gaps=[
            GapEvent("g", a, opened=True, health=NodeHealth.UNREACHABLE, detail="down"),
            GapEvent("g", b, opened=False),
            GapEvent("g", c, opened=True, health=NodeHealth.TIMEOUT, detail="slow"),
            GapEvent("g", c + timedelta(minutes=1), opened=True, health=NodeHealth.TIMEOUT),
        ])  # fmt: skip
        assert [(s, e, h) for s, e, h, _ in store.gaps("g")] == [
            (a, b, "unreachable"),
            (c, None, "timeout"),
        ]
        store.write(latest=[NodeStatus("g", NodeHealth.TIMEOUT, "slow", checked=c)])
        assert store.latest_by_id()[1].checked == c
    finally:
        ledger.close()


async def test_a_long_lived_poller_settles_the_collector_once(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import gc

    from leases.telemetry import gcsettle

    frozen: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1))
    # Recorded, not set: the test process keeps CPython's thresholds.
    thresholds: list[tuple[int, ...]] = []
    monkeypatch.setattr(gc, "set_threshold", lambda *t: thresholds.append(t))
    monkeypatch.setattr(gcsettle, "_settled", False)
    stop = asyncio.Event()
    fleet.poller.settle_gc = True
    runner = asyncio.create_task(fleet.poller.run(stop, mode="exec"))
    try:
        while not frozen:
            await asyncio.sleep(0.01)
        assert all(s.checked is not None for s in fleet.poller.statuses.values())
        polls = fleet.poller._nodes["w0"].polls
        while fleet.poller._nodes["w0"].polls < polls + 2:  # more sweeps, no more freezes
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await runner
    assert frozen == [1] and gcsettle.settled()
    assert thresholds == [gcsettle.THRESHOLDS]  # young objects collected less often
    # Another poller in the same process does not freeze again.
    assert gcsettle.settle() is False and frozen == [1]


def test_every_parsed_sample_passes_the_bounds_a_stored_one_must() -> None:
    # The poller does not check parsed samples twice: the parser must refuse all that
    # sample_problem would.
    for model, scenario in [("A100", Scenario.BUSY), ("V100", Scenario.IDLE_MONTHLY),
                            ("RTX 4090", Scenario.BURSTY), ("H800", Scenario.BUSY)]:  # fmt: skip
        sim = SimNode("b", model, 8, scenario, seed=7)
        text = sim_answer(sim, nvsmi.query_command(nvsmi.QUERY_FIELDS), T0).stdout
        for s in nvsmi.parse_query(text, nvsmi.QUERY_FIELDS, "b", T0):
            assert nvsmi.sample_problem(s) is None
    for target, (_lo, hi) in nvsmi.BOUNDS.items():
        field = next((f for f, spec in nvsmi._FIELDS.items() if spec.target == target), None)
        if field is None:
            continue
        fields = tuple(dict.fromkeys(("index", field)))
        row = f"{'0, ' if field != 'index' else ''}{hi * 2 + 1:g}"
        with pytest.raises(nvsmi.NvsmiParseError):
            nvsmi.parse_query(row + "\n", fields, "b", T0)


async def test_streams_of_nodes_that_keep_answering_open_no_gap(fleet: Fleet) -> None:
    # Stream mode, rounds every 0.2 s and a flush every 0.1 s: nodes that answer every
    # round have no gap in the ledger, and their latest rows follow the readings.
    import asyncio

    fleet.clock.now = T0
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        fleet.clock.now = T0 + timedelta(seconds=ticks)
        fleet.node_clock.now = T0 + timedelta(seconds=ticks)

    fleet.poller.on_update = lambda status: tick()
    stop = asyncio.Event()
    runner = asyncio.create_task(fleet.poller.run(stop, mode="stream", flush_s=0.1))
    try:
        while ticks < 40:
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await runner
    store = HistoryStore(fleet.ledger)
    assert store.gaps("w0") == [] and store.gaps("w1") == []
    latest = {s.node: s for s in store.latest_by_id().values()}
    for name in ("w0", "w1"):
        assert latest[name].health is NodeHealth.OK
        assert latest[name].samples == fleet.poller.statuses[name].samples


def test_a_reader_reads_what_is_stored_now_not_what_it_decoded_before(tmp_path: Path) -> None:
    """The dashboard's reader asks every node's latest row each refresh: processes and host
    figures whose text is unchanged are the objects made last time, and any change (a
    write, a hand edit behind zuka's back, a rename) is read as it is now."""
    ledger = Ledger.open(tmp_path / "l.db")
    try:
        node = ledger.add_node(records.node_from({"name": "g", "ssh_host": "10.0.0.9"}))
        writer, reader = HistoryStore(ledger), HistoryStore(ledger)
        proc = GpuProcess("g", "GPU-a", 4242, "python", 100.0, owner="alice")
        status = NodeStatus("g", NodeHealth.OK, checked=T0, at=T0, processes=(proc,))
        writer.write(latest=[status])
        first = reader.latest_by_id()[node.id or 0]
        writer.write(latest=[replace(status, checked=T0 + timedelta(seconds=5))])
        again = reader.latest_by_id()[node.id or 0]
        assert again.checked == T0 + timedelta(seconds=5)
        assert again.processes is first.processes  # the same text: not decoded again
        ledger.conn.execute(
            "UPDATE node_latest SET processes = replace(processes, 'alice', 'mallory')"
        )
        edited = reader.latest_by_id()[node.id or 0]
        assert [p.owner for p in edited.processes] == ["mallory"]
        ledger.conn.execute("UPDATE nodes SET name = 'h' WHERE id = ?", [node.id])
        renamed = reader.latest_by_id()[node.id or 0]
        assert [p.node for p in renamed.processes] == ["h"] and renamed.node == "h"
    finally:
        ledger.close()
