"""Everything the node screen shows of one node from the ledger, read in one go.

One read (run off the dashboard's event loop, on a connection of its own): the node, its
leases and the chain billing now with its cost (as `zuka node show` computes it), its
resources, its open alerts, its audit log, and one span of its GPU history as a series.
Live readings (the poller's, in memory) are joined by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from leases.alerts import state as alertstate
from leases.alerts.state import StoredAlert
from leases.core.auditentry import AuditEntry
from leases.core.errors import InputError
from leases.core.i18n import N_, _, pgettext
from leases.core.models import Lease, Node, Resource
from leases.ledger.store import Ledger
from leases.money import billing, leasecost, renewals
from leases.money.leasecost import LeaseCost
from leases.money.renewals import BillingNow
from leases.telemetry import series
from leases.telemetry.history import NodeMinute
from leases.telemetry.promtarget import inherit, source_line
from leases.telemetry.rollups import HistoryStore

# Audit entries kept for the screen: the newest; `zuka log NODE` prints them all.
LOG_MAX = 200


@dataclass(frozen=True)
class ChainLease:
    """One lease of the node with what it is charged by now (None: cannot be computed)."""

    lease: Lease
    charged: Decimal | None
    state: str  # "billing now", "renewed", "ended ...", "not started", "cancelled"


@dataclass(frozen=True)
class NodeFacts:
    node: Node
    at: datetime
    leases: tuple[ChainLease, ...]  # by start
    billing: BillingNow | None
    cost: LeaseCost | None
    resources: tuple[tuple[str, datetime, Resource], ...]
    alerts: tuple[StoredAlert, ...]  # open, worst first
    log: tuple[AuditEntry, ...]  # oldest first, the last LOG_MAX
    log_total: int
    life: tuple[datetime, datetime] | None  # the lease chain's start and end (or now)
    series: series.Series | None  # None: the lease's life asked of a node without a lease
    # Where its GPU readings come from, its provider's setting applied (promtarget).
    readings: str = ""


def lease_life(leases: Sequence[Lease], at: datetime) -> tuple[datetime, datetime] | None:
    """The span of the renewal chain billing at `at` (or the latest one): from its first
    lease's start to its end as recorded, or `at` while it runs."""
    now = renewals.billing_now(leases, at)
    if now is not None:
        chain = now.chain
    else:
        chains = renewals.chains(leases)
        if not chains:
            return None
        chain = chains[-1]
    last = chain[-1]
    stop = last.ended_at or (last.end if last.end is not None and last.end < at else None)
    return chain[0].start, min(stop or at, at)


# A lease's state (ChainLease.state: compared in code, so English) in words to show.
STATE_WORDS = {
    "cancelled": N_("cancelled"),
    "not started": N_("not started"),
    "ended at its end (not recorded)": N_("ended at its end (not recorded)"),
    "billing by the hour past its end": N_("billing by the hour past its end"),
    "billing now": N_("billing now"),
    "renewed": N_("renewed"),
    "ended": N_("ended"),
}


def state_word(state: str) -> str:
    """A ChainLease.state in the language in use."""
    if state == "open":  # not yet ended (an alert's "open" is another word)
        return pgettext("lease state", "open")
    word = STATE_WORDS.get(state)
    return _(word) if word else state


def _state(le: Lease, now: BillingNow | None, at: datetime) -> str:
    if renewals.never_billed(le):
        return "cancelled"
    if le.start > at:
        return "not started"
    if now is not None and now.lease.id == le.id:
        if now.lapsed:
            return "ended at its end (not recorded)"
        return "billing by the hour past its end" if now.hourly_after_end else "billing now"
    if now is not None and any(x.id == le.id for x in now.chain[:-1]):
        return "renewed"
    return "ended" if le.ended_at is not None else "open"


def _charged(
    le: Lease, at: datetime, cards: int | None, stops: Sequence[billing.Stop]
) -> Decimal | None:
    try:
        return billing.cost_to_date(le, at, stops=stops, cards=cards, commitment=False)
    except InputError:
        return None


def read(
    ledger: Ledger,
    name: str,
    at: datetime,
    span: series.Span,
    live: Sequence[NodeMinute] = (),
) -> NodeFacts:
    """The facts of the node called `name` now (UnknownNode when there is none)."""
    node = ledger.node(name)
    leases = ledger.leases(node)
    resources = ledger.resources(name)
    now = renewals.billing_now(leases, at)
    held = ledger.stop_spans()
    cost = leasecost.node_cost(node, leases, resources, None, at, stops=held)
    cards = node.gpu_count or None
    chain = tuple(
        ChainLease(le, _charged(le, at, cards, held.get(le.id or 0, ())), _state(le, now, at))
        for le in leases
    )
    alerts = tuple(a for a in alertstate.alerts(ledger, at) if a.node_id == node.id)
    log = ledger.history(name)
    life = lease_life(leases, at)
    return NodeFacts(
        node=node,
        at=at,
        leases=chain,
        billing=now,
        cost=cost,
        resources=tuple(resources),
        alerts=alerts,
        log=tuple(log[-LOG_MAX:]),
        log_total=len(log),
        life=life,
        series=read_series(HistoryStore(ledger), name, at, span, life, live),
        readings=source_line(inherit([node], ledger.readable_providers()[0])[0]),
    )


def read_series(
    store: HistoryStore,
    name: str,
    at: datetime,
    span: series.Span,
    life: tuple[datetime, datetime] | None,
    live: Sequence[NodeMinute] = (),
) -> series.Series | None:
    """One span of the node's history (None: the lease's life of a node without a lease)."""
    if span is series.Span.LEASE and life is None:
        return None
    g = series.grid(span, at, life)
    since, until = g.at(0), g.at(g.count)
    if span.from_minutes:
        minutes = store.minutes(name, since, until)
        # Hours too, where the minutes are gone (series.from_minutes).
        return series.from_minutes(span, g, minutes, live, store.hours(name, since, until))
    return series.from_hours(span, g, store.hours(name, since, until))
