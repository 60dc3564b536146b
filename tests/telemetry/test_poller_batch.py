"""A warm sweep's plain queries in one batch (leases.ssh.asks), over in-process SSH servers
answering as simulated nodes with kept shells: recorded exactly as a reading of its own
(Poller._read_once) records them; a node whose driver changed under us is probed in the
same sweep; a node not ready is read the usual way beside the batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import NodeHealth, NodeStatus
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.keptshell import shell_commands
from leases.ssh.pool import SshPool
from leases.telemetry.history import RecentHistory
from leases.telemetry.nodestate import NodeState
from leases.telemetry.poller import Poller
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until

KEYS = TestKeys.generate()
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@dataclass
class Fleet:
    """Simulated nodes on kept shells, at a time the test moves; `refused` the query
    fields every node's nvidia-smi now refuses (a driver changed under us)."""

    sims: list[SimNode]
    now: datetime = T0
    refused: set[str] = field(default_factory=set)
    garbage: bool = False  # the GPU query answered with what is no CSV of it
    hang: set[str] = field(default_factory=set)  # nodes whose nvidia-smi never answers
    servers: list[FakeNode] = field(default_factory=list)

    def answer(self, sim: SimNode, cmd: str) -> tuple[str, str, int]:
        for name in self.refused:
            if "--query-gpu=" in cmd and name in cmd:
                return f'Field "{name}" is not a valid field to query.\n\n', "", 2
        out, err, status = sim_answer(sim, cmd, self.now)
        if self.garbage and "--query-gpu=" in cmd:
            _gpus, mark, rest = out.partition("\n@zuka-gpus ")
            out = "0, GPU-x, what is this, ???\n<html>502</html>\n" + mark + rest
        return out, err, status

    def handler(self, sim: SimNode) -> Callable[..., object]:
        async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
            assert process.command in (None, "sh"), process.command  # kept shells only
            async for command in shell_commands(process):
                if sim.name in self.hang and "--query-gpu=" in command.text:
                    await process.channel.wait_closed()
                    return
                command.reply(*self.answer(sim, command.text))

        return handle


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    made = Fleet([SimNode(f"n{i}", "A100", 2, seed=i) for i in range(3)])
    made.servers = [await FakeNode(KEYS, handler=made.handler(s)).start() for s in made.sims]
    yield made
    for server in made.servers:
        await server.stop()


def _poller(fleet: Fleet, tmp_path: Path, *, extras: bool = False) -> Poller:
    """A poller of the fleet at its time; extras: the processes and host figures read
    every 6th reading too, riding on its query."""
    options = node_options(KEYS, tmp_path, fleet.servers, command_timeout=5)
    nodes = [
        server.as_node(sim.name) for server, sim in zip(fleet.servers, fleet.sims, strict=True)
    ]
    return Poller(nodes, pool=SshPool(options), clock=lambda: fleet.now, recent=RecentHistory(),
                  host_stats=extras, processes=extras)  # fmt: skip


def _unhosted(statuses: dict[str, NodeStatus]) -> dict[str, NodeStatus]:
    """The statuses without their host figures: their rates are per second of each
    poller's own monotonic clock (NodeState.read_host), which no test holds still."""
    return {name: replace(s, host=None) for name, s in statuses.items()}


class Counted:
    """A poller's readings of their own (_read_once), counted by node."""

    def __init__(self, poller: Poller) -> None:
        self.nodes: list[str] = []
        read_once = poller._read_once

        async def counted(state: NodeState) -> None:
            self.nodes.append(state.node.name)
            await read_once(state)

        poller._read_once = counted  # type: ignore[method-assign]


@pytest.mark.parametrize("extras", [False, True])
async def test_a_batch_sweep_records_what_readings_of_their_own_record(
    fleet: Fleet, tmp_path: Path, extras: bool
) -> None:
    """Two pollers on the same nodes at the same times: one sweeps (its warm nodes in the
    batch), the other reads each node in a reading of its own. Their statuses, kept
    samples, counts and last hour are the same, sweep after sweep, through answers the
    same as the last (kept samples), changed ones (parsed), every 6th with the processes
    and host figures (extras), and garbage."""
    batched = _poller(fleet, tmp_path, extras=extras)
    alone = _poller(fleet, tmp_path, extras=extras)
    seen = Counted(batched)
    try:
        await batched.sweep()  # probes: each node a reading of its own
        await alone.sweep()
        assert sorted(seen.nodes) == ["n0", "n1", "n2"]
        repeats = due = 0
        # Sim time: 20 s and more move the values; a step of 0 answers garbage.
        # Every 6th reading (polls 6 and 12 here) with the processes and host figures.
        for step in (5, 5, 20, 60, 5, 61, 5, 0, 5, 20, 5, 5, 5, 5):
            fleet.garbage = step == 0
            fleet.now += timedelta(seconds=step)
            seen.nodes.clear()
            unknown = sorted(n for n, st in batched._nodes.items() if st.fields is None)
            await batched.sweep()
            for state in alone._nodes.values():
                await alone._read_once(state)
            alone.flush()
            # Every node in the batch, but those probing afresh after garbage.
            assert sorted(seen.nodes) == unknown
            assert _unhosted(batched.statuses) == _unhosted(alone.statuses)
            assert all((s.host is not None) is extras for s in batched.statuses.values())
            assert all(bool(s.processes) is extras for s in batched.statuses.values())
            repeats += sum(s.samples_at is not None for s in batched.statuses.values())
            due += all(st.polls in (7, 13) for st in batched._nodes.values())
            for name in ("n0", "n1", "n2"):
                a, b = batched._nodes[name], alone._nodes[name]
                assert (a.said, a.kept, a.polls, a.fields) == (b.said, b.kept, b.polls, b.fields)
                assert (a.owner_problems, a.in_gap) == (b.owner_problems, b.in_gap)
                health = NodeHealth.GARBAGE if fleet.garbage else NodeHealth.OK
                assert batched.statuses[name].health is health
            assert batched.recent is not None and alone.recent is not None
            for name in ("n0", "n1", "n2"):
                for index in (0, 1):
                    assert batched.recent.series(name, index) == alone.recent.series(name, index)
        assert repeats  # some answers came again the same: their samples kept
        assert due == 2  # and two 6th readings in the batch
    finally:
        await batched.close()
        await alone.close()


