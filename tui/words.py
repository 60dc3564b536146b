"""Words for a screen, shared by the command line and the dashboard: a cell's text, a lease
time, what bills now, an audit entry's change. Pure functions of what they are given; no
Textual, no command line."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from leases.core import valuewords
from leases.core.auditentry import AuditEntry
from leases.core.host import HostStats
from leases.core.i18n import _, ngettext, pgettext
from leases.core.textsafe import visible
from leases.ledger import books
from leases.ledger.books import BOOKS
from leases.money import renewals
from leases.money.amounts import price_words
from leases.money.renewals import BillingNow


def shown(value: Any) -> str:
    """A stored value (an enum's or its text) as a text table shows it in the language in
    use: "monthly" -> "包月" under zh_CN; one without a display word as it is
    (leases.core.valuewords; English shows the value itself, JSON keeps it)."""
    return valuewords.shown(value)


def field_word(key: str) -> str:
    """A node record's key as `node show` labels it in the language in use (English shows
    the key itself, as --json names it)."""
    words = {
        "name": pgettext("field", "name"),
        "provider": pgettext("field", "provider"),
        "ssh_host": pgettext("field", "ssh_host"),
        "ssh_port": pgettext("field", "ssh_port"),
        "ssh_user": pgettext("field", "ssh_user"),
        "ssh_key_path": pgettext("field", "ssh_key_path"),
        "ssh_jump": pgettext("field", "ssh_jump"),
        "ssh_alias": pgettext("field", "ssh_alias"),
        "ssh_tunnels": pgettext("field", "ssh_tunnels"),
        "gpu_model": pgettext("field", "gpu_model"),
        "gpu_count": pgettext("field", "gpu_count"),
        "vram_gib": pgettext("field", "vram_gib"),
        "interconnect": pgettext("field", "interconnect"),
        "nvlinks": pgettext("field", "nvlinks"),
        "ib_gbps": pgettext("field", "ib_gbps"),
        "tags": pgettext("field", "tags"),
        "state": pgettext("field", "state"),
        "local": pgettext("field", "local"),
        "notes": pgettext("field", "notes"),
        "instance_id": pgettext("field", "instance_id"),
        "instance_endpoint": pgettext("field", "instance_endpoint"),
        "reading_source": pgettext("field", "reading_source"),
        "prom_url": pgettext("field", "prom_url"),
        "prom_match": pgettext("field", "prom_match"),
        "prom_token_file": pgettext("field", "prom_token_file"),
    }
    return words.get(key, key)


def schedule_word(value: Any) -> str:
    """A lease's payment schedule as a text table shows it ("monthly" is paid each month,
    not the billing type 包月)."""
    text = str(getattr(value, "value", value))
    words = {
        "upfront": pgettext("schedule", "upfront"),
        "monthly": pgettext("schedule", "monthly"),
        "quarterly": pgettext("schedule", "quarterly"),
    }
    return words.get(text, text)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
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
    if name and name[0].isalpha():
        return _("times in {zone} ({offset})").format(zone=name, offset=offset)
    return _("times in {offset} ({tz})").format(offset=offset, tz=tz)


def billing_line(now: BillingNow | None) -> str:
    if now is None:
        return _("bills now: no lease")
    le = now.lease
    kind = shown(le.billing_type)
    if not now.started and now.at is not None:
        return _("bills now: no lease; the lease from {start} ({billing} {price}) {starts}").format(
            start=when(le.start),
            billing=kind,
            price=price_words(le.unit_price, le.currency),
            starts=renewals.starts_in(le, now.at),
        )
    span = _("{start} to {end}").format(start=when(le.start), end=when(le.end) or _("open end"))
    if now.lapsed:
        return _(
            "bills now: no lease; the {billing} lease from {span} ended at its end, not"
            " recorded as ended: run zuka lease end {node} --at {at}"
        ).format(billing=kind, span=span, node=le.node, at=shlex.quote(when(le.end) or ""))
    if now.hourly_after_end:
        price = price_words(le.hourly_price, le.currency) if le.hourly_price is not None else "?"
        return _(
            "bills now: hourly {price} an hour, past its end: the {billing} lease from {span}"
            " falls back to hourly"
        ).format(price=price, billing=kind, span=span)
    line = _("bills now: {billing} {price}, {span}").format(
        billing=kind, price=price_words(le.unit_price, le.currency), span=span
    )
    if now.paid_until is None:
        return line
    renewed = len(now.chain) - 1 - now.chain.index(le)
    until = when(now.paid_until)
    if renewed:
        return ngettext(
            "{line}; paid until {until} (renewed {n} time after it)",
            "{line}; paid until {until} (renewed {n} times after it)",
            renewed,
        ).format(line=line, until=until, n=renewed)
    return _("{line}; paid until {until}").format(line=line, until=until)


def _summary(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    if before is None:
        name = (after or {}).get("name") or (after or {}).get("native_id")
        return _("added {name}").format(name=name) if name else _("added")
    if after is None:
        return _("removed")
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
        return _("plan {plan}").format(plan=said.get("plan")) + f"{step}{state}"
    if e.entity == "process":  # a GPU process stopped (leases.app.processes)
        said = e.after or {}
        cmdline = str(said.get("cmdline") or "").strip()
        text = _("pid {pid} of {user}: {outcome}").format(
            pid=said.get("pid"), user=said.get("user"), outcome=said.get("outcome")
        )
        return visible(f"{text}: {cmdline}" if cmdline else text, 200)
    if e.entity == "hostkey":  # a node's host key trusted (leases.app.trust)
        said = e.after or {}
        said_text = _("trusted {fingerprint} of {host}:{port}").format(
            fingerprint=said.get("fingerprint"), host=said.get("host"), port=said.get("port")
        )
        return visible(said_text, 200)
    if e.entity in BOOKS and (e.before is None or e.after is None):
        rec = e.after if e.after is not None else e.before or {}
        what = books.describe(e.entity, {**rec, **_counted(rec)})
        done = _("added {what}") if e.before is None else _("removed {what}")
        return visible(done.format(what=what), 200)
    text = _summary(e.before, e.after)
    start = (e.after or e.before or {}).get("start") if e.entity == "lease" else None
    if isinstance(start, str):
        return _("lease from {start}: {change}").format(
            start=start[:16].replace("T", " "), change=text
        )
    return text


def disk_cell(h: HostStats | None) -> str:
    """The fleet's Disk cell: the fullest data disk (else the root fs), in percent."""
    m = h.fullest_data if h is not None else None
    return "" if m is None else f"{m.used_pct:.0f}%"


def ram_cell(h: HostStats | None) -> str:
    pct = h.mem_used_pct if h is not None else None
    return "" if pct is None else f"{pct:.0f}%"
