"""The money report (leases.money.report) as Markdown, CSV and JSON.

Markdown is for pasting into a weekly report; every value from the ledger or a node goes
through textsafe.visible and then _md, which escapes Markdown's and HTML's specials, so a
pasted report shows a provider's name or a refund rule as text (never an image, a link or
a tag) and a cell stays a cell. CSV has one header
and cells neutralised against spreadsheet formulas as the export's are. JSON has Decimals
as strings, times in ISO 8601.

Every format shows money to the fen and card-hours to its own step (Markdown 0.1, CSV and
JSON 0.01), and every total is the sum of its rows as shown (`shown_totals`), so a reader
adding up a column gets the total printed below it; a zero is never "-0.00".

Two bases, named apart: cost (Accrued; `cost` in CSV and JSON) spreads each charge over
the time it pays for, as billing.accrued does; Charged in month (`charged_in_month`) is
the cash the provider took in the month, on the charge days.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from leases.core.textsafe import visible
from leases.ledger.transfer import _FORMULA_STARTS
from leases.money.billing import Verdict, fen
from leases.money.report import Attribution, LeaseRow, Report, Totals

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
    cost = storage = paid = busy = idle = unknown = idle_yuan = usage_cost = charged = zero
    for r in rows:
        n += 1
        cost += _fen(r.cost)
        charged += _fen(r.charged)
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
    return Totals(
        n, cost, storage, paid, busy, idle, unknown, idle_yuan, deposits, usage_cost, charged
    )


def currencies(report: Report) -> list[str]:
    """The currencies of the report's leases (the config's when it has none): each has
    totals of its own, never added to another's."""
    return sorted({r.currency for r in report.rows}) or [report.currency]


def _by_currency(report: Report, hours: Decimal) -> list[tuple[str, Totals]]:
    return [
        (c, shown_totals((r for r in report.rows if r.currency == c), hours))
        for c in currencies(report)
    ]


def _groups(
    report: Report, key: Callable[[LeaseRow], str], hours: Decimal
) -> list[tuple[str, str, Totals]]:
    """(label, currency, totals) per channel or provider and currency, each the sum of its
    rows as shown; the label names the currency when the report has several."""
    mixed = len(currencies(report)) > 1
    keys = sorted({(key(r), r.currency) for r in report.rows})
    return [
        (
            f"{k} ({c})" if mixed else k,
            c,
            shown_totals((r for r in report.rows if key(r) == k and r.currency == c), hours),
        )
        for k, c in keys
    ]


@dataclass(frozen=True)
class LabTotal:
    """The report's total in the lab's currency, at the config's rates for its month:
    each currency's total as shown, times its rate, to the fen, then added. None figures
    when a currency present has no rate (`missing`): never a total that leaves one out."""

    currency: str  # the lab's (config's billing.currency)
    rates: tuple[tuple[str, Decimal], ...]  # (code, rate) of the currencies converted
    missing: tuple[str, ...]  # currencies present without a rate for the month
    total: Decimal | None
    charged: Decimal | None


def lab_total(report: Report) -> LabTotal | None:
    """The total in the lab's currency; None when every lease is in it already, and when
    they are all in one other currency without a rate (their own total is one figure)."""
    lab, codes = report.currency, currencies(report)
    if not report.rows or codes == [lab]:
        return None
    rates = {c: report.rates[c] for c in codes if c != lab and c in report.rates}
    missing = tuple(c for c in codes if c != lab and c not in rates)
    if len(codes) == 1 and missing:
        return None
    if missing:
        return LabTotal(lab, tuple(rates.items()), missing, None, None)
    total = charged = Decimal(0)
    for code, t in _by_currency(report, _HUNDREDTH):
        rate = rates.get(code, Decimal(1))
        total += _fen(t.total * rate)
        charged += _fen(t.charged * rate)
    return LabTotal(lab, tuple(rates.items()), (), total, charged)


def _rates_said(lt: LabTotal) -> str:
    """'1 USD = ¥7.12, 1 HKD = ¥0.91'."""
    return ", ".join(f"1 {c} = {symbol(lt.currency)}{r}" for c, r in lt.rates)


