"""`zuka demo`: the dashboard on the example fleet, in a temporary ledger."""

from __future__ import annotations

import argparse
import tempfile
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from leases.demo import build_demo_ledger
from tui.app import run_dashboard


def run_demo(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="zuka-demo-") as tmp:
        path = Path(args.ledger) if args.ledger else Path(tmp) / "demo.db"
        today = datetime.now(ZoneInfo("Asia/Shanghai")).date()
        build_demo_ledger(path, today).close()
        return run_dashboard(path)
