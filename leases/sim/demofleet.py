"""The demo fleet, started: the demo ledger built from leases/data/demo_fleet.json, every
node in it backed by a simulated GPU node (an in-process SSH server) with days of history.
`zuka demo` and `zuka web --demo` both start it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.sim.demoledger import build_demo_ledger, demo_today
from leases.sim.ledger import FleetThread, backfill, serve_ledger_nodes, sim_nodes_of
from leases.telemetry.rollups import HistoryStore

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
