"""What a node's lease billing now costs: to date, by the end of its period and of the
lease, with its measured use over a trailing window and the hourly-against-monthly verdict
(`zuka cost`, the cost line of `zuka node show`). Pure: the leases, the storage lines and
the usage reader are passed in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease, Node, Resource
from leases.core.textsafe import visible
from leases.money import billing, report, schedule
from leases.money.amounts import fen_json, figure_json, money, money_words
from leases.money.billing import CardHours
from leases.money.estimate import Estimate, estimate
from leases.money.renewals import billing_now
from leases.money.verdict import Verdict, lease_break_even, verdict_text
from leases.money.words import billing_word

NO_HOURLY_PRICE = N_("record its hourly price to compare: zuka lease edit {node} --hourly-price P")


@dataclass(frozen=True)
class LeaseCost:
    """One node's lease billing now (with its renewal chain) and what it costs."""

    node: str
    lease: Lease  # the lease billing now
    chain: tuple[Lease, ...]
    estimate: Estimate | None  # None: the cost cannot be computed (see unknown)
    since: datetime  # the usage window, clipped to the chain's start
    until: datetime
    usage: CardHours | None  # None: card-hours unknown (no cards recorded)
    break_even: Decimal | None  # busy hours a month where monthly starts to pay
    verdict: Verdict | None
    unknown: tuple[str, ...]

    @property
    def currency(self) -> str:
        return self.lease.currency

    @property
    def tz(self) -> str:
        return self.lease.billing_tz

    @property
    def verdict_text(self) -> str | None:
        """The verdict, or what it needs; None for a lease billed by use (nothing to compare)."""
        if self.verdict is not None:
            return verdict_text(self.verdict, self.currency)
        if self.lease.billing_type.prepaid and self.lease.hourly_price is None:
            return _(NO_HOURLY_PRICE).format(node=self.node)
        return None


def storage_of(
    chain: Sequence[Lease], resources: Sequence[tuple[str, datetime, Resource]]
) -> list[tuple[Resource, Lease]]:
    """The priced storage lines (ledger.resources rows) of a chain's leases, found by
    lease (report.storage_lines), never by a node name another node may have had."""
    return [s for lines in report.storage_lines(chain, resources).values() for s in lines]


def node_cost(
    node: Node | None,
    leases: Sequence[Lease],
    resources: Sequence[tuple[str, datetime, Resource]],
    usage: report.Usage | None,
    at: datetime,
    days: int = 30,
    *,
    stops: Mapping[int, Sequence[billing.Stop]] | None = None,
) -> LeaseCost | None:
    """The cost of one node's lease billing at `at` (None: none bills), its use over the
    last `days` days (from the chain's start at the earliest; usage None: not read).
    `stops`: recorded stops by lease id (Ledger.stop_spans; None: none recorded)."""
    now = billing_now(sorted(leases, key=lambda le: le.start), at)
    if now is None or not now.bills:
        return None
    chain, lease = now.chain, now.lease
    cards = node.gpu_count if node is not None and node.gpu_count else None
    store = storage_of(chain, resources)
    held = (stops or {}).get(lease.id or 0, ())
    notes: list[str] = []
    est: Estimate | None = None
    try:
        est = estimate(chain, at, stops=held, storage=store, cards=cards)
        notes += est.unknown
    except InputError as exc:
        notes.append(_("cost unknown: {reason}").format(reason=exc.reason))
    since = max(at - timedelta(days=days), chain[0].start)
    used: CardHours | None = None
    row = (
        report.lease_row(chain, node, None, store, usage, since, at, stops=held) if usage else None
    )
    if row is not None:
        used = row.usage
        notes += [n for n in row.notes if n not in notes]
    verdict = billing.lease_verdict(lease, used, cards=cards) if used is not None else None
    return LeaseCost(
        node=lease.node,
        lease=lease,
        chain=chain,
        estimate=est,
        since=since,
        until=at,
        usage=used,
        break_even=lease_break_even(lease),
        verdict=verdict,
        unknown=tuple(dict.fromkeys(notes)),
    )


def _amount(c: LeaseCost, x: Decimal | None, words: bool = False) -> str:
    """An amount as a cell writes it (¥1,234.50), or as a sentence says it (1,234.50 元)."""
    return money_words(x, c.currency) if words else money(x, c.currency)


def _day(c: LeaseCost, at: datetime) -> str:
    return fields.shown(at, c.tz)


def by_lease_end(c: LeaseCost, words: bool = False) -> str:
    """The cost by the lease's end, with the end; "open-ended" for a lease without one
    (words: its amounts as a sentence says them)."""
    e = c.estimate
    if e is None:
        return "-"
    if e.lease_end is None or e.by_lease_end is None:
        return _("open-ended")
    said = _("{amount} by {day}").format(
        amount=_amount(c, e.by_lease_end, words), day=_day(c, e.lease_end)
    )
    term = term_owed(c)
    if term is None:
        return said
    owed, charged = _amount(c, term[0], words), _amount(c, term[1], words)
    return _("{said} (owed by the term: {owed}, of which {charged} charged)").format(
        said=said, owed=owed, charged=charged
    )


