"""The month's money report: what each lease cost, how much of it bought busy cards, and who
used them (`zuka report`).

Pure over what the caller reads: leases, nodes, providers, storage lines, and a `usage`
function giving a lease's card-hours over a window
(leases.telemetry.rollups.HistoryStore.lease_usage). A row is a renewal chain
(leases.money.renewals.chains), costed as leases.money.billing costs chains: each
lease's share of the window (billing.accrued), the chain's minimum commitment once.
Totals are sums of the rows, so every figure reconciles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease, Node, OwnerHour, Provider, RefundState, Resource
from leases.money import billing
from leases.money.billing import INSTANT, CardHours
from leases.money.deposits import (
    PARTLY_BACK,
    DepositLine,
    Refund,
    deposit_lines,
    paid_on,
    state_word,
)
from leases.money.estimate import month_of, stops_note, unknowns
from leases.money.invoices import Coverage
from leases.money.periods import zone
from leases.money.renewals import chains
from leases.money.units import ZERO, Span

# lease, since, until, cards -> the lease's card-hours over the window (with its cost)
Usage = Callable[[Lease, datetime, datetime, int | None], CardHours]

DEPOSIT_STATES = {
    RefundState.NONE: N_("paid"),
    RefundState.PENDING: N_("pending refund"),
    RefundState.REFUNDED: N_("refunded"),
    RefundState.FORFEITED: N_("forfeited"),
}
# The deposit's state at a month's end (leases.money.deposits.state_word) as the lease
# table says it.
_STATE_SAID = {
    **{k.value: v for k, v in DEPOSIT_STATES.items()},
    PARTLY_BACK: N_("partly refunded"),
}
NOT_YET_PAID = N_("not paid yet")
UNKNOWN_OWNER = N_("unknown")
UNASSIGNED = N_("unassigned")
_MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")  # ASCII digits only
YEARS = (2000, 2100)  # the months a report can be asked for


def month_window(month: str, tz_name: str, now: datetime) -> tuple[Span, bool]:
    """The calendar month YYYY-MM in the zone, cut at `now` when it is not over:
    ((since, until), complete)."""
    m = _MONTH_RE.fullmatch(month.strip())
    if m is None or not 1 <= int(m.group(2)) <= 12:
        raise InputError("month", month, _("must be YYYY-MM, e.g. 2025-03"))
    if not YEARS[0] <= int(m.group(1)) <= YEARS[1]:
        raise InputError(
            "month", month, _("the year must be from {lo} to {hi}").format(lo=YEARS[0], hi=YEARS[1])
        )
    tz = fields.timezone(tz_name, "billing.tz")
    since, until = month_of(datetime(int(m.group(1)), int(m.group(2)), 2, tzinfo=tz), tz)
    if since >= now:
        raise InputError("month", month, _("has not started yet"))
    return (since, min(until, now)), until <= now


@dataclass(frozen=True)
class LeaseRow:
    """One renewal chain's month."""

    node: str
    channel: str
    provider: str
    billing_type: str
    start: datetime
    end: datetime | None  # the chain's end (ended_at, else end); None: open-ended
    leases: int  # leases in the chain
    cost: Decimal  # the leases' share of the window, storage lines not included
    storage: Decimal
    usage: CardHours | None  # None: how many cards it pays for is not recorded
    deposit: Decimal | None
    deposit_state: str  # "" without a deposit; else a DEPOSIT_STATES value
    spans: tuple[Span, ...] = ()  # when in the window it paid for its cards
    notes: tuple[str, ...] = ()
    currency: str = "CNY"  # the lease's own: rows of two currencies are never added up
    # Cash basis beside `cost` (the accrual): what the provider charged in the window,
    # upfront charges and renewals on their charge days, and the storage lines (billed as
    # they run, so charged as they accrue).
    charged: Decimal = ZERO
    node_id: int | None = None  # the node's (`node` is its name, shown; names are reused)

    @property
    def total(self) -> Decimal:
        return self.cost + self.storage


