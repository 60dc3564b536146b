"""The money report (leases.report) as Markdown, CSV and JSON.

Markdown is for pasting into a weekly report; every value from the ledger or a node goes
through textsafe.visible (and pipes are escaped so a cell stays a cell). CSV has one header
and cells neutralised against spreadsheet formulas as the export's are. JSON has Decimals
as strings, times in ISO 8601.

Every format shows money to the fen and card-hours to its own step (Markdown 0.1, CSV and
JSON 0.01), and every total is the sum of its rows as shown (`shown_totals`), so a reader
adding up a column gets the total printed below it; a zero is never "-0.00".
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from leases.billing import fen
from leases.report import Attribution, LeaseRow, Report, Totals
from leases.textsafe import visible
from leases.transfer import _FORMULA_STARTS

_TENTH = Decimal("0.1")
_HUNDREDTH = Decimal("0.01")


def _fen(x: Decimal) -> Decimal:
    """x to the fen; a zero without its sign (never -0.00)."""
    q = fen(x)
    return q if q else abs(q)


def _step(x: Decimal, step: Decimal) -> Decimal:
    q = x.quantize(step, rounding=ROUND_HALF_UP)
    return q if q else abs(q)


def shown_totals(rows: Iterable[LeaseRow], hours: Decimal) -> Totals:
    """The sums of the rows as shown: money to the fen, card-hours to `hours`."""
    deposits: dict[str, Decimal] = {}
    n = 0
    zero = Decimal(0)
    cost = storage = paid = busy = idle = unknown = idle_yuan = usage_cost = zero
    for r in rows:
        n += 1
        cost += _fen(r.cost)
        storage += _fen(r.storage)
        if r.usage is not None:
            u = r.usage
            paid += _step(u.paid, hours)
            busy += _step(u.busy, hours)
            idle += _step(u.idle, hours)
            unknown += _step(u.unknown, hours)
            idle_yuan += _fen(u.idle_yuan)
            usage_cost += _fen(u.cost)
        if r.deposit is not None:
            deposits[r.deposit_state] = deposits.get(r.deposit_state, zero) + _fen(r.deposit)
    return Totals(n, cost, storage, paid, busy, idle, unknown, idle_yuan, deposits, usage_cost)


def _groups(
    report: Report, key: Callable[[LeaseRow], str], hours: Decimal
) -> list[tuple[str, Totals]]:
    """Totals per channel or provider, each the sum of its rows as shown."""
    keys = sorted({key(r) for r in report.rows})
    return [(k, shown_totals((r for r in report.rows if key(r) == k), hours)) for k in keys]


def _channel(r: LeaseRow) -> str:
    return r.channel


def _provider(r: LeaseRow) -> str:
    return r.provider


def symbol(currency: str) -> str:
    return "¥" if currency.upper() in ("CNY", "RMB", "JPY") else f"{currency} "


def _md(value: Any) -> str:
    return visible(value).replace("|", "\\|") if value not in (None, "") else "-"


def _money(x: Decimal | None) -> str:
    return "-" if x is None else f"{_fen(x):,}"


def _hours(x: Decimal | None, step: Decimal = _TENTH) -> str:
    return "-" if x is None else f"{_step(x, step):,}"


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
    t, cur = shown_totals(report.rows, _TENTH), symbol(report.currency)
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
    t = shown_totals(report.rows, _TENTH)
    rows.append(
        ["**Total**", "", "", "", _money(t.cost), _money(t.storage), *_use_cells(t), _deposits(t)]
    )
    lines += _table([*head, *_USE_HEADERS, "Deposit"], rows)
    for title, key in (("channel", _channel), ("provider", _provider)):
        groups = _groups(report, key, _TENTH)
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


def _att_sums(report: Report, att: Attribution, hours: Decimal) -> tuple[Decimal, ...]:
    """(busy, yuan, unattributed, leases' cost) as the sums of the rows as shown."""
    busy = sum((_step(r.busy, hours) for r in att.rows), Decimal(0))
    yuan = sum((_fen(r.yuan) for r in att.rows), Decimal(0))
    cost = sum((_fen(r.cost) for r in report.rows), Decimal(0))
    return busy, yuan, _fen(cost - yuan), cost


def attribution_markdown(report: Report, att: Attribution) -> str:
    cur = symbol(report.currency)
    who = "user" if att.by == "user" else "project"
    busy, yuan, unattributed, cost = _att_sums(report, att, _TENTH)
    lines = [
        f"# GPU use by {who} {report.month}",
        "",
        f"**{_hours(busy)} busy card-hours worth {cur}{_money(yuan)}** across"
        f" {len(att.rows)} {who}(s); each busy card-hour costs its lease's price per busy"
        f" card-hour. Not carried by any busy hour (idle leases): {cur}{_money(unattributed)}"
        f" of the leases' {cur}{_money(cost)}; {_window(report)}.",
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
    rows.append(["**Total**", "", _hours(busy), "", _money(yuan), ""])
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
    return "" if x is None else str(_fen(x))


def _c_hours(x: Decimal | None) -> str:
    return "" if x is None else str(_step(x, _HUNDREDTH))


def _row_total(r: LeaseRow) -> Decimal:
    """A row's total as shown: its cost and storage, each to the fen."""
    return _fen(r.cost) + _fen(r.storage)


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
        "; ".join(f"{k} {_fen(v)}" for k, v in sorted(t.deposits.items())), "",
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
                _c_money(r.cost), _c_money(r.storage), _c_money(_row_total(r)),
                *(
                    (_c_hours(u.paid), _c_hours(u.busy), _c_hours(u.idle), _c_hours(u.unknown),
                     _c_money(u.idle_yuan), _c_money(u.price_per_busy_hour))
                    if u is not None else ("",) * 6
                ),
                _c_money(r.deposit), r.deposit_state, _csv("; ".join(r.notes)),
            ]
        )  # fmt: skip
    for k, t in _groups(report, _channel, _HUNDREDTH):
        w.writerow(_c_totals("channel", _csv(k), "", t))
    for k, t in _groups(report, _provider, _HUNDREDTH):
        w.writerow(_c_totals("provider", "", _csv(k), t))
    w.writerow(_c_totals("total", "", "", shown_totals(report.rows, _HUNDREDTH)))
    return buf.getvalue()


