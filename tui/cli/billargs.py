"""The parser of `zuka bill ...` (its handlers load when run: tui/cli/lazy.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from leases.core.i18n import N_, _
from tui.cli import lazy

CHECK_HELP = N_(
    "compare the month's bills with zuka's charges, lease by lease, and list every bill line"
    " that matches nothing in the ledger. Exit status: 0 when it all agrees, 1 when a lease"
    " differs beyond the tolerance (or is not on the bill) or a line is unmatched, 2 on bad"
    " input (no bill for the month, an unknown provider)"
)

IMPORT_EPILOG = N_(
    "aliyun: the bill detail CSV (its Chinese header, columns read by name);"
    " assets/bills/aliyun-2026-11.csv in zuka's checkout holds the exact published header."
    " A file lacking columns the format needs is refused, naming every missing column."
)


def add_bill_commands(
    sub: Any,
    cmd: Callable[[Any, str, Callable[[argparse.Namespace, TextIO], int], str], Any],
    parser_class: type[argparse.ArgumentParser],
) -> None:
    bill = sub.add_parser("bill", help=_("the provider's own bill: import it, check it"))
    bills = bill.add_subparsers(dest="action", required=True, parser_class=parser_class)
    p = cmd(
        bills,
        "import",
        lazy.bill_import,
        _("read a provider's bill export (aliyun, aws_cur, or a [bills.NAME] mapping)"),
    )
    p.epilog = _(IMPORT_EPILOG)
    p.add_argument("file", help=_("the CSV the provider's console or report wrote"))
    p.add_argument("--provider", required=True, help=_("the provider it is from"))
    p.add_argument(
        "--format", help=_("aliyun, aws_cur or NAME of [bills.NAME] (default: from the header)")
    )
    p.add_argument(
        "--month", metavar="YYYY-MM", help=_("refuse the file unless its lines are of this month")
    )
    cmd(bills, "list", lazy.bill_list, _("the bills imported"))
    p = cmd(bills, "delete", lazy.bill_delete, _("delete an imported bill (zuka undo: back)"))
    p.add_argument("id", type=int)
    p = cmd(bills, "check", lazy.bill_check, _(CHECK_HELP))
    p.add_argument("--month", required=True, metavar="YYYY-MM", help=_("in the billing time zone"))
    p.add_argument("--provider", help=_("only this provider's bill"))
    p.add_argument(
        "--tolerance",
        metavar="T",
        help=_(
            "an amount (0.5) or a percent (1%%), at most 10000 or 20%%;"
            " default [bills] tolerance, else 1.00 or 1 %%, whichever larger"
        ),
    )
