"""A lease's (or a renewal chain's) cost to date, by the end of its current billing period
and by its end (the rules: leases.money.billing), with what the figures leave out for want
of a recorded term or a recorded stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from leases.core.i18n import _, ngettext
from leases.core.models import ExpiryAction, Lease, Resource, StoppedBilling
from leases.money.billing import INSTANT, Stop, chain_cost, off_grid, storage_cost
from leases.money.periods import boundary, period_index, step_of, zone
from leases.money.periods import utc as _u
from leases.money.units import ZERO, RefundRule, Span, refund_rule, renews


def month_of(at: datetime, tz: ZoneInfo) -> Span:
    """The calendar month in `tz` that holds `at`."""
    local = at.astimezone(tz)
    first = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    return first.replace(tzinfo=tz), boundary(first.replace(tzinfo=tz), "month", 1, tz)


def current_period(lease: Lease, at: datetime) -> Span:
    """The billing period that holds `at`: a prepaid lease's own unit (its day, week or
    month counted from its start, continued past its end); for pay-as-you-go the calendar
    month in the billing zone (the provider's monthly bill)."""
    tz = zone(lease)
    if not lease.billing_type.prepaid:
        return month_of(at, tz)
    step = step_of(lease)
    k = max(0, period_index(lease.start, step, at, tz))
    return boundary(lease.start, step, k, tz), boundary(lease.start, step, k + 1, tz)


def unknowns(lease: Lease, at: datetime) -> tuple[str, ...]:
    """What the figures of a lease leave out for want of a recorded term."""
    out: list[str] = []
    grid = off_grid(lease)
    if grid is not None:
        out.append(grid)
    if lease.billing_type.prepaid and lease.end is not None:
        if (
            lease.on_expiry is ExpiryAction.HOURLY
            and not lease.auto_renew
            and lease.hourly_price is None
        ):
            out.append(
                _("it bills hourly after its end at a price not recorded (give --hourly-price)")
            )
        if lease.ended_at is not None and _u(lease.ended_at) < _u(lease.end):
            rule = refund_rule(lease)
            if rule is None:
                out.append(
                    _(
                        "it ended early and the provider's refund rule is unknown: no refund"
                        " assumed ({rule})"
                    ).format(rule=lease.refund_rule)
                    if lease.refund_rule
                    else _(
                        "it ended early and the provider's refund rule is unknown: no refund"
                        " assumed"
                    )
                )
            elif rule is RefundRule.USED_THEN_HOURLY and lease.hourly_price is None:
                out.append(_("its refund needs the hourly price (give --hourly-price)"))
    return tuple(out)


def stops_note(lease: Lease, at: datetime, stops: Sequence[Stop]) -> str | None:
    """What a figure assumes of the stops nobody recorded, where they would change it.

    The rule: stops are known only as recorded (`zuka lease stop`, or the collector where
    a cloud driver reads the instance's state); zuka never infers one from missing
    readings (an unreachable node may be running and billing). So every figure of a lease
    that bills less while stopped (stopped_billing `storage_only` or `none`), and whose
    bill a stop changes (running time billed by use: pay-as-you-go, or a prepaid lease's
    hourly time after its end; or storage lines, which pause only under `none`), once it
    has started by `at`, counts every moment outside a recorded stop as running, and says
    so, with how many stops are recorded. A lease billing in full while stopped, or a
    prepaid span (paid whether it runs or not), needs no note."""
    if lease.stopped_billing is StoppedBilling.FULL or _u(lease.start) > _u(at):
        return None
    tail = lease.on_expiry is ExpiryAction.HOURLY and not lease.auto_renew
    if lease.billing_type.prepaid and not tail and lease.stopped_billing is not StoppedBilling.NONE:
        return None
    n = len(stops)
    said = (
        ngettext("{n} stop recorded", "{n} stops recorded", n).format(n=n)
        if n
        else _("no stop recorded")
    )
    return _(
        "assumes {node} ran whenever no stop is recorded ({stops}); record one with"
        " zuka lease stop {node} --at TIME"
    ).format(node=lease.node, stops=said)


@dataclass(frozen=True)
class Estimate:
    """A lease's (or a renewal chain's) cost: to date, by the end of the current period and
    by the end of the lease, storage lines included."""

    at: datetime
    to_date: Decimal
    storage_to_date: Decimal  # included in to_date
    period: Span
    by_period_end: Decimal
    lease_end: datetime | None
    by_lease_end: Decimal | None  # None: the lease has no end (pay-as-you-go, renews)
    unknown: tuple[str, ...] = ()


def estimate(
    chain: Lease | Sequence[Lease],
    at: datetime,
    *,
    stops: Sequence[Stop] = (),
    storage: Sequence[tuple[Resource, Lease]] = (),
    cards: int | None = None,
) -> Estimate:
    """Cost to date, by the end of the current period and by the lease's end, of a lease
    or of a renewal chain (oldest first), with the storage lines given (each with its
    lease). The period is that of the lease billing at `at`."""
    leases = (chain,) if isinstance(chain, Lease) else tuple(chain)
    if not leases:
        raise ValueError("estimate of no lease")
    at = _u(at)
    now = next((le for le in reversed(leases) if _u(le.start) <= at), leases[0])
    period = current_period(now, at)
    last = leases[-1]
    end = last.ended_at or last.end
    # The period shown never runs past the lease's end, unless its billing goes on after
    # it (a renewal, hourly after the end): a part month's last unit is charged in full,
    # but it is the lease's end that the figures run to.
    going_on = last.ended_at is None and (renews(last) or last.on_expiry is ExpiryAction.HOURLY)
    if end is not None and not going_on and _u(end) < _u(period[1]):
        # (a lease ended before `at`: the period that held its end, to its end)
        first = period[0] if _u(period[0]) < _u(end) else current_period(last, _u(end) - INSTANT)[0]
        period = (first, end)

    def total(when: datetime) -> tuple[Decimal, Decimal]:
        store = sum((storage_cost(r, le, when, stops=stops) for r, le in storage), ZERO)
        return chain_cost(leases, when, stops=stops, cards=cards) + store, store

    to_date, store = total(at)
    # Just before the boundary, unless the chain ends there (what its end owes, such as a
    # minimum commitment, is owed by then): the next period's prepayment (a renewal starts
    # and is charged at that instant) is not owed for this one.
    boundary = _u(period[1])
    # An auto-renewing lease does not end at its end: the renewal charged there is the
    # next period's too.
    if end is None or boundary < _u(end) or (last.ended_at is None and renews(last)):
        boundary -= INSTANT
    by_period = total(max(at, boundary))[0]
    by_end = total(max(at, _u(end)))[0] if end is not None else None
    notes = tuple(n for le in leases for n in unknowns(le, at))
    notes += tuple(dict.fromkeys(n for le in leases if (n := stops_note(le, at, stops))))
    return Estimate(at, to_date, store, period, by_period, end, by_end, notes)
