"""Handlers of `zuka lease refund` (a deposit back, in part or whole) and `zuka lease
refunds` (each deposit: paid, back, outstanding)."""

from __future__ import annotations

import argparse
from decimal import Decimal
from typing import TextIO

from leases.app.deposits import deposit_states, refund_deposit
from leases.core import fields
from leases.core.i18n import _
from leases.money.amounts import fen_json, money
from leases.money.words import deposit_word
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def lease_refund(args: argparse.Namespace, out: TextIO) -> int:
    with trusted(open_ledger(args, create=False), _("the refund")) as ledger:
        added, message = refund_deposit(
            ledger, args.node, args.amount, args.on, lease_start=args.lease_start,
            notes=args.notes or "",
        )  # fmt: skip
    return output.done(args, out, added, message)


def lease_refunds(args: argparse.Namespace, out: TextIO) -> int:
    with trusted(open_ledger(args, readonly=True), _("the deposits' figures")) as ledger:
        states = deposit_states(ledger, args.node)
    if args.json:
        output.dump_json(
            [
                {
                    "node": s.lease.node,
                    "lease_start": s.lease.start.isoformat(),
                    "currency": s.lease.currency,
                    "deposit": fen_json(s.lease.deposit) if s.lease.deposit is not None else None,
                    "paid_on": s.paid_on.isoformat(),
                    "paid_on_assumed": s.paid_on_assumed,
                    "state": s.state,
                    "refunded": fen_json(s.refunded),
                    "outstanding": fen_json(s.outstanding),
                    "forfeited": fen_json(s.lost),
                    "refunds": [
                        {
                            **{k: r[k] for k in ("id", "refunded_on", "notes")},
                            "amount": fen_json(Decimal(r["amount"])),
                        }
                        for r in s.refunds
                    ],
                }
                for s in states
            ],
            out,
        )
        return 0
    rows = []
    for s in states:
        cur = s.lease.currency
        refunds = ", ".join(
            _("{amount} on {day}").format(
                amount=money(fields.money("amount", r["amount"]), cur), day=r["refunded_on"]
            )
            + (f" ({r['notes']})" if r["notes"] else "")
            for r in s.refunds
        )
        rows.append(
            (
                s.lease.node,
                fields.shown(s.lease.start, s.lease.billing_tz),
                money(s.lease.deposit, cur),
                s.paid_on.isoformat() + (_(" (lease start)") if s.paid_on_assumed else ""),
                deposit_word(s.state),
                refunds or "-",
                money(s.refunded, cur),
                money(s.outstanding, cur),
                money(s.lost, cur) if s.lost else "-",
            )
        )
    headers = (
        _("NODE"), _("LEASE START"), _("DEPOSIT"), _("PAID ON"), _("STATE"), _("REFUNDS"),
        _("BACK"), _("OUTSTANDING"), _("FORFEITED"),
    )  # fmt: skip
    output.table(headers, rows, out)
    return 0
