"""What the node screen shows, computed without Textual (easy to test): table rows of its
processes, lease chain, resources, alerts and audit log, and its charts' lines.

Every value from a node or the ledger is made visible (leases.textsafe) here, once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from leases import fields, series
from leases.leasecost import cost_line
from leases.models import NodeStatus
from leases.nodefacts import NodeFacts
from leases.reportformat import money
from leases.textsafe import visible
from tui.cli_ledger import billing_line, change_text
from tui.fleetview import CELL_MAX

NO_ACCEPTANCE = "no acceptance check recorded"
# Longest a message (an alert's, a log entry's change) may make one cell.
MESSAGE_MAX = 300

PROCESS_COLUMNS = ("GPU", "PID", "User", "Process", "Memory")
# What matters most first: at 80 columns the deposit and contract are a scroll away.
LEASE_COLUMNS = ("Start", "End", "Billing", "Price", "Charged", "State", "Deposit", "Contract")
RESOURCE_COLUMNS = ("Lease start", "Kind", "ID", "Region", "Price", "Deleted", "Verified")
ALERT_COLUMNS = ("Severity", "Kind", "Since", "¥", "Message")
LOG_COLUMNS = ("ID", "When", "Who", "Action", "Change")


def _num(v: float | None, fmt: str) -> str:
    return "?" if v is None else fmt.format(v)


def process_rows(status: NodeStatus | None) -> list[tuple[str, ...]]:
    """The node's compute processes, by GPU then PID; a GPU the samples do not name is '?'."""
    if status is None:
        return []
    index = {s.uuid: s.index for s in status.samples if s.uuid}
    procs = sorted(status.processes, key=lambda p: (index.get(p.gpu_uuid, 1 << 16), p.pid))
    return [
        (
            str(index[p.gpu_uuid]) if p.gpu_uuid in index else "?",
            str(p.pid),
            visible(p.owner or "?", 32),
            visible(p.process_name or "?", CELL_MAX),
            f"{_num(p.used_mib, '{:.0f}')} MiB",
        )
        for p in procs
    ]


def _when(at: datetime | None, tz: str) -> str:
    return "-" if at is None else fields.shown(at, tz)


def lease_rows(facts: NodeFacts) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for c in facts.leases:
        le = c.lease
        tz = le.billing_tz
        deposit = (
            "-"
            if le.deposit is None
            else f"{money(le.deposit, le.currency)} ({le.deposit_refund.value})"
        )
        out.append(
            (
                _when(le.start, tz),
                _when(le.end, tz),
                le.billing_type.value,
                money(le.unit_price, le.currency),
                "unknown" if c.charged is None else money(c.charged, le.currency),
                c.state + (f" {_when(le.ended_at, tz)}" if c.state == "ended" else ""),
                deposit,
                visible(le.contract_no, 32) or "-",
            )
        )
    return out


def resource_rows(facts: NodeFacts) -> list[tuple[str, ...]]:
    return [
        (
            fields.shown(start.replace(tzinfo=None)),
            res.kind.value,
            visible(res.native_id, CELL_MAX),
            visible(res.region, 24) or "-",
            "-" if res.price is None else f"{res.price}/{res.price_per.value}",
            "-" if res.deleted_at is None else fields.shown(res.deleted_at.replace(tzinfo=None)),
            "-" if res.verified_at is None else fields.shown(res.verified_at.replace(tzinfo=None)),
        )
        for _, start, res in facts.resources
    ]


def alert_rows(facts: NodeFacts, tz: str) -> list[tuple[str, ...]]:
    zone = ZoneInfo(tz)
    return [
        (
            a.severity.value,
            a.kind.replace("_", " "),
            f"{a.first_seen.astimezone(zone):%m-%d %H:%M}",
            "" if a.yuan is None else f"{a.yuan:,}",
            visible(a.message, MESSAGE_MAX),
        )
        for a in facts.alerts
    ]


def log_rows(facts: NodeFacts, tz: str) -> list[tuple[str, ...]]:
    """Newest first: the screen is read from the top."""
    zone = ZoneInfo(tz)
    return [
        (
            str(e.id),
            "?" if e.problem and e.at.year == 1 else f"{e.at.astimezone(zone):%Y-%m-%d %H:%M}",
            visible(e.actor, 24),
            visible(e.action, 24),
            visible(f"unreadable entry: {e.problem}" if e.problem else change_text(e), MESSAGE_MAX),
        )
        for e in reversed(facts.log)
    ]


def lease_summary(facts: NodeFacts) -> list[str]:
    """The billing and cost lines, as `zuka node show` words them."""
    lines = [billing_line(facts.billing)]
    if facts.cost is not None:
        lines.append(cost_line(facts.cost))
    return [visible(line, MESSAGE_MAX) for line in lines]


@dataclass(frozen=True)
class Chart:
    """One chart's lines, each a stretch of known slices (a gap between two is not drawn)."""

    title: str
    xlabel: str
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    lines: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]
    ticks: tuple[tuple[float, str], ...]  # x positions and their labels


# Round steps: 1-2-3-5 by powers of ten, and those that suit minutes, hours and days.
_TICK_STEPS = sorted(
    {m * 10**k for k in range(9) for m in (1, 2, 3, 5)} | {6, 12, 15, 90, 120, 180, 360, 720}
)


def ticks(left: float, right: float, count: int = 5) -> tuple[tuple[float, str], ...]:
    """At most `count` ticks on round numbers over [left, right] (0, now, among them
    when it is inside)."""
    width = max(right - left, 1e-9)
    step = next((s for s in _TICK_STEPS if width / s <= count - 1), _TICK_STEPS[-1])
    first, last = math.ceil(left / step), math.floor(right / step)
    return tuple((float(k * step), f"{k * step:d}") for k in range(first, last + 1))


def _chart(
    s: series.Series,
    values: tuple[float | None, ...],
    title: str,
    top: float,
    now: datetime,
) -> Chart:
    ax = series.axis(s.span)
    g = s.grid
    xs = [ax.x(g, i, now) for i in range(g.count)]
    lines = tuple(
        (tuple(xs[a : b + 1]), tuple(v for v in values[a : b + 1] if v is not None))
        for a, b in series.runs(values)
    )
    known = [v for v in values if v is not None]
    high = max([top, *known]) if known else top
    left, right = ax.x(g, 0, now), ax.x(g, g.count, now)
    if known:
        title += f" · mean {sum(known) / len(known):.0f} · max {max(known):.0f}"
    gaps = g.count - len(known)
    if gaps:
        title += f" · {gaps} of {g.count} slices unread" if known else " · no readings"
    return Chart(title, ax.label, (left, right), (0.0, high or 1.0), lines, ticks(left, right))


def charts(
    s: series.Series, now: datetime, mem_top: float = 0.0, power_top: float = 0.0
) -> list[Chart]:
    """Utilisation (0-100 %), memory in use (GiB) and power (W) over the series' span;
    mem_top and power_top: the node's capacity when known, so a chart's top means full."""
    return [
        _chart(s, s.util, "utilisation %", 100.0, now),
        _chart(s, s.mem_gib, "memory GiB", mem_top, now),
        _chart(s, s.power_w, "power W", power_top, now),
    ]
