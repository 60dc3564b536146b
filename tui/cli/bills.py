"""`zuka bill import / list / delete / check`: the provider's own bill, imported and
reconciled with the ledger (leases.app.bills)."""

from __future__ import annotations

import argparse
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from leases.app import bills
from leases.config.load import load_user_config
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.rowaudit import ENTITIES
from leases.money.amounts import fen_json, money
from leases.money.bills.reconcile import Reconciliation
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def bill_import(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    with trusted(open_ledger(args), _("the bill"), ENTITIES) as ledger:
        done = bills.import_bill(
            ledger,
            Path(args.file),
            provider=args.provider,
            fmt=args.format,
            month=args.month,
            config=config,
        )
    return output.done(
        args, out, {**done.record, "months": list(done.months)}, done.said(args.provider)
    )


def bill_list(args: argparse.Namespace, out: TextIO) -> int:
    tz = load_user_config(args.config).billing.tz
    with trusted(open_ledger(args, readonly=True), _("the bills"), ENTITIES) as ledger:
        found = bills.list_bills(ledger, tz)
    if args.json:
        output.dump_json(found, out)
        return 0
    if not found:
        out.write(_("no bills imported: zuka bill import FILE --provider NAME") + "\n")
        return 0
    output.table(
        (
            _("ID"),
            _("PROVIDER"),
            _("FORMAT"),
            _("FILE"),
            _("IMPORTED ({tz})").format(tz=tz),
            _("MONTHS"),
            _("LINES"),
            _("PAYABLE"),
        ),
        [
            (
                b["id"],
                visible(b["provider"]),
                b["format"],
                visible(b["source"], 40),
                b["imported_local"][:16].replace("T", " "),
                ", ".join(b["months"]),
                b["lines"],
                ", ".join(money(Decimal(a), c) for c, a in b["payable"].items()),
            )
            for b in found
        ],
        out,
    )
    out.write(_("PAYABLE: before vouchers and credits, as zuka bill check counts the bill") + "\n")
    return 0


def bill_delete(args: argparse.Namespace, out: TextIO) -> int:
    with trusted(open_ledger(args), _("the bill"), ENTITIES) as ledger:
        gone = bills.delete_bill(ledger, args.id)
    return output.done(
        args,
        out,
        gone,
        _("deleted bill {id} and its {lines} lines (zuka undo puts them back)").format(
            id=args.id, lines=len(gone.get("lines", []))
        ),
    )


def bill_check(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    # The figures' rows, and (check_month) the bills of the month: not every bill's lines.
    with trusted(open_ledger(args, readonly=True), _("the figures")) as ledger:
        rec = bills.check_month(
            ledger, args.month, config=config, provider=args.provider, tol=args.tolerance
        )
    if args.json:
        output.dump_json(check_json(rec), out)
    else:
        write_check(rec, out)
    return 0 if rec.agrees else 1


def check_json(rec: Reconciliation) -> dict[str, Any]:
    return {
        "month": rec.month,
        "providers": list(rec.providers),
        "tolerance": rec.tolerance.said(),
        "agrees": rec.agrees,
        "leases": [
            {
                "node": r.node,
                "start": r.start.isoformat(),
                "provider": r.provider,
                "currency": r.currency,
                "zuka": fen_json(r.zuka),
                "bill": fen_json(r.billed),
                "difference": fen_json(r.difference),
                "credits_discounts": fen_json(r.apart),
                "tax": fen_json(r.tax),
                "lines": r.lines,
                "allowed": fen_json(r.allowed),
                "state": r.state,
                "other_currencies": list(r.others),
            }
            for r in rec.rows
        ],
        "unmatched": [
            {
                "provider": u.provider,
                "resource_id": u.resource_id,
                "product": u.product,
                "currency": u.currency,
                "amount": fen_json(u.amount),
                "credits_discounts": fen_json(u.apart),
                "lines": u.lines,
                "why": u.why,
            }
            for u in rec.unmatched
        ],
        "account": [
            {"provider": p, "kind": k, "currency": c, "amount": fen_json(a)}
            for (p, k, c), a in sorted(rec.account.items())
        ],
    }


def write_check(rec: Reconciliation, out: TextIO) -> None:
    providers = ", ".join(map(visible, rec.providers))
    out.write(
        _("bill check {month} ({providers}); tolerance {tolerance}").format(
            month=rec.month, providers=providers, tolerance=rec.tolerance.said()
        )
        + "\n\n"
    )
    if not rec.rows:
        out.write(
            _("no lease of {providers} charged in {month}").format(
                providers=providers, month=rec.month
            )
            + "\n"
        )
    else:
        output.table(
            (
                _("NODE"),
                _("LEASE FROM"),
                _("PROVIDER"),
                _("ZUKA"),
                _("BILL"),
                _("DIFFERENCE"),
                _("TOLERANCE"),
                _("CREDITS"),
                _("STATE"),
            ),
            [
                (
                    visible(r.node, 30),
                    r.start.strftime("%Y-%m-%d"),
                    visible(r.provider, 20),
                    money(r.zuka, r.currency),
                    money(r.billed, r.currency),
                    money(r.difference, r.currency),
                    "±" + money(r.allowed, r.currency),
                    money(r.apart, r.currency) if r.apart else "",
                    _(r.state) + (f" (+{', '.join(r.others)})" if r.others else ""),
                )
                for r in rec.rows
            ],
            out,
        )
    if rec.unmatched:
        out.write("\n" + _("On the bill, matching nothing in the ledger:") + "\n")
        output.table(
            (
                _("PROVIDER"),
                _("RESOURCE ID"),
                _("PRODUCT"),
                _("AMOUNT"),
                _("CREDITS"),
                _("LINES"),
                _("WHY"),
            ),
            [
                (
                    visible(u.provider, 20),
                    visible(u.resource_id, 60),
                    visible(u.product, 30),
                    money(u.amount, u.currency),
                    money(u.apart, u.currency) if u.apart else "",
                    u.lines,
                    u.why,
                )
                for u in rec.unmatched
            ],
            out,
        )
    if rec.account:
        out.write("\n" + _("The account's lines (no resource id):") + "\n")
        output.table(
            (_("PROVIDER"), _("KIND"), _("AMOUNT")),
            [(visible(p, 20), k, money(a, c)) for (p, k, c), a in sorted(rec.account.items())],
            out,
        )
    n, u = len(rec.differing), len(rec.unmatched)
    out.write(
        "\n"
        + (
            _("it all agrees") + "\n"
            if rec.agrees
            else _("{leases} lease(s) differ, {ids} resource id(s) unmatched").format(
                leases=n, ids=u
            )
            + "\n"
        )
    )
