"""The options of `zuka provider topup/balance` and `zuka invoice add/edit` (issue 20),
apart from their handlers (tui/cli/balances.py, invoices.py) so that building the parser
does not import the money maths."""

from __future__ import annotations

import argparse

from leases.core.i18n import N_, _
from tui.cli import choicewords

_CURRENCY_HELP = N_(
    "the account's currency (default: its entries', else the one its leases share, else"
    " [billing] currency); an account has one"
)
_VAT_HELP = N_("VAT rate: 6%%, 0.06 or 6 (China's rates: 0, 1, 3, 5, 6, 9, 13 %%)")


def topup_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help=_("the provider"))
    p.add_argument("--amount", required=True, help=_("the money put on the account"))
    p.add_argument("--at", metavar="TIME", help=_("when (default: now)"))
    p.add_argument("--currency", help=_(_CURRENCY_HELP))
    p.add_argument("--notes")


def balance_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help=_("the provider"))
    p.add_argument(
        "--set",
        metavar="AMOUNT",
        dest="reading",
        help=_("record the balance read off the provider's console (may be below 0)"),
    )
    p.add_argument(
        "--at",
        metavar="TIME",
        help=_(
            "with --set: when it was read (default: now);"
            " without: work the balance out at TIME (default: now)"
        ),
    )
    p.add_argument("--currency", help=_("with --set: {what}").format(what=_(_CURRENCY_HELP)))
    p.add_argument("--notes", help=_("with --set: a note on the reading"))  # fmt: skip


def invoice_options(p: argparse.ArgumentParser, *, editing: bool) -> None:
    """The options of `invoice add` (required ones marked) and `invoice edit` (all
    optional)."""
    need = not editing
    if not editing:
        p.add_argument("--provider", required=True, help=_("the provider that issued it"))
        p.add_argument("--node", help=_("an invoice of one lease: its node (default: of the"
                       " provider's charges of all its leases in its period)"))  # fmt: skip
        p.add_argument(
            "--lease-start",
            metavar="WHEN",
            help=_("with --node: the lease that starts then (default: its lease now)"),
        )
    p.add_argument("--number", required=need, help=_("the invoice number (发票号码)"))
    p.add_argument("--issued", required=need, metavar="YYYY-MM-DD", help=_("the day it was issued"))
    p.add_argument("--period", metavar="YYYY-MM", help=_("the month of charges it covers"))
    p.add_argument(
        "--from",
        dest="first",
        metavar="YYYY-MM-DD",
        help=_("the first day of charges it covers (with --to)"),
    )
    p.add_argument("--to", dest="last", metavar="YYYY-MM-DD",
                   help=_("the last day of charges it covers (included)"))  # fmt: skip
    p.add_argument("--amount", required=need, help=_("the amount as written (tax included unless"
                   " --tax-excluded)"))  # fmt: skip
    p.add_argument("--currency", help=_("default CNY"))
    p.add_argument("--vat", required=need, help=_(_VAT_HELP))
    tax = p.add_mutually_exclusive_group()
    tax.add_argument(
        "--tax-excluded",
        dest="tax_included",
        action="store_const",
        const=0,
        help=_("the amount is net of tax (金额), the tax added to it"),
    )
    tax.add_argument("--tax-included", dest="tax_included", action="store_const", const=1,
                     help=_("the amount includes the tax (价税合计; the default)"))  # fmt: skip
    p.add_argument(
        "--kind",
        choices=("special", "ordinary", "other"),
        type=choicewords.typed("leases.ledger.books.InvoiceKind"),
        help=_("special VAT invoice (专票, the default), ordinary (普票), other"),
    )
    p.add_argument("--notes")
