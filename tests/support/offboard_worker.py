"""Run one offboarding of node n1 in its own process, with the test drivers of
offboard_files (real files), killing itself where KILL_AT says (see Killer).

usage: python offboard_worker.py LEDGER ROOT KILL_AT
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from offboard_files import PLANNERS, drivers

from leases.config.sections import Config
from leases.ledger.store import Ledger
from leases.offboard import runner


def main(ledger_path: str, root: str, kill_at: str) -> int:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        fresh = runner.replan(ledger, node, Config(), PLANNERS)
        stored = runner.confirmed(ledger, node, fresh, "n1")
        table = drivers(ledger, node, Path(root), kill_at=kill_at)
        result = asyncio.run(runner.execute(ledger, stored, table))
    return 0 if result.finished else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