def lab_total_line(report: Report) -> str | None:
    """The Markdown line of the total in the lab's currency, or of the rate it lacks."""
    lt = lab_total(report)
    if lt is None:
        return None
    if lt.total is None or lt.charged is None:
        first = lt.missing[0]
        return (
            f"No total in {lt.currency}: the config has no rate for {', '.join(lt.missing)}"
            f' in {report.month} (add it: [money.rates."{report.month}"] {first} = RATE,'
            f" how many {lt.currency} one {first} was worth)."
        )
    sign = symbol(lt.currency)
    return (
        f"**Total in {lt.currency} {sign}{_money(lt.total)}** at the config's rates for"
        f" {report.month} ({_rates_said(lt)}; each currency's total converted to the fen,"
        f" then added); charged in month {sign}{_money(lt.charged)}."
    )


def _channel(r: LeaseRow) -> str:
    return r.channel


def _provider(r: LeaseRow) -> str:
    return r.provider


def symbol(currency: str) -> str:
    """What an amount in `currency` is written with: ¥ for CNY only (JPY's sign is ¥ too,
    so a table of both could not tell them apart), the code for the others."""
    return "¥" if currency.upper() in ("CNY", "RMB") else f"{currency} "


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
    return "-" if x is None else f"{_fen(x):,}"


def money(x: Decimal | None, currency: str) -> str:
    """An amount with its currency's symbol as the report prints it ("-" for none)."""
    return "-" if x is None else f"{symbol(currency)}{_money(x)}"


def verdict_text(v: Verdict, currency: str) -> str:
    """A monthly-against-hourly verdict in words, its amount in the lease's currency."""
    return v.said(lambda x: money(x, currency))


def _hours(x: Decimal | None, step: Decimal = _TENTH) -> str:
    return "-" if x is None else f"{_step(x, step):,}"


def _pct(part: Decimal, whole: Decimal) -> str:
    return f"{part * 100 / whole:.0f} %" if whole else "-"


def _day(t: datetime | None, tz: str) -> str:
    from leases.core import fields

    return "-" if t is None else t.astimezone(fields.timezone(tz, "tz")).strftime("%Y-%m-%d")


def _deposit(amount: Decimal | None, state: str) -> str:
    return "-" if amount is None else f"{_money(amount)} {state}"


def _window(report: Report) -> str:
    from leases.core import fields

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


def _use_headers(cur: str) -> list[str]:
    """The card-hour columns; `cur` the currency's code or symbol ("" among several)."""
    return [
        "Paid card-h",
        "Busy card-h",
        "Idle card-h",
        "Unknown card-h",
        f"Idle {cur}" if cur else "Idle cost",
        f"{cur}/busy card-h" if cur else "Per busy card-h",
    ]


Money = Callable[[Decimal | None], str]


def _use_cells(t: Totals, money: Money) -> list[str]:
    return [
        _hours(t.paid),
        _hours(t.busy),
        _hours(t.idle),
        _hours(t.unknown),
        money(t.idle_yuan),
        money(t.price_per_busy_hour),
    ]


def _row_use(r: LeaseRow, money: Money) -> list[str]:
    u = r.usage
    if u is None:
        return ["-"] * 6
    return [
        _hours(u.paid),
        _hours(u.busy),
        _hours(u.idle),
        _hours(u.unknown),
        money(u.idle_yuan),
        money(u.price_per_busy_hour),
    ]


def _money_in(report: Report, code: str) -> Money:
    """Amounts in `code` as cells: bare under a header that names the one currency, else
    each with its currency."""
    if len(currencies(report)) == 1:
        return _money
    cur = symbol(code)
    return lambda x: "-" if x is None else f"{cur}{_money(x)}"


def _header_currency(report: Report) -> str:
    """The currency a table's header names: the one currency's symbol, else none."""
    codes = currencies(report)
    return symbol(codes[0]).strip() if len(codes) == 1 else ""


def summary(report: Report) -> str:
    parts = []
    for code, t in _by_currency(report, _TENTH):
        cur = symbol(code)
        parts.append(
            f"**Total {cur}{_money(t.total)}** for {t.leases} lease(s)"
            f" (storage {cur}{_money(t.storage)}); busy {_hours(t.busy)} of {_hours(t.paid)}"
            f" paid card-hours ({_pct(t.busy, t.paid)}), idle {_hours(t.idle)},"
            f" unknown {_hours(t.unknown)}; **{cur}{_money(t.idle_yuan)} paid for idle cards**"
        )
    return "; ".join(parts) + f"; {_window(report)}."


