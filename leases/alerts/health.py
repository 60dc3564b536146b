"""The alert rules on a node's health: no readings (unreachable, login refused, stopped?,
about to be released) and what its readings say (host key changed, temperature, ECC)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from leases.alerts.alert import FRESH, Alert, AlertKind, Gap, Level, NodeFacts, make_alert
from leases.alerts.wording import duration
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.models import NodeHealth, StoppedBilling
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.money import periods
from leases.telemetry.nvsmi import human_reason

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
            f"{name}: it answers but refuses zuka's login, no readings for {duration(down)} "
            f"({visible(g.detail, 200)})",
            f"check the user and key zuka logs in with (zuka node show {name}; zuka node edit"
            f" {name} --ssh ...), or whether the provider reset the instance's keys",
        )
    elif g.health is not NodeHealth.HOSTKEY_CHANGED and late:
        yield make_alert(
            f,
            AlertKind.UNREACHABLE,
            Severity.WARNING,
            f"{name}: no readings for {duration(down)} ({g.health.value.replace('_', ' ')}: "
            f"{visible(g.detail, 200)})",
            f"on the node: {human_reason(g.health)}"
            if g.health in _FIX_ON_NODE
            else "check the node at the provider's console (stopped? network? driver?)",
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
    yield make_alert(
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
    yield make_alert(
        f,
        AlertKind.STOPPED_QUESTION,
        Severity.WARNING,
        f"{name}: no readings since {when} ({duration(now - g.start)}); was it stopped? Its lease"
        f" bills {lease.stopped_billing.value.replace('_', ' ')} while stopped, and zuka bills"
        " it as running until a stop is recorded",
        f"if it was stopped, record it: {visible(command)} (and `zuka lease resume"
        f" {visible(shlex.quote(f.node.name))}` once it runs again)",
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
            f"{name}: host key changed, connection refused ({visible(r.fingerprint or '?')})",
            "ask the provider why (reinstall? another machine?); only if satisfied, remove "
            "the old key from known_hosts",
        )
    # A reading that is not fresh (or a node not read now) says nothing new: it neither
    # raises an alert nor clears one (HOLD keeps an open one open, with its last figure).
    at = r.checked or now  # (a stored status was always checked)
    fresh = r.health is NodeHealth.OK and now - at <= FRESH
    when = "" if fresh else f" when last read, {duration(now - at)} ago"
    for s in r.samples:
        if s.temp_c is not None and s.temp_c >= config.temperature_c - TEMPERATURE_CLEAR_C:
            yield make_alert(
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
            yield make_alert(
                f,
                AlertKind.ECC,
                Severity.CRITICAL,
                f"{name}: GPU {s.index} reports {s.ecc_uncorrected} uncorrected ECC errors{when}",
                "ask the provider to reset or replace the card; results on it are suspect",
                key=f"gpu{s.index}",
                level=Level.RAISE if fresh else Level.HOLD,
            )