@dataclass(frozen=True)
class Totals:
    leases: int = 0
    cost: Decimal = ZERO
    storage: Decimal = ZERO
    paid: Decimal = ZERO
    busy: Decimal = ZERO
    idle: Decimal = ZERO
    unknown: Decimal = ZERO
    idle_yuan: Decimal = ZERO
    deposits: Mapping[str, Decimal] = field(default_factory=dict)  # state -> amount
    # The cost of the rows whose card-hours are known (what price_per_busy_hour divides).
    usage_cost: Decimal = ZERO
    charged: Decimal = ZERO  # cash basis: see LeaseRow.charged

    @property
    def total(self) -> Decimal:
        return self.cost + self.storage

    @property
    def known(self) -> Decimal:
        """Paid card-hours history knows (busy or idle)."""
        return self.paid - self.unknown

    @property
    def price_per_busy_hour(self) -> Decimal | None:
        return self.usage_cost / self.busy if self.busy else None


def totals(rows: Iterable[LeaseRow]) -> Totals:
    """The sums of the rows (every total in a report is one of these)."""
    deposits: dict[str, Decimal] = {}
    n = 0
    cost = storage = paid = busy = idle = unknown = idle_yuan = usage_cost = charged = ZERO
    for r in rows:
        n += 1
        cost += r.cost
        charged += r.charged
        storage += r.storage
        if r.usage is not None:
            paid += r.usage.paid
            busy += r.usage.busy
            idle += r.usage.idle
            unknown += r.usage.unknown
            idle_yuan += r.usage.idle_yuan
            usage_cost += r.usage.cost
        if r.deposit is not None:
            deposits[r.deposit_state] = deposits.get(r.deposit_state, ZERO) + r.deposit
    return Totals(
        n, cost, storage, paid, busy, idle, unknown, idle_yuan, deposits, usage_cost, charged
    )


@dataclass(frozen=True)
class Report:
    month: str
    tz: str
    since: datetime
    until: datetime
    complete: bool  # False: the month is not over; figures to `until`
    currency: str  # the config's: for display when no row says its own
    rows: tuple[LeaseRow, ...]
    by_channel: tuple[tuple[str, Totals], ...]
    by_provider: tuple[tuple[str, Totals], ...]
    total: Totals
    # The config's rates for the month ([money.rates]): currency -> the lab's currency
    # (`currency`) one unit was worth; only a total in the lab's currency uses them.
    rates: Mapping[str, Decimal] = field(default_factory=dict)
    # The month's charges against the invoices on them, per provider and per lease an
    # invoice names (leases.money.invoices; filled by leases.app.invoices.with_invoicing).
    invoicing: tuple[Coverage, ...] = ()
    # Deposits as cash, apart from the charges: paid out and back in the month, and each
    # still outstanding at its end, also of a lease long ended (leases.money.deposits).
    deposits: tuple[DepositLine, ...] = ()


def chain_accrued(
    chain: Sequence[Lease],
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[billing.Stop] = (),
    cards: int | None = None,
) -> Decimal:
    """A renewal chain's share of [since, until): each lease's accrued share without its own
    minimum commitment, and the chain's commitment (billing.chain_cost) where it falls."""

    def own_topup(le: Lease, at: datetime) -> Decimal:
        with_it = billing.cost_to_date(le, at, stops=stops, cards=cards)
        return with_it - billing.cost_to_date(le, at, stops=stops, cards=cards, commitment=False)

    def chain_topup(at: datetime) -> Decimal:
        bare = sum(
            (
                billing.cost_to_date(le, at, stops=stops, cards=cards, commitment=False)
                for le in chain
            ),
            ZERO,
        )
        return billing.chain_cost(chain, at, stops=stops, cards=cards) - bare

    share = ZERO
    for le in chain:
        share += billing.accrued(le, since, until, stops=stops, cards=cards)
        share -= own_topup(le, until) - own_topup(le, since)
    return share + chain_topup(until) - chain_topup(since)