def term_owed(c: LeaseCost) -> tuple[Decimal, Decimal] | None:
    """A term paid in instalments (a payment schedule): (what the whole term owes, what of
    it is charged by now); None when the lease billing now is paid otherwise. The whole
    term is owed whatever the schedule: only the dates it is charged on differ."""
    if not schedule.scheduled(c.lease):
        return None
    return billing.upfront_total(c.lease), schedule.charged_by(c.lease, c.until)


def cost_line(c: LeaseCost) -> str:
    """`cost: ¥X to date, ¥Y by DATE (period end), ¥Z by END` (node show)."""
    e = c.estimate
    if e is None:
        return _("cost: unknown ({why})").format(why="; ".join(visible(n) for n in c.unknown))
    return _("cost: {to_date} to date, {by_period_end} by {period_end} (period end), {end}").format(
        to_date=_amount(c, e.to_date, True),
        by_period_end=_amount(c, e.by_period_end, True),
        period_end=_day(c, e.period[1]),
        end=by_lease_end(c, True),
    )


HEADERS = (
    N_("NODE"), N_("BILLING"), N_("TO DATE"), N_("BY PERIOD END"), N_("BY LEASE END"),
    N_("STORAGE"), N_("BUSY CARD-H"), N_("IDLE CARD-H"), N_("UNKNOWN CARD-H"), N_("IDLE COST"),
    N_("PER BUSY CARD-H"), N_("BREAK-EVEN H/MONTH"), N_("VERDICT"),
)  # fmt: skip


def headers() -> list[str]:
    """The table's headers in the language in use."""
    return [_(h) for h in HEADERS]


def _hours(x: Decimal | None) -> str:
    return "-" if x is None else f"{x.quantize(Decimal('0.1')):,}"


def row(c: LeaseCost) -> list[str | None]:
    """A table row of `zuka cost` (values from the ledger made visible)."""
    e, u = c.estimate, c.usage
    return [
        visible(c.node),
        billing_word(c.lease.billing_type.value),
        _amount(c, e.to_date) if e else None,
        _("{amount} by {day}").format(amount=_amount(c, e.by_period_end), day=_day(c, e.period[1]))
        if e
        else None,
        by_lease_end(c),
        _amount(c, e.storage_to_date) if e else None,
        _hours(u.busy) if u else None,
        _hours(u.idle) if u else None,
        _hours(u.unknown) if u else None,
        _amount(c, u.idle_yuan) if u else None,
        _amount(c, u.price_per_busy_hour) if u and u.price_per_busy_hour is not None else None,
        _hours(c.break_even),
        c.verdict_text,
    ]


def _d(x: Decimal | None) -> str | None:
    return figure_json(x)  # never exponent notation (0E+1), nor 28 digits of noise


def _t(x: datetime | None) -> str | None:
    return None if x is None else x.isoformat()


def to_json(c: LeaseCost) -> dict[str, Any]:
    """Decimals as strings (money to the fen, card-hours and hours exact), times in ISO
    8601."""
    e, u, v = c.estimate, c.usage, c.verdict
    return {
        "node": c.node,
        "billing": c.lease.billing_type.value,
        "currency": c.currency,
        "lease_start": _t(c.lease.start),
        "chain_start": _t(c.chain[0].start),
        "leases": len(c.chain),
        "to_date": fen_json(e.to_date) if e else None,
        "storage_to_date": fen_json(e.storage_to_date) if e else None,
        "period_start": _t(e.period[0]) if e else None,
        "period_end": _t(e.period[1]) if e else None,
        "by_period_end": fen_json(e.by_period_end) if e else None,
        "lease_end": _t(e.lease_end) if e else None,
        "by_lease_end": fen_json(e.by_lease_end) if e else None,
        "term_owed": fen_json(term[0]) if (term := term_owed(c)) else None,
        "term_charged": fen_json(term[1]) if term else None,
        "window": {"since": _t(c.since), "until": _t(c.until)},
        "paid_card_hours": _d(u.paid) if u else None,
        "busy_card_hours": _d(u.busy) if u else None,
        "idle_card_hours": _d(u.idle) if u else None,
        "unknown_card_hours": _d(u.unknown) if u else None,
        "window_cost": fen_json(u.cost) if u else None,
        "idle_cost": fen_json(u.idle_yuan) if u else None,
        "per_busy_card_hour": fen_json(u.price_per_busy_hour) if u else None,
        "break_even_hours_per_month": _d(c.break_even),
        "monthly_saves": fen_json(v.monthly_saves) if v else None,
        "verdict": c.verdict_text,
        "unknown": list(c.unknown),
    }
