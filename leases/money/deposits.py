"""A lease's deposit as cash: paid out on a day, back in parts (the deposit_refund book),
outstanding until it is back in full, or forfeited (a loss). Pure: the lease and its
refund rows are passed in.

The lease holds the payment (`deposit`, `deposit_paid_on`) and its state
(`deposit_refund`: none | pending | refunded | forfeited, with `deposit_refunded_on`).
A deposit with no paid-on day counts as paid on the lease's start day (in its billing
zone). A refund row is a part of it back on its day. A deposit marked `refunded` is back
in full: the refund rows up to its refunded-on day are parts of it and the rest came back
on that day (or on a day not recorded). A deposit marked `forfeited` is not coming back:
nothing is outstanding, and what the refund rows did not bring back is lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from leases.core.i18n import N_
from leases.core.models import Lease, RefundState
from leases.money.periods import zone

ZERO = Decimal(0)
Refund = tuple[date, Decimal]  # the day it came back, the amount

PARTLY_BACK = N_("partly back")
PAID_ON_ASSUMED = N_("a deposit with no paid-on day is counted as paid on its lease's start day")


def paid_on(lease: Lease) -> tuple[date, bool]:
    """The day the deposit was paid, and whether that day is assumed (the lease's start
    day, in its billing zone, for want of deposit_paid_on)."""
    if lease.deposit_paid_on is not None:
        return lease.deposit_paid_on, False
    return lease.start.astimezone(zone(lease)).date(), True


def inflows(lease: Lease, refunds: Sequence[Refund]) -> list[tuple[date | None, Decimal]]:
    """What came back and when: the refund rows, and for a deposit marked refunded what
    they leave of it, on its refunded-on day (None: a day not recorded)."""
    out: list[tuple[date | None, Decimal]] = [(d, a) for d, a in refunds]
    if lease.deposit is not None and lease.deposit_refund is RefundState.REFUNDED:
        rest = lease.deposit - sum((a for _day, a in refunds), ZERO)
        if rest > 0:
            out.append((lease.deposit_refunded_on, rest))
    return out


def forfeited_on(lease: Lease) -> date:
    """The day a deposit marked forfeited was lost (the state carries no day): the day its
    lease ended (recorded, else its end; else its start), in its billing zone. Before it,
    the deposit was outstanding as any other."""
    at = lease.ended_at or lease.end or lease.start
    return at.astimezone(zone(lease)).date()


def outstanding(lease: Lease, refunds: Sequence[Refund], on: date) -> Decimal:
    """What of the deposit is still to come back at the end of day `on` (0 before it was
    paid, and for a deposit forfeited by then)."""
    if lease.deposit is None:
        return ZERO
    if lease.deposit_refund is RefundState.FORFEITED and forfeited_on(lease) <= on:
        return ZERO
    if paid_on(lease)[0] > on:
        return ZERO
    back = sum((a for d, a in inflows(lease, refunds) if d is None or d <= on), ZERO)
    return max(ZERO, lease.deposit - back)


def forfeited(lease: Lease, refunds: Sequence[Refund]) -> Decimal:
    """What of a forfeited deposit is lost (what its refund rows did not bring back)."""
    if lease.deposit is None or lease.deposit_refund is not RefundState.FORFEITED:
        return ZERO
    return max(ZERO, lease.deposit - sum((a for _day, a in refunds), ZERO))


def state_word(lease: Lease, refunds: Sequence[Refund], on: date = date.max) -> str:
    """The deposit's state at the end of day `on` as said to a person: its recorded state
    (none, pending, refunded, forfeited), "partly back" while refund rows have brought part
    of it back, "refunded" once they have brought all of it (or it is marked so by then);
    "none" for one marked refunded on a later day."""
    state = lease.deposit_refund
    if lease.deposit is None or state is RefundState.FORFEITED:
        return state.value
    back = sum((a for d, a in inflows(lease, refunds) if d is None or d <= on), ZERO)
    if back >= lease.deposit:
        return RefundState.REFUNDED.value
    if back > 0:
        return PARTLY_BACK
    # Marked refunded on a later day: by `on` it was paid and out, nothing more known.
    return RefundState.NONE.value if state is RefundState.REFUNDED else state.value


@dataclass(frozen=True)
class DepositLine:
    """One lease's deposit in a window of days [first, last]."""

    node: str
    provider: str
    lease_start: str  # the lease's start as shown (its billing zone)
    currency: str
    deposit: Decimal
    paid_on: date
    paid_on_assumed: bool
    paid: Decimal  # paid out in the window
    refunded: Decimal  # came back in the window
    outstanding: Decimal  # still to come back at the window's end
    lost: Decimal  # forfeited (shown once it is marked so)


def deposit_line(
    lease: Lease, refunds: Sequence[Refund], provider: str, first: date, last: date
) -> DepositLine | None:
    """The deposit's cash in [first, last] and what is outstanding at `last`; None when the
    lease has no deposit or it neither moved nor was outstanding in the window."""
    if lease.deposit is None:
        return None
    day, assumed = paid_on(lease)
    paid = lease.deposit if first <= day <= last else ZERO
    back = inflows(lease, refunds)
    refunded = sum((a for d, a in back if d is not None and first <= d <= last), ZERO)
    owed = outstanding(lease, refunds, last)
    # Lost in the window it was forfeited in, once (not again in every month after).
    lost = forfeited(lease, refunds) if first <= forfeited_on(lease) <= last else ZERO
    if not (paid or refunded or owed or lost):
        return None
    return DepositLine(
        lease.node, provider, lease.start.astimezone(zone(lease)).strftime("%Y-%m-%d %H:%M"),
        lease.currency, lease.deposit, day, assumed, paid, refunded, owed, lost,
    )  # fmt: skip


def deposit_lines(
    leases: Iterable[Lease],
    refunds: Mapping[int, Sequence[Refund]],
    provider_of: Mapping[int | str, str],
    first: date,
    last: date,
) -> tuple[DepositLine, ...]:
    """Every lease's deposit line in [first, last] (refunds and providers keyed by lease id;
    a provider by the lease's node key), by provider, node and start."""
    out = []
    for le in leases:
        line = deposit_line(
            le, refunds.get(le.id or 0, ()), provider_of.get(le.node_key, "-"), first, last
        )
        if line is not None:
            out.append(line)
    return tuple(sorted(out, key=lambda x: (x.provider, x.node, x.lease_start)))


def sums(lines: Iterable[DepositLine]) -> dict[str, dict[str, Decimal]]:
    """Per currency: paid, refunded, outstanding and lost (never added across currencies)."""
    out: dict[str, dict[str, Decimal]] = {}
    for x in lines:
        s = out.setdefault(
            x.currency, {"paid": ZERO, "refunded": ZERO, "outstanding": ZERO, "lost": ZERO}
        )
        s["paid"] += x.paid
        s["refunded"] += x.refunded
        s["outstanding"] += x.outstanding
        s["lost"] += x.lost
    return out