async def test_a_field_refused_in_the_batch_is_probed_in_the_same_sweep(
    fleet: Fleet, tmp_path: Path
) -> None:
    poller = _poller(fleet, tmp_path)
    seen = Counted(poller)
    try:
        await poller.sweep()
        assert all("fan.speed" in (s.fields or ()) for s in poller._nodes.values())
        fleet.refused = {"fan.speed"}
        fleet.now += timedelta(seconds=5)
        seen.nodes.clear()
        result = await poller.sweep()
        assert sorted(seen.nodes) == ["n0", "n1", "n2"]  # after the batch, on their own
        assert {s.health for s in result.values()} == {NodeHealth.OK}
        for state in poller._nodes.values():
            assert state.fields is not None and "fan.speed" not in state.fields
        assert all(s.samples[0].fan_pct is None for s in result.values())
    finally:
        await poller.close()


async def test_a_node_not_ready_is_read_beside_the_batch(fleet: Fleet, tmp_path: Path) -> None:
    """One node's connection closed between sweeps: it reconnects in a reading of its own
    while the others are asked in the batch."""
    poller = _poller(fleet, tmp_path)
    seen = Counted(poller)
    try:
        await poller.sweep()
        await poller.pool["n1"].close()
        seen.nodes.clear()
        fleet.now += timedelta(seconds=5)
        result = await poller.sweep()
        assert seen.nodes == ["n1"]
        assert {s.health for s in result.values()} == {NodeHealth.OK}
        assert poller.pool["n1"].connects == 2
    finally:
        await poller.close()


async def test_a_node_handed_back_is_read_at_once_not_after_the_slowest(
    fleet: Fleet, tmp_path: Path
) -> None:
    """One node hangs until its limit (3 s); another refuses a field: it is probed and
    recorded while the hung one still waits, not after it (a `poll --timeout` shorter
    than the limit would otherwise never see it read)."""
    options = node_options(KEYS, tmp_path, fleet.servers, command_timeout=3)
    nodes = [s.as_node(sim.name) for s, sim in zip(fleet.servers, fleet.sims, strict=True)]
    poller = Poller(nodes, pool=SshPool(options), clock=lambda: fleet.now,
                    host_stats=False, processes=False)  # fmt: skip
    try:
        await poller.sweep()
        fleet.hang, fleet.refused = {"n0"}, {"fan.speed"}
        fleet.now += timedelta(seconds=5)
        sweep = asyncio.ensure_future(poller.sweep())
        fields = lambda: poller._nodes["n1"].fields or ()  # noqa: E731
        await wait_until(lambda: fields() and "fan.speed" not in fields(), what="n1 probed")
        assert poller.statuses["n1"].health is NodeHealth.OK
        assert poller.statuses["n1"].checked == fleet.now
        assert not sweep.done()  # n0 still within its limit
        result = await asyncio.wait_for(sweep, 10)
        assert result["n0"].health is NodeHealth.TIMEOUT
    finally:
        await poller.close()


async def test_a_sweep_cancelled_before_its_batch_waits_leaves_nothing_held(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Cancelled in the loop turn it wrote its commands in: the shells they were written
    into are dropped and their turns given back; nothing of it is recorded, and the next
    sweep reads every node."""
    poller = _poller(fleet, tmp_path)
    updates: list[str] = []
    try:
        await poller.sweep()
        poller.on_update = lambda status: updates.append(status.node)
        sweep = asyncio.ensure_future(poller.sweep())
        await asyncio.sleep(0)  # its first step: the commands written
        sweep.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sweep
        sessions = poller.pool.sessions.values()
        assert not any(s._turns.held for s in sessions)
        await asyncio.sleep(0.2)  # an answer that came now would be recorded: none may
        assert updates == []
        fleet.now += timedelta(seconds=5)
        result = await asyncio.wait_for(poller.sweep(), 10)
        assert {s.health for s in result.values()} == {NodeHealth.OK}
        assert all(s.checked == fleet.now for s in result.values())
    finally:
        await poller.close()
