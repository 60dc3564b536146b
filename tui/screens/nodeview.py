"""What the node screen shows, computed without Textual (easy to test): table rows of its
processes, lease chain, resources, alerts and audit log, and its charts' lines.

Every value from a node or the ledger is made visible (leases.core.textsafe) here, once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from leases.alerts.state import StoredAlert
from leases.core import fields
from leases.core.i18n import N_, _
from leases.core.models import NodeStatus
from leases.core.origin import who
from leases.core.textsafe import visible
from leases.core.valuewords import action_word
from leases.fleet.nodefacts import NodeFacts, state_word
from leases.money.amounts import bare, money
from leases.money.leasecost import cost_line
from leases.telemetry import series
from tui.screens.alertwords import kind_words, severity_words
from tui.screens.fleetview import CELL_MAX
from tui.widgets.valuewords import period_words, value_words
from tui.words import billing_line, change_text

NO_ACCEPTANCE = N_("no acceptance check recorded")
# Longest a message (an alert's, a log entry's change) may make one cell.
MESSAGE_MAX = 300

# Marked: shown as _(label) where the tables are made.
PROCESS_COLUMNS = (N_("GPU"), N_("PID"), N_("User"), N_("Process"), N_("Memory"))
# What matters most first: at 80 columns the deposit and contract are a scroll away.
LEASE_COLUMNS = (N_("Start"), N_("End"), N_("Billing"), N_("Price"), N_("Charged"), N_("State"),
                 N_("Deposit"), N_("Contract"))  # fmt: skip
RESOURCE_COLUMNS = (N_("Lease start"), N_("Kind"), N_("ID"), N_("Region"), N_("Price"),
                    N_("Deleted"), N_("Verified"))  # fmt: skip
# Each amount with its currency (its lease's): a node's leases may be in several.
ALERT_COLUMNS = (N_("Severity"), N_("Kind"), N_("Since"), N_("Amount"), N_("Message"))
LOG_COLUMNS = (N_("ID"), N_("When"), N_("Who"), N_("Action"), N_("Change"))


def log_columns(tz: str, at: datetime) -> tuple[str, ...]:
    """The audit tab's columns, its times' zone named as `zuka log` names it ("When (CST)")."""
    zone = at.astimezone(ZoneInfo(tz)).strftime("%Z") or tz
    return tuple(_("When ({zone})").format(zone=zone) if c == "When" else _(c) for c in LOG_COLUMNS)


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
            visible((p.cmdline or "").strip() or p.process_name or "?", CELL_MAX),
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
            else f"{money(le.deposit, le.currency)} ({value_words(le.deposit_refund.value)})"
        )
        out.append(
            (
                _when(le.start, tz),
                _when(le.end, tz),
                value_words(le.billing_type.value),
                money(le.unit_price, le.currency),
                _("unknown") if c.charged is None else money(c.charged, le.currency),
                state_word(c.state) + (f" {_when(le.ended_at, tz)}" if c.state == "ended" else ""),
                deposit,
                visible(le.contract_no, 32) or "-",
            )
        )
    return out


def resource_rows(facts: NodeFacts) -> list[tuple[str, ...]]:
    return [
        (
            fields.shown(start.replace(tzinfo=None)),
            value_words(res.kind.value),
            visible(res.native_id, CELL_MAX),
            visible(res.region, 24) or "-",
            "-" if res.price is None else f"{res.price}/{period_words(res.price_per.value)}",
            "-" if res.deleted_at is None else fields.shown(res.deleted_at.replace(tzinfo=None)),
            "-" if res.verified_at is None else fields.shown(res.verified_at.replace(tzinfo=None)),
        )
        for _, start, res in facts.resources
    ]


def alert_amount(a: StoredAlert) -> str:
    """An alert's amount with its lease's currency ("" for none; a lease no longer in the
    ledger leaves the currency unknown: the bare amount and "?")."""
    if a.yuan is None:
        return ""
    return f"{bare(a.yuan)} ?" if a.currency is None else money(a.yuan, a.currency)


def alert_rows(facts: NodeFacts, tz: str) -> list[tuple[str, ...]]:
    zone = ZoneInfo(tz)
    return [
        (
            severity_words(a.severity.value),
            kind_words(a.kind),
            f"{a.first_seen.astimezone(zone):%m-%d %H:%M}",
            alert_amount(a),
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
            who(e.actor, e.origin),
            visible(action_word(e.action), 24),
            visible(
                _("unreadable entry: {problem}").format(problem=e.problem)
                if e.problem
                else change_text(e),
                MESSAGE_MAX,
            ),
        )
        for e in reversed(facts.log)
    ]


def vram_mismatch(vram_gib: int | None, totals_mib: list[float | None]) -> str | None:
    """What to say when the cards report less memory than the node was leased with (a
    sliced or relabelled card: the demo's matpool-a100-x, 'A100 80GB' reading 24 GiB)."""
    read = [t for t in totals_mib if t]
    if not vram_gib or not read:
        return None
    least = min(read) / 1024
    if least >= vram_gib * 0.9:  # nvidia-smi reports a little under the marketed size
        return None
    return _("cards report {read:.0f} GiB of memory, leased as {leased} GiB").format(
        read=least, leased=vram_gib
    )


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


# Steps of a time axis in hours: whole hours, then whole days.
_TIME_STEPS_H = (1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720, 1440, 2160)


def time_ticks(
    g: series.Grid, ax: series.Axis, tz: str, count: int = 5
) -> tuple[tuple[float, str], ...]:
    """At most `count` ticks on whole local hours or days over the grid, labelled with the
    time in tz (`11-28`, or `11-28 06:00` / `12:00` for steps under a day): a lease's life
    read as dates, not as a count from its start."""
    zone = ZoneInfo(tz)
    left = datetime.fromtimestamp(g.start, zone)
    right = datetime.fromtimestamp(g.end, zone)
    width_h = (g.end - g.start) / 3600
    step_h = next((s for s in _TIME_STEPS_H if width_h / s <= count - 1), _TIME_STEPS_H[-1])
    first = left.replace(minute=0, second=0, microsecond=0)
    if step_h >= 24:
        first = first.replace(hour=0)
        while first < left:
            first += timedelta(days=1)
    else:
        while first < left or first.hour % step_h:
            first += timedelta(hours=1)
    out: list[tuple[float, str]] = []
    t, last_day = first, None
    while t <= right and len(out) < count:
        if step_h >= 24:
            label = t.strftime("%m-%d")
        else:
            label = t.strftime("%H:%M" if t.date() == last_day else "%m-%d %H:%M")
        last_day = t.date()
        out.append((round((t.timestamp() - g.start) / ax.unit_s, 3), label))
        t = (t + timedelta(hours=step_h)).astimezone(zone)
    return tuple(out)


def _chart(
    s: series.Series,
    values: tuple[float | None, ...],
    title: str,
    top: float,
    now: datetime,
    tz: str,
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
        title += " · " + _("mean {mean:.0f} · max {max:.0f}").format(
            mean=sum(known) / len(known), max=max(known)
        )
    gaps = g.count - len(known)
    if gaps and known:
        title += " · " + _("{gaps} of {count} slices unread").format(gaps=gaps, count=g.count)
    elif gaps:
        title += " · " + _("no readings")
    if values and values[-1] is not None and g.at(g.count) > now:
        # The slice holding now is still being read: what it shows is so far.
        title += " · " + _("last slice so far")
    marks = time_ticks(g, ax, tz) if ax.from_start else ticks(left, right)
    return Chart(title, _(ax.label), (left, right), (0.0, high or 1.0), lines, marks)


def charts(
    s: series.Series,
    now: datetime,
    mem_top: float = 0.0,
    power_top: float = 0.0,
    gpus: int = 0,
    tz: str = "UTC",
) -> list[Chart]:
    """Utilisation (0-100 %), memory in use (GiB) and power (W) over the series' span;
    mem_top and power_top: the node's capacity when known, so a chart's top means full.
    gpus: how many GPUs the node has, said in the titles (the charts are the node's whole,
    not one GPU's); tz: the zone a lease's life is dated in."""
    if gpus > 1:
        over = _(" (mean of {count} GPUs)").format(count=gpus)
        total = _(" (all {count} GPUs)").format(count=gpus)
    else:
        over = total = _(" (its 1 GPU)") if gpus else ""
    return [
        _chart(s, s.util, _("utilisation %") + over, 100.0, now, tz),
        _chart(s, s.mem_gib, _("memory GiB") + total, mem_top, now, tz),
        _chart(s, s.power_w, _("power W") + total, power_top, now, tz),
    ]


# The node's GPUs. Marked: shown as _(label) where the table is made.
GPU_COLUMNS = (
    N_("GPU"), N_("Name"), N_("Util"), N_("Memory"), N_("Temp"), N_("Power"), N_("P-state"),
    N_("Procs"),
)  # fmt: skip


def gpu_rows(status: NodeStatus | None, processes_read: bool = True) -> list[tuple[str, ...]]:
    """One row a GPU; Procs is "-" where processes are not read (a node read from
    Prometheus): unknown, never 0."""
    if status is None:
        return []
    procs: dict[str, int] = {}
    for p in status.processes:
        procs[p.gpu_uuid] = procs.get(p.gpu_uuid, 0) + 1

    def num(v: float | None, fmt: str) -> str:
        return "?" if v is None else fmt.format(v)

    return [
        (
            str(s.index),
            # The vendor is the same on every card: without it the table fits 80 columns
            # with its last column ("Procs") whole, at full memory and power.
            visible(s.name, CELL_MAX).removeprefix("NVIDIA "),
            num(s.util_gpu, "{:.0f}%"),
            f"{num(s.mem_used_mib, '{:.0f}')}/{num(s.mem_total_mib, '{:.0f}')} MiB",
            num(s.temp_c, "{:.0f}°C"),
            f"{num(s.power_w, '{:.0f}')}/{num(s.power_limit_w, '{:.0f}')} W",
            visible(s.pstate or "?", 8),
            str(procs.get(s.uuid, 0)) if processes_read else "-",
        )
        for s in status.samples
    ]
