"""Reading what the alert rules (leases.alerts) judge: ledger facts, history figures and
the latest readings of every node, in a few reads.

Cheap enough to run every minute beside the collector: per-hour sums for the underuse
window, minute roll-ups only for the nodes a minute rule can apply to.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

from leases.alerts import HOURLY_TYPES, UNDERUSE_TYPES, Gap, NodeFacts, Reading
from leases.config import AlertsConfig
from leases.history import NodeMinute, unpack_minute
from leases.ledger import Ledger
from leases.models import GpuProcess, Lease, NodeHealth, NodeState
from leases.renewals import billing_now
from leases.rollups import HistoryStore, sample_from

# A GPU counts towards the peak of busy cards in an hour it was busy at least half of.
PEAK_BUSY_MINUTES = 30
FORGOTTEN_LOOKBACK = 3


def _hour_floor(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def gather(ledger: Ledger, config: AlertsConfig, now: datetime) -> list[NodeFacts]:
    """Facts of every node in the ledger, archived ones too (their deposits)."""
    store = HistoryStore(ledger)
    conn = ledger.conn
    lease_node = dict(conn.execute("SELECT id, node_id FROM leases").fetchall())
    by_node: dict[int, list[Lease]] = {}
    for le in ledger.leases():
        by_node.setdefault(lease_node[le.id], []).append(le)
    gaps = {
        node_id: Gap(datetime.fromisoformat(start), NodeHealth(health), detail)
        for node_id, start, health, detail in conn.execute(
            'SELECT node_id, start, health, detail FROM poll_gap WHERE "end" IS NULL'
        )
    }
    latest = _latest(ledger)
    until = _hour_floor(now)
    window = timedelta(days=config.underuse_window_days)
    out: list[NodeFacts] = []
    for node in ledger.nodes():
        if node.problem or node.id is None:
            continue
        leases = tuple(sorted(by_node.get(node.id, []), key=lambda le: le.start))
        if node.state is NodeState.RELEASED:
            out.append(NodeFacts(node, leases))
            continue
        now_billing = billing_now(leases, now) if leases else None
        facts = NodeFacts(
            node,
            leases,
            now_billing,
            latest=latest.get(node.id),
            gap=gaps.get(node.id),
        )
        lease = now_billing.lease if now_billing else None
        cards = node.gpu_count or None
        if lease is not None and lease.billing_type in UNDERUSE_TYPES:
            since = max(lease.start, until - window)
            if since < until and (lease.cards_billed or cards):
                usage = store.lease_usage(lease, since, until, cards=cards)
                facts = _with(facts, usage=usage, usage_since=since,
                              peak_busy_cards=_peak(store, node.name, since, until))  # fmt: skip
        minutes = _minutes_wanted(facts, config, now)
        if minutes:
            facts = _with(facts, minutes=_minutes(ledger, node.id, now - minutes, now))
        out.append(facts)
    return out


def _with(facts: NodeFacts, **changes: object) -> NodeFacts:
    return replace(facts, **changes)  # type: ignore[arg-type]


def _minutes_wanted(facts: NodeFacts, config: AlertsConfig, now: datetime) -> timedelta | None:
    """How far back the minute rules need minute roll-ups for this node (None: not at all)."""
    wanted = timedelta(0)
    b, r = facts.billed, facts.latest
    if b is not None and b.lease.billing_type in HOURLY_TYPES:
        # Further back than the rule needs, so that "idle since" finds where the idle
        # stretch began (and its yuan) when it began up to FORGOTTEN_LOOKBACK earlier.
        wanted = timedelta(hours=config.forgotten_idle_hours * FORGOTTEN_LOOKBACK)
    if r is not None and r.processes and r.health is NodeHealth.OK:
        wanted = max(wanted, timedelta(minutes=config.starved_minutes + 2))
    return wanted or None


def _minutes(
    ledger: Ledger, node_id: int, since: datetime, until: datetime
) -> tuple[NodeMinute, ...]:
    rows = ledger.conn.execute(
        "SELECT minute, gpus FROM gpu_minute WHERE node_id = ? AND minute >= ? AND minute < ?"
        " ORDER BY minute",
        (node_id, int(since.timestamp()) // 60, int(until.timestamp()) // 60 + 1),
    ).fetchall()
    return tuple(NodeMinute("", m, unpack_minute(b)) for m, b in rows)


def _peak(store: HistoryStore, node: str, since: datetime, until: datetime) -> int | None:
    hours = store.hours(node, since, until)
    if not hours:
        return None
    return max(sum(1 for g in h.gpus if g.busy_minutes >= PEAK_BUSY_MINUTES) for h in hours)


def _latest(ledger: Ledger) -> dict[int, Reading]:
    """The latest reading of every node, by node id (a name may be reused)."""
    out: dict[int, Reading] = {}
    for node_id, at, health, detail, fp, gpus, procs in ledger.conn.execute(
        "SELECT node_id, at, health, detail, fingerprint, gpus, processes FROM node_latest"
    ):
        out[node_id] = Reading(
            datetime.fromisoformat(at),
            NodeHealth(health),
            detail,
            fp,
            tuple(sample_from("", d) for d in json.loads(gpus)),
            tuple(GpuProcess(**{**p, "node": ""}) for p in json.loads(procs)),
        )
    return out
