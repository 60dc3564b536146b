"""A month of a provider's bill against zuka's charges, pure.

Each bill line is matched to a lease by its resource id, compared case-sensitively once
trimmed: a node's instance_id (`zuka node edit --instance-id`), or a resource's native_id
(a disk, snapshot or EIP of a lease). Only the nodes of the bill's own provider match. A
node's line goes to the lease (a renewal chain counted as one, as the rows are) whose span
overlaps the line's period the most: a daily line from 00:00 matches a lease started at
10:00 that day, a month's line a lease started in the month (a line that is a moment
matches the lease billing then); a resource's line to the lease it belongs to (a storage
line bills after its lease ends too). A line whose resource id matches nothing, or a
node's line overlapping none of its leases, is unmatched: the instance or disk nobody
recorded.
Lines without a resource id (an account's credit, its tax) are the account's, shown apart.

Per report row (a renewal chain, leases.money.report): zuka's figure is the row's cash,
`charged` (what the provider charged in the month, storage lines included); the
provider's is the sum of its matched lines of kind usage, subscription, refund and other,
in the row's currency; credits (vouchers) and discounts are shown apart and never
counted in the difference, nor is tax. A row with a charge and no line is "not on the
bill".

Tolerance: a difference within it agrees. By default the larger of 1.00 (a yuan: a
provider rounds each charge) and 1 % of zuka's figure; an amount given (`5`) is that
amount alone, a percent (`2%`) that share alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease, Node, Resource
from leases.money.report import LeaseRow, node_chains
from leases.money.units import ZERO

CHARGE_KINDS = frozenset({"usage", "subscription", "refund", "other"})
APART_KINDS = frozenset({"credit", "discount"})
DEFAULT_ABS = Decimal("1.00")
DEFAULT_PCT = Decimal("0.01")


@dataclass(frozen=True)
class Tolerance:
    amount: Decimal | None = None
    share: Decimal | None = None

    def limit(self, charged: Decimal) -> Decimal:
        """How far a figure may differ from zuka's `charged` and still agree."""
        if self.amount is None and self.share is None:
            return max(DEFAULT_ABS, abs(charged) * DEFAULT_PCT)
        return max(self.amount or ZERO, abs(charged) * (self.share or ZERO))

    def allows(self, difference: Decimal, charged: Decimal) -> bool:
        return abs(difference) <= self.limit(charged)

    def said(self) -> str:
        if self.amount is None and self.share is None:
            return _("1.00 or 1 %, whichever larger")
        if self.share is not None:
            return f"{self.share * 100:f}".rstrip("0").rstrip(".") + " %"
        return f"{self.amount}"


# The widest tolerance taken: beyond it every bill would agree.
MAX_AMOUNT = Decimal(10_000)
MAX_SHARE = Decimal("0.2")


def tolerance(value: str | None, field_name: str = "tolerance") -> Tolerance:
    """'1%' (a share of zuka's figure), '0.5' (an amount), None or '' (the default)."""
    text = (value or "").strip()
    if not text:
        return Tolerance()
    if text.endswith(("%", "％")):
        share = fields.number(field_name, text[:-1]) / 100
        if not ZERO <= share <= MAX_SHARE:
            raise InputError(
                field_name,
                text,
                _(
                    "must be a percent from 0 to {most:.0f}: a wider one would let a bill that is"
                    " wrong agree"
                ).format(most=MAX_SHARE * 100),
            )
        return Tolerance(share=share)
    amount = fields.number(field_name, text)
    if amount < 0:
        raise InputError(field_name, text, _("must not be negative (0.50 or 1%)"))
    if amount > MAX_AMOUNT:
        raise InputError(
            field_name,
            text,
            _("must be at most {most:,}: a wider one would let a bill that is wrong agree").format(
                most=MAX_AMOUNT
            ),
        )
    return Tolerance(amount=amount)


@dataclass(frozen=True)
class BillLine:
    """A stored bill line as the reconciliation needs it."""

    bill_id: int
    line_no: int
    provider: str
    period_start: datetime
    resource_id: str
    product: str
    kind: str
    amount: Decimal
    currency: str
    period_end: datetime | None = None  # None, or the start: the line is a moment


