"""What to rent next (`zuka plan`): pure money maths over measured demand.

- **Hybrid**: k cards on monthly terms as a base, the rest of each hour's demand rented by
  the hour. Demand is whole cards per clock hour: an hour in which 2.3 cards were busy on
  average needs 3 cards rented for it (so the plan never flatters hourly). Over a window of
  n hours, scaled to a month of HOURS_IN_MONTH hours:
      cost(k) = k x monthly + hourly x (HOURS_IN_MONTH / n) x sum over hours of max(0, d - k)
  One more base card saves the hourly price for every hour whose demand exceeds k, so
  cost(k+1) - cost(k) = monthly - hourly x HOURS_IN_MONTH x share(d > k): cost falls while
  that share is above monthly / (hourly x HOURS_IN_MONTH) and never falls again after
  (the share only shrinks as k grows). The optimum is the smallest k whose share is at or
  below that threshold (below it, strictly, more cards only cost more; at it, equal).
- **Unknown hours are never idle**: an hour counts only when history covers it, i.e. the
  known card-minutes of the nodes leased then reach COVERAGE (90 %) of their leased
  card-minutes (`measured_demand`). Hours before the fleet's first reading, and hours a
  dead collector missed, are left out, not read as no demand; the optimum is computed over
  the known hours and scaled to a month, and the caller says how many were unknown. An
  hour in which nothing was leased (after the first reading) is known: nothing rented.
- **Buy against rent**: owning (the cards' price over their life, power at the measured
  utilisation, hosting) against renting at the measured price per busy card-hour.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import BillingType, Lease, Node

HOURS_IN_MONTH = Decimal(730)  # 8760 / 12
HOURS_IN_YEAR = Decimal(8760)
ZERO = Decimal(0)


COVERAGE = 0.9  # share of the leased card-minutes history must know for an hour to count
MIN_KNOWN_HOURS = 7 * 24  # fewer known hours than a week: too little to plan from


@dataclass(frozen=True)
class NodeHistory:
    """One node's history for `measured_demand`: its cards, when a lease paid for them
    (Unix seconds [a, b); empty: no lease recorded, so it is expected from its first
    reading on), and per clock hour (Unix time // 3600) its busy and known card-minutes."""

    cards: int
    leased: Sequence[tuple[int, int]]
    hours: Mapping[int, tuple[int, int]]


@dataclass(frozen=True)
class Demand:
    """Busy cards in each known clock hour of the window [lo, hi)."""

    lo: int
    hi: int
    hours: tuple[int, ...]  # the known hours, in order
    cards: tuple[int, ...]  # whole busy cards in each of them
    before_history: int  # hours before the fleet's first reading (the window was cut)

    @property
    def window(self) -> int:
        return self.hi - self.lo

    @property
    def unknown(self) -> int:
        return self.window - len(self.hours)


def _leased_minutes(spans: Sequence[tuple[int, int]], lo: int, hi: int) -> dict[int, float]:
    """Minutes of each clock hour in [lo, hi) that the spans (Unix seconds) cover."""
    out: dict[int, float] = {}
    for a, b in spans:
        for h in range(max(lo, a // 3600), min(hi, -(-b // 3600))):
            s = min(b, (h + 1) * 3600) - max(a, h * 3600)
            if s > 0:
                out[h] = out.get(h, 0.0) + s / 60
    return out


def measured_demand(
    nodes: Mapping[str, NodeHistory], lo: int, hi: int, coverage: float = COVERAGE
) -> Demand:
    """Busy cards per known clock hour of [lo, hi) (see the module's rule on unknown
    hours): an hour is known when the nodes leased in it have `coverage` of their leased
    card-minutes read; busy minutes count from every node."""
    read = [h for n in nodes.values() for h in n.hours if lo <= h < hi]
    first = min(read, default=hi)
    expected = [0.0] * max(0, hi - lo)
    known = [0] * len(expected)
    busy = [0] * len(expected)
    for n in nodes.values():
        own = [h for h in n.hours if lo <= h < hi]
        if n.leased:
            minutes = _leased_minutes(n.leased, lo, hi)
        elif own:  # no lease recorded: expected from its first reading on
            minutes = dict.fromkeys(range(min(own), hi), 60.0)
        else:
            minutes = {}
        for h, m in minutes.items():
            expected[h - lo] += m * n.cards
        for h in own:
            b, k = n.hours[h]
            busy[h - lo] += b
            if h in minutes:
                known[h - lo] += k
    hours: list[int] = []
    per_hour: list[float] = []
    for i in range(max(0, first - lo), len(expected)):
        if known[i] >= coverage * expected[i] - 1e-9:
            hours.append(lo + i)
            per_hour.append(busy[i])
    return Demand(lo, hi, tuple(hours), tuple(cards_per_hour(per_hour)), max(0, first - lo))


def cards_per_hour(busy_card_minutes: Iterable[float]) -> list[int]:
    """Whole cards each hour needs, from its busy card-minutes (summed over nodes)."""
    # A hair of tolerance: 120.0000001 card-minutes from float sums is still 2 cards.
    return [max(0, math.ceil(m / 60 - 1e-9)) for m in busy_card_minutes]


@dataclass(frozen=True)
class HybridCost:
    """A month's cost with k monthly cards and the rest bought by the hour."""

    k: int
    base: Decimal  # k x monthly
    burst: Decimal  # the hourly part, scaled to a month
    burst_card_hours: Decimal  # card-hours a month bought by the hour

    @property
    def total(self) -> Decimal:
        return self.base + self.burst


MIN_PRICE = Decimal("0.0001")  # a hundredth of a fen
MAX_PRICE = Decimal(10) ** 9  # yuan; above it a figure is a typo, and Decimal maths overflows
MIN_UTILISATION = Decimal("0.001")  # 0.1 %: below it a busy card-hour's price is meaningless
LIFE_YEARS = (Decimal("0.5"), Decimal(30))
MAX_POWER_W = Decimal(100_000)
MAX_CARDS = 1_000_000


def _bounded(
    name: str, value: Decimal, lo: Decimal, hi: Decimal, *, lo_ok: bool, what: str
) -> None:
    """InputError naming the flag unless lo < value <= hi (lo <= value when lo_ok)."""
    if not value.is_finite() or value > hi or value < lo or (value == lo and not lo_ok):
        raise InputError(name, str(value), what)


def check_price(name: str, value: Decimal, *, zero_ok: bool = False) -> None:
    """A price from MIN_PRICE to MAX_PRICE (or 0, when zero_ok); InputError naming it."""
    if zero_ok and value == 0:
        return
    what = (
        _("must be a price from {lo} to {hi:,} (or 0)")
        if zero_ok
        else _("must be a price from {lo} to {hi:,}")
    )
    _bounded(
        name, value, MIN_PRICE, MAX_PRICE, lo_ok=True, what=what.format(lo=MIN_PRICE, hi=MAX_PRICE)
    )


def _check_prices(monthly: Decimal, hourly: Decimal) -> None:
    check_price("hourly", hourly)
    check_price("monthly", monthly)


def hybrid_cost(
    cards: Sequence[int],
    k: int,
    monthly: Decimal,
    hourly: Decimal,
    hours_in_month: Decimal = HOURS_IN_MONTH,
) -> HybridCost:
    """cost(k) a month (see the module's rule); `cards` is each hour's demand."""
    if not cards:
        raise InputError("days", "0", _("no hours of demand to plan from"))
    over = Decimal(sum(max(0, c - k) for c in cards)) * hours_in_month / len(cards)
    return HybridCost(k, k * monthly, over * hourly, over)


def cost_curve(
    cards: Sequence[int],
    monthly: Decimal,
    hourly: Decimal,
    hours_in_month: Decimal = HOURS_IN_MONTH,
) -> list[HybridCost]:
    """cost(k) for k from 0 (all hourly) to the peak (all monthly)."""
    return [
        hybrid_cost(cards, k, monthly, hourly, hours_in_month)
        for k in range(max(cards, default=0) + 1)
    ]


def optimal_base(
    cards: Sequence[int],
    monthly: Decimal,
    hourly: Decimal,
    hours_in_month: Decimal = HOURS_IN_MONTH,
) -> int:
    """The smallest k whose share of hours with demand above k is at or below
    monthly / (hourly x hours_in_month)."""
    _check_prices(monthly, hourly)
    if not cards:
        raise InputError("days", "0", _("no hours of demand to plan from"))
    n = len(cards)
    for k in range(max(cards) + 1):
        above = sum(1 for c in cards if c > k)
        # share <= threshold, without dividing: above / n <= monthly / (hourly x H)
        if above * hourly * hours_in_month <= monthly * n:
            return k
    return max(cards)  # not reached: nothing is above the peak


@dataclass(frozen=True)
class Hybrid:
    hours: int  # hours of demand measured
    peak: int
    threshold: Decimal  # monthly / (hourly x hours in the month)
    curve: tuple[HybridCost, ...]  # k = 0 .. peak
    best: HybridCost

    @property
    def all_hourly(self) -> HybridCost:
        return self.curve[0]

    @property
    def all_monthly(self) -> HybridCost:
        return self.curve[-1]

    @property
    def saves_against_hourly(self) -> Decimal:
        return self.all_hourly.total - self.best.total

    @property
    def saves_against_monthly(self) -> Decimal:
        return self.all_monthly.total - self.best.total


def hybrid(
    cards: Sequence[int],
    monthly: Decimal,
    hourly: Decimal,
    hours_in_month: Decimal = HOURS_IN_MONTH,
) -> Hybrid:
    k = optimal_base(cards, monthly, hourly, hours_in_month)
    curve = tuple(cost_curve(cards, monthly, hourly, hours_in_month))
    return Hybrid(len(cards), max(cards), monthly / (hourly * hours_in_month), curve, curve[k])


# -- the load-duration chart --------------------------------------------------------------

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def load_duration_chart(
    cards: Sequence[int], k: int, *, width: int = 60, height: int = 10
) -> list[str]:
    """Demand sorted from the busiest hour down, as text blocks: x is the share of hours,
    y the cards; the line at k marks the monthly base (above it: bought by the hour)."""
    if not cards:
        return ["(no demand measured)"]
    ordered = sorted(cards, reverse=True)
    n = len(ordered)
    width = max(1, min(width, n))
    cols = [ordered[min(n - 1, (i * n) // width)] for i in range(width)]
    peak = max(1, ordered[0])
    height = max(1, min(height, peak * 4))
    step = Decimal(peak) / height
    label_w = len(str(peak)) + 6
    lines: list[str] = []
    k_row = None if k <= 0 else min(height, math.ceil(Decimal(k) / step))
    for row in range(height, 0, -1):
        lo = step * (row - 1)
        cells = []
        for v in cols:
            fill = (Decimal(v) - lo) / step
            if fill >= 1:
                cells.append("█")
            elif fill > 0:
                cells.append(_EIGHTHS[max(1, int(fill * 8))])
            else:
                cells.append("╌" if row == k_row else " ")
        if row == k_row:
            label = f"k={k} ▶"
        elif row == height:
            label = f"{peak}"
        else:
            label = ""
        lines.append(f"{label:>{label_w}} │{''.join(cells)}")
    lines.append(f"{'k=0 ▶' if k <= 0 else '0':>{label_w}} └{'─' * width}")
    tail = _("100 % of hours")
    lines.append(f"{'':>{label_w}}  0 %{tail:>{max(0, width - 3)}}")
    return lines


# -- default prices from the ledger -------------------------------------------------------


@dataclass(frozen=True)
class PerCard:
    """A price per card (a month, or an hour) and the lease it was read from."""

    price: Decimal
    lease: Lease


def plan_currency(given: str | None, present: Iterable[str], default: str) -> str:
    """The one currency a plan is made in: the one given; else the leases' one currency
    (`present`); else, with no lease, `default` (the lab's). Leases in several currencies
    and none given: refused, naming --currency (a plan never adds two currencies)."""
    if given is not None:
        from leases.core.fields import currency

        return currency(given)
    codes = sorted(set(present))
    if len(codes) > 1:
        raise InputError(
            "currency",
            None,
            _(
                "the leases planned from are in {currencies}, and a plan never adds two"
                " currencies: give --currency C to plan from the leases in C (prices given with"
                " the flags are read in it)"
            ).format(currencies=_(" and ").join(codes)),
        )
    return codes[0] if codes else default


def model_matches(node: Node, model: str | None) -> bool:
    return model is None or model.strip().lower() in node.gpu_model.lower()


def lease_prices(
    leases: Sequence[Lease],
    nodes: Mapping[int, Node],
    model: str | None,
    currency: str | None = None,
) -> tuple[PerCard | None, PerCard | None]:
    """(monthly price a card, hourly price a card) from the latest leases of nodes (by id:
    a released node's name may be reused) whose GPU model matches (and, given a currency,
    in it: a plan never mixes two): a monthly lease's price over its cards; an hourly
    lease's, a card-hour lease's, or a monthly lease's recorded hourly price."""
    monthly: PerCard | None = None
    hourly: PerCard | None = None
    for le in sorted(leases, key=lambda le: le.start):
        node = nodes.get(le.node_id) if le.node_id is not None else None
        if node is None or not model_matches(node, model):
            continue
        if currency is not None and le.currency != currency:
            continue
        cards = le.cards_billed or node.gpu_count
        if not cards:
            continue
        bt = le.billing_type
        if bt is BillingType.MONTHLY:
            monthly = PerCard(le.unit_price / cards, le)
            if le.hourly_price:
                hourly = PerCard(le.hourly_price / cards, le)
        elif bt is BillingType.HOURLY:
            hourly = PerCard(le.unit_price / cards, le)
        elif bt is BillingType.CARD_HOUR:
            hourly = PerCard(le.unit_price, le)
    return monthly, hourly


# -- buy against rent ---------------------------------------------------------------------


@dataclass(frozen=True)
class BuyVsRent:
    cards: int
    utilisation: Decimal  # busy share of the card-hours
    capex_month: Decimal  # the cards' price spread over their life
    power_month: Decimal
    hosting_month: Decimal
    busy_card_hours_month: Decimal
    renting_per_busy_hour: Decimal

    @property
    def owning_month(self) -> Decimal:
        return self.capex_month + self.power_month + self.hosting_month

    @property
    def owning_per_busy_hour(self) -> Decimal:
        return self.owning_month / self.busy_card_hours_month

    @property
    def renting_month(self) -> Decimal:
        """Renting the same busy card-hours at the measured price."""
        return self.renting_per_busy_hour * self.busy_card_hours_month

    @property
    def ratio(self) -> Decimal:
        """Renting as a share of owning (below 1: renting is cheaper)."""
        return self.renting_per_busy_hour / self.owning_per_busy_hour


def payback_months(r: BuyVsRent, bought: Decimal) -> Decimal | None:
    """Months after which buying the cards (for `bought`) has cost less than renting: the
    price over what renting costs a month beyond owning's running costs (power, hosting).
    None when renting costs no more than running owned cards: buying never pays back."""
    gain = r.renting_month - r.power_month - r.hosting_month
    return bought / gain if gain > 0 else None


_UTIL_WHAT = N_("must be a share from 0.001 to 1 (0.65), or a percent written with % (65%, 1.5%)")


def utilisation_share(name: str, value: Decimal | str) -> Decimal:
    """A utilisation as typed, as a share: a share in (0, 1] (0.65), a percent written with
    % (65%, 1.5%), or a whole percent from 2 to 100 (65). A bare number between those
    (1.5: 1.5 % or 150 %?) is refused, never guessed."""
    if isinstance(value, str):
        raw = unicodedata.normalize("NFKC", value).strip()
        if raw.endswith("%"):
            share = fields.number(name, raw[:-1]) / 100
            if not MIN_UTILISATION <= share <= 1:
                raise InputError(name, raw, _(_UTIL_WHAT))  # said as typed: 150%, not 1.5
            return share
        value = fields.number(name, raw)
    if value.is_finite() and value > 1:
        if value > 100:
            raise InputError(name, str(value), _(_UTIL_WHAT))
        if value != value.to_integral_value() or value < 2:
            raise InputError(name, str(value), _("is ambiguous: {what}").format(what=_(_UTIL_WHAT)))
        value = value / 100
    _bounded(name, value, MIN_UTILISATION, Decimal(1), lo_ok=True, what=_(_UTIL_WHAT))
    return value


def buy_vs_rent(
    *,
    card_price: Decimal,
    life_years: Decimal,
    power_w: Decimal,
    kwh: Decimal,
    hosting_month: Decimal,
    cards: int,
    utilisation: Decimal,
    renting_per_busy_hour: Decimal,
) -> BuyVsRent:
    """Owning `cards` cards (bought at card_price each, written off over life_years,
    drawing power_w each while busy, hosted for hosting_month for all of them) against
    renting their busy card-hours at renting_per_busy_hour, at the given utilisation."""
    check_price("card-price", card_price)
    years = _("must be from {lo} to {hi} years").format(lo=LIFE_YEARS[0], hi=LIFE_YEARS[1])
    _bounded("life-years", life_years, *LIFE_YEARS, lo_ok=True, what=years)
    _bounded("power-w", power_w, Decimal(0), MAX_POWER_W, lo_ok=True,
             what=_("must be from 0 to {hi:,} W a card").format(hi=MAX_POWER_W))  # fmt: skip
    check_price("kwh", kwh, zero_ok=True)
    check_price("hosting", hosting_month, zero_ok=True)
    if not 0 < cards <= MAX_CARDS:
        raise InputError("cards", str(cards), _("must be from 1 to {hi:,}").format(hi=MAX_CARDS))
    utilisation_share("utilisation", utilisation)
    if utilisation > 1:
        raise InputError("utilisation", str(utilisation), _("must be a share at most 1"))
    check_price("renting price", renting_per_busy_hour)
    busy = cards * utilisation * HOURS_IN_MONTH
    return BuyVsRent(
        cards,
        utilisation,
        card_price * cards / (life_years * 12),
        busy * power_w / 1000 * kwh,
        hosting_month,
        busy,
        renting_per_busy_hour,
    )
