"""What the dashboard shows of each node, computed without Textual (easy to test)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text

from leases.models import GpuSample, Node, NodeHealth
from leases.poller import NodeStatus
from leases.renewals import BillingNow, starts_in
from leases.textsafe import visible

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], width: int = 20, top: float = 100.0) -> str:
    """The last `width` buckets of values as block characters; unknown is a space."""
    if not values:
        return " " * width
    size = max(1, len(values) // width) if len(values) >= width else 1
    buckets: list[float | None] = []
    for i in range(0, len(values), size):
        known = [v for v in values[i : i + size] if v is not None]
        buckets.append(sum(known) / len(known) if known else None)
    buckets = buckets[-width:]
    chars = [
        " " if b is None else BARS[min(len(BARS) - 1, int(b / top * (len(BARS) - 1) + 0.5))]
        for b in buckets
    ]
    return "".join(chars).rjust(width)


# Longest a value from a node or the ledger may make one table cell.
CELL_MAX = 48


def plain(value: object, max_len: int | None = None, *, wrap: bool = False) -> Text:
    """How the dashboard shows any text: controls made visible, never read as markup
    (a `[/]` in a GPU name would otherwise stop the dashboard)."""
    return Text(visible(value, max_len), no_wrap=not wrap, end="")


HEALTH_STYLE = {
    NodeHealth.OK: "green",
    NodeHealth.CONNECTING: "dim",
    NodeHealth.HOSTKEY_CHANGED: "bold red",
    NodeHealth.UNTRUSTED: "yellow",
}


@dataclass(frozen=True)
class FleetRow:
    key: str
    cells: tuple[str, ...]  # already made visible: safe to show, wrapped by plain()


COLUMNS = (
    "Node", "Health", "Alerts", "GPUs", "Util", "Memory", "Power", "Last hour", "Billing", "Ends",
)  # fmt: skip


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def summarize(samples: Sequence[GpuSample]) -> dict[str, Any]:
    """Per-node figures for a table row; None where any GPU's reading is unknown."""
    used = [s.mem_used_mib for s in samples]
    total = [s.mem_total_mib for s in samples]
    power = [s.power_w for s in samples]
    return {
        "gpus": len(samples),
        "util": _mean([s.util_gpu for s in samples]),
        "mem_used_gib": None if None in used else sum(used) / 1024,  # type: ignore[arg-type]
        "mem_total_gib": None if None in total else sum(total) / 1024,  # type: ignore[arg-type]
        "power_w": None if None in power else sum(power),
        "temp_max": max((s.temp_c for s in samples if s.temp_c is not None), default=None),
    }


def fleet_row(
    node: Node,
    status: NodeStatus | None,
    billing: BillingNow | None,
    util_history: Sequence[float | None],
    now: datetime,
    alerts: str = "",
) -> FleetRow:
    """billing: the lease billing now and the end of its renewal chain (leases.renewals),
    shown beside the lease's own end when a renewal follows it. alerts: the marker of its
    open alerts (tui.alerts.alert_marker)."""
    health = status.health if status else NodeHealth.CONNECTING
    samples = status.samples if status and health is NodeHealth.OK else ()
    fig = summarize(samples)
    health_text = health.value.replace("_", " ")
    if status and status.detail.startswith("stale"):
        health_text = "stale"
    elif status and status.detail and health is not NodeHealth.OK:
        health_text += " !"
    gpus = f"{len(samples)}x" if samples else f"({node.gpu_count})"
    used, total = fig["mem_used_gib"], fig["mem_total_gib"]
    mem = f"{used:.0f}/{total:.0f}G" if samples and used is not None and total is not None else "-"
    lease = billing.lease if billing else None
    ends = "-"
    if billing and lease and not billing.started:
        ends = starts_in(lease, now)  # booked, not billing yet
    elif billing and lease and lease.end:
        paid = billing.paid_until or lease.end
        days = (paid - now).total_seconds() / 86400
        ends = _day(lease.end, now)
        if paid != lease.end:
            ends += f" → {_day(paid, now)}"  # renewed: paid for until the chain's end
        ends = f"{ends} ({days:.0f}d)" if days >= 0 else f"{ends} past"
    price = f"{lease.billing_type.value} {lease.unit_price}" if lease else "-"
    return FleetRow(
        node.name,
        (
            visible(node.name, CELL_MAX),
            health_text,
            alerts,
            visible(f"{gpus} {node.gpu_model}".strip(), CELL_MAX),
            "-" if fig["util"] is None else f"{fig['util']:3.0f}%",
            mem,
            "-" if not samples or fig["power_w"] is None else f"{fig['power_w']:.0f}W",
            sparkline(util_history),
            price,
            ends,
        ),
    )


def _day(at: datetime, now: datetime) -> str:
    return f"{at:%m-%d}" if at.year == now.year else f"{at:%Y-%m-%d}"


GPU_COLUMNS = ("GPU", "Name", "Util", "Memory", "Temp", "Power", "P-state", "Procs")


def gpu_rows(status: NodeStatus | None) -> list[tuple[str, ...]]:
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
            visible(s.name, CELL_MAX),
            num(s.util_gpu, "{:.0f}%"),
            f"{num(s.mem_used_mib, '{:.0f}')}/{num(s.mem_total_mib, '{:.0f}')} MiB",
            num(s.temp_c, "{:.0f}°C"),
            f"{num(s.power_w, '{:.0f}')}/{num(s.power_limit_w, '{:.0f}')} W",
            visible(s.pstate or "?", 8),
            str(procs.get(s.uuid, 0)),
        )
        for s in status.samples
    ]
