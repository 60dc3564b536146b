"""How a lease's time becomes billing units and charges (the rules: leases.money.billing).

The lease's terms read as maths: its partial unit, its refund rule (and what a provider
keeps of a prepaid charge on an early release), whether it renews by itself; billing units
pro rata on the period grid (leases.money.periods), a prepaid span's and a pay-as-you-go
run's units rounded up to the partial unit; a charge booked to the fen where the provider
rounds each charge, and time billed by the clock hour. Pure; every time compared in UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Context, Decimal
from enum import StrEnum
from zoneinfo import ZoneInfo

from leases.core.models import ChargeRounding, ExpiryAction, Lease, PartialUnit
from leases.money.periods import FIXED as _FIXED
from leases.money.periods import boundary, period_index, step_of, zone
from leases.money.periods import seconds_between as _seconds
from leases.money.periods import utc as _u

Span = tuple[datetime, datetime]

ZERO = Decimal(0)
HOUR = Decimal(3600)
_GRAIN = {PartialUnit.SECOND: 1, PartialUnit.MINUTE: 60, PartialUnit.HOUR: 3600}
_GRAIN[PartialUnit.DAY] = 86400


class RefundRule(StrEnum):
    """What a provider refunds when a prepaid lease is released before its end."""

    NONE = "none"
    PRORATED_DAYS = "prorated_days"  # the unused whole days back
    PRORATED_HOURS = "prorated_hours"
    USED_THEN_HOURLY = "used_then_hourly"  # Tencent: used units at the price, the rest hourly


def _ceil(x: Decimal) -> Decimal:
    return x.to_integral_value(rounding=ROUND_CEILING)


def partial(lease: Lease) -> PartialUnit:
    """The lease's partial unit, or the default for its billing type: pro rata (second)
    for pay-as-you-go, a started unit in full for prepaid."""
    if lease.partial_unit is not None:
        return lease.partial_unit
    return PartialUnit.WHOLE if lease.billing_type.prepaid else PartialUnit.SECOND


def refund_rule(lease: Lease) -> RefundRule | None:
    """The lease's early-release refund rule; None when unknown (empty, or in words)."""
    try:
        return RefundRule(lease.refund_rule.strip().lower())
    except ValueError:
        return None


_FEN = Decimal("0.01")


def _fen_up(amount: Decimal) -> Decimal:
    """A charge booked to the fen, rounded up, at least one fen when anything is owed (as
    AutoDL's hourly charges are: BILLING-FACTS.md). Never raises on a huge amount."""
    if amount <= 0:
        return ZERO
    ctx = Context(prec=max(28, amount.adjusted() + 3), Emax=MAX_EMAX, Emin=MIN_EMIN)
    return max(_FEN, amount.quantize(_FEN, rounding=ROUND_CEILING, context=ctx))


def charge(lease: Lease, amount: Decimal) -> Decimal:
    """One charge as the provider books it: to the fen, up, when it rounds each charge."""
    return _fen_up(amount) if lease.rounding is ChargeRounding.CHARGE else amount


def _clock_hours(a: datetime, b: datetime, tz: ZoneInfo) -> list[Span]:
    """[a, b) cut at each clock hour of the zone's wall clock."""
    out: list[Span] = []
    a, b = _u(a), _u(b)
    while a < b:
        local = a.astimezone(tz).replace(minute=0, second=0, microsecond=0)
        nxt = max(_u(local + timedelta(hours=1)), a + timedelta(seconds=1))
        out.append((a, min(nxt, b)))
        a = min(nxt, b)
    return out


def hour_charges(lease: Lease, spans: Sequence[Span], per_hour: Decimal) -> Decimal:
    """Time billed at per_hour: exact, or, where each charge is rounded, one charge at each
    clock hour of the billing zone and one at the end of each run (the shutdown), each
    rounded up to the fen (AutoDL's booking: BILLING-FACTS.md)."""
    if lease.rounding is not ChargeRounding.CHARGE:
        return sum((_seconds(a, b) for a, b in spans), ZERO) / HOUR * per_hour
    tz = zone(lease)
    return sum(
        (
            _fen_up(_seconds(x, y) / HOUR * per_hour)
            for a, b in spans
            for x, y in _clock_hours(a, b, tz)
        ),
        ZERO,
    )