ATTRIBUTION_HEADER = ("row", "name", "users", "busy_card_hours", "yuan", "nodes")


def attribution_csv(report: Report, att: Attribution) -> str:
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
    busy, yuan, unattributed, _ = _att_sums(report, att, _HUNDREDTH)
    w.writerow(["total", "", "", _c_hours(busy), _c_money(yuan), ""])
    w.writerow(["unattributed", "", "", "", _c_money(unattributed), ""])
    return buf.getvalue()


# -- JSON -------------------------------------------------------------------------------


def _d(x: Decimal | None) -> str | None:
    """Money to the fen, as a string."""
    return None if x is None else str(_fen(x))


def _h(x: Decimal | None) -> str | None:
    """Card-hours to 0.01, as a string."""
    return None if x is None else str(_step(x, _HUNDREDTH))


def _totals_json(t: Totals) -> dict[str, Any]:
    return {
        "leases": t.leases,
        "cost": _d(t.cost),
        "storage": _d(t.storage),
        "total": _d(t.total),
        "paid_card_hours": _h(t.paid),
        "busy_card_hours": _h(t.busy),
        "idle_card_hours": _h(t.idle),
        "unknown_card_hours": _h(t.unknown),
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
                "paid_card_hours": _h(u.paid),
                "busy_card_hours": _h(u.busy),
                "idle_card_hours": _h(u.idle),
                "unknown_card_hours": _h(u.unknown),
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
            "total": _d(_row_total(r)),
            "card_hours_known": u is not None,
            **use,
            "deposit": _d(r.deposit),
            "deposit_state": r.deposit_state or None,
            "notes": list(r.notes),
        }

    return {
        **_head(report),
        "leases": [row(r) for r in report.rows],
        "by_channel": {k: _totals_json(t) for k, t in _groups(report, _channel, _HUNDREDTH)},
        "by_provider": {k: _totals_json(t) for k, t in _groups(report, _provider, _HUNDREDTH)},
        "total": _totals_json(shown_totals(report.rows, _HUNDREDTH)),
    }


def attribution_json(report: Report, att: Attribution) -> dict[str, Any]:
    busy, yuan, unattributed, cost = _att_sums(report, att, _HUNDREDTH)
    return {
        **_head(report),
        "by": att.by,
        "rows": [
            {
                "name": r.name,
                "users": list(r.users),
                "busy_card_hours": _h(r.busy),
                "yuan": _d(r.yuan),
                "nodes": list(r.nodes),
            }
            for r in att.rows
        ],
        "busy_card_hours": _h(busy),
        "yuan": _d(yuan),
        "unattributed_yuan": _d(unattributed),
        "outside_leases_card_hours": _h(att.outside_leases),
        "leases_cost": _d(cost),
    }


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
