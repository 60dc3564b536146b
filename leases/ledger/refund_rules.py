"""The deposit_refund book's rules between rows (leases.ledger.books), registered on the
book when this module is imported (leases.ledger.book_rows does): a refund is of a lease
that has a deposit not forfeited, never dated before the deposit was paid (its paid-on
day, else the lease's start day), and never brings the refunds over the deposit. That a
refund is not dated in the future is the use case's (it holds the clock:
leases.app.deposits)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease, RefundState
from leases.ledger.books import BOOKS, Record
from leases.money.amounts import money
from leases.money.deposits import Refund, paid_on


def _lease(ledger: Any, lease_id: int) -> Lease:
    rows = ledger.rows("SELECT id FROM leases WHERE id = ?", [lease_id])
    if not rows:
        raise InputError("lease_id", lease_id, _("no lease of that id"))
    lease: Lease = ledger.lease_by_id(lease_id)
    return lease


def refund_rule(ledger: Any, rec: Record, row_id: int | None) -> None:
    """Refuse a refund the lease's deposit does not allow (InputError naming the field)."""
    lease = _lease(ledger, int(rec["lease_id"]))
    if lease.deposit is None:
        raise InputError(
            "node",
            lease.node,
            _(
                "its lease has no deposit to refund: record it first with zuka lease edit {node} "
                "--deposit AMOUNT --deposit-paid-on YYYY-MM-DD"
            ).format(node=lease.node),
        )
    if lease.deposit_refund is RefundState.FORFEITED:
        raise InputError(
            "node", lease.node, _("its deposit is marked forfeited: nothing of it comes back")
        )
    day, assumed = paid_on(lease)
    if rec["refunded_on"] < day.isoformat():
        said = (
            _(
                "is before the deposit was paid ({day}, the lease's start day: no paid-on day"
                " recorded)"
            )
            if assumed
            else _("is before the deposit was paid ({day})")
        )
        raise InputError("refunded_on", rec["refunded_on"], said.format(day=day.isoformat()))
    before = ledger.rows(
        "SELECT id, amount FROM deposit_refunds WHERE lease_id = ? AND id IS NOT ?",
        [lease.id, row_id],
    )
    # What it rests on: the refunds recorded before, as zuka wrote them.
    ledger.check_untouched("deposit_refund", [int(r["id"]) for r in before])
    earlier = sum((Decimal(r["amount"]) for r in before), Decimal(0))
    amount = Decimal(rec["amount"])
    if earlier + amount > lease.deposit:
        left = lease.deposit - earlier
        raise InputError(
            "amount",
            rec["amount"],
            (
                _(
                    "is more than is left of the deposit: {left} of {deposit} ({earlier} refunded"
                    " before)"
                )
                if earlier
                else _("is more than is left of the deposit: {left} of {deposit}")
            ).format(
                left=money(left, lease.currency),
                deposit=money(lease.deposit, lease.currency),
                earlier=money(earlier, lease.currency),
            ),
        )


def check_lease_refunds(ledger: Any, lease: Lease) -> None:
    """A lease edited keeps its recorded refunds true: a deposit still there, not below
    what came back, paid no later than the first refund (InputError naming the field)."""
    rows = ledger.rows(
        "SELECT amount, refunded_on FROM deposit_refunds WHERE lease_id = ?", [lease.id]
    )
    if not rows:
        return
    back = sum((Decimal(r["amount"]) for r in rows), Decimal(0))
    if lease.deposit is None or lease.deposit < back:
        raise InputError(
            "deposit",
            None if lease.deposit is None else str(lease.deposit),
            _(
                "{count} refund(s) of it are recorded ({back} back): the deposit cannot be less;"
                " see zuka lease refunds {node}"
            ).format(count=len(rows), back=money(back, lease.currency), node=lease.node),
        )
    first = min(r["refunded_on"] for r in rows)
    day, _assumed = paid_on(lease)
    if day.isoformat() > first:
        raise InputError(
            "deposit_paid_on",
            day.isoformat(),
            _("is after a refund of it ({first}): it was paid before it came back").format(
                first=first
            ),
        )


def refunds_by_lease(ledger: Any) -> dict[int, list[Refund]]:
    """Every lease's refunds as (day, amount), by lease id, by day."""
    out: dict[int, list[Refund]] = {}
    for r in ledger.book_rows("deposit_refund"):
        day = date.fromisoformat(r["refunded_on"])
        out.setdefault(int(r["lease_id"]), []).append((day, Decimal(r["amount"])))
    return {k: sorted(v) for k, v in out.items()}


if refund_rule not in BOOKS["deposit_refund"].rules:
    BOOKS["deposit_refund"].rules.append(refund_rule)
