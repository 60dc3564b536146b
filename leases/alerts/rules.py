"""Every alert zuka raises, as pure rules: (facts about each node, config, now) -> alerts.

Facts are read elsewhere (leases.alerts.facts); state, acks and snoozes live in the ledger
(leases.alerts.state). A rule reports an alert at one of two levels: RAISE (the condition
crossed its raise threshold) or HOLD (it is between the clear and the raise threshold:
an open alert stays open, a new one is not raised). An alert a rule does not report at
all is cleared. That gap between the thresholds is what keeps alerts from flapping.

A missing reading is unknown, never idle: a rule that judges use draws no verdict from
minutes it has no readings for.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING

from leases.alerts.severity import Severity
from leases.config import AlertsConfig
from leases.core import fields
from leases.core.errors import InputError
from leases.core.models import (
    BillingType,
    ExpiryAction,
    Lease,
    Node,
    NodeHealth,
    NodeState,
    NodeStatus,
    RefundState,
    StoppedBilling,
)
from leases.core.textsafe import visible
from leases.money import billing, periods
from leases.money.renewals import BillingNow
from leases.offboard import status as offboard_status
from leases.telemetry.history import NodeMinute

if TYPE_CHECKING:
    from leases.offboard.evidence import Progress

# Underuse clears only when use rises this far above the threshold (50 % raises, 55 % clears).
UNDERUSE_CLEAR_MARGIN = 0.05
# A temperature alert clears this many degrees below the threshold.
TEMPERATURE_CLEAR_C = 5.0
# A starved alert clears when the window's mean utilisation rises this far above the line.
STARVED_CLEAR_PCT = 10.0
# A starved window whose utilisation never reached this did no work at all (0 %): an idle
# process holding the GPUs, not a job waiting for data.
IDLE_HELD_PCT = 1.0
# Share of a window's minutes that must have readings before use is judged over it.
COVERAGE = 0.9
# Readings older than this say nothing about the node now (no collector runs).
FRESH = timedelta(minutes=10)
# Underuse is not judged on less than this much paid time (a lease that just started).
UNDERUSE_MIN_SPAN = timedelta(days=1)
HOURLY_TYPES = (BillingType.HOURLY, BillingType.PER_SECOND, BillingType.CARD_HOUR)
UNDERUSE_TYPES = (BillingType.MONTHLY, BillingType.CONTRACT)
# Health of a gap that means "we cannot reach it" rather than "it answers badly".
_UNREACHABLE = {NodeHealth.UNREACHABLE, NodeHealth.TIMEOUT}


class AlertKind(StrEnum):
    LEASE_ENDING = "lease_ending"
    UNDERUSED = "underused"
    FORGOTTEN = "forgotten"
    STARVED = "starved"
    RELEASE_SOON = "release_soon"
    DEPOSIT = "deposit_not_refunded"
    AUTORENEW = "autorenew_soon"
    HOURLY_AFTER_END = "hourly_after_end"  # a prepaid lease past its end, billed by the hour
    UNREACHABLE = "unreachable"
    STOPPED_QUESTION = "stopped_question"  # unread for hours: was it stopped? record it
    LOGIN_FAILED = "login_failed"  # it answers but refuses our login: not unreachable
    HOSTKEY = "hostkey_changed"
    TEMPERATURE = "temperature"
    ECC = "ecc_errors"
    # A rule that could not be evaluated on a node (a row it cannot read): said as an
    # alert of its own, so that one bad row silences only that rule on that node.
    UNEVALUATED = "cannot_evaluate"
    # A ledger row changed behind zuka's back (leases.ledger.rowaudit): figures and deletions
    # that rest on it are refused until somebody checks it.
    EDITED = "edited_outside_zuka"


class Level(StrEnum):
    RAISE = "raise"
    HOLD = "hold"


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    severity: Severity
    node: str  # the name it had when raised (display only: names are reused)
    node_id: int | None
    lease_id: int | None
    lease_start: datetime | None
    key: str  # what tells apart alerts of one kind on one node and lease (a GPU, say)
    message: str  # plain words, with the yuan involved
    action: str  # what to do about it
    yuan: Decimal | None = None  # the amount, in `currency`
    level: Level = Level.RAISE
    currency: str = "CNY"  # of the lease the amount is from

    @property
    def identity(self) -> tuple[str, int | None, int | None, str]:
        return (self.kind.value, self.node_id, self.lease_id, self.key)


@dataclass(frozen=True)
class Gap:
    """An open stretch without readings (a poll_gap row)."""

    start: datetime
    health: NodeHealth
    detail: str


@dataclass(frozen=True)
class NodeFacts:
    """What the rules know of one node (live or archived) at `now`."""

    node: Node
    leases: tuple[Lease, ...] = ()  # this node's leases, by start
    billed: BillingNow | None = None  # the lease billing now and its renewal chain
    usage: billing.CardHours | None = None  # the prepaid lease's use over the window
    usage_since: datetime | None = None
    peak_busy_cards: int | None = None  # most cards busy in any hour of the window
    latest: NodeStatus | None = None
    gap: Gap | None = None
    # The trailing minute roll-ups the forgotten and starved rules look at, oldest first.
    minutes: tuple[NodeMinute, ...] = field(default=())
    # When every minute held is idle: where that idle stretch began before them, read
    # from hour roll-ups (None: not before the first minute held, or unknown).
    idle_from: datetime | None = None
    # Where its offboarding stands (evidence.progress; None: never planned).
    offboard: Progress | None = None
    # The node's recorded stops (leases.ledger.stops), applied by the lease's stopped_billing.
    stops: tuple[billing.Stop, ...] = ()
    # Facts that could not be read for it (alertfacts.gather): (rule, why, fix), rule
    # a name of node_alerts' rules or EVERY_RULE; such a rule is not run but said as a
    # "cannot evaluate" alert (a missing fact is never taken for "nothing to say").
    unread: tuple[tuple[str, str, str], ...] = ()


def yuan(amount: Decimal, currency: str) -> str:
    """¥1,234.56, USD 1,234.56: an amount in its lease's currency, as reports print it."""
    from leases.money.reportformat import money  # here: the report is not needed to evaluate

    return money(billing.fen(amount), currency)


