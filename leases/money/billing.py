"""What a lease costs: pure money maths in Decimal, every period in the lease's billing zone.

No I/O and no SQLite: the ledger (leases.ledger.store), history (leases.telemetry.rollups)
and the caller hand in leases, storage lines, stops and card-minutes. The rules, said once:

- **Charged by `at`** (`cost_to_date`). Pay-as-you-go (per_second, hourly, card_hour):
  the time the lease ran up to `at`, each run rounded up to its partial unit (`partial`;
  default pro rata to the second, as AutoDL, 恒源云 and HyperAI bill), times the unit
  price (and the cards billed, for card_hour). It runs from its start to `ended_at`, or to
  its `end` when the provider releases it then. Prepaid (daily, weekly, monthly, contract):
  the whole paid span, start to end, is charged at the start (a started unit in full by
  default), net of the refund that a recorded early end (`ended_at` before `end`) earns by
  the lease's refund rule; an unknown rule refunds nothing. After the end, by `on_expiry`:
  released, nothing more; hourly, the recorded hourly price for as long as it runs on;
  renews (or `auto_renew`) one more unit each period, charged `renew_charge_days` before
  the period begins; a recorded end after the lease's end stops the renewals from then on
  and keeps those charged, the period it ended in refunded by the refund rule (`renewals`).
  A minimum commitment (in billing units) is owed in full once the
  lease is over.
- **Stops** (`stops`: when the node was stopped; an open stop runs on): a lease that bills
  `storage_only` or `none` while stopped does not bill its running time then; prepaid time
  is paid anyway. Storage lines keep billing through stops unless the lease bills `none`.
- **Charged in a window** [since, until) (`charged_between`, the cash basis): the charges
  made in it, one at 00:00 on the 1st in the month it opens.
- **Projected** to a later time is the same function at that time, for the lease as
  recorded: so a projection is never below the cost to date, and no cost falls as time
  passes.
- **Accrued** over a window (`accrued`): the share of the cost that falls in it; every
  charge is spread over the time it pays for, period by period (a calendar month's price
  over that month's days): the upfront charge over the paid span, each auto-renewal over
  its own period (charged early, it still belongs to the period's months), the hourly
  fallback and pay-as-you-go as they run; a minimum commitment falls where it is owed.
- **Storage lines** (resources with a price): billed pro rata from `created` (else the
  lease's start) until `deleted_at`, after a stop and after the lease ends too.
- **Time**: every elapsed time and every comparison is in UTC (converted at the edges:
  Python compares two times of one zone by wall clock, ignoring DST's fold); period
  boundaries (days, weeks, months, the auto-renew charge day) are counted on the billing
  zone's wall clock. So a daily lease across a DST change costs one day's price for the
  23- or 25-hour day, while its paid card-hours are the real elapsed hours (71 for three
  days in Berlin from 2026-03-28, 73 in New York from 2026-10-31): the hours measured busy
  are real hours too, and busy / paid compares like with like.
- **Card-hours**: paid card-hours are the cards times the hours the lease is paid for;
  busy and known card-minutes come from history (leases.telemetry.history says when a minute is busy
  and when it is unknown). Idle is known and not busy; unknown is never idle.

Amounts are exact Decimals; `fen` rounds one for display.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import (
    MAX_EMAX,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_HALF_UP,
    Context,
    Decimal,
)
from enum import StrEnum
from zoneinfo import ZoneInfo

from leases.core import fields
from leases.core.errors import InputError
from leases.core.models import (
    BillingType,
    ChargeRounding,
    ExpiryAction,
    Lease,
    MonthCount,
    PartialUnit,
    Resource,
    StoppedBilling,
    StoragePeriod,
)
from leases.money.periods import FIXED as _FIXED
from leases.money.periods import boundary, period_index, step_of, zone
from leases.money.periods import seconds_between as _seconds
from leases.money.periods import utc as _u
from leases.money.renewals import chains

Stop = tuple[datetime, datetime | None]  # when the node was stopped; None: still stopped
Span = tuple[datetime, datetime]

ZERO = Decimal(0)
_HOUR = Decimal(3600)
_GRAIN = {PartialUnit.SECOND: 1, PartialUnit.MINUTE: 60, PartialUnit.HOUR: 3600}
_GRAIN[PartialUnit.DAY] = 86400


class RefundRule(StrEnum):
    """What a provider refunds when a prepaid lease is released before its end."""

    NONE = "none"
    PRORATED_DAYS = "prorated_days"  # the unused whole days back
    PRORATED_HOURS = "prorated_hours"
    USED_THEN_HOURLY = "used_then_hourly"  # Tencent: used units at the price, the rest hourly


# -- small helpers ----------------------------------------------------------------------


def fen(amount: Decimal) -> Decimal:
    """An amount rounded to the fen (0.01), half up, for display. Never raises: the
    precision is widened to the amount's digits (the default 28 would make quantize fail
    on 10^27 and above); NaN and infinities come back as they are."""
    if not amount.is_finite():
        return amount
    ctx = Context(prec=max(28, amount.adjusted() + 3), Emax=MAX_EMAX, Emin=MIN_EMIN)
    return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP, context=ctx)


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


def cards_of(lease: Lease, cards: int | None = None) -> int:
    """The cards a lease pays for: cards_billed, else `cards` (the node's GPU count)."""
    n = lease.cards_billed or cards
    if n is not None and n < 0:  # the ledger refuses it; a caller of the pure maths may not
        raise InputError("cards_billed", n, "must be at least 1")
    if not n:
        raise InputError(
            "cards_billed",
            None,
            f"the {lease.billing_type.value} lease of {lease.node} does not say how many cards"
            " it pays for: give --cards",
        )
    return n


_FEN = Decimal("0.01")


def _fen_up(amount: Decimal) -> Decimal:
    """A charge booked to the fen, rounded up, at least one fen when anything is owed (as
    AutoDL's hourly charges are: BILLING-FACTS.md). Never raises on a huge amount."""
    if amount <= 0:
        return ZERO
    ctx = Context(prec=max(28, amount.adjusted() + 3), Emax=MAX_EMAX, Emin=MIN_EMIN)
    return max(_FEN, amount.quantize(_FEN, rounding=ROUND_CEILING, context=ctx))


def _charge(lease: Lease, amount: Decimal) -> Decimal:
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


def _hour_charges(lease: Lease, spans: Sequence[Span], per_hour: Decimal) -> Decimal:
    """Time billed at per_hour: exact, or, where each charge is rounded, one charge at each
    clock hour of the billing zone and one at the end of each run (the shutdown), each
    rounded up to the fen (AutoDL's booking: BILLING-FACTS.md)."""
    if lease.rounding is not ChargeRounding.CHARGE:
        return sum((_seconds(a, b) for a, b in spans), ZERO) / _HOUR * per_hour
    tz = zone(lease)
    return sum(
        (
            _fen_up(_seconds(x, y) / _HOUR * per_hour)
            for a, b in spans
            for x, y in _clock_hours(a, b, tz)
        ),
        ZERO,
    )


def _renews(lease: Lease) -> bool:
    return lease.on_expiry is ExpiryAction.RENEWS or lease.auto_renew


# -- the period grid --------------------------------------------------------------------


def _units(anchor: datetime, step: str, tz: ZoneInfo, a: datetime, b: datetime) -> Decimal:
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


def _prepaid_units(lease: Lease, a: datetime, b: datetime) -> Decimal:
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


def _run_units(lease: Lease, a: datetime, b: datetime) -> Decimal:
    """Units of one pay-as-you-go run [a, b), rounded up to the partial unit."""
    unit = _FIXED[step_of(lease)]
    grain = partial(lease)
    g = unit if grain is PartialUnit.WHOLE else _GRAIN[grain]
    return _ceil(_seconds(a, b) / g) * g / unit


def _minus(spans: Iterable[Span], stops: Sequence[Stop], until: datetime) -> list[Span]:
    """spans with the stopped stretches cut out."""
    out = [(_u(a), _u(b)) for a, b in spans]
    until = _u(until)
    for s_lo, s_hi in stops:
        s_lo = _u(s_lo)
        hi = _u(s_hi) if s_hi is not None else max(until, s_lo)
        cut: list[Span] = []
        for a, b in out:
            if hi <= a or s_lo >= b:
                cut.append((a, b))
                continue
            if a < s_lo:
                cut.append((a, s_lo))
            if hi < b:
                cut.append((hi, b))
        out = cut
    return out


def _overlap(spans: Iterable[Span], lo: datetime, hi: datetime) -> list[Span]:
    lo, hi = _u(lo), _u(hi)
    spans = [(_u(a), _u(b)) for a, b in spans]
    return [(max(a, lo), min(b, hi)) for a, b in spans if max(a, lo) < min(b, hi)]


# -- what a lease is charged ------------------------------------------------------------


def _released_at(lease: Lease) -> datetime | None:
    """When a lease stops billing its running time, as recorded (None: runs on), in UTC."""
    if lease.ended_at is not None:
        return _u(lease.ended_at)
    if lease.end is not None and lease.on_expiry is ExpiryAction.RELEASED and not _renews(lease):
        return _u(lease.end)
    return None


def over(lease: Lease, at: datetime) -> bool:
    """Whether the lease is over by `at` (ended, or released at its end)."""
    stop = _released_at(lease)
    return stop is not None and stop <= _u(at)


def runs(lease: Lease, until: datetime, stops: Sequence[Stop] = ()) -> list[Span]:
    """The stretches a pay-as-you-go lease bills its running time up to `until`."""
    stop, until, start = _released_at(lease), _u(until), _u(lease.start)
    hi = min(until, stop) if stop is not None else until
    if hi <= start:
        return []
    spans: list[Span] = [(start, hi)]
    if lease.stopped_billing is not StoppedBilling.FULL:
        spans = _minus(spans, stops, until)
    return spans


_UNIT_WORDS = {"day": "day", "week": "week", "month": "month", "month30": "30-day month"}


def off_grid(lease: Lease) -> str | None:
    """What a prepaid lease's figures assume when its span is not a whole number of its
    billing units and it does not say how a part unit is billed (`partial_unit`): a started
    unit is charged in full, so a "monthly" lease of 28 days from 1 March costs a month,
    which a lab rarely meant. None when the span is whole, or the lease is not prepaid."""
    if not lease.billing_type.prepaid or lease.end is None or lease.partial_unit is not None:
        return None
    tz, step = zone(lease), step_of(lease)
    k = period_index(lease.start, step, lease.end, tz)
    lo = boundary(lease.start, step, k, tz)
    if _u(lo) == _u(lease.end):
        return None
    hi = boundary(lease.start, step, k + 1, tz)
    unit = _UNIT_WORDS[step]
    days = _seconds(lease.start, lease.end) / 86400
    shown = f"{days:.0f}" if days == days.to_integral_value() else f"{days:.2f}"
    whole = [f"{fields.shown(b, lease.billing_tz)} ({n} {unit}{'s' if n != 1 else ''})"
             for n, b in ((k, lo), (k + 1, hi)) if n > 0]  # fmt: skip
    return (
        f"it runs {shown} days, not a whole number of {unit}s, and how a part {unit} is billed"
        f" is not recorded: a started {unit} is charged in full ({k + 1} x {lease.unit_price});"
        f" if that is wrong, end it at " + " or ".join(whole) + " or give --partial-unit"
    )


def prepaid_total(lease: Lease) -> Decimal:
    """A prepaid lease's price for its whole span, start to end, before any refund."""
    assert lease.end is not None
    return _prepaid_units(lease, lease.start, lease.end) * lease.unit_price


def _net_upfront(lease: Lease) -> Decimal:
    """The upfront charge net of the refund a recorded early end earns."""
    assert lease.end is not None
    full = _charge(lease, prepaid_total(lease))
    if lease.ended_at is None or _u(lease.ended_at) >= _u(lease.end):
        return full
    return _charge(lease, _kept(lease, full, lease.start, lease.end, lease.ended_at))


def _kept(lease: Lease, full: Decimal, lo: datetime, hi: datetime, released: datetime) -> Decimal:
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
        return min(full, full * _ceil(used / _HOUR) * _HOUR / span)
    if rule is RefundRule.USED_THEN_HOURLY and lease.hourly_price is not None:
        if used <= 0:
            return ZERO
        tz, step = zone(lease), step_of(lease)
        k = period_index(lo, step, released, tz)
        rest = _seconds(boundary(lo, step, k, tz), released)
        return min(full, k * lease.unit_price + lease.hourly_price * rest / _HOUR)
    return full


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
    if not (lease.billing_type.prepaid and _renews(lease)) or lease.end is None:
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
        price = _charge(lease, lease.unit_price)
        if released is None or released >= _u(hi):
            out.append(Renewal(charged, price, _u(lo), _u(hi)))
        else:
            kept = _charge(lease, _kept(lease, price, lo, hi, released))
            out.append(Renewal(charged, kept, _u(lo), max(_u(lo), released)))
        k += 1


def _after_end(lease: Lease, at: datetime, stops: Sequence[Stop]) -> Decimal:
    """What a prepaid lease is charged after its end (or before it, for an auto-renewal)."""
    assert lease.end is not None
    end, at = _u(lease.end), _u(at)
    ended_at = _u(lease.ended_at) if lease.ended_at is not None else None
    if ended_at is not None and ended_at <= end:
        return ZERO
    if lease.on_expiry is ExpiryAction.HOURLY and not lease.auto_renew:
        if lease.hourly_price is None or at <= end:
            return ZERO
        stop = min(at, ended_at) if ended_at is not None else at
        spans: list[Span] = [(end, stop)] if stop > end else []
        if lease.stopped_billing is not StoppedBilling.FULL:
            spans = _minus(spans, stops, at)
        return _hour_charges(lease, spans, lease.hourly_price)
    if _renews(lease):
        return sum((r.amount for r in renewals(lease, at)), ZERO)
    return ZERO


def _commitment(lease: Lease) -> Decimal:
    return (lease.min_commitment or 0) * lease.unit_price


def _charged(
    lease: Lease, at: datetime, stops: Sequence[Stop], cards: int | None
) -> tuple[Decimal, Decimal]:
    """(charged up front, charged as it goes) by `at`, before any minimum commitment."""
    at = _u(at)
    if at <= _u(lease.start) and not (lease.billing_type.prepaid and at == _u(lease.start)):
        return ZERO, ZERO
    if lease.billing_type.prepaid:
        return _net_upfront(lease), _after_end(lease, at, stops)
    per_unit = lease.unit_price
    if lease.billing_type is BillingType.CARD_HOUR:
        per_unit *= cards_of(lease, cards)
    spans = runs(lease, at, stops)
    units = [_run_units(lease, a, b) for a, b in spans]
    if lease.rounding is ChargeRounding.CHARGE:
        # Booked by the clock hour (a per-second price is settled hourly too): each run's
        # billed time (its units, rounded up to the partial unit) from its start.
        unit = _FIXED[step_of(lease)]
        billed = [
            (a, a + timedelta(seconds=float(u * unit)))
            for (a, _), u in zip(spans, units, strict=True)
        ]
        return ZERO, _hour_charges(lease, billed, per_unit * _HOUR / unit)
    return ZERO, sum(units, ZERO) * per_unit


def cost_to_date(
    lease: Lease,
    at: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
    commitment: bool = True,
) -> Decimal:
    """What the lease is charged by `at` (see the module's rules). A later `at` projects:
    the lease as recorded, carried on to then. `cards` stands in for a card_hour lease's
    missing cards_billed; commitment=False leaves the minimum commitment out."""
    upfront, going = _charged(lease, at, stops, cards)
    cost = upfront + going
    if commitment and over(lease, at):
        cost = max(cost, _commitment(lease))
    return cost


def _renewal_lumps(lease: Lease) -> bool:
    """Whether a prepaid lease is charged one unit per period after its end, ahead of each
    period (as _after_end charges it)."""
    return lease.billing_type.prepaid and _renews(lease) and lease.end is not None


def _renewals_accrued(lease: Lease, since: datetime, until: datetime) -> Decimal:
    """The renewals' share of [since, until): each spread over the time it pays for, on
    its period's grid (a calendar month's price over that month's days); one that pays for
    no time (charged early, the lease ended before its period began, not refunded) falls
    where it is charged, in (since, until] as cost_to_date counts it."""
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
        whole = _units(end, step, tz, r.lo, r.hi)
        part = _units(end, step, tz, max(since, r.lo), min(until, r.hi))
        share += r.amount * part / whole if whole else ZERO
    return share


def accrued(
    lease: Lease,
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """The share of the lease's cost that falls in [since, until) (see the module's rules):
    what a monthly report or an idle-card figure charges to that window."""
    since, until = _u(since), _u(until)
    if until <= since:
        return ZERO
    up_hi, go_hi = _charged(lease, until, stops, cards)
    _, go_lo = _charged(lease, since, stops, cards)
    # Each renewal pays for its own period: spread it there, not on its charge day.
    share = _renewals_accrued(lease, since, until) if _renewal_lumps(lease) else go_hi - go_lo
    if up_hi:
        stop = paid_until(lease)
        whole = _units(lease.start, step_of(lease), zone(lease), lease.start, stop)
        part = _units(
            lease.start, step_of(lease), zone(lease), max(since, _u(lease.start)), min(until, stop)
        )
        share += up_hi * part / whole if whole else ZERO
    top_hi = cost_to_date(lease, until, stops=stops, cards=cards) - up_hi - go_hi
    top_lo = cost_to_date(lease, since, stops=stops, cards=cards) - sum(
        _charged(lease, since, stops, cards), ZERO
    )
    return share + top_hi - top_lo


def paid_until(lease: Lease) -> datetime:
    """The end of the time a prepaid lease's upfront charge pays for (an early end cuts
    it short)."""
    assert lease.end is not None
    end = _u(lease.end)
    return min(end, _u(lease.ended_at)) if lease.ended_at is not None else end


def billed_spans(lease: Lease, until: datetime, stops: Sequence[Stop] = ()) -> list[Span]:
    """The stretches up to `until` the lease pays for its cards: the prepaid span (stopped
    or not), then what bills after the end; a pay-as-you-go lease's runs."""
    if not lease.billing_type.prepaid:
        return runs(lease, until, stops)
    end, until, start = paid_until(lease), _u(until), _u(lease.start)
    spans: list[Span] = _overlap([(start, end)], start, until)
    if lease.end is None or end < _u(lease.end) or until <= _u(lease.end):
        return spans
    lease_end = _u(lease.end)
    after = _u(lease.ended_at) if lease.ended_at is not None else until
    tail: list[Span] = [(lease_end, min(after, until))] if min(after, until) > lease_end else []
    if lease.on_expiry is ExpiryAction.HOURLY and not lease.auto_renew:
        if lease.stopped_billing is not StoppedBilling.FULL:
            tail = _minus(tail, stops, until)
        return spans + tail
    return spans + tail if _renews(lease) else spans


def paid_card_hours(
    lease: Lease,
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """Cards times the hours in [since, until) the lease pays for them."""
    spans = _overlap(billed_spans(lease, until, stops), since, until)
    return sum((_seconds(a, b) for a, b in spans), ZERO) / _HOUR * cards_of(lease, cards)


# -- storage lines ----------------------------------------------------------------------


def storage_cost(
    resource: Resource, lease: Lease, at: datetime, *, stops: Sequence[Stop] = ()
) -> Decimal:
    """A storage line's charge by `at`: its price pro rata from created (else the lease's
    start) until deleted_at; paused by stops only when the lease bills nothing then."""
    if resource.price is None:
        return ZERO
    start, at = _u(resource.created or lease.start), _u(at)
    stop = min(_u(resource.deleted_at), at) if resource.deleted_at is not None else at
    if stop <= start:
        return ZERO
    spans: list[Span] = [(start, stop)]
    if lease.stopped_billing is StoppedBilling.NONE:
        spans = _minus(spans, stops, at)
    step = {StoragePeriod.HOUR: "hour", StoragePeriod.DAY: "day"}.get(
        resource.price_per, "month30" if lease.month_count is MonthCount.DAYS_30 else "month"
    )
    units = sum((_units(start, step, zone(lease), a, b) for a, b in spans), ZERO)
    return units * resource.price


# -- periods and estimates --------------------------------------------------------------


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
                "it bills hourly after its end at a price not recorded (give --hourly-price)"
            )
        if lease.ended_at is not None and _u(lease.ended_at) < _u(lease.end):
            rule = refund_rule(lease)
            if rule is None:
                out.append(
                    "it ended early and the provider's refund rule is unknown: no refund assumed"
                    + (f" ({lease.refund_rule})" if lease.refund_rule else "")
                )
            elif rule is RefundRule.USED_THEN_HOURLY and lease.hourly_price is None:
                out.append("its refund needs the hourly price (give --hourly-price)")
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
    said = f"{n} stop{'' if n == 1 else 's'} recorded" if n else "no stop recorded"
    return (
        f"assumes {lease.node} ran whenever no stop is recorded ({said}); record one with"
        f" zuka lease stop {lease.node} --at TIME"
    )


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


def chain_cost(
    chain: Sequence[Lease],
    at: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """A renewal chain's charge by `at`: the sum of its leases (each a lease of its own);
    the first lease's minimum commitment holds for the chain, owed once the chain is over
    (a renewal copies the terms, so the minimum is not owed again)."""
    total = sum(
        (cost_to_date(le, at, stops=stops, cards=cards, commitment=False) for le in chain), ZERO
    )
    if chain and over(chain[-1], at):
        total = max(total, _commitment(chain[0]))
    return total


_INSTANT = timedelta(microseconds=1)


def charged_between(
    chain: Sequence[Lease],
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """What a renewal chain was charged in [since, until) (the cash basis of a month): a
    charge at `since` is in, one at `until` is the next window's. cost_to_date counts the
    charges made at `at`, so a month from 00:00 on the 1st must ask for the instant before
    each bound: else a lease (or a renewal) charged at 00:00 on the 1st fell in the month
    before, and the month it starts showed nothing."""
    if _u(until) <= _u(since):
        return ZERO
    hi = chain_cost(chain, _u(until) - _INSTANT, stops=stops, cards=cards)
    return hi - chain_cost(chain, _u(since) - _INSTANT, stops=stops, cards=cards)


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
    if end is None or boundary < _u(end) or (last.ended_at is None and _renews(last)):
        boundary -= _INSTANT
    by_period = total(max(at, boundary))[0]
    by_end = total(max(at, _u(end)))[0] if end is not None else None
    notes = tuple(n for le in leases for n in unknowns(le, at))
    notes += tuple(dict.fromkeys(n for le in leases if (n := stops_note(le, at, stops))))
    return Estimate(at, to_date, store, period, by_period, end, by_end, notes)


def chain_of(leases: Sequence[Lease], lease: Lease) -> tuple[Lease, ...]:
    """The renewal chain (leases.money.renewals.chains) that holds `lease`."""
    return next(c for c in chains(leases) if any(le is lease or le == lease for le in c))


# -- busy, idle and unknown card-hours ----------------------------------------------------


@dataclass(frozen=True)
class CardHours:
    """A lease's card-hours over a window and what they cost. Busy and known come from
    history (gpu_hour rows); what history does not know is unknown, never idle."""

    paid: Decimal
    busy_history: Decimal
    known_history: Decimal
    cost: Decimal

    @property
    def busy(self) -> Decimal:
        return min(self.busy_history, self.paid)

    @property
    def known(self) -> Decimal:
        return min(self.known_history, self.paid)

    @property
    def idle(self) -> Decimal:
        return max(ZERO, self.known - self.busy)

    @property
    def unknown(self) -> Decimal:
        return self.paid - self.known

    @property
    def idle_yuan(self) -> Decimal:
        """The money paid for cards that sat idle: cost x idle share of paid card-hours."""
        return self.cost * self.idle / self.paid if self.paid else ZERO

    @property
    def price_per_busy_hour(self) -> Decimal | None:
        """What one busy card-hour cost (None: no busy hour)."""
        return self.cost / self.busy if self.busy else None


def card_hours(
    paid: Decimal, busy_card_minutes: int, known_card_minutes: int, cost: Decimal
) -> CardHours:
    """CardHours from paid card-hours, history's card-minutes and the cost over a window."""
    if busy_card_minutes > known_card_minutes:
        raise ValueError(f"busy {busy_card_minutes} > known {known_card_minutes} card-minutes")
    return CardHours(paid, Decimal(busy_card_minutes) / 60, Decimal(known_card_minutes) / 60, cost)


def lease_card_hours(
    lease: Lease,
    since: datetime,
    until: datetime,
    busy_card_minutes: int,
    known_card_minutes: int,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> CardHours:
    """A lease's paid, busy, idle and unknown card-hours and cost over [since, until)."""
    return card_hours(
        paid_card_hours(lease, since, until, stops=stops, cards=cards),
        busy_card_minutes,
        known_card_minutes,
        accrued(lease, since, until, stops=stops, cards=cards),
    )


# -- hourly against monthly ---------------------------------------------------------------


def break_even_hours(monthly_price: Decimal, hourly_price: Decimal, cards: int = 1) -> Decimal:
    """Hours a month at which renting `cards` by the hour (hourly_price a card-hour) costs
    as much as the month (monthly_price for all of them): more hours, monthly is cheaper."""
    if hourly_price <= 0 or cards <= 0:
        raise InputError("hourly_price", str(hourly_price), "must be greater than zero")
    return monthly_price / (hourly_price * cards)


def lease_break_even(lease: Lease) -> Decimal | None:
    """A monthly (or contract) lease's break-even hours a month against its recorded hourly
    price (both for the whole lease); None without one."""
    if lease.billing_type not in (BillingType.MONTHLY, BillingType.CONTRACT):
        return None
    if not lease.hourly_price:
        return None
    return break_even_hours(lease.unit_price, lease.hourly_price)


@dataclass(frozen=True)
class Verdict:
    """Monthly against hourly for the hours actually used."""

    monthly_cost: Decimal  # what the prepaid lease cost over the window
    hourly_cost: Decimal  # the busy (and unknown) card-hours at the hourly price
    refund_known: bool = True  # whether leaving early is priced by a known rule

    @property
    def monthly_saves(self) -> Decimal:
        """Positive: monthly was cheaper by this much; negative: hourly would have been."""
        return self.hourly_cost - self.monthly_cost

    def said(self, amount: Callable[[Decimal], str]) -> str:
        """The verdict in words, its amount written by `amount` (in the lease's currency:
        leases.money.reportformat.verdict_text)."""
        if self.monthly_saves >= 0:
            said = f"monthly saves {amount(self.monthly_saves)}"
        else:
            said = f"hourly would have cost {amount(-self.monthly_saves)} less"
        if not self.refund_known:
            said += " (the provider's early-release refund rule is unknown)"
        return said


def hourly_vs_monthly(
    monthly_cost: Decimal,
    busy_card_hours: Decimal,
    hourly_card_price: Decimal,
    unknown_card_hours: Decimal = ZERO,
    *,
    refund_known: bool = True,
) -> Verdict:
    """The verdict for a window: hourly rents only the card-hours used; unknown hours are
    counted as used (never idle), so the verdict never flatters hourly."""
    used = busy_card_hours + unknown_card_hours
    return Verdict(monthly_cost, used * hourly_card_price, refund_known)


def lease_verdict(lease: Lease, usage: CardHours, *, cards: int | None = None) -> Verdict | None:
    """The verdict from a prepaid lease's own measured use (usage over a window, from
    lease_card_hours); None when it has no hourly price recorded."""
    if lease.hourly_price is None or not lease.billing_type.prepaid:
        return None
    per_card = lease.hourly_price / cards_of(lease, cards)
    return hourly_vs_monthly(
        usage.cost,
        usage.busy,
        per_card,
        usage.unknown,
        refund_known=refund_rule(lease) is not None,
    )
