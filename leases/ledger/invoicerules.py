"""The invoices book's rules between rows and within reason (leases.ledger.books runs them
in the write's transaction, whoever writes: the CLI, an import): an invoice number is
unique per provider (the table's UNIQUE says so too; this says it in words), and an
invoice's period is at most 366 days, and an invoice of one lease is in its currency.
The issue day not in the future needs the clock and the billing zone: leases.app.invoices
checks it."""

from __future__ import annotations

from datetime import date
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.ledger.books import BOOKS, Record

MAX_PERIOD_DAYS = 366


def unique_number(ledger: Any, rec: Record, row_id: int | None) -> None:
    rows = ledger.rows(
        "SELECT i.id, p.name FROM invoices i JOIN providers p ON p.id = i.provider_id"
        " WHERE i.provider_id = ? AND i.number = ? AND i.id IS NOT ?",
        [rec["provider_id"], rec["number"], row_id],
    )
    if rows:
        raise InputError(
            "number",
            rec["number"],
            _(
                "is already the number of invoice #{rows} of provider {rows2}: an invoice number "
                "is unique per provider (edit that one, or check the number)"
            ).format(rows=rows[0]["id"], rows2=rows[0]["name"]),
        )


def period_within_reason(ledger: Any, rec: Record, row_id: int | None) -> None:
    days = (date.fromisoformat(rec["period_end"]) - date.fromisoformat(rec["period_start"])).days
    if days > MAX_PERIOD_DAYS:
        raise InputError(
            "period_end",
            rec["period_end"],
            _(
                "makes a period of {days} days from {rec} (it ends the day before {rec2}): an "
                "invoice covers at most {MAX_PERIOD_DAYS} days"
            ).format(
                days=days,
                rec=rec["period_start"],
                rec2=rec["period_end"],
                MAX_PERIOD_DAYS=MAX_PERIOD_DAYS,
            ),
        )


def in_its_lease_currency(ledger: Any, rec: Record, row_id: int | None) -> None:
    """An invoice of one lease is in that lease's currency: its charges are compared with
    it, and a CNY invoice against a USD lease's charges would read as all over-invoiced."""
    if rec.get("lease_id") is None:
        # Of all the provider's leases: in a currency one of them bills in, if it has any.
        found = ledger.rows(
            "SELECT DISTINCT l.currency FROM leases l JOIN nodes n ON n.id = l.node_id"
            " WHERE n.provider_id = ?",
            [rec["provider_id"]],
        )
        billed = sorted(r["currency"] for r in found)
        if billed and rec["currency"] not in billed:
            raise InputError(
                "currency",
                rec["currency"],
                _(
                    "the invoice is in {rec}, but the provider's leases bill in {join}: give the "
                    "invoice's currency (--currency {billed})"
                ).format(rec=rec["currency"], join=", ".join(billed), billed=billed[0]),
            )
        return
    rows = ledger.rows(
        "SELECT l.currency, n.name FROM leases l JOIN nodes n ON n.id = l.node_id WHERE l.id = ?",
        [rec["lease_id"]],
    )
    if rows and rows[0]["currency"] != rec["currency"]:
        raise InputError(
            "currency",
            rec["currency"],
            _(
                "the invoice is in {rec}, but the lease of node {rows} it covers is in {rows2}: "
                "an invoice of a lease is in its currency (--currency {rows2})"
            ).format(rec=rec["currency"], rows=rows[0]["name"], rows2=rows[0]["currency"]),
        )


RULES = (unique_number, period_within_reason, in_its_lease_currency)
for _rule in RULES:
    if _rule not in BOOKS["invoice"].rules:
        BOOKS["invoice"].rules.append(_rule)