@dataclass(frozen=True)
class RowCheck:
    """One report row (a renewal chain) against its bill lines."""

    node: str
    node_id: int | None
    start: datetime
    provider: str
    currency: str
    zuka: Decimal  # the row's cash (LeaseRow.charged)
    billed: Decimal  # its charge lines on the bill
    apart: Decimal  # its credits and discounts (negative), not in the difference
    tax: Decimal
    lines: int
    ok: bool
    others: tuple[str, ...] = ()  # lines in another currency: "USD 12.5"
    allowed: Decimal = ZERO  # the tolerance as an amount: |difference| up to it agrees

    @property
    def difference(self) -> Decimal:
        return self.billed - self.zuka

    @property
    def state(self) -> str:
        if self.ok:
            return N_("agrees")
        return N_("not on the bill") if self.lines == 0 else N_("differs")


@dataclass(frozen=True)
class Unmatched:
    """The lines of one resource id that match nothing in the ledger."""

    provider: str
    resource_id: str
    product: str
    currency: str
    amount: Decimal  # its charge lines (usage, subscription, refund, other)
    lines: int
    why: str
    apart: Decimal = ZERO  # its credits and discounts


@dataclass(frozen=True)
class Reconciliation:
    month: str
    providers: tuple[str, ...]  # those with lines in the month
    rows: tuple[RowCheck, ...]
    unmatched: tuple[Unmatched, ...]
    # The account's lines (no resource id): (provider, kind, currency) -> amount
    account: Mapping[tuple[str, str, str], Decimal] = field(default_factory=dict)
    tolerance: Tolerance = field(default_factory=Tolerance)

    @property
    def differing(self) -> tuple[RowCheck, ...]:
        return tuple(r for r in self.rows if not r.ok)

    @property
    def agrees(self) -> bool:
        return not self.differing and not self.unmatched


def _overlap(le: Lease, ln: BillLine) -> timedelta | None:
    """How long the lease's span and the line's period share; None when they share
    nothing. A line that is a moment shares a zero length with the lease billing then."""
    stop = le.ended_at or le.end
    start, end = ln.period_start, ln.period_end or ln.period_start
    if end <= start:
        covers = le.start <= start and (stop is None or start < stop)
        return timedelta(0) if covers else None
    shared = (end if stop is None else min(end, stop)) - max(start, le.start)
    return shared if shared > timedelta(0) else None