def _deposit(
    chain: Sequence[Lease], refunds: Mapping[int, Sequence[Refund]], on: date
) -> tuple[Decimal | None, str]:
    """The chain's deposit and its state at the end of day `on` (the month's last day): as
    the Deposits section counts it, not as it is today."""
    held = [le for le in chain if le.deposit is not None]
    if not held:
        return None, ""
    last = held[-1]
    if paid_on(last)[0] > on:
        return last.deposit, NOT_YET_PAID
    word = state_word(last, refunds.get(last.id or 0, ()), on)
    return last.deposit, _STATE_SAID.get(word, word)


def _overlaps(chain: Sequence[Lease], since: datetime, until: datetime) -> bool:
    first, last = chain[0], chain[-1]
    stop = last.ended_at or last.end
    return first.start < until and (stop is None or stop > since)


def lease_row(
    chain: Sequence[Lease],
    node: Node | None,
    provider: Provider | None,
    storage: Sequence[tuple[Resource, Lease]],
    usage: Usage,
    since: datetime,
    until: datetime,
    *,
    stops: Sequence[billing.Stop] = (),
    refunds: Mapping[int, Sequence[Refund]] | None = None,
    deposit_on: date | None = None,
) -> LeaseRow | None:
    """A chain's row for the window; None when it neither ran nor billed in it. `stops`:
    the node's recorded stops (Ledger.stop_spans), applied by each lease's
    stopped_billing; `refunds` (by lease id) give the deposit's state at the end of day
    `deposit_on` (None: the window's last day in the lease's billing zone)."""
    cards = node.gpu_count if node is not None and node.gpu_count else None
    notes: list[str] = []
    try:
        cost = chain_accrued(chain, since, until, stops=stops, cards=cards)
        charged = billing.charged_between(chain, since, until, stops=stops, cards=cards)
    except InputError as exc:
        cost = charged = ZERO
        notes.append(_("cost unknown: {reason}").format(reason=exc.reason))
    store = sum(
        (
            billing.storage_cost(r, le, until, stops=stops)
            - billing.storage_cost(r, le, since, stops=stops)
            for r, le in storage
        ),
        ZERO,
    )
    charged += store  # storage lines bill as they run: charged as they accrue
    used: CardHours | None = None
    spans: list[Span] = []
    try:
        parts = [usage(le, since, until, cards) for le in chain]
        used = CardHours(
            sum((p.paid for p in parts), ZERO),
            sum((p.busy_history for p in parts), ZERO),
            sum((p.known_history for p in parts), ZERO),
            cost,
        )
        for le in chain:
            spans += [
                (max(a, since), min(b, until))
                for a, b in billing.billed_spans(le, until, stops)
                if max(a, since) < min(b, until)
            ]
    except InputError:
        notes.append(_("card-hours unknown: record the lease's cards billed or the node's GPUs"))
    if not _overlaps(chain, since, until) and not (cost or charged or store or spans):
        return None
    for le in chain:
        notes += unknowns(le, until)
        note = stops_note(le, until, stops)
        notes += [note] if note else []
    last = chain[-1]
    on = deposit_on or (until - INSTANT).astimezone(zone(last)).date()
    deposit, state = _deposit(chain, refunds or {}, on)
    return LeaseRow(
        node=last.node,
        channel=provider.kind.value if provider is not None else "-",
        provider=provider.name if provider is not None else "-",
        billing_type=last.billing_type.value,
        start=chain[0].start,
        end=last.ended_at or last.end,
        leases=len(chain),
        cost=cost,
        storage=store,
        usage=used,
        deposit=deposit,
        deposit_state=state,
        spans=tuple(spans),
        notes=tuple(dict.fromkeys(notes)),
        currency=last.currency,
        charged=charged,
        node_id=last.node_id,
    )


def nodes_by_key(nodes: Iterable[Node]) -> dict[int | str, Node]:
    """Nodes by id, for Lease.node_key: a released node's name may be reused, so a lease
    read from the ledger finds its node by id. By name too, for a lease that has no node
    id: the live node of that name rather than a released one."""
    found: dict[int | str, Node] = {}
    for n in sorted(nodes, key=lambda n: n.state == "released"):
        if n.id is not None:
            found[n.id] = n
        found.setdefault(n.name, n)
    return found