def renews(lease: Lease) -> bool:
    return lease.on_expiry is ExpiryAction.RENEWS or lease.auto_renew


# -- the period grid --------------------------------------------------------------------


def pro_rata_units(anchor: datetime, step: str, tz: ZoneInfo, a: datetime, b: datetime) -> Decimal:
    """Billing units in [a, b) pro rata on the grid of `step` from `anchor`."""
    a, b = _u(a), _u(b)
    if b <= a:
        return ZERO
    if step in _FIXED:
        return _seconds(a, b) / _FIXED[step]
    total = ZERO
    k = period_index(anchor, step, a, tz)
    while True:
        lo, hi = boundary(anchor, step, k, tz), boundary(anchor, step, k + 1, tz)
        if lo >= b:
            return total
        total += _seconds(max(lo, a), min(hi, b)) / _seconds(lo, hi)
        k += 1


def prepaid_units(lease: Lease, a: datetime, b: datetime) -> Decimal:
    """Units of [a, b) on the lease's grid from a: whole periods, and the remainder rounded
    up to the lease's partial unit (a started unit in full by default)."""
    tz, step = zone(lease), step_of(lease)
    a, b = _u(a), _u(b)
    if b <= a:
        return ZERO
    k = period_index(a, step, b, tz)
    lo = boundary(a, step, k, tz)
    rest = _seconds(lo, b)
    if rest == 0:
        return Decimal(k)
    length = _seconds(lo, boundary(a, step, k + 1, tz))
    grain = partial(lease)
    if grain is PartialUnit.WHOLE:
        return Decimal(k + 1)
    g = _GRAIN[grain]
    return Decimal(k) + min(Decimal(1), _ceil(rest / g) * g / length)


def run_units(lease: Lease, a: datetime, b: datetime) -> Decimal:
    """Units of one pay-as-you-go run [a, b), rounded up to the partial unit."""
    unit = _FIXED[step_of(lease)]
    grain = partial(lease)
    g = unit if grain is PartialUnit.WHOLE else _GRAIN[grain]
    return _ceil(_seconds(a, b) / g) * g / unit


def overlap(spans: Iterable[Span], lo: datetime, hi: datetime) -> list[Span]:
    lo, hi = _u(lo), _u(hi)
    spans = [(_u(a), _u(b)) for a, b in spans]
    return [(max(a, lo), min(b, hi)) for a, b in spans if max(a, lo) < min(b, hi)]


def kept_on_release(
    lease: Lease, full: Decimal, lo: datetime, hi: datetime, released: datetime
) -> Decimal:
    """What the provider keeps of `full`, paid for [lo, hi), when the lease is released at
    `released` (before hi; at or before lo: nothing of it used) by the lease's refund rule;
    an unknown rule refunds nothing."""
    rule = refund_rule(lease)
    used = max(ZERO, _seconds(lo, released))
    span = _seconds(lo, hi)
    if span <= 0:  # records refuse it; nothing to prorate
        return full
    if rule is RefundRule.PRORATED_DAYS:
        return min(full, full * _ceil(used / 86400) * 86400 / span)
    if rule is RefundRule.PRORATED_HOURS:
        return min(full, full * _ceil(used / HOUR) * HOUR / span)
    if rule is RefundRule.USED_THEN_HOURLY and lease.hourly_price is not None:
        if used <= 0:
            return ZERO
        tz, step = zone(lease), step_of(lease)
        k = period_index(lo, step, released, tz)
        rest = _seconds(boundary(lo, step, k, tz), released)
        return min(full, k * lease.unit_price + lease.hourly_price * rest / HOUR)
    return full