def to_markdown(report: Report) -> str:
    cur = _header_currency(report)
    single = len(currencies(report)) == 1
    lines = [f"# GPU rental report {report.month}", "", summary(report), ""]
    converted = lab_total_line(report)
    if converted is not None:
        lines += [converted, ""]
    lines += ["## Leases", ""]
    # Accrued: each charge spread over the time it pays for; charged: cash, on its day.
    head = ["Node", "Channel", "Provider", "Billing", f"Accrued {cur}".rstrip()]
    head.append(f"Storage {cur}".rstrip())
    rows = []
    for r in report.rows:
        money = _money_in(report, r.currency)
        rows.append(
            [
                _md(r.node),
                _md(r.channel),
                _md(r.provider),
                _md(r.billing_type) + (f" ×{r.leases}" if r.leases > 1 else ""),
                money(r.cost),
                money(r.storage),
                *_row_use(r, money),
                money(r.charged),
                _md(_deposit(r.deposit, r.deposit_state)),
            ]
        )
    for code, t in _by_currency(report, _TENTH):
        money = _money_in(report, code)
        label = "**Total**" if single else f"**Total {code}**"
        cells = [money(t.cost), money(t.storage), *_use_cells(t, money), money(t.charged)]
        cells.append(_deposits(t))
        rows.append([label, "", "", "", *cells])
    charged = f"Charged in month {cur}".rstrip()
    lines += _table([*head, *_use_headers(cur), charged, "Deposit"], rows)
    for title, key in (("channel", _channel), ("provider", _provider)):
        lines += ["", f"## By {title}", ""]
        grouped = []
        for k, code, g in _groups(report, key, _TENTH):
            money = _money_in(report, code)
            grouped.append(
                [_md(k), str(g.leases), money(g.total), money(g.storage), *_use_cells(g, money)]
            )
        lines += _table(
            [
                title.capitalize(),
                "Leases",
                f"Total {cur}".rstrip(),
                f"Storage {cur}".rstrip(),
                *_use_headers(cur),
            ],
            grouped,
        )
    notes = [(r.node, n) for r in report.rows for n in r.notes]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {_md(node)}: {_md(n)}" for node, n in notes]
    return "\n".join(lines) + "\n"


def _deposits(t: Totals) -> str:
    return ", ".join(f"{_money(v)} {k}" for k, v in sorted(t.deposits.items())) or "-"


@dataclass(frozen=True)
class _AttSums:
    """One currency's attribution sums, each the sum of its rows as shown."""

    code: str
    busy: Decimal
    yuan: Decimal
    unattributed: Decimal  # the leases' cost no busy hour carried
    cost: Decimal  # the leases' cost
    # The storage lines' cost, a row of its own (no busy hour carries it), and its nodes.
    storage: Decimal = Decimal(0)
    storage_nodes: tuple[str, ...] = ()

    @property
    def total(self) -> Decimal:
        """The by-lease report's total: yuan + storage + unattributed."""
        return self.yuan + self.storage + self.unattributed


def _att_sums(report: Report, att: Attribution, hours: Decimal) -> list[_AttSums]:
    codes = sorted({r.currency for r in att.rows} | set(currencies(report)))
    out = []
    for code in codes:
        mine = [r for r in att.rows if r.currency == code]
        busy = sum((_step(r.busy, hours) for r in mine), Decimal(0))
        yuan = sum((_fen(r.yuan) for r in mine), Decimal(0))
        leases = [r for r in report.rows if r.currency == code]
        cost = sum((_fen(r.cost) for r in leases), Decimal(0))
        storage = sum((_fen(r.storage) for r in leases), Decimal(0))
        stored = tuple(sorted({r.node for r in leases if _fen(r.storage)}))
        out.append(_AttSums(code, busy, yuan, _fen(cost - yuan), cost, storage, stored))
    return out


