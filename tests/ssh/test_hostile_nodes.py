"""Hostile nodes (GPU index 256, endless output without newlines, a 100 MB line) beside
healthy ones: the poller, `zuka collect` and the dashboard keep reading every other node,
the bad ones are `garbage` with the reason, and memory stays bounded.

Nodes are leases.sim's in-process SSH servers with the hostile scenarios. The collector
and the dashboard run as subprocesses (their peak RSS is read from /proc), the fleet in a
thread of the test process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from leases.core.models import Node, NodeHealth
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet
from leases.sim.ledger import FleetThread, register_sim_nodes, serve_ledger_nodes
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.faultlog import fault_logger
from leases.telemetry.history import RecentHistory
from leases.telemetry.lock import PollerLock
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore

ZUKA = [sys.executable, "-m", "tui.cli.main"]
RSS_LIMIT_KB = 200 * 1024
HOSTILE = {
    "sim-004": (Scenario.GPU_INDEX_256, "'256' is outside 0..127"),
    "sim-005": (Scenario.ENDLESS_OUTPUT, "printed a line over 64 KiB"),
    "sim-006": (Scenario.HUGE_LINE, "printed a line over 64 KiB"),
}
HEALTHY = ("sim-001", "sim-002", "sim-003")


def _bad_as_expected(health: dict[str, tuple[str, str]]) -> bool:
    return all(
        health.get(name, ("", ""))[0] == NodeHealth.GARBAGE.value and words in health[name][1]
        for name, (_, words) in HOSTILE.items()
    )


async def test_poller_keeps_reading_healthy_nodes_beside_hostile_ones(tmp_path: Path) -> None:
    """In-process, with a clock running 30x so that minutes close and get packed."""
    sims = [SimNode(n, "A100", 2, seed=i) for i, n in enumerate(HEALTHY)]
    sims += [SimNode(n, "A100", 2, scenario, seed=9) for n, (scenario, _) in HOSTILE.items()]
    t0, m0 = datetime.now(UTC), time.monotonic()

    def clock() -> datetime:
        return t0 + timedelta(seconds=(time.monotonic() - m0) * 30)

    async with SimFleet(sims) as fleet:
        known = fleet.write_known_hosts(tmp_path / "known_hosts")
        key = str(fleet.write_client_key(tmp_path))
        ledger = Ledger.open(tmp_path / "l.db")
        nodes = [ledger.add_node(Node(ep.name, ep.ssh_target(key))) for ep in fleet]
        options = SshOptions(known_hosts=(known,), agent_path=None, config=[], command_timeout=5)
        recent = RecentHistory()
        poller = Poller(
            nodes, pool=SshPool(options), clock=clock, store=HistoryStore(ledger),
            recent=recent, interval_s=0.3, log=fault_logger(tmp_path / "l.db"),
        )  # fmt: skip
        stop = asyncio.Event()
        task = asyncio.create_task(poller.run(stop, mode="stream", flush_s=0.3))
        try:
            deadline = time.monotonic() + 60
            counts: dict[str, int] = {}
            while True:  # wait on the condition; the deadline only bounds a failure
                assert not task.done(), task
                health = {n: (s.health.value, s.detail) for n, s in poller.statuses.items()}
                if _bad_as_expected(health) and not counts:
                    counts = {n: len(recent.series(n, 0)) for n in HEALTHY}
                minutes = {n: len(poller.store.minutes(n, t0, clock())) for n in HEALTHY}  # type: ignore[union-attr]
                if counts and all(
                    len(recent.series(n, 0)) >= counts[n] + 5 and minutes[n] >= 2 for n in HEALTHY
                ):
                    break
                assert time.monotonic() < deadline, (health, counts, minutes)
                await asyncio.sleep(0.05)
            assert all(poller.statuses[n].health is NodeHealth.OK for n in HEALTHY)
        finally:
            stop.set()
            await task
            await poller.close()
            ledger.close()


@pytest.fixture
def hostile_ledger(ledger_path: Path) -> Iterator[tuple[Path, FleetThread]]:
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 6, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    for name, (scenario, _) in HOSTILE.items():
        runner.call(runner.fleet.set_scenario(name, scenario))
    yield ledger_path, runner
    runner.stop()


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def test_zuka_collect_keeps_collecting_beside_hostile_nodes(
    hostile_ledger: tuple[Path, FleetThread],
) -> None:
    path, _ = hostile_ledger
    collector = subprocess.Popen(
        [*ZUKA, "collect", "--ledger", str(path), "--interval", "0.5", "--flush", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert collector.stdout is not None
        assert "zuka collect: 6 nodes" in collector.stdout.readline()
        deadline = time.monotonic() + 90
        seen: dict[str, set[datetime]] = {n: set() for n in HEALTHY}
        with Ledger.open(path, create=False) as ledger:
            store = HistoryStore(ledger)
            while True:
                assert collector.poll() is None, collector.communicate()
                latest = {r.node: r for r in store.latest_by_id().values()}
                health = {n: (r.health.value, r.detail) for n, r in latest.items()}
                if _bad_as_expected(health):
                    for n in HEALTHY:
                        if n in latest and latest[n].health is NodeHealth.OK:
                            seen[n].add(latest[n].at)
                if all(len(v) >= 4 for v in seen.values()):
                    break  # every healthy node's reading kept arriving
                assert time.monotonic() < deadline, (health, seen)
                time.sleep(0.2)
        peak = _peak_rss_kb(collector.pid)
        print(f"zuka collect peak RSS: {peak} kB")  # a figure for the report (pytest -s)
        assert peak < RSS_LIMIT_KB, f"collector peak RSS {peak} kB"
    finally:
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=30)
    assert collector.returncode == 0, err
    assert PollerLock(path).holder() is None  # released: a dashboard can take over


_DASHBOARD = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from tui.dashboard.app import ZukaApp

    hostile, healthy = json.loads(sys.argv[2]), json.loads(sys.argv[3])

    def peak_kb():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

    async def main():
        app = ZukaApp(Path(sys.argv[1]), interval_s=0.5, refresh_s=0.3)
        verdict = {"ok": False}
        async with app.run_test(size=(140, 40)) as pilot:
            deadline = time.monotonic() + 90
            seen = {n: set() for n in healthy}
            while time.monotonic() < deadline:
                await pilot.pause(0.2)
                st = app.poller.statuses if app.poller else {}
                bad = all(
                    n in st and st[n].health.value == "garbage" and words in st[n].detail
                    for n, words in hostile.items()
                )
                if bad:
                    for n in healthy:
                        if st[n].health.value == "ok":
                            seen[n].add(st[n].at)
                verdict = {
                    "ok": bad and all(len(v) >= 4 for v in seen.values()),
                    "health": {n: [s.health.value, s.detail] for n, s in st.items()},
                    "sub_title": app.sub_title,
                    "running": app.is_running,
                }
                if verdict["ok"]:
                    break
        verdict["peak_kb"] = peak_kb()
        print(json.dumps(verdict))

    asyncio.run(main())
    """
)


def test_dashboard_keeps_polling_beside_hostile_nodes(
    hostile_ledger: tuple[Path, FleetThread],
) -> None:
    path, _ = hostile_ledger
    hostile = {n: words for n, (_, words) in HOSTILE.items()}
    run = subprocess.run(
        [sys.executable, "-c", _DASHBOARD, str(path), json.dumps(hostile), json.dumps(HEALTHY)],
        capture_output=True, text=True, timeout=180, env={**os.environ, "TERM": "dumb"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    verdict = json.loads(run.stdout.strip().splitlines()[-1])
    assert verdict["ok"], verdict
    print(f"dashboard peak RSS: {verdict['peak_kb']} kB")  # a figure for the report
    assert "polling every 0.5 s" in verdict["sub_title"], verdict["sub_title"]
    assert verdict["peak_kb"] < RSS_LIMIT_KB, f"dashboard peak RSS {verdict['peak_kb']} kB"
