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

from leases.core.i18n import _
from leases.core.spoken import percent
from leases.core.textsafe import visible
from leases.money import reportdeposits, shares
from leases.money.amounts import bare, money_words, symbol, unit
from leases.money.report import UNASSIGNED, UNKNOWN_OWNER, Attribution, LeaseRow, Report, Totals
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
from leases.money.words import billing_word, channel_word


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
        return _(
            "No total in {currency}: the config has no rate for {missing} in {month} (add it:"
            ' [money.rates."{month}"] {first} = RATE, how many {currency} one {first} was'
            " worth)."
        ).format(
            currency=lt.currency, missing=", ".join(lt.missing), month=report.month, first=first
        )
    return _(
        "**Total {total}** (all currencies in {currency}) at the config's rates for {month}"
        " ({rates}; each currency's total converted to the fen, then added); charged in month"
        " {charged}."
    ).format(
        total=money_words(lt.total, lt.currency),
        currency=lt.currency,
        month=report.month,
        rates=_rates_said(lt),
        charged=money_words(lt.charged, lt.currency),
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
    return percent(f"{part * 100 / whole:.0f}") if whole else "-"


def _deposit(amount: Decimal | None, state: str) -> str:
    return "-" if amount is None else f"{bare(amount)} {_(state) if state else state}"


def _window(report: Report) -> str:
    from leases.core import fields

    tz = fields.timezone(report.tz, "tz")
    lo = report.since.astimezone(tz).strftime("%Y-%m-%d")
    hi = report.until.astimezone(tz).strftime("%Y-%m-%d %H:%M")
    if report.complete:
        return _("month {month} in the {tz} time zone (from {since})").format(
            month=report.month, tz=visible(report.tz), since=lo
        )
    return _(
        "month {month} in the {tz} time zone; the month is not over: figures to {until}"
        " (from {since})"
    ).format(month=report.month, tz=visible(report.tz), until=hi, since=lo)


# -- Markdown ---------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _h in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _use_headers(cur: str) -> list[str]:
    """The card-hour columns; `cur` the currency's code or symbol ("" among several)."""
    return [
        _("Paid card-h"),
        _("Busy card-h"),
        _("Idle card-h"),
        _("Unknown card-h"),
        _("Idle {currency}").format(currency=cur) if cur else _("Idle cost"),
        _("{currency}/busy card-h").format(currency=cur) if cur else _("Per busy card-h"),
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
        parts.append(
            _(
                "**Total {total}** for {leases} lease(s) (storage {storage}); busy {busy} of"
                " {paid} paid card-hours ({share}), idle {idle}, unknown {unknown};"
                " **{idle_cost} paid for idle cards**"
            ).format(
                total=money_words(t.total, code),
                leases=t.leases,
                storage=money_words(t.storage, code),
                busy=_hours(t.busy),
                paid=_hours(t.paid),
                share=_pct(t.busy, t.paid),
                idle=_hours(t.idle),
                unknown=_hours(t.unknown),
                idle_cost=money_words(t.idle_yuan, code),
            )
        )
    return _("{parts}; {window}.").format(parts=_("; ").join(parts), window=_window(report))


def to_markdown(report: Report) -> str:
    cur = _header_currency(report)
    single = len(currencies(report)) == 1
    lines = [_("# GPU rental report {month}").format(month=report.month), "", summary(report), ""]
    converted = lab_total_line(report)
    if converted is not None:
        lines += [converted, ""]
    lines += [_("## Leases"), ""]
    # Accrued: each charge spread over the time it pays for; charged: cash, on its day.
    head = [_("Node"), _("Channel"), _("Provider"), _("Billing")]
    head.append(_("Accrued {currency}").format(currency=cur).rstrip())
    head.append(_("Storage {currency}").format(currency=cur).rstrip())
    rows = []
    for r in report.rows:
        money = _money_in(report, r.currency)
        rows.append(
            [
                _md(r.node),
                _md(channel_word(r.channel)),
                _md(r.provider),
                _md(billing_word(r.billing_type)) + (f" ×{r.leases}" if r.leases > 1 else ""),
                money(r.cost),
                money(r.storage),
                *_row_use(r, money),
                money(r.charged),
                _md(_deposit(r.deposit, r.deposit_state)),
            ]
        )
    for code, t in by_currency(report, TENTH):
        money = _money_in(report, code)
        label = _("**Total**") if single else _("**Total {currency}**").format(currency=unit(code))
        cells = [money(t.cost), money(t.storage), *_use_cells(t, money), money(t.charged)]
        cells.append(_deposits(t))
        rows.append([label, "", "", "", *cells])
    charged = _("Charged in month {currency}").format(currency=cur).rstrip()
    lines += _table([*head, *_use_headers(cur), charged, _("Deposit")], rows)
    by = (
        (_("## By channel"), _("Channel"), lambda r: channel_word(channel_of(r))),
        (_("## By provider"), _("Provider"), provider_of),
    )
    for heading, title, key in by:
        lines += ["", heading, ""]
        grouped = []
        for k, code, g in groups(report, key, TENTH):
            money = _money_in(report, code)
            grouped.append(
                [_md(k), str(g.leases), money(g.total), money(g.storage), *_use_cells(g, money)]
            )
        lines += _table(
            [
                title,
                _("Leases"),
                _("Total {currency}").format(currency=cur).rstrip(),
                _("Storage {currency}").format(currency=cur).rstrip(),
                *_use_headers(cur),
            ],
            grouped,
        )
    lines += share_markdown(report)
    lines += reportdeposits.markdown(report, _md)
    lines += invoicing_markdown(report)
    notes = [(r.node, n) for r in report.rows for n in r.notes]
    if notes:
        lines += ["", _("## Notes"), ""]
        lines += [f"- {_md(node)}: {_md(n)}" for node, n in notes]
    return "\n".join(lines) + "\n"


def share_markdown(report: Report) -> list[str]:
    """Each provider's share of the cards billed (leases.money.shares), and the
    single-channel risk."""
    found = shares.provider_shares(report.rows)
    if not found:
        return []
    lines = ["", _("## Provider share of the cards"), ""]
    rows = [[_md(s.provider), _hours(s.card_hours), percent(str(s.shown))] for s in found]
    lines += _table([_("Provider"), _("Card-hours billed"), _("Share")], rows)
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
            _md(c.node) if c.node else _("all leases"),
            f"{symbol(c.currency)}{bare(c.charged)}",
            f"{symbol(c.currency)}{bare(c.invoiced)}",
            f"{symbol(c.currency)}{bare(c.uninvoiced)}",
            _md(", ".join(c.numbers)) if c.numbers else "-",
            _md(c.remark) if c.remark else "-",
        ]
        for c in report.invoicing
    ]
    head = [
        _("Provider"), _("Lease"), _("Charged in month"), _("Invoiced"), _("Uninvoiced"),
        _("Invoices"), _("Notes"),
    ]  # fmt: skip
    return ["", _("## Invoices"), "", *_table(head, rows)]