def attribution_markdown(report: Report, att: Attribution) -> str:
    who = "user" if att.by == "user" else "project"
    sums = _att_sums(report, att, _TENTH)
    single = len(sums) == 1
    said = []
    for m in sums:
        cur = symbol(m.code)
        said.append(
            f"**{_hours(m.busy)} busy card-hours worth {cur}{_money(m.yuan)}**; not carried"
            f" by any busy hour (idle leases): {cur}{_money(m.unattributed)} of the leases'"
            f" {cur}{_money(m.cost)}; storage lines {cur}{_money(m.storage)}"
        )
    lines = [
        f"# GPU use by {who} {report.month}",
        "",
        f"{'; '.join(said)}; across {len(att.rows)} {who}(s); each busy card-hour costs its"
        f" lease's price per busy card-hour; {_window(report)}.",
        "",
    ]
    rows = []
    for r in att.rows:
        money = _money if single else _money_in(report, r.currency)
        rows.append(
            [
                _md(r.name),
                _md(", ".join(r.users)),
                _hours(r.busy),
                _pct(r.busy, att.busy),
                money(r.yuan),
                _md(", ".join(r.nodes)),
            ]
        )
    for m in sums:
        money = _money if single else _money_in(report, m.code)
        # Rows of their own, so that the total is the by-lease report's total.
        if m.storage:
            rows.append(["*storage lines*", "", "", "", money(m.storage),
                         _md(", ".join(m.storage_nodes))])  # fmt: skip
        if m.unattributed:
            rows.append(["*not carried by a busy hour*", "", "", "", money(m.unattributed), ""])
    for m in sums:
        money = _money if single else _money_in(report, m.code)
        label = "**Total**" if single else f"**Total {m.code}**"
        rows.append([label, "", _hours(m.busy), "", money(m.total), ""])
    cur = symbol(sums[0].code).strip() if single else "Cost"
    lines += _table([who.capitalize(), "Node users", "Busy card-h", "Share", cur, "Nodes"], rows)
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
    "row", "node", "channel", "provider", "billing", "currency", "start", "end", "leases", "cost",
    "storage", "total", "charged_in_month", "paid_card_hours", "busy_card_hours", "idle_card_hours",
    "unknown_card_hours", "idle_yuan", "yuan_per_busy_card_hour", "deposit", "deposit_state",
    "notes",
)  # fmt: skip


def _c_totals(kind: str, channel: str, provider: str, code: str, t: Totals) -> list[str]:
    deposit = sum(t.deposits.values(), Decimal(0)) if t.deposits else None
    return [
        kind, "", channel, provider, "", code, "", "", str(t.leases), _c_money(t.cost),
        _c_money(t.storage), _c_money(t.total), _c_money(t.charged), _c_hours(t.paid),
        _c_hours(t.busy), _c_hours(t.idle), _c_hours(t.unknown), _c_money(t.idle_yuan),
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
                r.currency, r.start.isoformat(), r.end.isoformat() if r.end else "", str(r.leases),
                _c_money(r.cost), _c_money(r.storage), _c_money(_row_total(r)),
                _c_money(r.charged),
                *(
                    (_c_hours(u.paid), _c_hours(u.busy), _c_hours(u.idle), _c_hours(u.unknown),
                     _c_money(u.idle_yuan), _c_money(u.price_per_busy_hour))
                    if u is not None else ("",) * 6
                ),
                _c_money(r.deposit), r.deposit_state, _csv("; ".join(r.notes)),
            ]
        )  # fmt: skip
    # Groups and totals per currency (the currency column says which).
    for k, code, t in _groups(report, _channel, _HUNDREDTH):
        w.writerow(_c_totals("channel", _csv(_plain(report, k, code)), "", code, t))
    for k, code, t in _groups(report, _provider, _HUNDREDTH):
        w.writerow(_c_totals("provider", "", _csv(_plain(report, k, code)), code, t))
    for code, t in _by_currency(report, _HUNDREDTH):
        w.writerow(_c_totals("total", "", "", code, t))
    lt = lab_total(report)
    if lt is not None:
        # The total in the lab's currency; its notes say the rates, or the rate missing.
        said = (
            "rates " + "; ".join(f"{c} {r}" for c, r in lt.rates)
            if lt.total is not None
            else f"no rate for {', '.join(lt.missing)} in {report.month}"
        )
        cells = dict.fromkeys(CSV_HEADER, "")
        cells |= {"row": "total_in_lab_currency", "currency": lt.currency,
                  "total": _c_money(lt.total), "charged_in_month": _c_money(lt.charged),
                  "notes": _csv(said)}  # fmt: skip
        w.writerow(list(cells.values()))
    return buf.getvalue()


ATTRIBUTION_HEADER = ("row", "name", "users", "busy_card_hours", "currency", "yuan", "nodes")


