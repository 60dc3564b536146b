"""Handler of `zuka` and `zuka dashboard`: the dashboard on a ledger that exists."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from leases.core.errors import LedgerError
from leases.core.textsafe import visible
from leases.ledger import labfiles
from leases.ledger.paths import resolve_ledger_path
from leases.ledger.store import Ledger
from tui.cli.opening import named


def dashboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.dashboard.app import run_dashboard

    path = resolve_ledger_path(args.ledger)
    if named(args) and not path.exists():
        # A typo (lab.dbb) opened an empty ledger, said only in the dashboard's header.
        raise LedgerError(
            f"no ledger at {visible(str(path))}: a typo? The dashboard opens a ledger that"
            " exists; start a new one there with `zuka node add NAME --ledger PATH ...`,"
            " or try `zuka demo`"
        )
    if not out.isatty():
        if path.exists():
            # The ledger's own problem first, as the dashboard does.
            Ledger.open(path, readonly=labfiles.in_lab(path)).close()
        print(
            "zuka: the dashboard needs a terminal and stdout is not one: run it in a terminal,"
            " or for text use a listing (`zuka node list`, `zuka poll --once`)",
            file=sys.stderr,
        )
        return 2
    return run_dashboard(path)
