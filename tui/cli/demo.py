"""`zuka demo`: the dashboard on the example fleet, live.

A temporary ledger is built from leases/data/demo_fleet.json; every node in it is backed by a
simulated GPU node (an in-process SSH server, see leases.sim.demofleet) with 30 days of
history, and the dashboard polls them over real SSH connections like any other fleet.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.sim.demofleet import prepare
from tui.dashboard import gcpolicy
from tui.dashboard.app import ZukaApp
from tui.dashboard.signals import ended_by_signals


def run_demo(args: argparse.Namespace) -> int:
    dashboard: list[ZukaApp] = []
    with (
        ended_by_signals(lambda: dashboard[0].exit() if dashboard else None) as received,
        tempfile.TemporaryDirectory(prefix="zuka-demo-") as tmp,
    ):
        path = Path(args.ledger) if args.ledger else Path(tmp) / "demo.db"
        if path.exists():
            raise InputError(
                "ledger", str(path), _("zuka demo builds a new ledger: give a new path")
            )
        print(_("starting 12 simulated GPU nodes with 30 days of history..."), file=sys.stderr)
        runner = prepare(path)
        try:
            dashboard.append(ZukaApp(path))
            gcpolicy.tune()  # this process is the dashboard's own
            dashboard[0].run()
        finally:
            runner.stop()
    return 128 + received[0] if received else 0
