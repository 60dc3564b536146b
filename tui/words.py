"""Words for a screen, shared by the command line and the dashboard: a cell's text, a lease
time, what bills now, an audit entry's change. Pure functions of what they are given; no
Textual, no command line."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from leases.core.auditentry import AuditEntry
from leases.core.host import HostStats
from leases.core.textsafe import visible
from leases.ledger import books
from leases.ledger.books import BOOKS
from leases.money import renewals
from leases.money.renewals import BillingNow


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return visible(",".join(str(v) for v in value)) or "-"
    return visible(value)


def when(at: datetime | None) -> str | None:
    """A lease time as the tables print it, in the lease's billing zone (--lease-start
    takes it back)."""
    return at.strftime("%Y-%m-%d %H:%M") if at else None


def day(at: datetime, tz: str | None = None) -> str:
    """A time of the audit log as a sentence says it, in the lab's zone tz (the config's
    billing.tz; None: this machine's), its name after it."""
    return at.astimezone(ZoneInfo(tz) if tz else None).strftime("%Y-%m-%d %H:%M %Z")


def clock(at: datetime, tz: str, *, seconds: bool = False) -> str:
    """A time as a table a person reads prints it: in the lab's one zone tz (the config's
    billing.tz, as the dashboard's audit tab and alerts show it), the zone named once in
    a header (zone_header), not on every row. JSON keeps ISO 8601 with the offset."""
    return at.astimezone(ZoneInfo(tz)).strftime(
        "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    )


def zone_header(tz: str, at: datetime) -> str:
    """The header naming the zone times are printed in: `times in CST (UTC+8)`."""
    here = at.astimezone(ZoneInfo(tz))
    minutes = int((here.utcoffset() or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    offset = f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")
    name = here.strftime("%Z")
    return (
        f"times in {name} ({offset})" if name and name[0].isalpha() else f"times in {offset} ({tz})"
    )


def billing_line(now: BillingNow | None) -> str:
    if now is None:
        return "bills now: no lease"
    le = now.lease
    if not now.started and now.at is not None:
        return (
            f"bills now: no lease; the lease from {when(le.start)} ({le.billing_type.value}"
            f" {le.unit_price} {le.currency}) {renewals.starts_in(le, now.at)}"
        )
    span = f"{when(le.start)} to {when(le.end) or 'open end'}"
    if now.lapsed:
        return (
            f"bills now: no lease; the {le.billing_type.value} lease from {span} ended at its"
            f" end, not recorded as ended: run zuka lease end {le.node}"
            f" --at {shlex.quote(when(le.end) or '')}"
        )
    if now.hourly_after_end:
        price = f"{le.hourly_price} {le.currency}" if le.hourly_price is not None else "?"
        return (
            f"bills now: hourly {price} an hour, past its end: the"
            f" {le.billing_type.value} lease from {span} falls back to hourly"
        )
    line = f"bills now: {le.billing_type.value} {le.unit_price} {le.currency}, {span}"
    if now.paid_until is None:
        return line
    renewed = len(now.chain) - 1 - now.chain.index(le)
    after = f" (renewed {renewed} time{'s' if renewed > 1 else ''} after it)" if renewed else ""
    return f"{line}; paid until {when(now.paid_until)}{after}"


def _summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    if before is None:
        name = (after or {}).get("name") or (after or {}).get("native_id")
        return f"added {name}" if name else "added"
    if after is None:
        return "removed"
    changed = [k for k in after if before.get(k) != after.get(k)]
    return "; ".join(f"{k}: {cell(before.get(k))} -> {cell(after[k])}" for k in changed)


def _counted(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A deleted bill's bundle holds its lines: their count as its record has it."""
    lines = rec.get("lines")
    return {"line_count": len(lines)} if isinstance(lines, list) else {}


def change_text(e: AuditEntry) -> str:
    """An entry's change; for a lease, which lease (its start as `lease list` prints it);
    for offboarding evidence, the plan, the step and its state (`zuka offboard --report`
    shows the rest)."""
    if e.entity == "offboard":
        said = e.after or {}
        step = f" {said['step']}" if said.get("step") else ""
        state = f": {said['state']}" if said.get("state") else ""
        return f"plan {said.get('plan')}{step}{state}"
    if e.entity == "process":  # a GPU process stopped (leases.app.processes)
        said = e.after or {}
        cmdline = str(said.get("cmdline") or "").strip()
        text = f"pid {said.get('pid')} of {said.get('user')}: {said.get('outcome')}"
        return visible(f"{text}: {cmdline}" if cmdline else text, 200)
    if e.entity == "hostkey":  # a node's host key trusted (leases.app.trust)
        said = e.after or {}
        return visible(f"trusted {said.get('fingerprint')} of {said.get('host')}:"
                       f"{said.get('port')}", 200)  # fmt: skip
    if e.entity in BOOKS and (e.before is None or e.after is None):
        rec = e.after if e.after is not None else e.before or {}
        what = books.describe(e.entity, {**rec, **_counted(rec)})
        return visible(f"{'added' if e.before is None else 'removed'} {what}", 200)
    text = _summary(e.before, e.after)
    start = (e.after or e.before or {}).get("start") if e.entity == "lease" else None
    if isinstance(start, str):
        return f"lease from {start[:16].replace('T', ' ')}: {text}"
    return text


def disk_cell(h: HostStats | None) -> str:
    """The fleet's Disk cell: the fullest data disk (else the root fs), in percent."""
    m = h.fullest_data if h is not None else None
    return "" if m is None else f"{m.used_pct:.0f}%"


def ram_cell(h: HostStats | None) -> str:
    pct = h.mem_used_pct if h is not None else None
    return "" if pct is None else f"{pct:.0f}%"
