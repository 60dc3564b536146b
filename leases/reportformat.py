"""The money report (leases.report) as Markdown, CSV and JSON.

Markdown is for pasting into a weekly report; every value from the ledger or a node goes
through textsafe.visible and then _md, which escapes Markdown's and HTML's specials, so a
pasted report shows a provider's name or a refund rule as text (never an image, a link or
a tag) and a cell stays a cell. CSV has one header
and cells neutralised against spreadsheet formulas as the export's are. JSON is exact:
Decimals as strings, times in ISO 8601.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from leases.billing import fen
from leases.report import Attribution, LeaseRow, Report, Totals
from leases.textsafe import visible
from leases.transfer import _FORMULA_STARTS

_TENTH = Decimal("0.1")
_HUNDREDTH = Decimal("0.01")


def symbol(currency: str) -> str:
    return "¥" if currency.upper() in ("CNY", "RMB", "JPY") else f"{currency} "


# Markdown's inline specials, backslash-escaped wherever they stand (CommonMark takes a
# backslash before any ASCII punctuation as the character itself); `-`, `+` and `.` only
# matter at the start of a line (a list), and are escaped there.
_MD_ESCAPE = {c: "\\" + c for c in "\\`*_{}[]()#+!|~"}
# HTML's specials as entities, so that no tag or entity from a cell reaches the page.
_MD_ESCAPE |= {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}
_MD_TABLE = str.maketrans(_MD_ESCAPE)
_MD_LIST = re.compile(r"-|\d+[.)]")
_MD_LIST_DIGITS = re.compile(r"^(\d*)")


def _md(value: Any) -> str:
    """A value from the ledger as Markdown text: no image, link, emphasis, code, heading or
    HTML can come out of it, and a pipe keeps a cell a cell."""
    if value in (None, ""):
        return "-"
    text = visible(value).translate(_MD_TABLE)
    if _MD_LIST.match(text):  # "-" or "1." would start a list where a line begins
        text = _MD_LIST_DIGITS.sub(r"\1\\", text, count=1)
    return text


def _money(x: Decimal | None) -> str:
    return "-" if x is None else f"{fen(x):,}"


def _hours(x: Decimal | None, step: Decimal = _TENTH) -> str:
    return "-" if x is None else f"{x.quantize(step):,}"


def _pct(part: Decimal, whole: Decimal) -> str:
    return f"{part * 100 / whole:.0f} %" if whole else "-"


def _day(t: datetime | None, tz: str) -> str:
    from leases import fields

    return "-" if t is None else t.astimezone(fields.timezone(tz, "tz")).strftime("%Y-%m-%d")


def _deposit(amount: Decimal | None, state: str) -> str:
    return "-" if amount is None else f"{_money(amount)} {state}"


def _window(report: Report) -> str:
    from leases import fields

    tz = fields.timezone(report.tz, "tz")
    lo = report.since.astimezone(tz).strftime("%Y-%m-%d")
    hi = report.until.astimezone(tz).strftime("%Y-%m-%d %H:%M")
    cut = "" if report.complete else f"; the month is not over: figures to {hi}"
    return f"month {report.month} in the {visible(report.tz)} time zone{cut} (from {lo})"


# -- Markdown ---------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


_USE_HEADERS = (
    "Paid card-h",
    "Busy card-h",
    "Idle card-h",
    "Unknown card-h",
    "Idle ¥",
    "¥/busy card-h",
)


def _use_cells(t: Totals) -> list[str]:
    return [
        _hours(t.paid),
        _hours(t.busy),
        _hours(t.idle),
        _hours(t.unknown),
        _money(t.idle_yuan),
        _money(t.price_per_busy_hour),
    ]


def _row_use(r: LeaseRow) -> list[str]:
    u = r.usage
    if u is None:
        return ["-"] * 6
    return [
        _hours(u.paid),
        _hours(u.busy),
        _hours(u.idle),
        _hours(u.unknown),
        _money(u.idle_yuan),
        _money(u.price_per_busy_hour),
    ]


def summary(report: Report) -> str:
    t, cur = report.total, symbol(report.currency)
    return (
        f"**Total {cur}{_money(t.total)}** for {t.leases} lease(s)"
        f" (storage {cur}{_money(t.storage)}); busy {_hours(t.busy)} of {_hours(t.paid)}"
        f" paid card-hours ({_pct(t.busy, t.paid)}), idle {_hours(t.idle)},"
        f" unknown {_hours(t.unknown)}; **{cur}{_money(t.idle_yuan)} paid for idle cards**;"
        f" {_window(report)}."
    )


def to_markdown(report: Report) -> str:
    cur = symbol(report.currency)
    lines = [f"# GPU rental report {report.month}", "", summary(report), "", "## Leases", ""]
    head = ["Node", "Channel", "Provider", "Billing", f"Cost {cur}", f"Storage {cur}"]
    rows = [
        [
            _md(r.node),
            _md(r.channel),
            _md(r.provider),
            _md(r.billing_type) + (f" ×{r.leases}" if r.leases > 1 else ""),
            _money(r.cost),
            _money(r.storage),
            *_row_use(r),
            _md(_deposit(r.deposit, r.deposit_state)),
        ]
        for r in report.rows
    ]
    t = report.total
    rows.append(
        ["**Total**", "", "", "", _money(t.cost), _money(t.storage), *_use_cells(t), _deposits(t)]
    )
    lines += _table([*head, *_USE_HEADERS, "Deposit"], rows)
    for title, groups in (("channel", report.by_channel), ("provider", report.by_provider)):
        lines += ["", f"## By {title}", ""]
        lines += _table(
            [title.capitalize(), "Leases", f"Total {cur}", f"Storage {cur}", *_USE_HEADERS],
            [
                [_md(k), str(g.leases), _money(g.total), _money(g.storage), *_use_cells(g)]
                for k, g in groups
            ],
        )
    notes = [(r.node, n) for r in report.rows for n in r.notes]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {_md(node)}: {_md(n)}" for node, n in notes]
    return "\n".join(lines) + "\n"


def _deposits(t: Totals) -> str:
    return ", ".join(f"{_money(v)} {k}" for k, v in sorted(t.deposits.items())) or "-"


def attribution_markdown(report: Report, att: Attribution) -> str:
    cur = symbol(report.currency)
    who = "user" if att.by == "user" else "project"
    lines = [
        f"# GPU use by {who} {report.month}",
        "",
        f"**{_hours(att.busy)} busy card-hours worth {cur}{_money(att.yuan)}** across"
        f" {len(att.rows)} {who}(s); each busy card-hour costs its lease's price per busy"
        f" card-hour. Not carried by any busy hour (idle leases): {cur}{_money(att.unattributed)}"
        f" of the leases' {cur}{_money(report.total.cost)}; {_window(report)}.",
        "",
    ]
    rows = [
        [
            _md(r.name),
            _md(", ".join(r.users)),
            _hours(r.busy),
            _pct(r.busy, att.busy),
            _money(r.yuan),
            _md(", ".join(r.nodes)),
        ]
        for r in att.rows
    ]
    rows.append(["**Total**", "", _hours(att.busy), "", _money(att.yuan), ""])
    lines += _table(
        [who.capitalize(), "Node users", "Busy card-h", "Share", f"{cur}", "Nodes"], rows
    )
    if att.outside_leases:
        lines += [
            "",
            f"{_hours(att.outside_leases)} busy card-hours fell outside any lease (no yuan).",
        ]
    return "\n".join(lines) + "\n"


# -- CSV --------------------------------------------------------------------------------


def _csv(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def _c_money(x: Decimal | None) -> str:
    return "" if x is None else str(fen(x))


def _c_hours(x: Decimal | None) -> str:
    return "" if x is None else str(x.quantize(_HUNDREDTH))


CSV_HEADER = (
    "row", "node", "channel", "provider", "billing", "start", "end", "leases", "cost",
    "storage", "total", "paid_card_hours", "busy_card_hours", "idle_card_hours",
    "unknown_card_hours", "idle_yuan", "yuan_per_busy_card_hour", "deposit", "deposit_state",
    "notes",
)  # fmt: skip


def _c_totals(kind: str, channel: str, provider: str, t: Totals) -> list[str]:
    deposit = sum(t.deposits.values(), Decimal(0)) if t.deposits else None
    return [
        kind, "", channel, provider, "", "", "", str(t.leases), _c_money(t.cost),
        _c_money(t.storage), _c_money(t.total), _c_hours(t.paid), _c_hours(t.busy),
        _c_hours(t.idle), _c_hours(t.unknown), _c_money(t.idle_yuan),
        _c_money(t.price_per_busy_hour), _c_money(deposit),
        "; ".join(f"{k} {fen(v)}" for k, v in sorted(t.deposits.items())), "",
    ]  # fmt: skip


def to_csv(report: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for r in report.rows:
        u = r.usage
        w.writerow(
            [
                "lease", _csv(r.node), _csv(r.channel), _csv(r.provider), r.billing_type,
                r.start.isoformat(), r.end.isoformat() if r.end else "", str(r.leases),
                _c_money(r.cost), _c_money(r.storage), _c_money(r.total),
                *(
                    (_c_hours(u.paid), _c_hours(u.busy), _c_hours(u.idle), _c_hours(u.unknown),
                     _c_money(u.idle_yuan), _c_money(u.price_per_busy_hour))
                    if u is not None else ("",) * 6
                ),
                _c_money(r.deposit), r.deposit_state, _csv("; ".join(r.notes)),
            ]
        )  # fmt: skip
    for k, t in report.by_channel:
        w.writerow(_c_totals("channel", _csv(k), "", t))
    for k, t in report.by_provider:
        w.writerow(_c_totals("provider", "", _csv(k), t))
    w.writerow(_c_totals("total", "", "", report.total))
    return buf.getvalue()


ATTRIBUTION_HEADER = ("row", "name", "users", "busy_card_hours", "yuan", "nodes")


def attribution_csv(att: Attribution) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(ATTRIBUTION_HEADER)
    for r in att.rows:
        w.writerow(
            [
                att.by,
                _csv(r.name),
                _csv(";".join(r.users)),
                _c_hours(r.busy),
                _c_money(r.yuan),
                _csv(";".join(r.nodes)),
            ]
        )
    w.writerow(["total", "", "", _c_hours(att.busy), _c_money(att.yuan), ""])
    w.writerow(["unattributed", "", "", "", _c_money(att.unattributed), ""])
    return buf.getvalue()


# -- JSON -------------------------------------------------------------------------------


def _d(x: Decimal | None) -> str | None:
    return None if x is None else str(x)


def _totals_json(t: Totals) -> dict[str, Any]:
    return {
        "leases": t.leases,
        "cost": _d(t.cost),
        "storage": _d(t.storage),
        "total": _d(t.total),
        "paid_card_hours": _d(t.paid),
        "busy_card_hours": _d(t.busy),
        "idle_card_hours": _d(t.idle),
        "unknown_card_hours": _d(t.unknown),
        "idle_yuan": _d(t.idle_yuan),
        "yuan_per_busy_card_hour": _d(t.price_per_busy_hour),
        "deposits": {k: _d(v) for k, v in sorted(t.deposits.items())},
    }


def _head(report: Report) -> dict[str, Any]:
    return {
        "month": report.month,
        "tz": report.tz,
        "since": report.since.isoformat(),
        "until": report.until.isoformat(),
        "complete": report.complete,
        "currency": report.currency,
    }


def report_json(report: Report) -> dict[str, Any]:
    def row(r: LeaseRow) -> dict[str, Any]:
        u = r.usage
        use: Mapping[str, Any] = (
            {
                "paid_card_hours": _d(u.paid),
                "busy_card_hours": _d(u.busy),
                "idle_card_hours": _d(u.idle),
                "unknown_card_hours": _d(u.unknown),
                "idle_yuan": _d(u.idle_yuan),
                "yuan_per_busy_card_hour": _d(u.price_per_busy_hour),
            }
            if u is not None
            else {}
        )
        return {
            "node": r.node,
            "channel": r.channel,
            "provider": r.provider,
            "billing_type": r.billing_type,
            "start": r.start.isoformat(),
            "end": r.end.isoformat() if r.end else None,
            "leases": r.leases,
            "cost": _d(r.cost),
            "storage": _d(r.storage),
            "total": _d(r.total),
            "card_hours_known": u is not None,
            **use,
            "deposit": _d(r.deposit),
            "deposit_state": r.deposit_state or None,
            "notes": list(r.notes),
        }

    return {
        **_head(report),
        "leases": [row(r) for r in report.rows],
        "by_channel": {k: _totals_json(t) for k, t in report.by_channel},
        "by_provider": {k: _totals_json(t) for k, t in report.by_provider},
        "total": _totals_json(report.total),
    }


def attribution_json(report: Report, att: Attribution) -> dict[str, Any]:
    return {
        **_head(report),
        "by": att.by,
        "rows": [
            {
                "name": r.name,
                "users": list(r.users),
                "busy_card_hours": _d(r.busy),
                "yuan": _d(r.yuan),
                "nodes": list(r.nodes),
            }
            for r in att.rows
        ],
        "busy_card_hours": _d(att.busy),
        "yuan": _d(att.yuan),
        "unattributed_yuan": _d(att.unattributed),
        "outside_leases_card_hours": _d(att.outside_leases),
        "leases_cost": _d(report.total.cost),
    }


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
