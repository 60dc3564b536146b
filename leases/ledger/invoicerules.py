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
            f"is already the number of invoice #{rows[0]['id']} of provider {rows[0]['name']}:"
            " an invoice number is unique per provider (edit that one, or check the number)",
        )


def period_within_reason(ledger: Any, rec: Record, row_id: int | None) -> None:
    days = (date.fromisoformat(rec["period_end"]) - date.fromisoformat(rec["period_start"])).days
    if days > MAX_PERIOD_DAYS:
        raise InputError(
            "period_end",
            rec["period_end"],
            f"makes a period of {days} days from {rec['period_start']} (it ends the day before"
            f" {rec['period_end']}): an invoice covers"
            f" at most {MAX_PERIOD_DAYS} days",
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
                f"the invoice is in {rec['currency']}, but the provider's leases bill in"
                f" {', '.join(billed)}: give the invoice's currency (--currency {billed[0]})",
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
            f"the invoice is in {rec['currency']}, but the lease of node {rows[0]['name']} it"
            f" covers is in {rows[0]['currency']}: an invoice of a lease is in its currency"
            f" (--currency {rows[0]['currency']})",
        )


RULES = (unique_number, period_within_reason, in_its_lease_currency)
for _rule in RULES:
    if _rule not in BOOKS["invoice"].rules:
        BOOKS["invoice"].rules.append(_rule)
