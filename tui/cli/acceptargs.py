"""The options of `zuka accept` (kept apart from its handler, which loads SSH and the
checks only when the command runs)."""

from __future__ import annotations

import argparse

from leases.core.acceptance import Level, Status
from leases.core.i18n import N_, _
from tui.cli import choicewords

EXIT = {Status.PASSED: 0, Status.WARNED: 0, Status.FAILED: 1, Status.NOT_CHECKED: 3,
        Status.SKIPPED: 3}  # fmt: skip
HELP = N_(
    "exit status: 0 passed or warned, 1 failed, 3 not checked (the node could not be"
    " reached or read), 2 bad input"
)


def accept_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("node", metavar="NODE")
    p.add_argument("--level", choices=[lv.value for lv in Level], default=None,
                   type=choicewords.typed(Level),
                   help=_("quick (read-only, seconds), standard (+ short GPU work), burn"
                   " (+ a bounded burn-in); default quick"))  # fmt: skip
    p.add_argument("--last", action="store_true", help=_("the stored verdict; runs nothing"))
    p.add_argument("--report", choices=("md",), help=_("print the report a provider accepts"))
    p.epilog = _(HELP)
