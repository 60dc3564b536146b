"""`zuka demo`: the dashboard on the example fleet, live.

A temporary ledger is built from leases/data/demo_fleet.json; every node in it is backed by a
simulated GPU node (an in-process SSH server, see leases.sim) with 30 days of history, and
the dashboard polls them over real SSH connections like any other fleet.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

from leases.core.errors import InputError
from leases.sim.demoledger import build_demo_ledger, demo_today
from leases.sim.ledger import FleetThread, backfill, serve_ledger_nodes, sim_nodes_of
from leases.telemetry.rollups import HistoryStore
from tui.dashboard import gcpolicy
from tui.dashboard.app import ZukaApp

HISTORY_DAYS = 30


def prepare(path: Path, days: float = HISTORY_DAYS) -> FleetThread:
    """Build the demo ledger at path and start its simulated fleet."""
    with build_demo_ledger(path, demo_today(datetime.now(UTC))) as ledger:
        nodes = ledger.nodes()
        runner = serve_ledger_nodes(ledger, path, nodes)
        try:
            store = HistoryStore(ledger)
            now = datetime.now(UTC)
            for sim in sim_nodes_of(nodes):
                backfill(store, sim, now - timedelta(days=days), now)
        except BaseException:
            runner.stop()
            raise
    return runner


@contextmanager
def ended_by_signals(exit_running: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """SIGHUP (the terminal closed: tmux kill-session) and SIGTERM end the demo as `q`
    does, through every `finally` on the way out, so that its folder (the ledger and the
    simulated nodes' private key) is removed; by default either signal kills the process
    before any cleanup runs. In the running event loop, exit_running is called there (the
    dashboard exits as on `q`, stopping its terminal threads); elsewhere SystemExit is
    raised. Yields the signals received; later ones are ignored."""
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        for sig in caught:
            signal.signal(sig, signal.SIG_IGN)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or exit_running is None:
            raise SystemExit(128 + signum)
        # Asked again every 2 s until the process ends: an exit asked while the app is
        # still starting (a loaded machine) can be lost, and the demo then never ended.
        assert loop is not None and exit_running is not None
        ask, running = exit_running, loop

        def again() -> None:
            ask()
            running.call_later(2.0, again)

        loop.call_soon_threadsafe(again)

    caught = (signal.SIGHUP, signal.SIGTERM)
    before = {sig: signal.signal(sig, stop) for sig in caught}
    try:
        yield received
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def run_demo(args: argparse.Namespace) -> int:
    dashboard: list[ZukaApp] = []
    with (
        ended_by_signals(lambda: dashboard[0].exit() if dashboard else None) as received,
        tempfile.TemporaryDirectory(prefix="zuka-demo-") as tmp,
    ):
        path = Path(args.ledger) if args.ledger else Path(tmp) / "demo.db"
        if path.exists():
            raise InputError("ledger", str(path), "zuka demo builds a new ledger: give a new path")
        print("starting 12 simulated GPU nodes with 30 days of history...", file=sys.stderr)
        runner = prepare(path)
        try:
            dashboard.append(ZukaApp(path))
            gcpolicy.tune()  # this process is the dashboard's own
            dashboard[0].run()
        finally:
            runner.stop()
    return 128 + received[0] if received else 0
