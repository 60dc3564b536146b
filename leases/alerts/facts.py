"""Reading what the alert rules (leases.alerts.rules) judge: ledger facts, history figures and
the latest readings of every node, in a few reads.

Cheap enough to run every minute beside the collector: per-hour sums for the underuse
window, minute roll-ups only for the nodes a minute rule can apply to.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from leases.alerts.acceptance import RULE as ACCEPTANCE_RULE
from leases.alerts.acceptance import read as accepted
from leases.alerts.alert import AlertKind, Gap, NodeFacts
from leases.alerts.drift import reason
from leases.alerts.rules import EVERY_RULE, MINUTE_RULES, UNDERUSE_RULE
from leases.alerts.said import phrase, say
from leases.alerts.usage import (
    COVERAGE,
    HOURLY_TYPES,
    STARVED_CLEAR_PCT,
    UNDERUSE_CLEAR_MARGIN,
    UNDERUSE_TYPES,
    all_idle,
)
from leases.config.sections import AlertsConfig
from leases.core.errors import InputError
from leases.core.i18n import N_
from leases.core.models import Lease, NodeHealth, NodeState, NodeStatus
from leases.core.textsafe import visible
from leases.ledger.refund_rules import refunds_by_lease
from leases.ledger.store import Ledger
from leases.money.billing import CardHours, Stop
from leases.money.renewals import billing_now
from leases.offboard.evidence import progress
from leases.telemetry.history import NodeMinute, busy_verdict, unpack_minute
from leases.telemetry.rollups import HistoryStore

# A GPU counts towards the peak of busy cards in an hour it was busy at least half of.
PEAK_BUSY_MINUTES = 30
# Minutes read for the forgotten rule beyond its threshold; where the idle stretch began
# before them comes from hour roll-ups (_idle_from).
FORGOTTEN_MARGIN = timedelta(hours=1)


def _hour_floor(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


# (lease, since, until, cards) -> (usage, peak busy cards): whole past hours of history,
# which change once an hour, not at every evaluation (AlertWatch keeps one across them).
# The node's recorded stops are in the key: a stop recorded changes the figures at once.
UsageCache = dict[
    tuple[Lease, datetime, datetime, int | None, tuple[Stop, ...]], tuple[CardHours, int | None]
]


def gather(
    ledger: Ledger, config: AlertsConfig, now: datetime, cache: UsageCache | None = None
) -> list[NodeFacts]:
    """Facts of every node in the ledger, archived ones too (their deposits). With a
    cache, a lease's underuse figures are read from history once per hour, not at every
    evaluation (they cover whole hours before the current one)."""
    store = HistoryStore(ledger)
    conn = ledger.conn
    lease_node = dict(conn.execute("SELECT id, node_id FROM leases").fetchall())
    by_node: dict[int, list[Lease]] = {}
    # A lease row that does not read (edited behind zuka's back) costs its node's rules,
    # never the fleet's: every other lease is read as ever.
    readable, _rest = ledger.readable_leases()
    for le in readable:
        by_node.setdefault(lease_node[le.id], []).append(le)
    unread: dict[int, Exception] = {}
    for lease_id in set(lease_node) - {le.id for le in readable}:
        try:
            ledger.lease_by_id(lease_id)
        except Exception as exc:  # the row's own fault, said on its node
            unread.setdefault(lease_node[lease_id], exc)
    gaps: dict[int, Gap] = {}
    for node_id, start, health, detail in conn.execute(
        'SELECT node_id, start, health, detail FROM poll_gap WHERE "end" IS NULL'
    ):
        try:
            gaps[node_id] = Gap(datetime.fromisoformat(start), NodeHealth(health), detail)
        except (TypeError, ValueError) as exc:  # a row written behind zuka's back
            unread.setdefault(node_id, exc)
    try:
        latest = store.latest_by_id()
    except Exception:
        latest = {}  # one reading that does not read: each node's read on its own
        for (node_id,) in conn.execute("SELECT node_id FROM node_latest"):
            try:
                latest.update(store.latest_by_id([node_id]))
            except Exception as exc:
                unread.setdefault(node_id, exc)
    stops_of: dict[int, list[Stop]] = {}
    try:
        every_stop = ledger.stops()
    except Exception:
        every_stop = []  # one stop row that does not read: each node's read on its own below
        for (node_id,) in conn.execute("SELECT id FROM nodes"):
            try:
                every_stop += ledger.stops(node_ids=[node_id])
            except Exception as exc:
                unread.setdefault(node_id, exc)
    for s in every_stop:
        stops_of.setdefault(s.node_id, []).append(s.span)
    open_kinds: dict[int, set[str]] = {}
    for node_id, kind in conn.execute("SELECT node_id, kind FROM alerts WHERE cleared_at IS NULL"):
        open_kinds.setdefault(node_id, set()).add(kind)
    until = _hour_floor(now)
    if cache is not None:  # figures of earlier hours are not needed again
        for key in [k for k in cache if k[2] != until]:
            del cache[key]
    offboarding = progress(ledger)  # one read: the lease-end alert names where it stands
    refunds = refunds_by_lease(ledger)
    out: list[NodeFacts] = []
    for node in ledger.nodes():
        if node.problem or node.id is None:
            continue
        leases = tuple(sorted(by_node.get(node.id, []), key=lambda le: le.start))
        held = {le.id: tuple(refunds[le.id]) for le in leases if le.id in refunds}
        if node.state is NodeState.RELEASED:
            out.append(NodeFacts(node, leases, refunds=held))
            continue
        # One node's rows that cannot be read cost that node's rules, never the fleet's.
        try:
            if node.id in unread:
                raise unread[node.id]
            now_billing = billing_now(leases, now) if leases else None
        except Exception as exc:
            out.append(NodeFacts(node, leases, unread=((EVERY_RULE, *_why(exc)),)))
            continue
        facts = NodeFacts(
            node,
            leases,
            now_billing,
            latest=latest.get(node.id),
            gap=gaps.get(node.id),
            offboard=offboarding.get(node.id),
            stops=tuple(stops_of.get(node.id, ())),
            refunds=held,
        )
        # History that cannot be read costs only the rules that judge it.
        try:
            facts = _usage_facts(facts, store, config, now, cache)
        except Exception as exc:
            facts = _with(facts, unread=((UNDERUSE_RULE, *_why(exc)),))
        try:
            facts = _minute_facts(facts, ledger, config, now, open_kinds)
        except Exception as exc:
            facts = _with(facts, unread=facts.unread + tuple((r, *_why(exc)) for r in MINUTE_RULES))
        try:
            facts = _with(facts, acceptance=accepted(ledger, facts, config, now))
        except Exception as exc:  # a run changed outside zuka: said, never taken for none
            facts = _with(facts, unread=(*facts.unread, (ACCEPTANCE_RULE, *_why(exc))))
        out.append(facts)
    return out


def _why(exc: Exception) -> tuple[str, str]:
    """(why, fix) for facts of a node that could not be read (leases.alerts.said)."""
    if isinstance(exc, InputError):
        return (
            reason(exc),
            say(
                N_(
                    "`zuka audit verify` names the row and its value; correct it with zuka's own"
                    " commands (zuka lease list, zuka lease edit ...)"
                )
            ),
        )
    return (
        phrase(visible(f"{type(exc).__name__}: {exc}", 300)),
        say(N_("a fault in zuka or a damaged ledger row: report it with this message")),
    )


def _usage_facts(
    facts: NodeFacts,
    store: HistoryStore,
    config: AlertsConfig,
    now: datetime,
    cache: UsageCache | None,
) -> NodeFacts:
    """The underuse rule's figures, from hour roll-ups."""
    node, now_billing = facts.node, facts.billed
    until = _hour_floor(now)
    window = timedelta(days=config.underuse_window_days)
    lease = now_billing.lease if now_billing else None
    cards = node.gpu_count or None
    if lease is not None and lease.billing_type in UNDERUSE_TYPES:
        since = max(lease.start, until - window)
        if since < until and (lease.cards_billed or cards):
            key = (lease, since, until, cards, facts.stops)
            hit = cache.get(key) if cache is not None else None
            if hit is None:
                usage = store.lease_usage(lease, since, until, stops=facts.stops, cards=cards)
                peak = None
                # The peak (unpacking every hour) only where the underuse rule may speak.
                if usage.paid and (usage.busy + usage.unknown) / usage.paid < Decimal(
                    str(config.underuse_threshold + UNDERUSE_CLEAR_MARGIN)
                ):
                    peak = _peak(store, node.name, since, until)
                hit = (usage, peak)
                if cache is not None:
                    cache[key] = hit
            facts = _with(facts, usage=hit[0], usage_since=since)
            if hit[1] is not None:
                facts = _with(facts, peak_busy_cards=hit[1])
    return facts


