"""The money report (leases.money.report) as CSV: one header, and cells neutralised against
spreadsheet formulas as the export's are. Figures as leases.money.reporttotals shows them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from leases.core.textsafe import formula_safe
from leases.money import reportdeposits, shares
from leases.money.amounts import fen_shown
from leases.money.report import Attribution, Report, Totals
from leases.money.reporttotals import (
    HUNDREDTH,
    att_sums,
    by_currency,
    channel_of,
    currencies,
    groups,
    lab_total,
    provider_of,
    row_total,
    to_step,
)


def _csv(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    return formula_safe(text)


def _c_money(x: Decimal | None) -> str:
    return "" if x is None else str(fen_shown(x))


def _c_hours(x: Decimal | None) -> str:
    return "" if x is None else str(to_step(x, HUNDREDTH))


CSV_HEADER = (
    "row", "node", "channel", "provider", "billing", "currency", "start", "end", "leases", "cost",
    "storage", "total", "charged_in_month", "paid_card_hours", "busy_card_hours", "idle_card_hours",
    "unknown_card_hours", "idle_yuan", "yuan_per_busy_card_hour", "deposit", "deposit_state",
    *reportdeposits.CSV_COLUMNS, "notes", "invoiced", "uninvoiced",
)  # fmt: skip
_NO_DEPOSIT_CASH = ("",) * len(reportdeposits.CSV_COLUMNS)


class _Rows:
    """A csv writer whose rows are padded to the header (the invoicing columns come last
    and only invoicing rows fill them)."""

    def __init__(self, buf: io.StringIO) -> None:
        self._w = csv.writer(buf, lineterminator="\n")

    def writerow(self, cells: list[str] | tuple[str, ...]) -> None:
        self._w.writerow([*cells, *[""] * (len(CSV_HEADER) - len(cells))])

    def writerows(self, rows: Iterable[list[str] | tuple[str, ...]]) -> None:
        for cells in rows:
            self.writerow(cells)


def _c_totals(kind: str, channel: str, provider: str, code: str, t: Totals) -> list[str]:
    deposit = sum(t.deposits.values(), Decimal(0)) if t.deposits else None
    return [
        kind, "", channel, provider, "", code, "", "", str(t.leases), _c_money(t.cost),
        _c_money(t.storage), _c_money(t.total), _c_money(t.charged), _c_hours(t.paid),
        _c_hours(t.busy), _c_hours(t.idle), _c_hours(t.unknown), _c_money(t.idle_yuan),
        _c_money(t.price_per_busy_hour), _c_money(deposit),
        "; ".join(f"{k} {fen_shown(v)}" for k, v in sorted(t.deposits.items())),
        *_NO_DEPOSIT_CASH, "",
    ]  # fmt: skip


def to_csv(report: Report) -> str:
    buf = io.StringIO()
    w = _Rows(buf)
    w.writerow(CSV_HEADER)
    for r in report.rows:
        u = r.usage
        w.writerow(
            [
                "lease", _csv(r.node), _csv(r.channel), _csv(r.provider), r.billing_type,
                r.currency, r.start.isoformat(), r.end.isoformat() if r.end else "", str(r.leases),
                _c_money(r.cost), _c_money(r.storage), _c_money(row_total(r)),
                _c_money(r.charged),
                *(
                    (_c_hours(u.paid), _c_hours(u.busy), _c_hours(u.idle), _c_hours(u.unknown),
                     _c_money(u.idle_yuan), _c_money(u.price_per_busy_hour))
                    if u is not None else ("",) * 6
                ),
                _c_money(r.deposit), r.deposit_state, *_NO_DEPOSIT_CASH,
                _csv("; ".join(r.notes)),
            ]
        )  # fmt: skip
    # Groups and totals per currency (the currency column says which).
    for k, code, t in groups(report, channel_of, HUNDREDTH):
        w.writerow(_c_totals("channel", _csv(_plain(report, k, code)), "", code, t))
    for k, code, t in groups(report, provider_of, HUNDREDTH):
        w.writerow(_c_totals("provider", "", _csv(_plain(report, k, code)), code, t))
    for code, t in by_currency(report, HUNDREDTH):
        w.writerow(_c_totals("total", "", "", code, t))
    for share in shares.provider_shares(report.rows):
        # Each provider's share of the cards billed: its card-hours and its percent.
        cells = dict.fromkeys(CSV_HEADER, "")
        risk = "; single-channel risk" if share.concentrated else ""
        cells |= {"row": "provider_share", "provider": _csv(share.provider),
                  "paid_card_hours": _c_hours(share.card_hours),
                  "notes": f"share {share.shown} %{risk}"}  # fmt: skip
        w.writerow(list(cells.values()))
    for c in report.invoicing:  # the month's charges against their invoices
        cells = dict.fromkeys(CSV_HEADER, "")
        cells |= {
            "row": "invoicing",
            "node": _csv(c.node or ""),
            "provider": _csv(c.provider),
            "currency": c.currency,
            "charged_in_month": _c_money(c.charged),
            "invoiced": _c_money(c.invoiced),
            "uninvoiced": _c_money(c.uninvoiced),
            "notes": _csv("; ".join([*c.numbers, c.remark] if c.remark else c.numbers)),
        }
        w.writerow(list(cells.values()))  # fmt: skip
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
    w.writerows(reportdeposits.csv_rows(report, CSV_HEADER, _csv))
    return buf.getvalue()


ATTRIBUTION_HEADER = ("row", "name", "users", "busy_card_hours", "currency", "yuan", "nodes")


def _plain(report: Report, label: str, code: str) -> str:
    """A group's name without the currency groups adds among several (CSV has a column)."""
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
    for m in att_sums(report, att, HUNDREDTH):
        nodes = _csv(";".join(m.storage_nodes))
        w.writerow(["storage", "", "", "", m.code, _c_money(m.storage), nodes])
        w.writerow(["unattributed", "", "", "", m.code, _c_money(m.unattributed), ""])
        w.writerow(["total", "", "", _c_hours(m.busy), m.code, _c_money(m.total), ""])
    return buf.getvalue()