def node_chains(leases: Iterable[Lease]) -> list[tuple[Lease, ...]]:
    """Renewal chains (leases.money.renewals.chains) node by node: two nodes that had the same
    name never make one chain."""
    by_node: dict[int | str, list[Lease]] = {}
    for le in leases:
        by_node.setdefault(le.node_key, []).append(le)
    return [c for group in by_node.values() for c in chains(group)]


def lease_key(le: Lease) -> int | tuple[str, datetime]:
    """A lease's identity: its id, or its node's name and start for a lease not read from
    a ledger (names are reused, so (name, start) is not one where ids exist)."""
    return le.id if le.id is not None else (le.node, le.start)


def storage_lines(
    leases: Iterable[Lease], resources: Iterable[tuple[str, datetime, Resource]]
) -> dict[int | tuple[str, datetime], list[tuple[Resource, Lease]]]:
    """The priced storage lines (ledger.resources rows) of the leases, by lease_key: a
    resource names its lease by id (Resource.lease_id)."""
    by_id: dict[int, Lease] = {}
    by_name: dict[tuple[str, datetime], Lease] = {}
    for le in leases:
        if le.id is not None:
            by_id[le.id] = le
        else:
            by_name[(le.node, le.start)] = le
    found: dict[int | tuple[str, datetime], list[tuple[Resource, Lease]]] = {}
    for name, start, res in resources:
        found_le = by_id.get(res.lease_id) or by_name.get((name, start))
        if found_le is not None and res.price is not None:
            found.setdefault(lease_key(found_le), []).append((res, found_le))
    return found


def _grouped(
    rows: Sequence[LeaseRow], key: Callable[[LeaseRow], str]
) -> tuple[tuple[str, Totals], ...]:
    groups: dict[str, list[LeaseRow]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return tuple((k, totals(groups[k])) for k in sorted(groups))


def build_report(
    month: str,
    window: Span,
    complete: bool,
    *,
    tz: str,
    currency: str,
    leases: Sequence[Lease],
    nodes: Sequence[Node],
    providers: Sequence[Provider],
    resources: Sequence[tuple[str, datetime, Resource]],
    usage: Usage,
    stops: Mapping[int, Sequence[billing.Stop]] | None = None,
    refunds: Mapping[int, Sequence[Refund]] | None = None,
) -> Report:
    """The report over `window` (month_window) of every chain that ran or billed in it.
    `stops`: each lease's recorded stops by lease id (Ledger.stop_spans; None: none);
    `refunds`: each lease's deposit refunds by lease id (the deposit_refund book)."""
    since, until = window
    node_of = nodes_by_key(nodes)
    provider_of = {p.name: p for p in providers}
    storage_of = storage_lines(leases, resources)
    zone_ = fields.timezone(tz, "billing.tz")
    first, last = since.astimezone(zone_).date(), (until - INSTANT).astimezone(zone_).date()
    rows: list[LeaseRow] = []
    for chain in node_chains(leases):
        node = node_of.get(chain[-1].node_key)
        provider = provider_of.get(node.provider or "") if node is not None else None
        store = [s for le in chain for s in storage_of.get(lease_key(le), [])]
        held = (stops or {}).get(chain[-1].id or 0, ())
        row = lease_row(
            chain, node, provider, store, usage, since, until, stops=held, refunds=refunds,
            deposit_on=last,
        )  # fmt: skip
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda r: (r.channel, r.provider, r.node, r.start))
    held_by = {k: n.provider or "-" for k, n in node_of.items()}
    cash = deposit_lines(leases, refunds or {}, held_by, first, last)
    return Report(
        month,
        tz,
        since,
        until,
        complete,
        currency,
        tuple(rows),
        _grouped(rows, lambda r: r.channel),
        _grouped(rows, lambda r: r.provider),
        totals(rows),
        deposits=cash,
    )


