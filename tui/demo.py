"""`zuka demo`: the dashboard on the example fleet, live.

A temporary ledger is built from leases/data/demo_fleet.json; every node in it is backed by a
simulated GPU node (an in-process SSH server, see leases.sim) with 30 days of history, and
the dashboard polls them over real SSH connections like any other fleet.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from leases.demo import build_demo_ledger
from leases.errors import InputError
from leases.rollups import HistoryStore
from leases.simledger import FleetThread, backfill, serve_ledger_nodes, sim_nodes_of
from tui.app import run_dashboard

HISTORY_DAYS = 30


def prepare(path: Path, days: float = HISTORY_DAYS) -> FleetThread:
    """Build the demo ledger at path and start its simulated fleet."""
    today = datetime.now(ZoneInfo("Asia/Shanghai")).date()
    with build_demo_ledger(path, today) as ledger:
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


def run_demo(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="zuka-demo-") as tmp:
        path = Path(args.ledger) if args.ledger else Path(tmp) / "demo.db"
        if path.exists():
            raise InputError("ledger", str(path), "zuka demo builds a new ledger: give a new path")
        print("starting 12 simulated GPU nodes with 30 days of history...", file=sys.stderr)
        runner = prepare(path)
        try:
            return run_dashboard(path)
        finally:
            runner.stop()