def _minute_facts(
    facts: NodeFacts,
    ledger: Ledger,
    config: AlertsConfig,
    now: datetime,
    open_kinds: dict[int, set[str]],
) -> NodeFacts:
    """The minute rules' minutes, where a rule may hold."""
    node = facts.node
    assert node.id is not None
    minutes = _minutes_wanted(facts, config, now, open_kinds.get(node.id, set()))
    if minutes:
        held = _minutes(ledger, node.id, now - minutes, now)
        facts = _with(facts, minutes=held, idle_from=_idle_from(ledger, node.id, held, now))
    return facts


def _with(facts: NodeFacts, **changes: object) -> NodeFacts:
    return replace(facts, **changes)  # type: ignore[arg-type]


def _idle_now(r: NodeStatus) -> bool:
    return bool(r.samples) and all(
        busy_verdict(s.util_gpu, s.mem_used_mib, s.power_w, s.power_limit_w) is False
        for s in r.samples
    )


def _low_now(r: NodeStatus, config: AlertsConfig) -> bool:
    return any(
        s.util_gpu is not None and s.util_gpu < config.starved_util + STARVED_CLEAR_PCT
        for s in r.samples
    )


def _minutes_wanted(
    facts: NodeFacts, config: AlertsConfig, now: datetime, open_kinds: set[str]
) -> timedelta | None:
    """How far back the minute rules need minute roll-ups for this node (None: not at all).

    Only where the latest reading (or an open alert) says a rule may hold: a node busy now
    is neither forgotten nor starved, and most of a fleet is read no further.
    """
    wanted = timedelta(0)
    b, r = facts.billed, facts.latest
    ok = r is not None and r.health is NodeHealth.OK
    forgotten = AlertKind.FORGOTTEN.value in open_kinds or (ok and r is not None and _idle_now(r))
    if b is not None and b.lease.billing_type in HOURLY_TYPES and forgotten:
        wanted = timedelta(hours=config.forgotten_idle_hours) + FORGOTTEN_MARGIN
    starved = AlertKind.STARVED.value in open_kinds or (
        ok and r is not None and _low_now(r, config)
    )
    if r is not None and r.processes and ok and starved:
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