# -- who used the cards -----------------------------------------------------------------


@dataclass(frozen=True)
class OwnerRow:
    name: str  # a person, a project, "unknown" or "unassigned"
    users: tuple[str, ...]  # the node users counted here
    busy: Decimal  # card-hours
    yuan: Decimal
    nodes: tuple[str, ...]
    currency: str = "CNY"  # of the leases whose busy hours these are


@dataclass(frozen=True)
class Attribution:
    by: str  # "user" or "project"
    rows: tuple[OwnerRow, ...]
    busy: Decimal
    yuan: Decimal  # the sum over rows of all currencies: see the rows for each currency
    # The leases' cost (storage left out) that no user's busy hour carried: leases that
    # sat idle all month, busy hours whose owner the history does not hold.
    unattributed: Decimal
    outside_leases: Decimal  # busy card-hours on nodes when no lease paid for them
    # The storage lines' cost, a row of its own: no busy hour carries it. By lease total
    # = the rows' yuan + storage + unattributed.
    storage: Decimal = ZERO


def owner_key(owner: str, by: str, users: Mapping[str, str], projects: Mapping[str, str]) -> str:
    """Where a node user's hours go: its person (--by user) or project (--by project)."""
    if owner == "?":
        return UNKNOWN_OWNER
    person = users.get(owner, owner)
    if by == "user":
        return person
    return projects.get(person) or projects.get(owner) or UNASSIGNED


def attribute(
    report: Report,
    owner_hours: Iterable[OwnerHour],
    by: str,
    users: Mapping[str, str],
    projects: Mapping[str, str],
) -> Attribution:
    """Busy card-hours per person or project, and their yuan: each of a user's busy
    card-hours on a lease's node costs that lease's effective price per busy card-hour."""
    if by not in ("user", "project"):
        raise InputError("by", by, _("must be lease, user or project"))
    # By node id: two nodes of one name (one released) have hours of their own. By name
    # only rows and hours that carry no id (not read from a ledger).
    by_node: dict[int | str, list[LeaseRow]] = {}
    for r in report.rows:
        by_node.setdefault(r.node_id if r.node_id is not None else r.node, []).append(r)
    # Keyed by (person or project, currency): yuan of two currencies are never added.
    busy: dict[tuple[str, str], Decimal] = {}
    yuan: dict[tuple[str, str], Decimal] = {}
    who: dict[tuple[str, str], set[str]] = {}
    where: dict[tuple[str, str], set[str]] = {}
    outside = ZERO
    for oh in owner_hours:
        hours = Decimal(str(oh.busy_card_minutes)) / 60
        t = datetime.fromtimestamp(oh.hour * 3600, UTC)
        on = by_node.get(oh.node_id if oh.node_id is not None else oh.node, ())
        row = next((r for r in on if any(a <= t < b for a, b in r.spans)), None)
        if row is None:
            outside += hours  # no lease paid for the card then: no yuan, not a user's share
            continue
        price = row.usage.price_per_busy_hour if row.usage is not None else None
        key = (owner_key(oh.owner, by, users, projects), row.currency)
        busy[key] = busy.get(key, ZERO) + hours
        yuan[key] = yuan.get(key, ZERO) + (price * hours if price is not None else ZERO)
        who.setdefault(key, set()).add(UNKNOWN_OWNER if oh.owner == "?" else oh.owner)
        where.setdefault(key, set()).add(oh.node)
    rows = tuple(
        OwnerRow(k[0], tuple(sorted(who[k])), busy[k], yuan[k], tuple(sorted(where[k])), k[1])
        for k in sorted(busy, key=lambda k: (k[1], -yuan[k], -busy[k], k[0]))
    )
    total_yuan = sum(yuan.values(), ZERO)
    return Attribution(
        by,
        rows,
        sum(busy.values(), ZERO),
        total_yuan,
        report.total.cost - total_yuan,
        outside,
        report.total.storage,
    )