def _plain(report: Report, label: str, code: str) -> str:
    """A group's name without the currency _groups adds among several (CSV has a column)."""
    return label.removesuffix(f" ({code})") if len(currencies(report)) > 1 else label


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
                r.currency,
                _c_money(r.yuan),
                _csv(";".join(r.nodes)),
            ]
        )
    # Storage and what no busy hour carried, then the total of every row above it: the
    # by-lease report's total.
    for m in _att_sums(report, att, _HUNDREDTH):
        nodes = _csv(";".join(m.storage_nodes))
        w.writerow(["storage", "", "", "", m.code, _c_money(m.storage), nodes])
        w.writerow(["unattributed", "", "", "", m.code, _c_money(m.unattributed), ""])
        w.writerow(["total", "", "", _c_hours(m.busy), m.code, _c_money(m.total), ""])
    return buf.getvalue()


# -- JSON -------------------------------------------------------------------------------


def _d(x: Decimal | None) -> str | None:
    """Money to the fen, as a string."""
    return None if x is None else str(_fen(x))


def _h(x: Decimal | None) -> str | None:
    """Card-hours to 0.01, as a string."""
    return None if x is None else str(_step(x, _HUNDREDTH))


def _totals_json(t: Totals, code: str) -> dict[str, Any]:
    return {
        "currency": code,
        "leases": t.leases,
        "cost": _d(t.cost),
        "storage": _d(t.storage),
        "total": _d(t.total),
        "charged_in_month": _d(t.charged),
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
        # The leases' one currency; None when they have several (see by_currency).
        "currency": codes[0] if len(codes := currencies(report)) == 1 else None,
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
            "currency": r.currency,
            "start": r.start.isoformat(),
            "end": r.end.isoformat() if r.end else None,
            "leases": r.leases,
            "cost": _d(r.cost),
            "storage": _d(r.storage),
            "total": _d(_row_total(r)),
            "charged_in_month": _d(r.charged),
            "card_hours_known": u is not None,
            **use,
            "deposit": _d(r.deposit),
            "deposit_state": r.deposit_state or None,
            "notes": list(r.notes),
        }

    per = {c: _totals_json(t, c) for c, t in _by_currency(report, _HUNDREDTH)}
    return {
        **_head(report),
        "leases": [row(r) for r in report.rows],
        # Among several currencies a group is "name (CUR)": never two currencies added.
        "by_channel": {k: _totals_json(t, c) for k, c, t in _groups(report, _channel, _HUNDREDTH)},
        "by_provider": {
            k: _totals_json(t, c) for k, c, t in _groups(report, _provider, _HUNDREDTH)
        },
        "by_currency": per,
        "total": next(iter(per.values())) if len(per) == 1 else None,
        # None when every lease is in the lab's currency (the config's).
        "in_lab_currency": _lab_json(report),
    }


def _lab_json(report: Report) -> dict[str, Any] | None:
    lt = lab_total(report)
    if lt is None:
        return None
    return {
        "currency": lt.currency,
        "month": report.month,
        "rates": {c: str(r) for c, r in lt.rates},
        "missing_rates": list(lt.missing),
        "total": _d(lt.total),
        "charged_in_month": _d(lt.charged),
    }


def attribution_json(report: Report, att: Attribution) -> dict[str, Any]:
    sums = _att_sums(report, att, _HUNDREDTH)
    one = sums[0] if len(sums) == 1 else None
    return {
        **_head(report),
        "by": att.by,
        "rows": [
            {
                "name": r.name,
                "users": list(r.users),
                "busy_card_hours": _h(r.busy),
                "currency": r.currency,
                "yuan": _d(r.yuan),
                "nodes": list(r.nodes),
            }
            for r in att.rows
        ],
        "busy_card_hours": _h(sum((m.busy for m in sums), Decimal(0))),
        # yuan, unattributed_yuan, leases_cost: None among several currencies (by_currency)
        "yuan": _d(one.yuan) if one else None,
        "unattributed_yuan": _d(one.unattributed) if one else None,
        "storage_yuan": _d(one.storage) if one else None,
        # yuan + storage_yuan + unattributed_yuan: the by-lease report's total
        "leases_total": _d(one.total) if one else None,
        "outside_leases_card_hours": _h(att.outside_leases),
        "leases_cost": _d(one.cost) if one else None,
        "by_currency": {
            m.code: {
                "busy_card_hours": _h(m.busy),
                "yuan": _d(m.yuan),
                "unattributed_yuan": _d(m.unattributed),
                "storage_yuan": _d(m.storage),
                "leases_total": _d(m.total),
                "leases_cost": _d(m.cost),
            }
            for m in sums
        },
    }


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