def _idle_from(
    ledger: Ledger, node_id: int, minutes: tuple[NodeMinute, ...], now: datetime
) -> datetime | None:
    """When every minute held (before now's) is idle: where that idle stretch began before
    the first of them. Walks back minute by minute to the start of the first minute's
    hour; from there through whole idle hours (no busy card-minute, readings for COVERAGE
    of the hour), then the minutes of the hour before. A minute without a reading ends
    the walk (unknown is never idle). None when the minutes held are not all idle or the
    stretch begins with them."""
    hi = int(now.timestamp()) // 60
    held = [m for m in minutes if m.minute < hi]
    if not held or any(all_idle(m) is not True for m in held):
        return None
    first = held[0].minute
    start = _idle_minutes_back(ledger, node_id, first, (first // 60) * 60)
    if start % 60 == 0:  # the whole of first's hour before it was idle: earlier hours
        full = COVERAGE * 60 * len(held[-1].gpus)
        expect = start // 60 - 1
        for hour, busy, known in ledger.conn.execute(
            "SELECT hour, busy_card_minutes, known_card_minutes FROM gpu_hour"
            " WHERE node_id = ? AND hour <= ? ORDER BY hour DESC",
            (node_id, expect),
        ):
            if hour != expect or busy or known < full:
                break
            start, expect = hour * 60, hour - 1
        start = _idle_minutes_back(ledger, node_id, start, start - 60)
    return datetime.fromtimestamp(start * 60, now.tzinfo) if start < first else None


def _idle_minutes_back(ledger: Ledger, node_id: int, start: int, floor: int) -> int:
    """The earliest minute m in [floor, start] such that every minute in [m, start) has
    an all-idle reading (start itself when the minute before it has none)."""
    for minute, blob in ledger.conn.execute(
        "SELECT minute, gpus FROM gpu_minute WHERE node_id = ? AND minute >= ? AND minute < ?"
        " ORDER BY minute DESC",
        (node_id, floor, start),
    ):
        if minute != start - 1 or all_idle(NodeMinute("", minute, unpack_minute(blob))) is not True:
            break
        start = minute
    return start


def _peak(store: HistoryStore, node: str, since: datetime, until: datetime) -> int | None:
    hours = store.hours(node, since, until)
    if not hours:
        return None
    return max(sum(1 for g in h.gpus if g.busy_minutes >= PEAK_BUSY_MINUTES) for h in hours)
