"""The alert rules on a node's health: no readings (unreachable, login refused, stopped?,
about to be released) and what its readings say (host key changed, temperature, ECC)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from leases.alerts.alert import FRESH, Alert, AlertKind, Gap, Level, NodeFacts, make_alert
from leases.alerts.said import call, say
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.i18n import N_
from leases.core.models import NodeHealth, StoppedBilling
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.money import periods

# A temperature alert clears this many degrees below the threshold.
TEMPERATURE_CLEAR_C = 5.0
# Health of a gap that means "we cannot reach it" rather than "it answers badly".
_UNREACHABLE = {NodeHealth.UNREACHABLE, NodeHealth.TIMEOUT}
# Health of a gap whose fix is known and on the node (its words say it): the action is that.
_FIX_ON_NODE = {NodeHealth.NVML_LIBRARY_MISSING, NodeHealth.NVML_PERMISSION}


def gap_rules(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    g = f.gap
    if g is None:
        yield from _release_soon(f, None, config, now)  # a stop recorded is enough
        return
    name = visible(f.node.name)
    down = now - g.start
    late = down >= timedelta(minutes=config.unreachable_minutes)
    if g.health is NodeHealth.AUTH_FAILED and late:
        # It answers, and refuses our login: the console says nothing about that.
        yield make_alert(
            f,
            AlertKind.LOGIN_FAILED,
            Severity.WARNING,
            say(
                N_(
                    "{name}: it answers but refuses zuka's login, no readings for {span} ({detail})"
                ),
                name=name,
                span=call("duration", down.total_seconds()),
                detail=call("detail", visible(g.detail, 200)),
            ),
            say(
                N_(
                    "check the user and key zuka logs in with (zuka node show {name}; zuka node"
                    " edit {name} --ssh ...), or whether the provider reset the instance's keys"
                ),
                name=name,
            ),
        )
    elif g.health is not NodeHealth.HOSTKEY_CHANGED and late:
        yield make_alert(
            f,
            AlertKind.UNREACHABLE,
            Severity.WARNING,
            say(
                N_("{name}: no readings for {span} ({health}: {detail})"),
                name=name,
                span=call("duration", down.total_seconds()),
                health=call("health", g.health.value),
                detail=call("detail", visible(g.detail, 200)),
            ),
            say(N_("on the node: {fix}"), fix=call("reason", g.health.value))
            if g.health in _FIX_ON_NODE
            else say(N_("check the node at the provider's console (stopped? network? driver?)")),
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
    how = say(N_("stopped (recorded)")) if since in recorded else say(N_("stopped or unreachable"))
    yield make_alert(
        f,
        AlertKind.RELEASE_SOON,
        Severity.CRITICAL,
        say(
            N_(
                "{name}: {how} since {since}; the platform releases it after {days} days"
                " stopped, about {release}, and wipes its disks"
            ),
            name=visible(f.node.name),
            how=how,
            since=f"{gone:%Y-%m-%d %H:%M %Z}",
            days=lease.release_after_stopped_days,
            release=f"{release:%Y-%m-%d %H:%M %Z}",
        ),
        say(N_("start the instance (or copy its data off) before then")),
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
    yield make_alert(
        f,
        AlertKind.STOPPED_QUESTION,
        Severity.WARNING,
        say(
            N_(
                "{name}: no readings since {when} ({span}); was it stopped? Its lease bills"
                " {billing} while stopped, and zuka bills it as running until a stop is"
                " recorded"
            ),
            name=name,
            when=when,
            span=call("duration", (now - g.start).total_seconds()),
            billing=call("stopped", lease.stopped_billing.value),
        ),
        say(
            N_(
                "if it was stopped, record it: {command} (and `zuka lease resume {name}` once"
                " it runs again)"
            ),
            command=visible(command),
            name=visible(shlex.quote(f.node.name)),
        ),
        lease=lease,
        key=g.start.astimezone(UTC).isoformat(),
    )


def readings(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    r = f.latest
    if r is None:
        return
    name = visible(f.node.name)
    if r.health is NodeHealth.HOSTKEY_CHANGED:
        yield make_alert(
            f,
            AlertKind.HOSTKEY,
            Severity.CRITICAL,
            say(
                N_("{name}: host key changed, connection refused ({fingerprint})"),
                name=name,
                fingerprint=visible(r.fingerprint or "?"),
            ),
            say(
                N_(
                    "ask the provider why (reinstall? another machine?); only if satisfied,"
                    " remove the old key from known_hosts"
                )
            ),
        )
    # A reading that is not fresh (or a node not read now) says nothing new: it neither
    # raises an alert nor clears one (HOLD keeps an open one open, with its last figure).
    at = r.checked or now  # (a stored status was always checked)
    fresh = r.health is NodeHealth.OK and now - at <= FRESH
    when = (
        ""
        if fresh
        else say(
            N_(" when last read, {span} ago"), span=call("duration", (now - at).total_seconds())
        )
    )
    for s in r.samples:
        if s.temp_c is not None and s.temp_c >= config.temperature_c - TEMPERATURE_CLEAR_C:
            yield make_alert(
                f,
                AlertKind.TEMPERATURE,
                Severity.CRITICAL
                if s.temp_c >= config.temperature_c + TEMPERATURE_CLEAR_C
                else Severity.WARNING,
                say(
                    N_("{name}: GPU {index} at {temp} °C{when} (alert at {limit} °C)"),
                    name=name,
                    index=s.index,
                    temp=f"{s.temp_c:.0f}",
                    when=when,
                    limit=f"{config.temperature_c:.0f}",
                ),
                say(N_("ask the provider to check cooling; the card throttles and may fail")),
                key=f"gpu{s.index}",
                level=Level.RAISE if fresh and s.temp_c >= config.temperature_c else Level.HOLD,
            )
        if s.ecc_uncorrected:
            yield make_alert(
                f,
                AlertKind.ECC,
                Severity.CRITICAL,
                say(
                    N_("{name}: GPU {index} reports {count} uncorrected ECC errors{when}"),
                    name=name,
                    index=s.index,
                    count=s.ecc_uncorrected,
                    when=when,
                ),
                say(N_("ask the provider to reset or replace the card; results on it are suspect")),
                key=f"gpu{s.index}",
                level=Level.RAISE if fresh else Level.HOLD,
            )
