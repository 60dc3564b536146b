"""Deposit use cases: `zuka lease refund` (a deposit back, in part or in full, on a day)
and `zuka lease refunds` (each lease's deposit, what came back and what is outstanding).
The rules a refund keeps against the lease and the other refunds are the book's
(leases.ledger.refund_rules); a refund dated after today is refused here, by the ledger's
clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease
from leases.ledger.books import Record
from leases.ledger.refund_rules import refunds_by_lease
from leases.ledger.store import Ledger
from leases.money import deposits, renewals
from leases.money.amounts import money_words
from leases.money.periods import zone
from leases.money.words import deposit_word

# The book's fields as the command's flags name them.
_FLAG = {"refunded_on": "on"}


def refund_deposit(
    ledger: Ledger,
    node: str,
    amount: str,
    on: str,
    *,
    lease_start: str | None = None,
    notes: str = "",
) -> tuple[Record, str]:
    """`zuka lease refund NODE --amount X --on DAY`: the refund as recorded and what the
    command says of it (with what is still outstanding)."""
    lease = _lease_named(ledger, node, lease_start)
    if lease_start is None and lease.node_id == ledger.node(node).id:
        lease = _outstanding_in_chain(ledger, lease)
    day = fields.day("on", on)
    today = ledger.clock().astimezone(zone(lease)).date()
    if day > today:
        raise InputError(
            "on", on, _("is in the future (today is {today})").format(today=today.isoformat())
        )
    rec: dict[str, Any] = {
        "lease_id": lease.id, "amount": amount, "refunded_on": day.isoformat(), "notes": notes,
    }  # fmt: skip
    try:
        added = ledger.add_book("deposit_refund", rec, node=lease.node)
    except InputError as exc:
        raise InputError(_FLAG.get(exc.field, exc.field), exc.value, exc.reason) from None
    left = deposits.outstanding(lease, refunds_by_lease(ledger).get(lease.id or 0, []), date.max)
    said = _(
        "recorded {amount} of the deposit of {node} back on {day}; outstanding: {left}"
    ).format(
        amount=money_words(Decimal(added["amount"]), lease.currency),
        node=lease.node,
        day=day.isoformat(),
        left=money_words(left, lease.currency),
    )
    return added, said


def _lease_named(ledger: Ledger, node: str, lease_start: str | None) -> Lease:
    """The lease of `node` that --lease-start names (see Ledger.lease_for); a deposit
    outlives its node, so when the node of that name now has no such lease, the released
    nodes that had the name are looked at too (the latest first): with --lease-start, the
    one that names a lease of theirs; without, the latest with a deposit outstanding."""
    try:
        return ledger.lease_for(node, lease_start)
    except InputError as exc:
        back = refunds_by_lease(ledger)
        for old in ledger.archived_nodes(node):
            leases = ledger.leases(old)
            if lease_start is not None:
                try:
                    return ledger.lease_for(node, lease_start, old)
                except InputError:
                    continue
            owed = [le for le in leases
                    if deposits.outstanding(le, back.get(le.id or 0, []), date.max)]  # fmt: skip
            if owed:
                return owed[-1]
        raise exc from None


def _outstanding_in_chain(ledger: Ledger, lease: Lease) -> Lease:
    """With no --lease-start: of the renewal chain of the lease billing now (or the latest),
    the latest lease whose deposit is still outstanding (a renewal copies no deposit: it
    stays on the lease it was paid with). None outstanding but some lease of the node has a
    deposit: refused, naming them; no deposit at all: the lease, for the book to refuse."""
    every = ledger.leases(lease.node)
    (chain,) = [c for c in renewals.chains(every) if any(le.id == lease.id for le in c)]
    back = refunds_by_lease(ledger)
    out = [le for le in chain if deposits.outstanding(le, back.get(le.id or 0, []), date.max)]
    if out:
        return out[-1]
    paid = [le for le in every if le.deposit is not None]
    if not paid:
        return lease
    named = ", ".join(
        f"{fields.shown(le.start, le.billing_tz)}"
        f" ({deposit_word(deposits.state_word(le, back.get(le.id or 0, [])))})"
        for le in paid
    )
    raise InputError(
        "node",
        lease.node,
        _(
            "has no deposit outstanding (its leases with a deposit start {leases}):"
            " name the lease with --lease-start"
        ).format(leases=named),
    )


def all_refunds(ledger: Ledger) -> dict[int, list[deposits.Refund]]:
    """Every lease's refund rows by lease id, by day (what `zuka report` shows)."""
    return refunds_by_lease(ledger)


@dataclass(frozen=True)
class DepositState:
    """One lease's deposit: paid, back, outstanding today, lost, and its refund rows."""

    lease: Lease
    paid_on: date
    paid_on_assumed: bool
    refunded: Decimal
    outstanding: Decimal
    lost: Decimal
    refunds: tuple[Record, ...]
    state: str  # as said today: held, pending, partly back, refunded, forfeited


def deposit_states(ledger: Ledger, node: str | None = None) -> list[DepositState]:
    """`zuka lease refunds [NODE]`: every lease with a deposit (of the node), oldest first."""
    if node is not None:
        ledger.node(node)  # a typo is named, not listed as nothing
    rows = ledger.book_rows("deposit_refund")
    out = []
    for le in ledger.leases(node):
        if le.deposit is None:
            continue
        mine = [r for r in rows if r["lease_id"] == le.id]
        refunds = sorted((date.fromisoformat(r["refunded_on"]), Decimal(r["amount"])) for r in mine)
        today = ledger.clock().astimezone(zone(le)).date()
        day, assumed = deposits.paid_on(le)
        back = sum((a for d, a in deposits.inflows(le, refunds) if d is None or d <= today),
                   Decimal(0))  # fmt: skip
        owed, lost = deposits.outstanding(le, refunds, today), deposits.forfeited(le, refunds)
        said = deposits.state_word(le, refunds, today)
        # The stored "none" (no refund asked for yet) reads as no deposit to a person.
        said = "held" if said == "none" else said
        out.append(DepositState(le, day, assumed, back, owed, lost, tuple(mine), said))
    return out
