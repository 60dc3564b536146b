"""The money report's figures as every format shows them (leases.money.reportmarkdown,
reportcsv, reportjson): money to the fen and card-hours to the format's step (Markdown 0.1,
CSV and JSON 0.01), and every total the sum of its rows as shown (`shown_totals`), so a
reader adding up a column gets the total printed below it; a zero is never "-0.00". Totals
per currency (never two currencies added), per channel or provider, in the lab's currency
at the config's rates, and the sums of an attribution by user or project.

Two bases, named apart: cost (Accrued; `cost` in CSV and JSON) spreads each charge over
the time it pays for, as billing.accrued does; Charged in month (`charged_in_month`) is
the cash the provider took in the month, on the charge days.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from leases.money.amounts import fen_shown
from leases.money.report import Attribution, LeaseRow, Report, Totals

TENTH = Decimal("0.1")
HUNDREDTH = Decimal("0.01")


def to_step(x: Decimal, step: Decimal) -> Decimal:
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
        cost += fen_shown(r.cost)
        charged += fen_shown(r.charged)
        storage += fen_shown(r.storage)
        if r.usage is not None:
            u = r.usage
            paid += to_step(u.paid, hours)
            busy += to_step(u.busy, hours)
            idle += to_step(u.idle, hours)
            unknown += to_step(u.unknown, hours)
            idle_yuan += fen_shown(u.idle_yuan)
            usage_cost += fen_shown(u.cost)
        if r.deposit is not None:
            deposits[r.deposit_state] = deposits.get(r.deposit_state, zero) + fen_shown(r.deposit)
    return Totals(
        n, cost, storage, paid, busy, idle, unknown, idle_yuan, deposits, usage_cost, charged
    )


def currencies(report: Report) -> list[str]:
    """The currencies of the report's leases (the config's when it has none): each has
    totals of its own, never added to another's."""
    return sorted({r.currency for r in report.rows}) or [report.currency]


def by_currency(report: Report, hours: Decimal) -> list[tuple[str, Totals]]:
    return [
        (c, shown_totals((r for r in report.rows if r.currency == c), hours))
        for c in currencies(report)
    ]


def groups(
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
    for code, t in by_currency(report, HUNDREDTH):
        rate = rates.get(code, Decimal(1))
        total += fen_shown(t.total * rate)
        charged += fen_shown(t.charged * rate)
    return LabTotal(lab, tuple(rates.items()), (), total, charged)


def channel_of(r: LeaseRow) -> str:
    return r.channel


def provider_of(r: LeaseRow) -> str:
    return r.provider


def row_total(r: LeaseRow) -> Decimal:
    """A row's total as shown: its cost and storage, each to the fen."""
    return fen_shown(r.cost) + fen_shown(r.storage)


@dataclass(frozen=True)
class AttSums:
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


def att_sums(report: Report, att: Attribution, hours: Decimal) -> list[AttSums]:
    codes = sorted({r.currency for r in att.rows} | set(currencies(report)))
    out = []
    for code in codes:
        mine = [r for r in att.rows if r.currency == code]
        busy = sum((to_step(r.busy, hours) for r in mine), Decimal(0))
        yuan = sum((fen_shown(r.yuan) for r in mine), Decimal(0))
        leases = [r for r in report.rows if r.currency == code]
        cost = sum((fen_shown(r.cost) for r in leases), Decimal(0))
        storage = sum((fen_shown(r.storage) for r in leases), Decimal(0))
        stored = tuple(sorted({r.node for r in leases if fen_shown(r.storage)}))
        out.append(AttSums(code, busy, yuan, fen_shown(cost - yuan), cost, storage, stored))
    return out
