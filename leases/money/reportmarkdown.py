"""The money report (leases.money.report) as Markdown, for pasting into a weekly report.

Every value from the ledger or a node goes through textsafe.visible and then _md, which
escapes Markdown's and HTML's specials, so a pasted report shows a provider's name or a
refund rule as text (never an image, a link or a tag) and a cell stays a cell. Figures as
leases.money.reporttotals shows them, amounts as leases.money.amounts writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from leases.core.textsafe import visible
from leases.money import reportdeposits, shares
from leases.money.amounts import bare, symbol
from leases.money.report import Attribution, LeaseRow, Report, Totals
from leases.money.reporttotals import (
    TENTH,
    LabTotal,
    att_sums,
    by_currency,
    channel_of,
    currencies,
    groups,
    lab_total,
    provider_of,
    to_step,
)


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
        f"**Total in {lt.currency} {sign}{bare(lt.total)}** at the config's rates for"
        f" {report.month} ({_rates_said(lt)}; each currency's total converted to the fen,"
        f" then added); charged in month {sign}{bare(lt.charged)}."
    )


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


def _hours(x: Decimal | None, step: Decimal = TENTH) -> str:
    return "-" if x is None else f"{to_step(x, step):,}"


def _pct(part: Decimal, whole: Decimal) -> str:
    return f"{part * 100 / whole:.0f} %" if whole else "-"


def _deposit(amount: Decimal | None, state: str) -> str:
    return "-" if amount is None else f"{bare(amount)} {state}"


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
        return bare
    cur = symbol(code)
    return lambda x: "-" if x is None else f"{cur}{bare(x)}"


def _header_currency(report: Report) -> str:
    """The currency a table's header names: the one currency's symbol, else none."""
    codes = currencies(report)
    return symbol(codes[0]).strip() if len(codes) == 1 else ""


def summary(report: Report) -> str:
    parts = []
    for code, t in by_currency(report, TENTH):
        cur = symbol(code)
        parts.append(
            f"**Total {cur}{bare(t.total)}** for {t.leases} lease(s)"
            f" (storage {cur}{bare(t.storage)}); busy {_hours(t.busy)} of {_hours(t.paid)}"
            f" paid card-hours ({_pct(t.busy, t.paid)}), idle {_hours(t.idle)},"
            f" unknown {_hours(t.unknown)}; **{cur}{bare(t.idle_yuan)} paid for idle cards**"
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
    for code, t in by_currency(report, TENTH):
        money = _money_in(report, code)
        label = "**Total**" if single else f"**Total {code}**"
        cells = [money(t.cost), money(t.storage), *_use_cells(t, money), money(t.charged)]
        cells.append(_deposits(t))
        rows.append([label, "", "", "", *cells])
    charged = f"Charged in month {cur}".rstrip()
    lines += _table([*head, *_use_headers(cur), charged, "Deposit"], rows)
    for title, key in (("channel", channel_of), ("provider", provider_of)):
        lines += ["", f"## By {title}", ""]
        grouped = []
        for k, code, g in groups(report, key, TENTH):
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
    lines += share_markdown(report)
    lines += reportdeposits.markdown(report, _md)
    lines += invoicing_markdown(report)
    notes = [(r.node, n) for r in report.rows for n in r.notes]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {_md(node)}: {_md(n)}" for node, n in notes]
    return "\n".join(lines) + "\n"


def share_markdown(report: Report) -> list[str]:
    """Each provider's share of the cards billed (leases.money.shares), and the
    single-channel risk."""
    found = shares.provider_shares(report.rows)
    if not found:
        return []
    lines = ["", "## Provider share of the cards", ""]
    rows = [[_md(s.provider), _hours(s.card_hours), f"{s.shown} %"] for s in found]
    lines += _table(["Provider", "Card-hours billed", "Share"], rows)
    risk = shares.risk_line(found)
    return lines + (["", f"**{_md(risk)}**"] if risk else [])


def invoicing_markdown(report: Report) -> list[str]:
    """The month's charges against their invoices (leases.money.invoices), per provider
    and per lease an invoice names; nothing when no provider charged or invoiced."""
    if not report.invoicing:
        return []
    rows = [
        [
            _md(c.provider),
            _md(c.node or "all leases"),
            f"{symbol(c.currency)}{bare(c.charged)}",
            f"{symbol(c.currency)}{bare(c.invoiced)}",
            f"{symbol(c.currency)}{bare(c.uninvoiced)}",
            _md(", ".join(c.numbers)) if c.numbers else "-",
            _md(c.remark) if c.remark else "-",
        ]
        for c in report.invoicing
    ]
    head = ["Provider", "Lease", "Charged in month", "Invoiced", "Uninvoiced", "Invoices", "Notes"]
    return ["", "## Invoices", "", *_table(head, rows)]


def _deposits(t: Totals) -> str:
    return ", ".join(f"{bare(v)} {k}" for k, v in sorted(t.deposits.items())) or "-"


def attribution_markdown(report: Report, att: Attribution) -> str:
    who = "user" if att.by == "user" else "project"
    sums = att_sums(report, att, TENTH)
    single = len(sums) == 1
    said = []
    for m in sums:
        cur = symbol(m.code)
        said.append(
            f"**{_hours(m.busy)} busy card-hours worth {cur}{bare(m.yuan)}**; not carried"
            f" by any busy hour (idle leases): {cur}{bare(m.unattributed)} of the leases'"
            f" {cur}{bare(m.cost)}; storage lines {cur}{bare(m.storage)}"
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
        money = bare if single else _money_in(report, r.currency)
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
        money = bare if single else _money_in(report, m.code)
        # Rows of their own, so that the total is the by-lease report's total.
        if m.storage:
            rows.append(["*storage lines*", "", "", "", money(m.storage),
                         _md(", ".join(m.storage_nodes))])  # fmt: skip
        if m.unattributed:
            rows.append(["*not carried by a busy hour*", "", "", "", money(m.unattributed), ""])
    for m in sums:
        money = bare if single else _money_in(report, m.code)
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