def _deposits(t: Totals) -> str:
    return ", ".join(f"{bare(v)} {_(k) if k else k}" for k, v in sorted(t.deposits.items())) or "-"


def attribution_markdown(report: Report, att: Attribution) -> str:
    by_user = att.by == "user"
    sums = att_sums(report, att, TENTH)
    single = len(sums) == 1
    said = []
    for m in sums:
        said.append(
            _(
                "**{busy} busy card-hours worth {worth}**; not carried by any busy hour (idle"
                " leases): {unattributed} of the leases' {cost}; storage lines {storage}"
            ).format(
                busy=_hours(m.busy),
                worth=money_words(m.yuan, m.code),
                unattributed=money_words(m.unattributed, m.code),
                cost=money_words(m.cost, m.code),
                storage=money_words(m.storage, m.code),
            )
        )
    title = _("# GPU use by user {month}") if by_user else _("# GPU use by project {month}")
    across = (
        _(
            "{said}; across {count} user(s); each busy card-hour costs its lease's price per"
            " busy card-hour; {window}."
        )
        if by_user
        else _(
            "{said}; across {count} project(s); each busy card-hour costs its lease's price"
            " per busy card-hour; {window}."
        )
    )
    lines = [
        title.format(month=report.month),
        "",
        across.format(said=_("; ").join(said), count=len(att.rows), window=_window(report)),
        "",
    ]
    rows = []
    for r in att.rows:
        money = bare if single else _money_in(report, r.currency)
        rows.append(
            [
                _md(_(r.name) if r.name in (UNKNOWN_OWNER, UNASSIGNED) else r.name),
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
            rows.append([_("*storage lines*"), "", "", "", money(m.storage),
                         _md(", ".join(m.storage_nodes))])  # fmt: skip
        if m.unattributed:
            rows.append([_("*not carried by a busy hour*"), "", "", "", money(m.unattributed), ""])
    for m in sums:
        money = bare if single else _money_in(report, m.code)
        label = _("**Total {currency}**").format(currency=unit(m.code))
        label = _("**Total**") if single else label
        rows.append([label, "", _hours(m.busy), "", money(m.total), ""])
    cur = symbol(sums[0].code).strip() if single else _("Cost")
    who = _("User") if by_user else _("Project")
    lines += _table([who, _("Node users"), _("Busy card-h"), _("Share"), cur, _("Nodes")], rows)
    if att.outside_leases:
        lines += [
            "",
            _("{hours} busy card-hours fell outside any lease (no yuan).").format(
                hours=_hours(att.outside_leases)
            ),
        ]
    return "\n".join(lines) + "\n"
