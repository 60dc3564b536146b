"""The poller over real in-process SSH servers: readings, faults, recovery, history.

Each FakeNode answers nvidia-smi through the simulator's command emulation, and a test can
switch one node into a fault; the other nodes must not notice, and the node must recover.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest

from leases.alerts import state as alertstate
from leases.alerts.watch import AlertWatch
from leases.config.sections import AlertsConfig
from leases.core.clock import utc_now
from leases.core.models import Node, NodeHealth
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.keptshell import shell_commands
from leases.ssh.pool import SshPool
from leases.telemetry.history import RecentHistory
from leases.telemetry.nvml import NvmlUnavailable
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until

KEYS = TestKeys.generate()
MISMATCH = (
    "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.54\n"
)

# nvidia-smi where the driver's library is not in the container, and where NVML refuses the
# login user (as nvidia-docker#1163 and nvidia-container-toolkit#33 show them).
NO_LIBRARY = (
    "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that"
    " the NVIDIA Display Driver is properly installed and present in your system.\nPlease also"
    " try adding directory that contains libnvidia-ml.so to your system PATH.\n"
)
DENIED = "Failed to initialize NVML: Insufficient Permissions\n"
NVML_FAULTS = {"nolib": (NO_LIBRARY, "", 12), "denied": (DENIED, "", 4)}


class Faults:
    """What each node should do instead of answering normally."""

    def __init__(self) -> None:
        self.mode: dict[int, str] = {}


def handler_for(faults: Faults, sim: SimNode):  # type: ignore[no-untyped-def]
    async def shell(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        """A shell channel: each command as sh reads it (leases.sim.keptshell); the fault
        applies to nvidia-smi."""
        async for command in shell_commands(process):
            cmd = command.text
            mode = faults.mode.get(node.port, "ok")
            # (A sweep that reads the processes sends "(nvidia-smi ...": gpuread.with_apps.)
            if not cmd.startswith(("nvidia-smi", "(nvidia-smi")) or mode == "ok":
                out, err, status = sim_answer(sim, cmd, datetime.now(UTC))
            elif mode == "hang":
                await process.channel.wait_closed()
                return
            elif mode == "half":
                command.partial("0, GPU-1234, NVIDIA A1")
                process.close()
                return
            else:
                out, err, status = {
                    "missing": ("", "sh: 1: nvidia-smi: not found\n", 127),
                    "mismatch": (MISMATCH, "", 18),
                    "garbage": ("0, GPU-x, what is this, ???\n<html>502</html>\n", "", 0),
                    **NVML_FAULTS,
                }[mode]
            command.reply(out, err, status)

    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        if process.command in (None, "sh"):
            await shell(process, node)
            return
        mode = faults.mode.get(node.port, "ok")
        cmd = process.command or ""
        if mode == "hang":
            await process.channel.wait_closed()
            return
        if mode == "missing":
            process.stderr.write("sh: 1: nvidia-smi: not found\n")
            process.exit(127)
            return
        if mode == "mismatch":
            process.stdout.write(MISMATCH)
            process.exit(18)
            return
        if mode in NVML_FAULTS:
            out, err, status = NVML_FAULTS[mode]
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(status)
            return
        if mode == "garbage":
            process.stdout.write("0, GPU-x, what is this, ???\n<html>502 Bad Gateway</html>\n")
            process.exit(0)
            return
        if mode == "half":
            process.stdout.write("0, GPU-1234, NVIDIA A1")
            await asyncio.sleep(0.01)
            process.close()
            return
        out, err, status = sim_answer(sim, cmd, datetime.now(UTC))
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)

    return handle


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[tuple[list[FakeNode], Faults, Poller, Ledger]]:
    faults = Faults()
    sims = [SimNode(f"n{i}", "A100", 2, seed=i) for i in range(4)]
    servers = [await FakeNode(KEYS, handler=handler_for(faults, s)).start() for s in sims]
    ledger = Ledger.open(tmp_path / "l.db")
    nodes: list[Node] = []
    for server, sim in zip(servers, sims, strict=True):
        node = server.as_node(sim.name)
        nodes.append(ledger.add_node(records.node_from(
            {**records.node_record(node), "gpu_model": "A100", "gpu_count": 2})))  # fmt: skip
    options = node_options(
        KEYS, tmp_path, servers, command_timeout=0.5, backoff_base=0.01, backoff_cap=0.02
    )
    poller = Poller(
        nodes, pool=SshPool(options), store=HistoryStore(ledger), recent=RecentHistory(),
        interval_s=0.2,
    )  # fmt: skip
    yield servers, faults, poller, ledger
    await poller.close()
    for s in servers:
        await s.stop()
    ledger.close()


async def sweep_until(poller: Poller, name: str, health: NodeHealth, tries: int = 20) -> None:
    for _ in range(tries):
        result = await poller.sweep()
        if result[name].health is health:
            return
        await asyncio.sleep(0.03)
    raise AssertionError(f"{name} never became {health}: {poller.statuses[name]}")


async def test_a_sweep_reads_every_gpu(fleet) -> None:  # type: ignore[no-untyped-def]
    _, _, poller, ledger = fleet
    result = await poller.sweep()
    assert {n: s.health for n, s in result.items()} == dict.fromkeys(result, NodeHealth.OK)
    st = result["n0"]
    assert [s.index for s in st.samples] == [0, 1]
    assert st.samples[0].mem_total_mib == 81920
    assert st.samples[0].util_gpu is not None
    latest = {r.node: r for r in HistoryStore(ledger).latest_by_id().values()}
    assert latest["n0"].health is NodeHealth.OK and len(latest["n0"].samples) == 2


@pytest.mark.parametrize(
    ("mode", "health"),
    [
        ("hang", NodeHealth.TIMEOUT),
        ("missing", NodeHealth.NO_NVIDIA_SMI),
        ("mismatch", NodeHealth.DRIVER_MISMATCH),
        ("nolib", NodeHealth.NVML_LIBRARY_MISSING),
        ("denied", NodeHealth.NVML_PERMISSION),
        ("garbage", NodeHealth.GARBAGE),
        ("half", NodeHealth.UNREACHABLE),
    ],
)
async def test_a_fault_stays_on_its_node_and_heals(fleet, mode: str, health: NodeHealth) -> None:  # type: ignore[no-untyped-def]
    servers, faults, poller, ledger = fleet
    await poller.sweep()
    faults.mode[servers[1].port] = mode
    result = await poller.sweep()
    if mode == "half":  # a channel cut mid-output: the connection is treated as dropped
        assert result["n1"].health in (NodeHealth.UNREACHABLE, NodeHealth.GARBAGE)
    else:
        assert result["n1"].health is health, result["n1"]
    assert result["n1"].detail
    for other in ("n0", "n2", "n3"):
        assert result[other].health is NodeHealth.OK
    gaps = HistoryStore(ledger).gaps("n1")
    assert len(gaps) == 1 and gaps[0][1] is None  # an open gap: readings unknown, not zero
    del faults.mode[servers[1].port]
    await sweep_until(poller, "n1", NodeHealth.OK)
    assert HistoryStore(ledger).gaps("n1")[0][1] is not None


async def test_unreachable_then_back(fleet) -> None:  # type: ignore[no-untyped-def]
    servers, _, poller, _ = fleet
    await poller.sweep()
    await servers[2].stop()
    # The node's open connection was cut: on a loaded machine the first sweep can wait out
    # its command on it before the cut is seen (timed out); the refused reconnect that
    # follows is unreachable. Nothing else is the node's state meanwhile.
    seen: list[NodeHealth] = []
    for _ in range(20):
        result = await poller.sweep()
        seen.append(result["n2"].health)
        if seen[-1] is NodeHealth.UNREACHABLE:
            break
    assert seen[-1] is NodeHealth.UNREACHABLE, seen
    assert set(seen) <= {NodeHealth.TIMEOUT, NodeHealth.UNREACHABLE}, seen
    assert result["n2"].samples  # last good readings kept for display
    assert all(result[n].health is NodeHealth.OK for n in ("n0", "n1", "n3"))
    await servers[2].start()
    await sweep_until(poller, "n2", NodeHealth.OK)


async def test_auth_failure_then_key_authorised(fleet) -> None:  # type: ignore[no-untyped-def]
    servers, _, poller, _ = fleet
    await poller.sweep()
    await servers[3].stop()
    servers[3].authorized = {KEYS.stranger_key.convert_to_public()}
    await servers[3].start()
    await sweep_until(poller, "n3", NodeHealth.AUTH_FAILED)
    servers[3].authorized = {KEYS.client_key.convert_to_public()}
    await sweep_until(poller, "n3", NodeHealth.OK)


async def test_changed_host_key_is_refused_and_alerted(fleet) -> None:  # type: ignore[no-untyped-def]
    servers, _, poller, ledger = fleet
    # Alerts evaluated after every flush (the collector's default is once a minute).
    poller.alerts = AlertWatch(ledger, AlertsConfig(), clock=utc_now, every_s=0.0)
    await poller.sweep()
    await servers[0].stop()
    await servers[0].start(host_key=KEYS.other_host_key)
    await sweep_until(poller, "n0", NodeHealth.HOSTKEY_CHANGED)
    st = poller.statuses["n0"]
    assert st.fingerprint == KEYS.other_host_key.get_fingerprint("sha256")
    alerts = alertstate.alerts(ledger, utc_now())
    assert [(a.node, a.kind) for a in alerts] == [("n0", "hostkey_changed")]
    assert st.fingerprint in alerts[0].message
    await poller.sweep()
    assert len(alertstate.alerts(ledger, utc_now())) == 1  # deduplicated
    assert poller.statuses["n1"].health is NodeHealth.OK
    # Issue 18: the sweep held back by the backoff keeps the fingerprint (it was "?").
    assert poller.statuses["n0"].fingerprint == KEYS.other_host_key.get_fingerprint("sha256")
    poller.flush()
    (again,) = alertstate.alerts(ledger, utc_now())
    assert st.fingerprint in again.message and "?" not in again.message


async def test_stream_mode_delivers_rounds(fleet) -> None:  # type: ignore[no-untyped-def]
    _, _, poller, ledger = fleet
    stop = asyncio.Event()
    task = asyncio.create_task(poller.run(stop, mode="stream", flush_s=0.2))
    recent = poller.recent
    assert recent is not None

    def rounds() -> dict[str, int]:
        return {n: len(recent.series(n, 0)) for n in ("n0", "n1", "n2", "n3")}

    try:
        await wait_until(lambda: min(rounds().values()) >= 4 or task.done(), what="4 rounds")
        assert not task.done(), task
    finally:
        stop.set()
        await task
    for name in ("n0", "n1", "n2", "n3"):
        assert poller.statuses[name].health is NodeHealth.OK
    assert min(rounds().values()) >= 4, rounds()
    assert HistoryStore(ledger).latest_by_id()[ledger.node("n3").id or 0].health is NodeHealth.OK


async def test_local_node_without_nvml_reports_it(tmp_path: Path) -> None:
    """No GPU here: the real NVML library is missing, and that is a status, not a crash."""
    node = Node(name="local", ssh=records.node_from({"name": "x", "local": True}).ssh, local=True)
    poller = Poller([node], pool=SshPool(node_options(KEYS, tmp_path)))
    result = await poller.sweep()
    assert result["local"].health is NodeHealth.NO_NVML
    assert "NVML" in result["local"].detail
    await poller.close()


async def test_local_node_through_an_injected_reader(tmp_path: Path) -> None:
    """A stand-in NVML reader (no GPU exists here) shows how local readings flow."""
    from leases.core.models import GpuProcess, GpuSample

    class Reader:
        def open(self) -> None: ...

        def close(self) -> None: ...

        def read(self, node: str, now: datetime) -> list[GpuSample]:
            return [GpuSample(node=node, at=now, index=0, uuid="GPU-0", util_gpu=42.0)]

        def processes(self, node: str, samples: list[GpuSample]) -> list[GpuProcess]:
            return [GpuProcess(node, "GPU-0", 77, "python", 100.0, owner="alice")]

    class Broken(Reader):
        def open(self) -> None:
            raise NvmlUnavailable(
                "no NVML on this host: driver not loaded", NodeHealth.DRIVER_NOT_LOADED
            )

    node = Node(name="ws", ssh=records.node_from({"name": "x", "local": True}).ssh, local=True)
    ok = Poller([node], pool=SshPool(node_options(KEYS, tmp_path)), nvml=Reader)  # type: ignore[arg-type]
    status = (await ok.sweep())["ws"]
    assert status.samples[0].util_gpu == 42.0
    assert [p.owner for p in status.processes] == ["alice"]
    bad = Poller([node], pool=SshPool(node_options(KEYS, tmp_path)), nvml=Broken)  # type: ignore[arg-type]
    assert (await bad.sweep())["ws"].health is NodeHealth.DRIVER_NOT_LOADED


# -- isolation: zuka's own failure on one node's data is that node's state ---------------


class FailingStore(HistoryStore):
    """A real store over the ledger that fails for the nodes named in `bad`."""

    def __init__(self, ledger: Ledger, bad: set[str]) -> None:
        super().__init__(ledger)
        self.bad = bad

    def write(self, minutes=(), latest=(), gaps=()):  # type: ignore[no-untyped-def]
        if any(g.node in self.bad for g in gaps):
            raise RuntimeError(f"cannot close the gap of {sorted(self.bad)[0]}")
        if any(r.node in self.bad for r in latest):
            raise RuntimeError("cannot store the latest rows")
        super().write(minutes, latest, gaps)


async def test_a_failure_on_one_nodes_data_is_that_nodes_state_and_logged(
    fleet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import stat

    from leases.ledger.paths import fault_log_path
    from leases.telemetry.faultlog import fault_logger

    _, _, poller, ledger = fleet
    poller.store = FailingStore(ledger, {"n1"})
    poller.log = fault_logger(tmp_path / "l.db")
    result = await poller.sweep()  # the flush inside falls back node by node
    assert result["n1"].health is NodeHealth.GARBAGE
    assert "RuntimeError" in result["n1"].detail and "fault log" in result["n1"].detail
    assert all(result[n].health is NodeHealth.OK for n in ("n0", "n2", "n3"))
    latest = {r.node: r for r in HistoryStore(ledger).latest_by_id().values()}
    assert {n: latest[n].health for n in ("n0", "n2", "n3")} == dict.fromkeys(
        ("n0", "n2", "n3"), NodeHealth.OK
    )
    log = fault_log_path(tmp_path / "l.db")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "node n1" in text and "Traceback" in text and "cannot close the gap of n1" in text
    poller.store.bad.clear()
    await sweep_until(poller, "n1", NodeHealth.OK)


async def test_run_supervised_restarts_a_dead_run_with_backoff(fleet) -> None:  # type: ignore[no-untyped-def]
    _, _, poller, _ = fleet
    real_run = poller.run
    deaths: list[float] = []

    async def dying_run(stop: asyncio.Event, mode: str = "stream", flush_s: float = 5.0) -> None:
        if len(deaths) < 3:
            assert not poller.running  # a dead run never claims to poll
            raise RuntimeError("boom")
        await real_run(stop, mode, flush_s)  # type: ignore[arg-type]

    poller.run = dying_run  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(
        poller.run_supervised(
            stop, flush_s=0.1, on_fault=lambda exc, delay: deaths.append(delay), backoff_s=0.01
        )
    )
    await wait_until(
        lambda: task.done() or (poller.running and poller.statuses["n0"].health is NodeHealth.OK),
        what="a healthy run after three deaths",
    )
    assert not task.done(), task
    assert deaths == [0.01, 0.02, 0.04] and poller.restarts == 3
    assert poller.last_fault == "RuntimeError: boom"
    stop.set()
    await task
    assert not poller.running


# -- history: a gap opened by one process is closed by the next good reading in any ------


async def test_a_gap_opened_by_another_process_is_closed_by_the_next_reading(
    fleet, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    servers, faults, poller, ledger = fleet
    # "The collector": n1 fails, a gap opens; then it stops.
    faults.mode[servers[1].port] = "missing"
    await poller.sweep()
    assert HistoryStore(ledger).gaps("n1")[-1][1] is None
    await poller.close()
    del faults.mode[servers[1].port]
    # "The dashboard taking over": a new poller over the same ledger file.
    other_ledger = Ledger.open(tmp_path / "l.db")
    try:
        store = HistoryStore(other_ledger)
        taker = Poller(poller.nodes, pool=SshPool(poller.pool.options), store=store, interval_s=0.2)
        result = await taker.sweep()
        assert result["n1"].health is NodeHealth.OK
        gaps = HistoryStore(ledger).gaps("n1")
        assert len(gaps) == 1 and gaps[0][1] is not None, gaps
        await taker.close()
    finally:
        other_ledger.close()
