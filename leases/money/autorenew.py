"""The renewals a provider makes by itself after a prepaid lease's end (on_expiry `renews`,
or auto_renew): when each is charged (renew_charge_days before its period, on the zone's
wall clock), what for, net of the refund an end within its period earns, and each one's
share of a window (accrual). Renewals the lab records as new leases are chains
(leases.money.renewals); leases.money.billing adds these to a lease's charges.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from leases.core.models import Lease
from leases.money.periods import boundary, period_index, step_of, zone
from leases.money.periods import utc as _u
from leases.money.units import ZERO, charge, kept_on_release, pro_rata_units, renews


@dataclass(frozen=True)
class Renewal:
    """One period an auto-renewing prepaid lease was renewed for after its end: charged at
    `charged_at` (renew_charge_days before the period, on the zone's wall clock), `amount`
    net of the refund an end within (or before) the period earns, paying for [lo, hi)."""

    charged_at: datetime
    amount: Decimal
    lo: datetime
    hi: datetime  # the period's end, cut at the lease's end when it ended within it


def renewals(lease: Lease, at: datetime, since: datetime | None = None) -> list[Renewal]:
    """The renewals of a prepaid lease the provider renews by itself, charged by `at`
    (charges at `at` included); given `since`, only those whose period ends after it (a
    month's report need not walk every renewal of a lease renewed for years). Ending the
    lease after its end (`lease end --at`) stops the renewals charged from then on; those
    charged before stay charged: the period the lease ended in, and any charged early for
    a period that had not begun, are refunded by the lease's refund rule (an unknown rule
    refunds nothing). A lease ended at or before its end was never renewed."""
    if not (lease.billing_type.prepaid and renews(lease)) or lease.end is None:
        return []
    end, at = _u(lease.end), _u(at)
    released = _u(lease.ended_at) if lease.ended_at is not None else None
    if released is not None and released <= end:
        return []
    tz, step = zone(lease), step_of(lease)
    early = timedelta(days=lease.renew_charge_days or 0)
    out: list[Renewal] = []
    k = 0 if since is None else max(0, period_index(end, step, since, tz))
    while True:
        lo, hi = boundary(end, step, k, tz), boundary(end, step, k + 1, tz)
        charged = _u(lo - early)  # the charge day on the zone's wall clock (Aliyun: 08:00)
        if charged > at or (released is not None and charged >= released):
            return out
        price = charge(lease, lease.unit_price)
        if released is None or released >= _u(hi):
            out.append(Renewal(charged, price, _u(lo), _u(hi)))
        else:
            kept = charge(lease, kept_on_release(lease, price, lo, hi, released))
            out.append(Renewal(charged, kept, _u(lo), max(_u(lo), released)))
        k += 1


def renewal_lumps(lease: Lease) -> bool:
    """Whether a prepaid lease is charged one unit per period after its end, ahead of each
    period (as leases.money.billing charges it after its end)."""
    return lease.billing_type.prepaid and renews(lease) and lease.end is not None


def renewals_accrued(lease: Lease, since: datetime, until: datetime) -> Decimal:
    """The renewals' share of [since, until): each spread over the time it pays for, on
    its period's grid (a calendar month's price over that month's days); one that pays for
    no time (charged early, the lease ended before its period began, not refunded) falls
    where it is charged, in (since, until] as billing.cost_to_date counts it."""
    assert lease.end is not None
    tz, step, end = zone(lease), step_of(lease), lease.end
    share = ZERO
    # A period that begins before `until` is charged by then; one that ended by `since`,
    # or was charged by then for a period never begun, has no share here.
    for r in renewals(lease, until, since):
        if r.hi <= r.lo:
            if since < r.charged_at <= until:
                share += r.amount
            continue
        if r.hi <= since or r.lo >= until:
            continue
        whole = pro_rata_units(end, step, tz, r.lo, r.hi)
        part = pro_rata_units(end, step, tz, max(since, r.lo), min(until, r.hi))
        share += r.amount * part / whole if whole else ZERO
    return share
