"""`zuka invoice add/list/edit/delete`: the invoices (fapiao) on a provider's charges (the
use cases in leases.app.invoices)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from decimal import Decimal
from typing import Any, TextIO

from leases.app import invoices as app
from leases.config.load import load_user_config
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.money.amounts import bare, symbol
from leases.money.invoices import rate_warning
from leases.money.words import kind_word
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def _given(args: argparse.Namespace) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "number": args.number, "issued_on": args.issued, "amount": args.amount,
        "currency": args.currency, "vat_rate": args.vat, "tax_included": args.tax_included,
        "kind": args.kind, "notes": args.notes,
    }  # fmt: skip
    span = app.period(args.period, args.first, args.last)
    if span is not None:
        rec["period_start"], rec["period_end"] = span
    return {k: v for k, v in rec.items() if v is not None}


# The invoice's columns as its options name them, so that an error names what was typed.
FLAGS = {
    "number": "--number", "issued_on": "--issued", "period_start": "--from",
    "period_end": "--to", "period": "--period", "from": "--from", "to": "--to",
    "amount": "--amount", "currency": "--currency", "vat_rate": "--vat", "kind": "--kind",
    "notes": "--notes", "lease_start": "--lease-start", "node": "--node",
}  # fmt: skip


@contextmanager
def flags_named() -> Iterator[None]:
    """An input error names the option (--vat), not the column (vat_rate)."""
    try:
        yield
    except InputError as exc:
        flag = FLAGS.get(exc.field)
        if flag is None:
            raise
        raise InputError(flag, exc.value, exc.reason) from None


def _tz(args: argparse.Namespace) -> str:
    return load_user_config(args.config).billing.tz


def invoice_add(args: argparse.Namespace, out: TextIO) -> int:
    with flags_named():
        return _add(args, out)


def _add(args: argparse.Namespace, out: TextIO) -> int:
    given = _given(args)
    if "period_start" not in given:
        raise InputError("period", None, _("is required: --period YYYY-MM, or --from and --to"))
    given |= {"provider": args.provider, "node": args.node, "lease_start": args.lease_start}
    tz = _tz(args)
    with trusted(open_ledger(args, create=False), _("the invoice")) as ledger:
        added, message = app.add_invoice(ledger, given, tz=tz)
    _warn_rate(added)
    return output.done(args, out, _with_last_day(added), message)


def _with_last_day(rec: dict[str, Any]) -> dict[str, Any]:
    """The record (its period_end the ledger's exclusive bound) with `period_to`, the last
    day covered, as --to and `invoice list` say it."""
    last = date.fromisoformat(str(rec["period_end"])) - timedelta(days=1)
    return {**rec, "period_to": last.isoformat()}


def _warn_rate(rec: dict[str, Any]) -> None:
    """An odd VAT rate is recorded (another country's may be right) and said on stderr,
    never in the JSON on stdout."""
    said = rate_warning(Decimal(str(rec["vat_rate"])))
    if said is not None:
        print(_("zuka: warning: {warning}").format(warning=said), file=sys.stderr)


def invoice_edit(args: argparse.Namespace, out: TextIO) -> int:
    tz = _tz(args)
    with flags_named(), trusted(open_ledger(args, create=False), _("the invoice")) as ledger:
        edited, message = app.edit_invoice(ledger, args.id, _given(args), tz=tz)
    if args.vat is not None:
        _warn_rate(edited)
    return output.done(args, out, _with_last_day(edited), message)


def invoice_delete(args: argparse.Namespace, out: TextIO) -> int:
    with trusted(open_ledger(args, create=False), _("the invoice")) as ledger:
        gone, message = app.delete_invoice(ledger, args.id)
    return output.done(args, out, gone, message)


def invoice_list(args: argparse.Namespace, out: TextIO) -> int:
    with trusted(open_ledger(args, readonly=True), _("the invoices' figures")) as ledger:
        found = app.invoices(ledger, provider=args.provider, month=args.month)
    if args.json:
        output.dump_json([app.invoice_json(i) for i in found], out)
        return 0
    rows = []
    for i in found:
        v, cur = i.vat, symbol(i.currency)
        rows.append((
            i.id, i.provider, i.node or _("all leases"), i.number, i.issued_on.isoformat(),
            f"{i.period_start} – {i.period_to}",
            app.rate_shown(i.vat_rate) + ("" if i.tax_included else _(" excl.")),
            f"{cur}{bare(v.net)}", f"{cur}{bare(v.tax)}", f"{cur}{bare(v.total)}",
            kind_word(i.kind),
        ))  # fmt: skip
    head = (_("ID"), _("PROVIDER"), _("LEASE"), _("NUMBER"), _("ISSUED"), _("PERIOD"), _("VAT"),
            _("NET"), _("TAX"), _("TOTAL"), _("KIND"))  # fmt: skip
    output.table(head, rows, out)
    if found:
        out.write(
            _("tax to the fen, half up, as a fapiao rounds it; TOTAL includes the tax") + "\n"
        )
    return 0