def unit_price(amount: Decimal, currency: str) -> str:
    """A price per hour as recorded (¥3.3333, not ¥3.33: hourly prices go to 4 places)."""
    from leases.money.reportformat import symbol

    if amount == billing.fen(amount):
        return yuan(amount, currency)
    return f"{symbol(currency)}{amount.normalize():,f}"


def _days(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400
    if days >= 2:
        return f"{int(days)} days"  # whole days: 62.6 days after an end is 62, not 63
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{delta.total_seconds() / 60:.0f} minutes"
    shown = f"{hours:.1f}".removesuffix(".0")  # 1.5 hours, not 2
    return f"{shown} hour{'' if shown == '1' else 's'}"


def _alert(
    facts: NodeFacts,
    kind: AlertKind,
    severity: Severity,
    message: str,
    action: str,
    *,
    lease: Lease | None = None,
    key: str = "",
    amount: Decimal | None = None,
    level: Level = Level.RAISE,
) -> Alert:
    return Alert(
        kind,
        severity,
        facts.node.name,
        facts.node.id,
        lease.id if lease else None,
        lease.start if lease else None,
        key,
        message,
        action,
        None if amount is None else billing.fen(amount),
        level,
        lease.currency if lease else "CNY",
    )


def evaluate(facts: Sequence[NodeFacts], config: AlertsConfig, now: datetime) -> list[Alert]:
    """Every alert that holds at `now`, node by node, in a stable order."""
    out: list[Alert] = []
    for f in facts:
        out.extend(node_alerts(f, config, now))
    return out


EVERY_RULE = "every rule"
UNDERUSE_RULE = "underuse"
MINUTE_RULES = ("forgotten instance", "starved")
Rule = Callable[["NodeFacts", AlertsConfig, datetime], Iterator[Alert]]


def node_alerts(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    """One node's alerts, rule by rule: a rule that fails on this node's rows becomes a
    "cannot evaluate" alert of its own, and every other rule (and node) still speaks."""
    unread = {rule: (why, fix) for rule, why, fix in f.unread}
    if EVERY_RULE in unread:
        # Its facts could not be read at all: no rule may take a missing fact for "none".
        yield _unevaluated(f, EVERY_RULE, *unread[EVERY_RULE])
        return
    released = f.node.state is NodeState.RELEASED
    for rule in RULES:
        if released and not rule.archived:
            continue
        if rule.name in unread:
            yield _unevaluated(f, rule.key, *unread[rule.name])
            continue
        try:
            found = list(rule.run(f, config, now))
        except Exception as exc:  # any failure is the rule's on this node, not the fleet's
            yield _unevaluated(f, rule.key, *_failure(f, exc))
            continue
        yield from found


def _failure(f: NodeFacts, exc: Exception) -> tuple[str, str]:
    """Why a rule failed on a node's rows, and what fixes it."""
    name = visible(f.node.name)
    if isinstance(exc, InputError) and exc.field == "cards_billed":
        lease = next((le for le in reversed(f.leases) if le.bills_node_gpus), None)
        if lease is not None:
            start = fields.shown(lease.start, lease.billing_tz)
            command = f"zuka lease edit {shlex.quote(f.node.name)} --start {shlex.quote(start)}"
            return (
                f"its card_hour lease from {start} does not say how many cards it pays for"
                " and the node has no GPU count",
                f"{visible(command)} --cards N",
            )
    if isinstance(exc, InputError):
        return (
            visible(f"{exc.field}: {exc.reason}", 300),
            f"correct it in the ledger (zuka lease list {name}; zuka node show {name})",
        )
    return (
        visible(f"{type(exc).__name__}: {exc}", 300),
        "a fault in zuka: report it with this message; the other rules still run",
    )


def _unevaluated(f: NodeFacts, what: str, why: str, fix: str) -> Alert:
    return _alert(
        f,
        AlertKind.UNEVALUATED,
        Severity.WARNING,
        f"cannot evaluate {visible(f.node.name)} ({what}): {why} — fix: {fix}",
        fix,
        key=what,  # one alert a rule: it clears when that rule runs again
    )


# -- money and dates ------------------------------------------------------------------------


def _renews_itself(lease: Lease) -> bool:
    return lease.auto_renew or lease.on_expiry is ExpiryAction.RENEWS


def _lease_end(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    if b is None or b.paid_until is None:
        return
    last = b.chain[-1]
    if _renews_itself(last):
        return  # the autorenew rule speaks for it
    end = b.paid_until
    left = end - now
    own = last.notice_days
    notices = sorted({own, *(d for d in config.lease_end_notice_days if d < own)} if own
                     else set(config.lease_end_notice_days), reverse=True)  # fmt: skip
    if not notices or left <= timedelta(0) or left > timedelta(days=notices[0]):
        return
    name = visible(f.node.name)
    said = offboard_status.phrase(f.offboard)
    p = f.offboard
    if p is not None and p.finished:
        state, action = (
            said,
            f"nothing left before the end; a day later: zuka offboard {name} --recheck",
        )
    elif p is not None and p.stopped:
        state, action = said, f"see why and go on: zuka offboard {name} (or o on the fleet)"
    elif p is not None:
        state = said
        action = f"finish offboarding before the end: zuka offboard {name} (or o on the fleet)"
    elif f.node.state is NodeState.OFFBOARDING:
        state, action = "offboarding has started", "finish offboarding before the end"
    else:
        state = "offboarding has NOT started"
        action = (
            f"copy data off and start offboarding (zuka offboard {name}; by hand: zuka node"
            f" edit {name} --state offboarding), or renew the lease"
        )
    after = ""
    if last.on_expiry is ExpiryAction.HOURLY and last.hourly_price is not None:
        after = (
            f"; after it the provider bills {unit_price(last.hourly_price, last.currency)} an hour"
        )
    elif last.on_expiry is ExpiryAction.HOURLY:
        after = "; after it the provider bills by the hour"
    severity = Severity.CRITICAL if left <= timedelta(days=notices[-1]) else Severity.WARNING
    if p is not None and p.finished:
        severity = Severity.INFO  # the lab left nothing behind: the end is only a date now
    yield _alert(
        f,
        AlertKind.LEASE_ENDING,
        severity,
        f"{name}: the {last.billing_type.value} lease ends {end:%Y-%m-%d %H:%M %Z} "
        f"(in {_days(left)}); {state}{after}",
        action,
        lease=last,
        # One alert per notice stage: each stage is announced once.
        key=f"{min(d for d in notices if left <= timedelta(days=d))}d",
    )


def _autorenew(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    if b is None or b.paid_until is None:
        return
    last = b.chain[-1]
    if not _renews_itself(last) or last.end is None:
        return
    # The end of the period paid for now (renewals go on past the lease's own end).
    charge = b.paid_until - timedelta(days=last.renew_charge_days or 0)
    if not (charge - timedelta(days=config.autorenew_notice_days) <= now < charge):
        return
    # A period's price is the machine's (what `zuka cost` charges); only card-hours are
    # priced per card, and those never renew.
    price = last.unit_price * (
        (last.cards_billed or 1) if last.billing_type is BillingType.CARD_HOUR else 1
    )
    yield _alert(
        f,
        AlertKind.AUTORENEW,
        Severity.WARNING,
        f"{visible(f.node.name)}: the {last.billing_type.value} lease renews itself; the "
        f"provider charges about {yuan(price, last.currency)} a period on {charge:%Y-%m-%d} (in "
        f"{_days(charge - now)}), before the period paid for ends {b.paid_until:%Y-%m-%d}",
        "turn auto-renew off at the provider before the charge if the node is not needed",
        lease=last,
        amount=price,
    )


def _hourly_after_end(f: NodeFacts, now: datetime) -> Iterator[Alert]:
    """A prepaid lease past its end that the provider now bills by the hour (on_expiry
    hourly): the yuan a day it costs until it is released or renewed."""
    b = f.billed
    if b is None or not b.hourly_after_end or b.lease.end is None:
        return
    lease, name = b.lease, visible(f.node.name)
    assert lease.end is not None
    end = lease.end.astimezone(periods.zone(lease))
    price = lease.hourly_price
    rate = (
        f"{unit_price(price, lease.currency)} an hour, {yuan(price * 24, lease.currency)} a day"
        if price is not None
        else "a price not recorded (give --hourly-price)"
    )
    yield _alert(
        f,
        AlertKind.HOURLY_AFTER_END,
        Severity.WARNING,
        f"{name}: the {lease.billing_type.value} lease ended {end:%Y-%m-%d %H:%M %Z} and the"
        f" provider now bills it by the hour: {rate}",
        f"release it at the provider and record it (zuka lease end {name}), or renew it"
        f" (zuka lease renew {name} --until DATE)",
        lease=lease,
        amount=None if price is None else price * 24,
    )


def _deposits(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    open_ = b.chain if b else ()
    for lease in f.leases:
        if not lease.deposit or lease.deposit_refund not in (RefundState.NONE, RefundState.PENDING):
            continue
        if b is not None and b.bills and any(le.id == lease.id for le in open_):
            # Its chain still bills: past its own end, it renews itself (auto-renew) or
            # the provider bills it by the hour (on_expiry hourly); nothing was handed back.
            continue
        ended = lease.ended_at or lease.end
        if ended is None or any(le.start >= ended for le in open_ if le is not lease):
            continue  # still running, or renewed: the deposit carries over
        if now - ended < timedelta(days=config.deposit_refund_days):
            continue
        yield _alert(
            f,
            AlertKind.DEPOSIT,
            Severity.WARNING,
            f"{visible(f.node.name)}: deposit {yuan(lease.deposit, lease.currency)} not refunded "
            f"{_days(now - ended)} after the lease ended {ended:%Y-%m-%d}",
            # The lease by its start: without --start `lease edit` picks the lease billing
            # now, and an ended lease bills no more.
            "ask the provider for the refund, then record it: "
            + visible(
                f"zuka lease edit {shlex.quote(f.node.name)} --start"
                f" {shlex.quote(fields.shown(lease.start, lease.billing_tz))}"
                " --deposit-refund refunded"
            ),
            lease=lease,
            amount=lease.deposit,
        )


# -- use ----------------------------------------------------------------------------------


def _underuse(f: NodeFacts, config: AlertsConfig) -> Iterator[Alert]:
    b, u = f.billed, f.usage
    if b is None or u is None or b.lease.billing_type not in UNDERUSE_TYPES or not u.paid:
        return
    if not _term_runs(b):
        return  # over (ended, lapsed, billing by the hour past its end): nothing to renew
    cards = billing.cards_of(b.lease, f.node.gpu_count or None)
    if u.paid < Decimal(UNDERUSE_MIN_SPAN.total_seconds() / 3600) * cards:
        return
    # Unknown card-hours count as used: no idle verdict from hours without readings.
    share = float((u.busy + u.unknown) / u.paid)
    if share >= config.underuse_threshold + UNDERUSE_CLEAR_MARGIN:
        return
    level = Level.RAISE if share < config.underuse_threshold else Level.HOLD
    lease = b.lease
    advice = _renewal_advice(lease, u, cards, f.peak_busy_cards, share)
    renewal = next((le for le in b.chain if le.start > lease.start), None)
    if renewal is not None:
        # Already renewed: the advice is for that renewal, before it starts.
        start = fields.shown(renewal.start, renewal.billing_tz)
        advice = (
            f"A renewal from {start} is already recorded; before it starts, "
            + advice.removeprefix("At renewal: ")
            + f" (change it: zuka lease edit {visible(f.node.name)} --start '{start}' ...)"
        )
    days = u.paid / cards / 24
    yield _alert(
        f,
        AlertKind.UNDERUSED,
        Severity.WARNING,
        f"{visible(f.node.name)}: {cards} cards busy {share:.0%} of the paid card-hours over "
        f"the last {days:.0f} days ({u.busy:.0f} of {u.paid:.0f} busy, {u.unknown:.0f} "
        f"unknown); {yuan(u.idle_yuan, lease.currency)} of {yuan(u.cost, lease.currency)} paid"
        " for idle cards",
        advice,
        lease=lease,
        amount=u.idle_yuan,
        level=level,
    )


def _term_runs(b: BillingNow) -> bool:
    """Whether the prepaid term billing now still runs at b.at: started, not ended, and
    paid for beyond now (an auto-renewing lease past its end runs in its renewal period).
    Past it, advice "at renewal" has nothing to act on: the idle-node rules speak then."""
    if not b.bills or b.at is None:
        return False
    if b.lease.ended_at is not None and b.lease.ended_at <= b.at:
        return False
    paid = b.paid_until
    return paid is None or paid > b.at


def _renewal_advice(
    lease: Lease, u: billing.CardHours, cards: int, peak: int | None, share: float
) -> str:
    said = []
    if share < 0.1:
        said.append("release it at the end (or early, if the refund rule allows)")
    elif peak is not None and 0 < peak < cards:
        said.append(f"renew with {peak} cards instead of {cards} (at most {peak} were busy)")
    verdict = billing.lease_verdict(lease, u, cards=cards)
    if verdict is not None:
        from leases.money.reportformat import verdict_text

        said.append(verdict_text(verdict, lease.currency))
        if verdict.monthly_saves < 0:
            said.append("rent by the hour")
    elif not said:
        said.append("rent by the hour unless use rises")
    return "At renewal: " + "; ".join(said)


def all_idle(m: NodeMinute) -> bool | None:
    """True when every GPU of the minute was idle; None when any was unknown."""
    verdicts = [g.busy for g in m.gpus]
    if not verdicts or None in verdicts:
        return None
    return not any(verdicts)


def _idle_since(
    minutes: Sequence[NodeMinute], now: datetime, hours: float, before: datetime | None = None
) -> datetime | None:
    """When the trailing run of all-idle minutes began, if it covers the last `hours`
    with readings for at least COVERAGE of its minutes; else None. `before`: where the
    idle stretch began when it began before the first minute held (NodeFacts.idle_from)."""
    hi = int(now.timestamp()) // 60
    lo = hi - int(hours * 60)
    known = 0
    start = None
    for m in reversed(minutes):
        if m.minute >= hi:
            continue
        idle = all_idle(m)
        if idle is not True:
            break
        start = m.minute
        if m.minute >= lo:
            known += 1
    if start is None or start > lo or known < COVERAGE * (hi - lo):
        return None
    since = datetime.fromtimestamp(start * 60, now.tzinfo)
    if before is not None and minutes and start == minutes[0].minute:
        since = min(since, before)
    return since


_MINUTE = timedelta(minutes=1)


def _known_idle(
    minutes: Sequence[NodeMinute], since: datetime, now: datetime
) -> list[tuple[datetime, datetime]]:
    """The spans of [since, now) known idle: runs of minutes held (all idle from `since`
    on: _idle_since), the stretch before the first minute held (NodeFacts.idle_from, read
    from idle hours), and the minute now running after a last idle minute."""
    hi = int(now.timestamp()) // 60
    lo = since.timestamp() / 60
    held = [m.minute for m in minutes if lo <= m.minute < hi]
    spans: list[tuple[int, int]] = []
    for m in held:
        if spans and spans[-1][1] == m:
            spans[-1] = (spans[-1][0], m + 1)
        else:
            spans.append((m, m + 1))
    out = [
        (datetime.fromtimestamp(a * 60, now.tzinfo), datetime.fromtimestamp(z * 60, now.tzinfo))
        for a, z in spans
    ]
    if out and since < out[0][0] and minutes and minutes[0].minute == spans[0][0]:
        out[0] = (since, out[0][1])  # idle before the first minute held (hour roll-ups)
    if out and spans[-1][1] == hi:
        out[-1] = (out[-1][0], now)
    return out


def _forgotten(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    if b is None or b.lease.billing_type not in HOURLY_TYPES or b.lease.start > now:
        return
    since = _idle_since(f.minutes, now, config.forgotten_idle_hours, f.idle_from)
    if since is None:
        return
    lease = b.lease
    since = since.astimezone(periods.zone(lease))  # shown in the lease's billing zone
    # The lease's price (times its cards) over the minutes known idle since then: a gap
    # without readings inside the stretch is unknown, never idle yuan.
    spans = _known_idle(f.minutes, since, now)
    spent = sum(
        (
            billing.accrued(lease, max(a, lease.start), z, stops=f.stops,
                            cards=f.node.gpu_count or None)
            for a, z in spans
            if z > lease.start
        ),
        Decimal(0),
    )  # fmt: skip
    unknown = (now - since) - sum((z - a for a, z in spans), timedelta(0))
    gaps = f", {_days(unknown)} of it without readings, not counted" if unknown >= _MINUTE else ""
    yield _alert(
        f,
        AlertKind.FORGOTTEN,
        Severity.WARNING,
        f"{visible(f.node.name)}: every GPU idle since {since:%Y-%m-%d %H:%M %Z} "
        f"({_days(now - since)}{gaps}), billed by the hour: {yuan(spent, lease.currency)} spent"
        " on it while idle",
        "stop or release the instance if nobody needs it",
        lease=lease,
        amount=spent,
    )


def _starved(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    r = f.latest
    if r is None or r.checked is None or r.health is not NodeHealth.OK:
        return
    if now - r.checked > FRESH or not r.processes:
        return
    held = {p.gpu_uuid for p in r.processes}
    gpus = {s.index for s in r.samples if s.uuid in held} or {s.index for s in r.samples}
    hi = int(now.timestamp()) // 60
    lo = hi - config.starved_minutes
    utils: list[float] = []
    seen = 0
    for m in f.minutes:
        if not lo <= m.minute < hi:
            continue
        values = [g.util_mean for g in m.gpus if g.index in gpus]
        if not values or None in values:
            continue
        seen += 1
        utils.append(max(v for v in values if v is not None))
    if seen < COVERAGE * config.starved_minutes:
        return  # not enough readings to say
    if max(utils) < config.starved_util:
        level = Level.RAISE
    elif sum(utils) / len(utils) < config.starved_util + STARVED_CLEAR_PCT:
        level = Level.HOLD
    else:
        return
    mean = sum(utils) / len(utils)
    name, span = visible(f.node.name), config.starved_minutes
    # The words say what the figures show: "stayed below" only when it did (RAISE); a
    # held alert gives its mean against the line it clears at.
    if level is Level.RAISE:
        shown = (
            f"utilisation stayed below {config.starved_util:.0f} % for {span} minutes"
            f" (mean {mean:.0f} %, at most {max(utils):.0f} %)"
        )
    else:
        shown = (
            f"utilisation averaged {mean:.0f} % over the last {span} minutes (it clears above"
            f" {config.starved_util + STARVED_CLEAR_PCT:.0f} %)"
        )
    if max(utils) < IDLE_HELD_PCT:
        # No kernel ran at all: nothing is waiting for data; a process holds the GPUs idle.
        said = (
            f"{name}: GPU processes hold {len(gpus)} GPUs but did no work: {shown}; a"
            " forgotten notebook or a hung job, not a slow one"
        )
        action = (
            f"find whose process it is (zuka node show {name}) and end it if nobody needs it;"
            " a hung job: check its logs (NCCL, a deadlock)"
        )
    else:
        said = (
            f"{name}: GPU processes run on {len(gpus)} GPUs but {shown}: data loading or"
            " communication is the bottleneck"
        )
        action = (
            "raise batch size or DataLoader workers (num_workers, pin_memory), or check the "
            "network between nodes"
        )
    yield _alert(f, AlertKind.STARVED, Severity.WARNING, said, action, level=level)


# -- reachability and readings -------------------------------------------------------------


def _gap_rules(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    g = f.gap
    if g is None:
        yield from _release_soon(f, None, config, now)  # a stop recorded is enough
        return
    name = visible(f.node.name)
    down = now - g.start
    late = down >= timedelta(minutes=config.unreachable_minutes)
    if g.health is NodeHealth.AUTH_FAILED and late:
        # It answers, and refuses our login: the console says nothing about that.
        yield _alert(
            f,
            AlertKind.LOGIN_FAILED,
            Severity.WARNING,
            f"{name}: it answers but refuses zuka's login, no readings for {_days(down)} "
            f"({visible(g.detail, 200)})",
            f"check the user and key zuka logs in with (zuka node show {name}; zuka node edit"
            f" {name} --ssh ...), or whether the provider reset the instance's keys",
        )
    elif g.health is not NodeHealth.HOSTKEY_CHANGED and late:
        yield _alert(
            f,
            AlertKind.UNREACHABLE,
            Severity.WARNING,
            f"{name}: no readings for {_days(down)} ({g.health.value.replace('_', ' ')}: "
            f"{visible(g.detail, 200)})",
            "check the node at the provider's console (stopped? network? driver?)",
        )
    yield from _stopped_question(f, g, config, now)
    yield from _release_soon(f, g, config, now)


def _release_soon(
    f: NodeFacts, g: Gap | None, config: AlertsConfig, now: datetime
) -> Iterator[Alert]:
    """A platform that releases (and wipes) a node stopped for N days: counted from the
    stop recorded (`zuka lease stop`, or the cloud's own state), else from when the node
    stopped answering, whichever came first: the collector's first failed poll may be
    days after the stop."""
    lease = f.billed.lease if f.billed else None
    if lease is None or lease.release_after_stopped_days is None:
        return
    recorded = [lo for lo, hi in f.stops if lo <= now and (hi is None or hi > now)]
    unread = [g.start] if g is not None and g.health in _UNREACHABLE else []
    if not recorded and not unread:
        return
    since = min(recorded + unread)
    release = since + timedelta(days=lease.release_after_stopped_days)
    if now < release - timedelta(days=config.release_notice_days):
        return
    # In the lab's zone (the lease's billing zone), as every other alert: times are
    # stored in UTC.
    tz = periods.zone(lease)
    gone, release = since.astimezone(tz), release.astimezone(tz)
    how = "stopped (recorded)" if since in recorded else "stopped or unreachable"
    yield _alert(
        f,
        AlertKind.RELEASE_SOON,
        Severity.CRITICAL,
        f"{visible(f.node.name)}: {how} since {gone:%Y-%m-%d %H:%M %Z}; the platform "
        f"releases it after {lease.release_after_stopped_days} days stopped, about "
        f"{release:%Y-%m-%d %H:%M %Z}, and wipes its disks",
        "start the instance (or copy its data off) before then",
        lease=lease,
    )


def _stopped_question(f: NodeFacts, g: Gap, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    """A node unreachable for hours whose lease bills less while stopped: was it stopped?
    zuka never takes missing readings for a stop (the node may run and bill), so it asks,
    with the command that records it. Keyed by the gap's start: one alert a gap (open
    while the gap lasts, cleared when readings come back), never one a poll."""
    lease = f.billed.lease if f.billed else None
    if (
        lease is None
        or lease.stopped_billing is StoppedBilling.FULL
        or g.health not in _UNREACHABLE
    ):
        return
    if now - g.start < timedelta(hours=config.stopped_question_hours):
        return
    if any(hi is None or hi > g.start for lo, hi in f.stops if lo <= now):
        return  # a stop is recorded over the gap: nothing to ask
    when = fields.shown(g.start, lease.billing_tz)
    name = visible(f.node.name)
    command = f"zuka lease stop {shlex.quote(f.node.name)} --at {shlex.quote(when)}"
    yield _alert(
        f,
        AlertKind.STOPPED_QUESTION,
        Severity.WARNING,
        f"{name}: no readings since {when} ({_days(now - g.start)}); was it stopped? Its lease"
        f" bills {lease.stopped_billing.value.replace('_', ' ')} while stopped, and zuka bills"
        " it as running until a stop is recorded",
        f"if it was stopped, record it: {visible(command)} (and `zuka lease resume"
        f" {visible(shlex.quote(f.node.name))}` once it runs again)",
        lease=lease,
        key=g.start.astimezone(UTC).isoformat(),
    )


def _readings(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    r = f.latest
    if r is None:
        return
    name = visible(f.node.name)
    if r.health is NodeHealth.HOSTKEY_CHANGED:
        yield _alert(
            f,
            AlertKind.HOSTKEY,
            Severity.CRITICAL,
            f"{name}: host key changed, connection refused ({visible(r.fingerprint or '?')})",
            "ask the provider why (reinstall? another machine?); only if satisfied, remove "
            "the old key from known_hosts",
        )
    # A reading that is not fresh (or a node not read now) says nothing new: it neither
    # raises an alert nor clears one (HOLD keeps an open one open, with its last figure).
    at = r.checked or now  # (a stored status was always checked)
    fresh = r.health is NodeHealth.OK and now - at <= FRESH
    when = "" if fresh else f" when last read, {_days(now - at)} ago"
    for s in r.samples:
        if s.temp_c is not None and s.temp_c >= config.temperature_c - TEMPERATURE_CLEAR_C:
            yield _alert(
                f,
                AlertKind.TEMPERATURE,
                Severity.CRITICAL
                if s.temp_c >= config.temperature_c + TEMPERATURE_CLEAR_C
                else Severity.WARNING,
                f"{name}: GPU {s.index} at {s.temp_c:.0f} °C{when} (alert at "
                f"{config.temperature_c:.0f} °C)",
                "ask the provider to check cooling; the card throttles and may fail",
                key=f"gpu{s.index}",
                level=Level.RAISE if fresh and s.temp_c >= config.temperature_c else Level.HOLD,
            )
        if s.ecc_uncorrected:
            yield _alert(
                f,
                AlertKind.ECC,
                Severity.CRITICAL,
                f"{name}: GPU {s.index} reports {s.ecc_uncorrected} uncorrected ECC errors{when}",
                "ask the provider to reset or replace the card; results on it are suspect",
                key=f"gpu{s.index}",
                level=Level.RAISE if fresh else Level.HOLD,
            )


# -- the rules, in the order node_alerts runs them -----------------------------------------


def _hourly_rule(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    return _hourly_after_end(f, now)


def _underuse_rule(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    return _underuse(f, config)


@dataclass(frozen=True)
class RuleSpec:
    """One rule: its name (in "cannot evaluate NODE (the NAME rule)"), what it runs, the
    kinds it raises (while it cannot be evaluated on a node, its alerts there stay as they
    were, never cleared for want of a judgement), and whether it still runs on an archived
    node (read no more: only its money is open)."""

    name: str
    run: Rule
    kinds: tuple[AlertKind, ...]
    archived: bool = False

    @property
    def key(self) -> str:
        """Its "cannot evaluate" alert's key."""
        return f"the {self.name} rule"


RULES = (
    RuleSpec("deposit", _deposits, (AlertKind.DEPOSIT,), archived=True),
    RuleSpec("lease end", _lease_end, (AlertKind.LEASE_ENDING,)),
    RuleSpec("auto-renew", _autorenew, (AlertKind.AUTORENEW,)),
    RuleSpec("hourly after end", _hourly_rule, (AlertKind.HOURLY_AFTER_END,)),
    RuleSpec(UNDERUSE_RULE, _underuse_rule, (AlertKind.UNDERUSED,)),
    RuleSpec(MINUTE_RULES[0], _forgotten, (AlertKind.FORGOTTEN,)),
    RuleSpec(MINUTE_RULES[1], _starved, (AlertKind.STARVED,)),
    RuleSpec("no readings", _gap_rules, (AlertKind.UNREACHABLE, AlertKind.LOGIN_FAILED,
                                         AlertKind.STOPPED_QUESTION, AlertKind.RELEASE_SOON)),
    RuleSpec("readings", _readings, (AlertKind.HOSTKEY, AlertKind.TEMPERATURE, AlertKind.ECC)),
)  # fmt: skip
_KINDS_OF = {r.key: r.kinds for r in RULES} | {EVERY_RULE: tuple(k for r in RULES for k in r.kinds)}


def unjudged(alerts: Sequence[Alert]) -> set[tuple[int | None, str]]:
    """(node id, kind) of every alert no rule judged this time: those of the rules a
    "cannot evaluate" alert names (all of them for EVERY_RULE)."""
    return {
        (a.node_id, kind.value)
        for a in alerts
        if a.kind is AlertKind.UNEVALUATED
        for kind in _KINDS_OF.get(a.key, ())
    }
