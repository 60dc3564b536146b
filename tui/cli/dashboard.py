"""Handler of `zuka` and `zuka dashboard`: the dashboard on a ledger that exists."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from leases.core.errors import LedgerError, no_ledger
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger import files
from leases.ledger.paths import ledger_choice


def dashboard(args: argparse.Namespace, out: TextIO) -> int:
    from tui.dashboard.app import run_dashboard
    from tui.dashboard.source import check_ledger

    path, why = ledger_choice(args.ledger)
    exists = files.exists(path)  # a lab this user may not enter: refused naming its group
    if why.startswith("[lab]") and not exists:
        raise no_ledger(path, why)
    if why and not exists:
        # A typo (lab.dbb) opened an empty ledger, said only in the dashboard's header.
        raise LedgerError(
            _(
                "no ledger at {path}: a typo? The dashboard opens a ledger that exists; start"
                " a new one there with `zuka node add NAME --ledger PATH ...`, or try"
                " `zuka demo`"
            ).format(path=visible(str(path)))
        )
    if not out.isatty():
        if exists:
            check_ledger(path)  # the ledger's own problem first, as the dashboard does
        print(
            _(
                "zuka: the dashboard needs a terminal and stdout is not one: run it in a"
                " terminal, or for text use a listing (`zuka node list`, `zuka poll --once`)"
            ),
            file=sys.stderr,
        )
        return 2
    return run_dashboard(path)
