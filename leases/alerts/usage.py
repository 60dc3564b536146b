"""The alert rules on use: a prepaid node underused (with advice for its renewal), an
hourly node forgotten idle, GPUs starved of work.

A missing reading is unknown, never idle: a rule that judges use draws no verdict from
minutes it has no readings for.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from leases.alerts.alert import FRESH, Alert, AlertKind, Level, NodeFacts, make_alert
from leases.alerts.said import Said, call, joined, say
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.i18n import N_
from leases.core.models import BillingType, Lease, NodeHealth
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.money import billing, periods
from leases.money.renewals import BillingNow
from leases.money.verdict import Verdict
from leases.telemetry.history import NodeMinute

# Underuse clears only when use rises this far above the threshold (50 % raises, 55 % clears).
UNDERUSE_CLEAR_MARGIN = 0.05
# A starved alert clears when the window's mean utilisation rises this far above the line.
STARVED_CLEAR_PCT = 10.0
# A starved window whose utilisation never reached this did no work at all (0 %): an idle
# process holding the GPUs, not a job waiting for data.
IDLE_HELD_PCT = 1.0
# Share of a window's minutes that must have readings before use is judged over it.
COVERAGE = 0.9
# Underuse is not judged on less than this much paid time (a lease that just started).
UNDERUSE_MIN_SPAN = timedelta(days=1)
HOURLY_TYPES = (BillingType.HOURLY, BillingType.PER_SECOND, BillingType.CARD_HOUR)
UNDERUSE_TYPES = (BillingType.MONTHLY, BillingType.CONTRACT)


def underuse(f: NodeFacts, config: AlertsConfig) -> Iterator[Alert]:
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
    steps = _renewal_advice(lease, u, cards, f.peak_busy_cards, share)
    advice = say(N_("At renewal: {advice}"), advice=joined(N_("; "), *steps))
    renewal = next((le for le in b.chain if le.start > lease.start), None)
    if renewal is not None:
        # Already renewed: the advice is for that renewal, before it starts.
        start = fields.shown(renewal.start, renewal.billing_tz)
        advice = say(
            N_(
                "A renewal from {start} is already recorded; before it starts, {advice} (change"
                " it: zuka lease edit {name} --start '{start}' ...)"
            ),
            start=start,
            advice=joined(N_("; "), *steps),
            name=visible(f.node.name),
        )
    days = u.paid / cards / 24
    yield make_alert(
        f,
        AlertKind.UNDERUSED,
        Severity.WARNING,
        say(
            N_(
                "{name}: {cards} cards busy {share} of the paid card-hours over the last {days}"
                " days ({busy} of {paid} busy, {unknown} unknown); {idle} of {cost} paid for"
                " idle cards"
            ),
            name=visible(f.node.name),
            cards=cards,
            share=f"{share:.0%}",
            days=f"{days:.0f}",
            busy=f"{u.busy:.0f}",
            paid=f"{u.paid:.0f}",
            unknown=f"{u.unknown:.0f}",
            idle=call("money", u.idle_yuan, lease.currency),
            cost=call("money", u.cost, lease.currency),
        ),
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
) -> list[Said]:
    said = []
    if share < 0.1:
        said.append(say(N_("release it at the end (or early, if the refund rule allows)")))
    elif peak is not None and 0 < peak < cards:
        said.append(
            say(
                N_("renew with {peak} cards instead of {cards} (at most {peak} were busy)"),
                peak=peak,
                cards=cards,
            )
        )
    verdict = billing.lease_verdict(lease, u, cards=cards)
    if verdict is not None:
        said.append(_verdict(verdict, lease.currency))
        if verdict.monthly_saves < 0:
            said.append(say(N_("rent by the hour")))
    elif not said:
        said.append(say(N_("rent by the hour unless use rises")))
    return said


def _verdict(v: Verdict, currency: str) -> Said:
    """A monthly-against-hourly verdict in words (leases.money.verdict's, said again in
    each language)."""
    if v.monthly_saves >= 0:
        said = say(N_("monthly saves {money}"), money=call("money", v.monthly_saves, currency))
    else:
        said = say(
            N_("hourly would have cost {money} less"),
            money=call("money", -v.monthly_saves, currency),
        )
    if v.refund_known:
        return said
    return say(N_("{verdict} (the provider's early-release refund rule is unknown)"), verdict=said)


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


def forgotten(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
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
    gaps = (
        say(
            N_(", {span} of it without readings, not counted"),
            span=call("duration", unknown.total_seconds()),
        )
        if unknown >= _MINUTE
        else ""
    )
    yield make_alert(
        f,
        AlertKind.FORGOTTEN,
        Severity.WARNING,
        say(
            N_(
                "{name}: every GPU idle since {since} ({span}{gaps}), billed by the hour:"
                " {money} spent on it while idle"
            ),
            name=visible(f.node.name),
            since=f"{since:%Y-%m-%d %H:%M %Z}",
            span=call("duration", (now - since).total_seconds()),
            gaps=gaps,
            money=call("money", spent, lease.currency),
        ),
        say(N_("stop or release the instance if nobody needs it")),
        lease=lease,
        amount=spent,
    )


def starved(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
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
        shown = say(
            N_(
                "utilisation stayed below {line} % for {span} minutes (mean {mean} %, at most"
                " {most} %)"
            ),
            line=f"{config.starved_util:.0f}",
            span=span,
            mean=f"{mean:.0f}",
            most=f"{max(utils):.0f}",
        )
    else:
        shown = say(
            N_(
                "utilisation averaged {mean} % over the last {span} minutes (it clears above"
                " {line} %)"
            ),
            mean=f"{mean:.0f}",
            span=span,
            line=f"{config.starved_util + STARVED_CLEAR_PCT:.0f}",
        )
    if max(utils) < IDLE_HELD_PCT:
        # No kernel ran at all: nothing is waiting for data; a process holds the GPUs idle.
        said = say(
            N_(
                "{name}: GPU processes hold {count} GPUs but did no work: {shown}; a forgotten"
                " notebook or a hung job, not a slow one"
            ),
            name=name,
            count=len(gpus),
            shown=shown,
        )
        action = say(
            N_(
                "find whose process it is (zuka node show {name}) and end it if nobody needs"
                " it; a hung job: check its logs (NCCL, a deadlock)"
            ),
            name=name,
        )
    else:
        said = say(
            N_(
                "{name}: GPU processes run on {count} GPUs but {shown}: data loading or"
                " communication is the bottleneck"
            ),
            name=name,
            count=len(gpus),
            shown=shown,
        )
        action = say(
            N_(
                "raise batch size or DataLoader workers (num_workers, pin_memory), or check the"
                " network between nodes"
            )
        )
    yield make_alert(f, AlertKind.STARVED, Severity.WARNING, said, action, level=level)
