"""Quotes for planned work (`zuka plan job`): a job of N cards for H hours priced under each
option a lab has (an offer in its price book, or what one of its current leases pays),
pure maths in Decimal.

How an option bills the job (cards N, hours H; a machine holds `gpus` cards, one card when
the offer does not say: machines = ceil(N / gpus)):
- card_hour: N x H card-hours at the price (a minimum term: that many card-hours at least);
- hourly: machines x whole hours (ceil H) at the price a machine-hour; per_second:
  machines x whole seconds (ceil H x 3600) at the price a machine-second (a minimum term:
  that many hours, or seconds, a machine at least);
- daily, weekly, monthly, contract (a contract's price is a month's, as a lease's is):
  machines x the periods that cover the job's span, at least the minimum term. The span
  is H hours back-to-back, or the whole window of `--within DAYS` when the job's hours
  are spread over it: a machine rented by the month is held from the first hour to the
  last. A quote's month is 30 days (720 h), a week 168 h, a day 24 h.
Cash up front: the first payment (one period for all machines of a prepaid option; none
for pay-as-you-go, billed as it runs) and the deposit.

Options are ranked by cost: first those allowed (data region allowed for the project, and
in the quote's currency), then the lab's own leases on a period's terms (a monthly or
contract lease already rented: more cards on its terms would need a new contract, so it is
listed, never ranked first), then those in another currency (never added to or compared
with the quote's), then those whose region is not allowed; the cheapest is the first
allowed. A lease billed pay-as-you-go is ranked with the offers.
The break-even of each monthly (or contract) option against each pay-as-you-go one of the
same currency is the hours of use a month above which the month costs less
(leases.money.verdict.break_even_hours, per machine of the monthly option); above a quote's
month (720 h) there is none: the pay-as-you-go option costs less at every hour of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import BillingType
from leases.money.verdict import break_even_hours

ZERO = Decimal(0)
QUOTE_MONTH_HOURS = Decimal(720)  # 30 days
PERIOD_HOURS = {
    BillingType.DAILY: Decimal(24),
    BillingType.WEEKLY: Decimal(168),
    BillingType.MONTHLY: QUOTE_MONTH_HOURS,
    BillingType.CONTRACT: QUOTE_MONTH_HOURS,
}
UNIT_WORDS = {
    BillingType.PER_SECOND: "second",
    BillingType.HOURLY: "hour",
    BillingType.CARD_HOUR: "card-hour",
    BillingType.DAILY: "day",
    BillingType.WEEKLY: "week",
    BillingType.MONTHLY: "month",
    BillingType.CONTRACT: "month",
}


def unit_word(billing_type: BillingType, plural: bool = False) -> str:
    """A billing unit as text says it, in the language in use: "month" / "months" / "月"
    (UNIT_WORDS stays English: `--json`'s "unit")."""
    unit = UNIT_WORDS[billing_type]
    if unit == "second":
        return _("seconds") if plural else _("second")
    if unit == "hour":
        return _("hours") if plural else _("hour")
    if unit == "card-hour":
        return _("card-hours") if plural else _("card-hour")
    if unit == "day":
        return _("days") if plural else _("day")
    if unit == "week":
        return _("weeks") if plural else _("week")
    return _("months") if plural else _("month")


def unit_plural(billing_type: BillingType) -> str:
    return unit_word(billing_type, plural=True)


PAY_AS_YOU_GO = (BillingType.PER_SECOND, BillingType.HOURLY, BillingType.CARD_HOUR)
MONTHLY = (BillingType.MONTHLY, BillingType.CONTRACT)
MAX_CARDS = 100_000
MAX_HOURS = Decimal(87_600)  # ten years of hours: more is a typo
MAX_DAYS = 3_660


def _ceil(x: Decimal) -> Decimal:
    return x.to_integral_value(rounding=ROUND_CEILING)


@dataclass(frozen=True)
class Job:
    """The planned work: `cards` cards for `hours` hours each, within `within_days`
    calendar days (None: the hours back-to-back)."""

    cards: int
    hours: Decimal
    within_days: int | None = None

    @property
    def card_hours(self) -> Decimal:
        return self.cards * self.hours

    @property
    def span_hours(self) -> Decimal:
        """How long a machine is held: the hours back-to-back, or the whole window."""
        return self.hours if self.within_days is None else Decimal(self.within_days * 24)


def job(cards: int, hours: Decimal, within_days: int | None = None) -> Job:
    """A job, checked: InputError naming --cards, --hours or --within."""
    if not 1 <= cards <= MAX_CARDS:
        raise InputError("cards", str(cards), _("must be from 1 to {hi:,}").format(hi=MAX_CARDS))
    if not hours.is_finite() or not ZERO < hours <= MAX_HOURS:
        raise InputError(
            "hours", str(hours), _("must be more than 0 and at most {hi:,}").format(hi=MAX_HOURS)
        )
    if within_days is not None:
        if not 1 <= within_days <= MAX_DAYS:
            raise InputError(
                "within", str(within_days), _("must be from 1 to {hi:,} days").format(hi=MAX_DAYS)
            )
        if within_days * 24 < hours:
            need = int(_ceil(hours / 24))
            raise InputError(
                "within",
                str(within_days),
                _("is shorter than the job: {hours} hours need at least {need} days").format(
                    hours=hours, need=need
                ),
            )
    return Job(cards, hours, within_days)


@dataclass(frozen=True)
class Option:
    """One way to rent the job: an offer of the price book, or a current lease's terms."""

    label: str  # "offer 3", "lease n1"
    provider: str
    channel: str
    gpu_model: str  # as typed
    billing_type: BillingType
    unit_price: Decimal
    currency: str
    gpus: int | None  # cards a machine; None: priced a card
    min_term: int | None  # in billing units
    deposit: Decimal | None
    region: str
    rented: str = ""  # a current lease's own terms in words; "" for an offer

    @property
    def new_contract(self) -> bool:
        """A lease already rented on a period's terms: more cards need a new contract."""
        return bool(self.rented) and self.billing_type not in PAY_AS_YOU_GO


@dataclass(frozen=True)
class Priced:
    """An option's price for the job."""

    option: Option
    machines: int
    units: Decimal  # billing units charged (a machine's, or all the card-hours)
    cost: Decimal
    min_term_binds: bool
    first_payment: Decimal
    allowed: bool  # its data region is allowed
    compared: bool  # in the quote's currency
    why: str  # a lease's terms; why it is not allowed, compared or ranked ("" for none)

    @property
    def unit(self) -> str:
        return UNIT_WORDS[self.option.billing_type]

    @property
    def up_front(self) -> Decimal:
        return self.first_payment + (self.option.deposit or ZERO)

    @property
    def rank(self) -> int:
        if not self.allowed:
            return 3
        if not self.compared:
            return 2
        return 1 if self.option.new_contract else 0


def price(option: Option, work: Job) -> tuple[int, Decimal, Decimal, bool, Decimal]:
    """(machines, units, cost, whether the minimum term binds, first payment)."""
    bt = option.billing_type
    machines = -(-work.cards // option.gpus) if option.gpus else work.cards
    floor = Decimal(option.min_term or 0)
    if bt is BillingType.CARD_HOUR:
        units = work.card_hours
        return (
            machines,
            max(units, floor),
            max(units, floor) * option.unit_price,
            floor > units,
            ZERO,
        )
    if bt is BillingType.HOURLY:
        units = _ceil(work.hours)
    elif bt is BillingType.PER_SECOND:
        units = _ceil(work.hours * 3600)
    else:
        units = _ceil(work.span_hours / PERIOD_HOURS[bt])
    billed = max(units, floor)
    first = ZERO if bt in PAY_AS_YOU_GO else machines * option.unit_price
    return machines, billed, machines * billed * option.unit_price, floor > units, first


def _region_ok(option: Option, regions: Sequence[str] | None) -> bool:
    if regions is None:
        return True
    return option.region.strip().casefold() in {r.strip().casefold() for r in regions}


@dataclass(frozen=True)
class BreakEven:
    """Hours of use a month above which `monthly` costs less than `hourly` (a machine of
    the monthly option's cards)."""

    monthly: Option
    hourly: Option
    hours: Decimal | None  # None: more than a quote's month has (see `reason`)
    reason: str = ""  # why there is no break-even ("" when there is one)


def card_hour_price(option: Option) -> Decimal:
    """A pay-as-you-go option's price a card-hour."""
    if option.billing_type is BillingType.CARD_HOUR:
        return option.unit_price
    per_hour = option.unit_price * (3600 if option.billing_type is BillingType.PER_SECOND else 1)
    return per_hour / (option.gpus or 1)


def break_evens(options: Sequence[Option]) -> list[BreakEven]:
    out: list[BreakEven] = []
    for m in options:
        if m.billing_type not in MONTHLY:
            continue
        for h in options:
            if h.billing_type in PAY_AS_YOU_GO and h.currency == m.currency:
                hours = break_even_hours(m.unit_price, card_hour_price(h), m.gpus or 1)
                if hours > QUOTE_MONTH_HOURS:
                    why = _(
                        "{offer} costs less even at every hour of a month"
                        " ({hours} h: a quote's month is 30 days)"
                    ).format(offer=h.label, hours=QUOTE_MONTH_HOURS)
                    out.append(BreakEven(m, h, None, why))
                else:
                    out.append(BreakEven(m, h, hours))
    return out


@dataclass(frozen=True)
class Quote:
    job: Job
    model: str  # as asked
    currency: str  # the options compared are in it
    regions: tuple[str, ...] | None  # the data regions allowed; None: any
    rule: str  # who allows them ("project llm", "--region cn-beijing"); "" for any
    options: tuple[Priced, ...]  # cheapest allowed first
    break_evens: tuple[BreakEven, ...]

    @property
    def cheapest(self) -> Priced | None:
        first = self.options[0] if self.options else None
        return first if first is not None and first.rank == 0 else None

    @property
    def runner_up(self) -> Priced | None:
        ranked = [p for p in self.options if p.rank == 0]
        return ranked[1] if len(ranked) > 1 else None

    @property
    def saves(self) -> Decimal | None:
        """How much less the cheapest costs than the next allowed option."""
        best, next_ = self.cheapest, self.runner_up
        return None if best is None or next_ is None else next_.cost - best.cost


def quote(
    work: Job,
    model: str,
    options: Sequence[Option],
    *,
    currency: str,
    regions: Sequence[str] | None = None,
    rule: str = "",
) -> Quote:
    """The job priced under every option, ranked (see the module's rules)."""
    priced: list[Priced] = []
    for o in options:
        machines, units, cost, binds, first = price(o, work)
        allowed = _region_ok(o, regions)
        compared = o.currency == currency
        notes = [o.rented] if o.rented else []
        if not allowed:
            where = (
                _("region {region}").format(region=o.region)
                if o.region
                else _("no region recorded")
            )
            notes.append(_("not allowed for {rule} ({where})").format(rule=rule, where=where))
        elif not compared:
            notes.append(
                _("in {currency}: not compared with {other}").format(
                    currency=o.currency, other=currency
                )
            )
        elif o.new_contract:
            notes.append(_("more cards need a new contract: never ranked first"))
        why = _("; ").join(notes)
        priced.append(Priced(o, machines, units, cost, binds, first, allowed, compared, why))
    priced.sort(key=lambda p: (p.rank, p.cost, p.option.label))
    return Quote(
        work,
        model,
        currency,
        None if regions is None else tuple(regions),
        rule,
        tuple(priced),
        tuple(break_evens(options)),
    )
