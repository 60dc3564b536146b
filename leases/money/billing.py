"""What a lease costs: pure money maths in Decimal, every period in the lease's billing zone.

No I/O and no SQLite: the ledger (leases.ledger.store), history (leases.telemetry.rollups)
and the caller hand in leases, storage lines, stops and card-minutes. The rules, said once:

- **Charged by `at`** (`cost_to_date`). Pay-as-you-go (per_second, hourly, card_hour):
  the time the lease ran up to `at`, each run rounded up to its partial unit (`partial`;
  default pro rata to the second, as AutoDL, 恒源云 and HyperAI bill), times the unit
  price (and the cards billed, for card_hour). It runs from its start to `ended_at`, or to
  its `end` when the provider releases it then. Prepaid (daily, weekly, monthly, contract):
  the whole paid span, start to end, is charged at the start (a started unit in full by
  default; a monthly or contract term with a `payment_schedule` in instalments instead,
  a month's or a quarter's at the start of each: leases.money.schedule); a recorded early
  end (`ended_at` before `end`) gives back what the lease's refund rule refunds (and
  cancels what was charged for periods not begun) on the day it ended, as providers
  refund on release: until then the charges stand whole. An unknown rule refunds nothing.
  After the end, by `on_expiry`:
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
  recorded: so, from a recorded end on (and for a lease not ended early), a projection is
  never below the cost to date, and no cost falls as time passes but by a refund, on the
  day of the early end that earns it (that month's cash can be below 0: money in).
- **Accrued** over a window (`accrued`): the share of the cost that falls in it; every
  charge is spread over the time it pays for, period by period (a calendar month's price
  over that month's days): the upfront charge over the paid span, each auto-renewal over
  its own period (charged early, it still belongs to the period's months), each
  instalment of a payment schedule over its period (leases.money.schedule), the hourly
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

Amounts are exact Decimals; leases.money.amounts.fen rounds one for display.

Here: what a lease is charged by a time and over a window, its storage lines, a chain's
charges and the card-hours it pays for. How time becomes units and charges is in
leases.money.units, the provider's own renewals in leases.money.autorenew, the estimate
to the period's and the lease's end in leases.money.estimate, hourly against monthly in
leases.money.verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _, is_chinese, ngettext
from leases.core.models import (
    BillingType,
    ChargeRounding,
    ExpiryAction,
    Lease,
    MonthCount,
    Resource,
    StoppedBilling,
    StoragePeriod,
)
from leases.money.amounts import unit_price_words
from leases.money.autorenew import renewal_lumps, renewals, renewals_accrued
from leases.money.periods import FIXED as _FIXED
from leases.money.periods import boundary, period_index, step_of, zone
from leases.money.periods import seconds_between as _seconds
from leases.money.periods import utc as _u
from leases.money.schedule import accrued_between, charged_by, scheduled, term_total
from leases.money.units import (
    HOUR,
    ZERO,
    Span,
    charge,
    hour_charges,
    kept_on_release,
    overlap,
    prepaid_units,
    pro_rata_units,
    refund_rule,
    renews,
    run_units,
)
from leases.money.verdict import Verdict, hourly_vs_monthly
from leases.money.words import billing_word

Stop = tuple[datetime, datetime | None]  # when the node was stopped; None: still stopped


# -- the cards paid for, and stopped time cut out ---------------------------------------


def cards_of(lease: Lease, cards: int | None = None) -> int:
    """The cards a lease pays for: cards_billed, else `cards` (the node's GPU count)."""
    n = lease.cards_billed or cards
    if n is not None and n < 0:  # the ledger refuses it; a caller of the pure maths may not
        raise InputError("cards_billed", n, _("must be at least 1"))
    if not n:
        raise InputError(
            "cards_billed",
            None,
            _(
                "the {billing} lease of {node} does not say how many cards it pays for:"
                " give --cards"
            ).format(billing=billing_word(lease.billing_type.value), node=lease.node),
        )
    return n


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


# -- what a lease is charged ------------------------------------------------------------


def _released_at(lease: Lease) -> datetime | None:
    """When a lease stops billing its running time, as recorded (None: runs on), in UTC."""
    if lease.ended_at is not None:
        return _u(lease.ended_at)
    if lease.end is not None and lease.on_expiry is ExpiryAction.RELEASED and not renews(lease):
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


def _units(step: str, n: int) -> str:
    """n billing units in words: "1 month", "2 weeks", "1 30-day month" / "1个月"."""
    if step == "day":
        return ngettext("{n} day", "{n} days", n).format(n=n)
    if step == "week":
        return ngettext("{n} week", "{n} weeks", n).format(n=n)
    if step == "month":
        return ngettext("{n} month", "{n} months", n).format(n=n)
    return ngettext("{n} 30-day month", "{n} 30-day months", n).format(n=n)


def _unit_words(step: str) -> tuple[str, str]:
    """A billing unit's word, one and several: ("month", "months") / ("月", "月")."""
    if step == "day":
        return _("day"), _("days")
    if step == "week":
        return _("week"), _("weeks")
    if step == "month":
        return _("month"), _("months")
    return _("30-day month"), _("30-day months")


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
    unit, units = _unit_words(step)
    days = _seconds(lease.start, lease.end) / 86400
    shown = f"{days:.0f}" if days == days.to_integral_value() else f"{days:.2f}"
    whole = [
        _("{day} ({units})").format(day=fields.shown(b, lease.billing_tz), units=_units(step, n))
        for n, b in ((k, lo), (k + 1, hi))
        if n > 0
    ]
    return _(
        "it runs {days} days, not a whole number of {units}, and how a part {unit} is billed"
        " is not recorded: a started {unit} is charged in full ({count} x {price});"
        " if that is wrong, end it at {ends} or give --partial-unit"
    ).format(
        days=shown,
        units=units,
        unit=unit,
        count=k + 1,
        # English as ever ("1 x 50000", the figure as recorded); Chinese says money, the
        # same figure: "1 × 50,000 元"
        price=unit_price_words(lease.unit_price, lease.currency)
        if is_chinese()
        else lease.unit_price,
        ends=_(" or ").join(whole),
    )


def prepaid_total(lease: Lease) -> Decimal:
    """A prepaid lease's price for its whole span, start to end, before any refund."""
    assert lease.end is not None
    return prepaid_units(lease, lease.start, lease.end) * lease.unit_price


def _net_upfront(lease: Lease) -> Decimal:
    """The upfront charge net of the refund a recorded early end earns."""
    assert lease.end is not None
    full = charge(lease, prepaid_total(lease))
    if lease.ended_at is None or _u(lease.ended_at) >= _u(lease.end):
        return full
    return charge(lease, kept_on_release(lease, full, lease.start, lease.end, lease.ended_at))


def _upfront_by(lease: Lease, at: datetime) -> Decimal:
    """What the prepaid span has charged by `at`: all of it at the start, or the
    instalments of its payment schedule charged by then."""
    return charged_by(lease, at) if scheduled(lease) else _net_upfront(lease)


def upfront_total(lease: Lease) -> Decimal:
    """What a prepaid lease's span is charged in all, net of an early end's refund
    (the whole term, owed whatever its payment schedule)."""
    return term_total(lease) if scheduled(lease) else _net_upfront(lease)


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
        return hour_charges(lease, spans, lease.hourly_price)
    if renews(lease):
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
    if lease.ended_at is not None and at < _u(lease.ended_at):
        # Not ended yet by `at`: what an early end refunds (or cancels) comes back when it
        # ends, not on the day it was charged (providers refund on release).
        lease = replace(lease, ended_at=None)
    if lease.billing_type.prepaid:
        return _upfront_by(lease, at), _after_end(lease, at, stops)
    per_unit = lease.unit_price
    if lease.billing_type is BillingType.CARD_HOUR:
        per_unit *= cards_of(lease, cards)
    spans = runs(lease, at, stops)
    units = [run_units(lease, a, b) for a, b in spans]
    if lease.rounding is ChargeRounding.CHARGE:
        # Booked by the clock hour (a per-second price is settled hourly too): each run's
        # billed time (its units, rounded up to the partial unit) from its start.
        unit = _FIXED[step_of(lease)]
        billed = [
            (a, a + timedelta(seconds=float(u * unit)))
            for (a, _end), u in zip(spans, units, strict=True)
        ]
        return ZERO, hour_charges(lease, billed, per_unit * HOUR / unit)
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
    _paid, go_lo = _charged(lease, since, stops, cards)
    # Each renewal pays for its own period: spread it there, not on its charge day.
    share = renewals_accrued(lease, since, until) if renewal_lumps(lease) else go_hi - go_lo
    if up_hi and scheduled(lease):  # each instalment over the time it pays for
        share += accrued_between(lease, since, until)
    elif up_hi:  # the whole term's price, spread over the time it pays for
        term, stop = upfront_total(lease), paid_until(lease)
        whole = pro_rata_units(lease.start, step_of(lease), zone(lease), lease.start, stop)
        part = pro_rata_units(
            lease.start, step_of(lease), zone(lease), max(since, _u(lease.start)), min(until, stop)
        )
        share += term * part / whole if whole else ZERO
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
    spans: list[Span] = overlap([(start, end)], start, until)
    if lease.end is None or end < _u(lease.end) or until <= _u(lease.end):
        return spans
    lease_end = _u(lease.end)
    after = _u(lease.ended_at) if lease.ended_at is not None else until
    tail: list[Span] = [(lease_end, min(after, until))] if min(after, until) > lease_end else []
    if lease.on_expiry is ExpiryAction.HOURLY and not lease.auto_renew:
        if lease.stopped_billing is not StoppedBilling.FULL:
            tail = _minus(tail, stops, until)
        return spans + tail
    return spans + tail if renews(lease) else spans


def paid_card_hours(
    lease: Lease,
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """Cards times the hours in [since, until) the lease pays for them."""
    spans = overlap(billed_spans(lease, until, stops), since, until)
    return sum((_seconds(a, b) for a, b in spans), ZERO) / HOUR * cards_of(lease, cards)


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
    units = sum((pro_rata_units(start, step, zone(lease), a, b) for a, b in spans), ZERO)
    return units * resource.price


# -- a renewal chain's charges -----------------------------------------------------------


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


INSTANT = timedelta(microseconds=1)


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
    hi = chain_cost(chain, _u(until) - INSTANT, stops=stops, cards=cards)
    return hi - chain_cost(chain, _u(since) - INSTANT, stops=stops, cards=cards)


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
