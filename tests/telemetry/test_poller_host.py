"""The host figures through the poller, over in-process SSH servers answering as simulated
nodes: read in the GPU query's round trip (exec) or the owner query's (stream), stored
with the node's latest status, and never at the GPUs' expense."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncssh
import pytest

from leases.core.host import MountKind
from leases.core.models import Node, NodeHealth
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.gpu import Scenario
from leases.ssh.pool import SshPool
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from tests.support.sshfixtures import FakeNode, TestKeys, default_handler, node_options
from tests.support.waiting import wait_until

KEYS = TestKeys.generate()
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
NO_PROC = "@zh load\n@zh mem\n@zh stat\n@zh net\n@zh df\n@zh end\n"


@dataclass
class Clock:
    now: datetime = T0
    step: timedelta = timedelta(0)  # how far each reading of the clock moves it on

    def __call__(self) -> datetime:
        now = self.now
        self.now += self.step
        return now


@dataclass
class Seen:
    commands: list[str] = field(default_factory=list)


def _no_proc(sim: SimNode, seen: Seen) -> Callable[..., object]:
    """A node without /proc whose df fails: the GPU part answered, the host part empty
    (every command of the snippet fails into 2>/dev/null)."""

    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        cmd = process.command or ""
        cmd = unwrap_sh(cmd) or cmd  # an exec is handed to sh: what sh runs
        seen.commands.append(cmd)
        gpu, marker, _ = cmd.partition("; echo @zuka-host $?")
        out, err, status = sim_answer(sim, gpu, node.sim_clock())
        if marker:
            out += f"@zuka-host {status}\n{NO_PROC}"
            status = 0
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return handle


MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\n"


def _mismatch(sim: SimNode, seen: Seen) -> Callable[..., object]:
    """The field probe works, then the driver goes: the GPU query fails with 18 while the
    snippet after it runs, so the channel's own exit status is the snippet's (0)."""

    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        cmd = process.command or ""
        cmd = unwrap_sh(cmd) or cmd  # an exec is handed to sh: what sh runs
        seen.commands.append(cmd)
        _gpu, marker, snippet = cmd.partition("; echo @zuka-host $?; ")
        if not marker:
            out, err, status = sim_answer(sim, cmd, node.sim_clock())
        else:
            host = sim_answer(sim, snippet, node.sim_clock())
            out, err, status = MISMATCH + "@zuka-host 18\n" + host.stdout, "", 0
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return handle


def _hangs(sim: SimNode, seen: Seen) -> Callable[..., object]:
    """A node where what rides with the GPU query (ps, df of a stuck mount) never ends:
    a command carrying the host part hangs until the client gives up on it."""

    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        cmd = process.command or ""
        cmd = unwrap_sh(cmd) or cmd  # an exec is handed to sh: what sh runs
        seen.commands.append(cmd)
        if "@zuka-host" in cmd:
            await process.channel.wait_closed()
            return
        out, err, status = sim_answer(sim, cmd, node.sim_clock())
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return handle


def _recording(seen: Seen) -> Callable[..., object]:
    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        cmd = process.command or ""
        seen.commands.append(unwrap_sh(cmd) or cmd)  # an exec is handed to sh: what sh runs
        await default_handler(process, node)

    return handle


@dataclass
class Fleet:
    servers: list[FakeNode]
    poller: Poller
    ledger: Ledger
    clock: Clock
    seen: Seen


@pytest.fixture
async def fleet(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Fleet]:
    kind = getattr(request, "param", "ok")
    clock, seen = Clock(), Seen()
    sims = [
        SimNode("autodl-a", "RTX 4090", 2, Scenario.BUSY, seed=3),  # its data disk 95 % full
        SimNode("box", "A100", 2, Scenario.BUSY, seed=1),
    ]
    special = {"noproc": _no_proc, "mismatch": _mismatch, "hangs": _hangs}.get(kind)
    handlers = [_recording(seen), special(sims[1], seen) if special else None]
    servers = [
        await FakeNode(KEYS, sim=s, sim_clock=clock, **({"handler": h} if h else {})).start()
        for s, h in zip(sims, handlers, strict=True)
    ]
    ledger = Ledger.open(tmp_path / "l.db")
    nodes: list[Node] = []
    for server, sim in zip(servers, sims, strict=True):
        node = server.as_node(sim.name)
        nodes.append(ledger.add_node(records.node_from(
            {**records.node_record(node), "gpu_model": "A100", "gpu_count": 2})))  # fmt: skip
    options = node_options(KEYS, tmp_path, servers, command_timeout=2.0)
    poller = Poller(
        nodes, pool=SshPool(options), store=HistoryStore(ledger), clock=clock,
        interval_s=0.2, apps_every=1, host_stats=kind != "off",
    )  # fmt: skip
    yield Fleet(servers, poller, ledger, clock, seen)
    await poller.close()
    for s in servers:
        await s.stop()
    ledger.close()


async def test_exec_reads_the_host_in_the_gpu_querys_round_trip(fleet: Fleet) -> None:
    first = await fleet.poller.sweep()
    st = first["autodl-a"]
    assert st.health is NodeHealth.OK and len(st.samples) == 2
    host = st.host
    assert host is not None
    assert host.cpus == 32 and host.load1 is not None and host.mem_total_kib is not None
    assert host.cpu_pct is None  # the first reading has no delta
    tmp = next(m for m in host.mounts if m.path == "/root/autodl-tmp")
    assert (tmp.label, tmp.kind) == ("AutoDL data disk", MountKind.DATA)
    assert round(tmp.used_pct) == 95
    assert {m.kind for m in host.mounts} >= {MountKind.ROOT, MountKind.SHM}
    # One command carried both: nvidia-smi's query and the snippet.
    query = [c for c in fleet.seen.commands if c.startswith("nvidia-smi --query-gpu")]
    # (The field probe before it is untouched: nvidia-smi alone.)
    assert any("@zuka-host" in c and "/proc/stat" in c for c in query)

    fleet.clock.now = T0 + timedelta(seconds=30)
    second = (await fleet.poller.sweep())["autodl-a"].host
    assert second is not None and second.cpu_pct is not None and 0 < second.cpu_pct < 100
    assert second.net_rx_bps is not None and second.net_rx_bps > 0

    stored = {s.node: s for s in HistoryStore(fleet.ledger).latest_by_id().values()}
    assert stored["autodl-a"].host == second  # persisted with the latest status


@pytest.mark.parametrize("fleet", ["noproc"], indirect=True)
async def test_a_node_without_proc_or_df_keeps_its_gpus(fleet: Fleet) -> None:
    st = (await fleet.poller.sweep())["box"]
    assert st.health is NodeHealth.OK and len(st.samples) == 2
    assert st.host is not None
    assert st.host.mounts == () and st.host.mem_total_kib is None
    assert any("memory not read" in p for p in st.host.problems)


@pytest.mark.parametrize("fleet", ["mismatch"], indirect=True)
async def test_the_gpu_failure_is_classified_as_before_and_the_host_still_read(
    fleet: Fleet,
) -> None:
    st = (await fleet.poller.sweep())["box"]
    assert st.health is NodeHealth.DRIVER_MISMATCH, st  # 18 from the marker, not the channel
    assert "@zh" not in st.detail and "@zuka-host" not in st.detail
    assert st.host is not None and st.host.mem_total_kib is not None


@pytest.mark.parametrize("fleet", ["off"], indirect=True)
async def test_host_stats_off_sends_todays_command(fleet: Fleet) -> None:
    st = (await fleet.poller.sweep())["autodl-a"]
    assert st.health is NodeHealth.OK and st.host is None
    assert not any("@zuka-host" in c for c in fleet.seen.commands)


async def test_stream_mode_rides_on_the_owner_query(fleet: Fleet) -> None:
    """The stream itself stays nvidia-smi alone; the host part comes with the owners."""
    stop = asyncio.Event()
    fleet.clock.now = T0
    task = asyncio.create_task(fleet.poller.run(stop, mode="stream", flush_s=0.1))

    def streamed() -> bool:
        return any("-lms" in c for c in fleet.seen.commands)

    try:
        await wait_until(lambda: streamed() or task.done(), what="the stream")
        # Time moves on with every reading from here. (A clock set forward once gave one
        # reading with a CPU share, the next one at the same instant none: a wait that
        # missed the first reading's status, which a backlog of stream rounds makes short,
        # waited for ever.)
        fleet.clock.step = timedelta(seconds=1)
        await wait_until(
            lambda: (
                (
                    (h := fleet.poller.statuses["autodl-a"].host) is not None
                    and h.cpu_pct is not None
                )
                or task.done()
            ),
            what="a CPU share from two readings",
        )
        assert not task.done(), task
    finally:
        stop.set()
        await task
    stream = [c for c in fleet.seen.commands if "-lms" in c]
    assert stream and all("@zuka-host" not in c for c in stream)
    owners = [c for c in fleet.seen.commands if "@zuka-owners" in c]
    assert any(c.rstrip().endswith("@zh end") for c in owners)  # in exec mode: the GPUs'
    st = fleet.poller.statuses["autodl-a"]
    assert st.health is NodeHealth.OK
    assert st.processes  # the owner query's own part still parsed
    stored = {s.node: s for s in HistoryStore(fleet.ledger).latest_by_id().values()}
    assert stored["autodl-a"].host is not None


async def test_exec_reads_the_host_as_often_as_the_processes(fleet: Fleet) -> None:
    """Every apps_every sweeps (with the owners); between them the GPU query goes alone and
    the figures read last stay on the status."""
    fleet.poller.apps_every = 3
    hosts = []
    for i in range(4):
        fleet.clock.now = T0 + timedelta(seconds=10 * i)
        hosts.append((await fleet.poller.sweep())["autodl-a"].host)
    # (The 4th sweep's GPU query carries the owner query too: gpuread.with_apps.)
    queries = [c for c in fleet.seen.commands if "nvidia-smi --query-gpu=index" in c]
    assert ["@zuka-host" in c for c in queries[-4:]] == [True, False, False, True]
    assert hosts[0] is not None and hosts[1] == hosts[0] == hosts[2]
    assert hosts[3] is not None and hosts[3].cpu_pct is not None  # over the 30 s between


@pytest.mark.parametrize("fleet", ["hangs"], indirect=True)
async def test_a_part_that_hangs_costs_its_own_turn_only(fleet: Fleet) -> None:
    """The GPU query with the host part times out: that turn is taken, and the readings
    until the next turn ask the GPU query alone (they read); before, every reading rode
    with the hanging part again and the node stayed timed out."""
    fleet.poller.apps_every = 3
    healths = []
    for i in range(4):
        fleet.clock.now = T0 + timedelta(seconds=10 * i)
        healths.append((await fleet.poller.sweep())["box"].health)
    assert healths == [NodeHealth.TIMEOUT, NodeHealth.OK, NodeHealth.OK, NodeHealth.TIMEOUT]
