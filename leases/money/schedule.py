"""A prepaid term paid in instalments (`payment_schedule` monthly or quarterly): when each
is charged and how much (the rules: leases.money.billing).

A monthly or contract lease's term is priced as ever (leases.money.units.prepaid_units x
unit_price); a schedule only says when that price is charged: one unit (monthly) or three
(quarterly) at the start of each period of the lease's own grid from its start (calendar
or 30-day months, in the billing zone), the last instalment what is left of the term (a
part period, or a part quarter). An early end (`ended_at` before `end`) charges no
instalment from the end on, and the refund rule applies to the instalment paying for the
period the lease ended in (its share kept, as leases.money.units.kept_on_release says);
the earlier ones were used in full. Each instalment accrues over the period it pays for
(the one kept of the period the lease ended in over that period's start to the end), so
recording an early end never changes the months before it. Pure; times compared in UTC.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from leases.core.models import BillingType, Lease, PaymentSchedule
from leases.money.periods import boundary, step_of, zone
from leases.money.periods import utc as _u
from leases.money.units import ZERO, charge, kept_on_release, prepaid_units, pro_rata_units

# The billing types whose term a schedule pays: a month's unit; a day or a week is paid
# whole, and pay-as-you-go is billed as it runs.
SCHEDULED_TYPES = (BillingType.MONTHLY, BillingType.CONTRACT)
_MONTHS = {PaymentSchedule.MONTHLY: 1, PaymentSchedule.QUARTERLY: 3}

Instalment = tuple[datetime, Decimal]  # when it is charged (UTC), the amount charged
# When it is charged (UTC), the end of its period, the amount charged.
Paid = tuple[datetime, datetime, Decimal]


def scheduled(lease: Lease) -> bool:
    """Whether the lease's term is paid in instalments rather than all at its start."""
    return (
        lease.payment_schedule is not PaymentSchedule.UPFRONT
        and lease.billing_type in SCHEDULED_TYPES
        and lease.end is not None
    )


def instalments(lease: Lease) -> list[Instalment]:
    """The instalments a scheduled lease is charged, in order, net of an early end's
    refund; each booked as the provider books a charge (to the fen, up, when it rounds
    each one)."""
    return [(lo, amount) for lo, _, amount in paid_periods(lease)]


def paid_periods(lease: Lease) -> list[Paid]:
    """Each instalment with its period (an early end cuts the last one short)."""
    assert lease.end is not None
    tz, step, every = zone(lease), step_of(lease), _MONTHS[lease.payment_schedule]
    start, end = _u(lease.start), _u(lease.end)
    ended = _u(lease.ended_at) if lease.ended_at is not None else None
    left = prepaid_units(lease, start, end) * lease.unit_price
    per = lease.unit_price * every
    out: list[Paid] = []
    k = 0
    lo = start
    while lo < end and (ended is None or lo < ended):
        hi = min(_u(boundary(start, step, k + every, tz)), end)
        amount = left if hi >= end else min(per, left)
        left -= amount
        if ended is not None and ended < hi:
            amount = kept_on_release(lease, amount, lo, hi, ended)
        out.append((lo, hi, charge(lease, amount)))
        k += every
        lo = hi
    return out


def charged_by(lease: Lease, at: datetime) -> Decimal:
    """What the instalments charged by `at` come to (one charged at `at` counts)."""
    at = _u(at)
    return sum((amount for when, amount in instalments(lease) if when <= at), ZERO)


def term_total(lease: Lease) -> Decimal:
    """What the whole term is charged, every instalment (net of an early end's refund)."""
    return sum((amount for _, amount in instalments(lease)), ZERO)


def accrued_between(lease: Lease, since: datetime, until: datetime) -> Decimal:
    """The instalments' share of [since, until): each spread over the time it pays for,
    its period (to the early end, in the period the lease ended in), pro rata on the
    lease's grid (a calendar month's price over that month's days)."""
    tz, step, anchor = zone(lease), step_of(lease), lease.start
    since, until = _u(since), _u(until)
    ended = _u(lease.ended_at) if lease.ended_at is not None else None
    share = ZERO
    for lo, hi, amount in paid_periods(lease):
        hi = min(hi, ended) if ended is not None else hi
        part = pro_rata_units(anchor, step, tz, max(lo, since), min(hi, until))
        if part:
            share += amount * part / pro_rata_units(anchor, step, tz, lo, hi)
    return share


def paid_to(lease: Lease, at: datetime) -> datetime:
    """The end of the period of the last instalment charged by `at` (the first one's when
    none is charged yet): the period the lease ended in, for an early end."""
    assert lease.end is not None
    at = _u(at)
    periods = paid_periods(lease)
    if not periods:  # ended at its start: nothing charged
        return _u(lease.ended_at or lease.end)
    done = [hi for lo, hi, _ in periods if lo <= at]
    return done[-1] if done else periods[0][1]