def reconcile(
    month: str,
    lines: Iterable[BillLine],
    rows: Sequence[LeaseRow],
    *,
    leases: Sequence[Lease],
    nodes: Sequence[Node],
    resources: Sequence[tuple[str, datetime, Resource]],
    tol: Tolerance,
) -> Reconciliation:
    """`lines`: the month's lines of the providers reconciled; `rows`: the month's report
    rows (leases.money.report.build_report)."""
    lines = list(lines)
    providers = tuple(sorted({ln.provider for ln in lines}))
    node_by_id = {n.id: n for n in nodes if n.id is not None}
    by_instance: dict[tuple[str, str], Node] = {}
    for n in sorted(nodes, key=lambda n: n.state == "released"):
        if n.instance_id.strip() and n.provider:
            by_instance.setdefault((n.provider, n.instance_id.strip()), n)
    lease_by_id = {le.id: le for le in leases if le.id is not None}
    by_native: dict[tuple[str, str], Lease] = {}
    for _name, _start, res in resources:
        le = lease_by_id.get(res.lease_id)
        node = node_by_id.get(le.node_id) if le is not None and le.node_id is not None else None
        if le is not None and node is not None and node.provider and res.native_id.strip():
            by_native.setdefault((node.provider, res.native_id.strip()), le)
    node_leases: dict[int, list[Lease]] = {}
    for le in leases:
        if le.node_id is not None:
            node_leases.setdefault(le.node_id, []).append(le)
    chain_of: dict[int, tuple[int | None, datetime]] = {}
    for chain in node_chains(leases):
        for le in chain:
            if le.id is not None:
                chain_of[le.id] = (chain[0].node_id, chain[0].start)
    row_of = {(r.node_id, r.start): r for r in rows}
    matched: dict[tuple[int | None, datetime], list[BillLine]] = {}
    missing: dict[tuple[str, str], list[tuple[BillLine, str]]] = {}
    account: dict[tuple[str, str, str], Decimal] = {}
    for ln in lines:
        rid = ln.resource_id.strip()
        if not rid:
            key = (ln.provider, ln.kind, ln.currency)
            account[key] = account.get(key, ZERO) + ln.amount
            continue
        lease: Lease | None = by_native.get((ln.provider, rid))
        why = _("no node or resource of this provider has this id")
        if lease is None:
            node = by_instance.get((ln.provider, rid))
            if node is not None and node.id is not None:
                lease = _most_overlap(node_leases.get(node.id, []), ln, chain_of)
                why = _("node {node} has no lease then").format(node=node.name)
        if lease is None or lease.id not in chain_of:
            missing.setdefault((ln.provider, rid), []).append((ln, why))
            continue
        matched.setdefault(chain_of[lease.id], []).append(ln)
    checks = [_check(row_of.get(k), k, got, node_by_id, tol) for k, got in matched.items()]
    checks += [
        _check(r, (r.node_id, r.start), [], node_by_id, tol)
        for r in rows
        if (r.node_id, r.start) not in matched and r.provider in providers and r.charged
    ]
    checks.sort(key=lambda c: (c.provider, c.node, c.start))
    unmatched = [
        Unmatched(
            prov,
            rid,
            got[0][0].product,
            got[0][0].currency,
            sum((ln.amount for ln, _why in got if ln.kind in CHARGE_KINDS), ZERO),
            len(got),
            got[0][1],
            sum((ln.amount for ln, _why in got if ln.kind in APART_KINDS), ZERO),
        )
        for (prov, rid), got in sorted(missing.items())
    ]
    return Reconciliation(month, providers, tuple(checks), tuple(unmatched), account, tol)


def _most_overlap(
    leases: Sequence[Lease], ln: BillLine, chain_of: Mapping[int, tuple[int | None, datetime]]
) -> Lease | None:
    """Of the node's leases, one of the chain sharing the most of the line's period (the
    earliest chain on a tie); None when none overlaps it."""
    shared: dict[tuple[int | None, datetime], timedelta] = {}
    first: dict[tuple[int | None, datetime], Lease] = {}
    for le in sorted(leases, key=lambda le: le.start):
        got = _overlap(le, ln)
        if got is None or le.id is None or le.id not in chain_of:
            continue
        key = chain_of[le.id]
        shared[key] = shared.get(key, timedelta(0)) + got
        first.setdefault(key, le)
    if not shared:
        return None
    best = max(sorted(shared, key=lambda k: k[1]), key=lambda k: shared[k])
    return first[best]


def _check(
    row: LeaseRow | None,
    key: tuple[int | None, datetime],
    got: Sequence[BillLine],
    node_by_id: Mapping[int, Node],
    tol: Tolerance,
) -> RowCheck:
    node = node_by_id.get(key[0]) if key[0] is not None else None
    currency = row.currency if row is not None else (got[0].currency if got else "CNY")
    zuka = row.charged if row is not None else ZERO
    billed = apart = tax = ZERO
    others: dict[str, Decimal] = {}
    for ln in got:
        if ln.currency != currency:
            others[ln.currency] = others.get(ln.currency, ZERO) + ln.amount
        elif ln.kind in APART_KINDS:
            apart += ln.amount
        elif ln.kind == "tax":
            tax += ln.amount
        else:
            billed += ln.amount
    # A line in another currency than the lease's is a charge zuka does not predict: the
    # row cannot agree (it is shown beside it, never added).
    ok = bool(got) and tol.allows(billed - zuka, zuka) and not others
    return RowCheck(
        node=row.node if row is not None else (node.name if node is not None else "?"),
        node_id=key[0],
        start=key[1],
        provider=row.provider if row is not None else (got[0].provider if got else "-"),
        currency=currency,
        zuka=zuka,
        billed=billed,
        apart=apart,
        tax=tax,
        lines=len(got),
        ok=ok,
        others=tuple(f"{c} {a}" for c, a in sorted(others.items())),
        allowed=tol.limit(zuka),
    )
