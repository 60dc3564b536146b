"""Invoice (fapiao) use cases: `zuka invoice add/list/edit/delete`, and the month's
invoiced and uninvoiced charges `zuka report` shows (the maths in leases.money.invoices;
the rows' rules in leases.ledger.invoicerules)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.ledger.books import BOOKS, Record
from leases.ledger.store import Ledger
from leases.money.amounts import fen_json, money_words
from leases.money.invoices import Charged, Invoice, allot, coverage
from leases.money.report import LeaseRow, Report

_MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")


def month_days(month: str, field: str = "period") -> tuple[date, date]:
    """YYYY-MM as its first day and the first day of the next month."""
    m = _MONTH_RE.fullmatch(str(month).strip())
    if m is None or not 1 <= int(m.group(2)) <= 12 or not 2000 <= int(m.group(1)) <= 2100:
        raise InputError(field, month, _("must be a month YYYY-MM, e.g. 2026-08"))
    y, mo = int(m.group(1)), int(m.group(2))
    return date(y, mo, 1), date(y + mo // 12, mo % 12 + 1, 1)


def period(month: str | None, first: str | None, last: str | None) -> tuple[str, str] | None:
    """(period_start, period_end exclusive) from --period YYYY-MM, or --from FIRST --to LAST
    (the last day covered, as a fapiao writes it); None when neither is given."""
    if month is not None:
        if first is not None or last is not None:
            raise InputError("period", month, _("give --period or --from/--to, not both"))
        lo, hi = month_days(month)
        return lo.isoformat(), hi.isoformat()
    if first is None and last is None:
        return None
    if first is None or last is None:
        raise InputError(
            "from" if first is None else "to",
            None,
            _("is required with the other: --from FIRST_DAY --to LAST_DAY"),
        )
    lo, hi = fields.day("from", first), fields.day("to", last)
    if hi < lo:
        raise InputError(
            "to", last, _("is before --from {first}: the period runs from --from to --to").format(
                first=lo
            )
        )  # fmt: skip
    return lo.isoformat(), (hi + timedelta(days=1)).isoformat()


def _today(ledger: Ledger, tz: str) -> date:
    return ledger.clock().astimezone(fields.timezone(tz, "billing.tz")).date()


def _not_future(ledger: Ledger, issued: Any, tz: str) -> None:
    if issued is None:
        return
    day, today = fields.day("issued_on", str(issued)), _today(ledger, tz)
    if day > today:
        raise InputError("issued_on", str(issued),
                         _("is in the future (today is {today} in {tz}): an invoice is issued"
                           " on or before today").format(today=today, tz=tz))  # fmt: skip


def _lease_id(ledger: Ledger, provider: str, node: str | None, lease_start: str | None
              ) -> int | None:  # fmt: skip
    if node is None:
        if lease_start is not None:
            raise InputError("lease_start", lease_start, _("needs --node: the lease of which node"))
        return None
    at = ledger.node(node)
    if at.provider != provider:
        raise InputError(
            "node", node, _("is at provider {at}, not {provider}").format(
                at=at.provider or _("(none)"), provider=provider
            )
        )  # fmt: skip
    lease = ledger.lease_for(node, lease_start, at)
    return lease.id


def add_invoice(ledger: Ledger, given: Mapping[str, Any], *, tz: str) -> tuple[Record, str]:
    """`zuka invoice add`: `given` holds provider (a name), node and lease_start (optional),
    and the invoice's columns; period_start/period_end from `period`."""
    rec = {k: v for k, v in given.items() if k not in ("provider", "node", "lease_start")}
    name = str(given.get("provider") or "")
    prov = ledger.provider(name)
    rec["provider_id"] = prov.id
    rec["lease_id"] = _lease_id(ledger, prov.name, given.get("node"), given.get("lease_start"))
    BOOKS["invoice"].check(rec)  # the fields first, then the day against today
    _not_future(ledger, rec.get("issued_on"), tz)
    added = ledger.add_book("invoice", rec, node=given.get("node"))
    inv = invoice_of(added, prov.name, given.get("node"))
    v, cur = inv.vat, inv.currency
    return added, _(
        "added invoice #{id} {number} of {provider}, covering {first} to {last}: total {total}"
        " (tax {tax} at {rate}, net {net}; tax to the fen, half up)"
    ).format(
        id=added["id"],
        number=added["number"],
        provider=prov.name,
        first=inv.period_start,
        last=inv.period_to,
        total=money_words(v.total, cur),
        tax=money_words(v.tax, cur),
        rate=rate_shown(inv.vat_rate),
        net=money_words(v.net, cur),
    )


def edit_invoice(ledger: Ledger, row_id: int, changes: Mapping[str, Any], *, tz: str
                 ) -> tuple[Record, str]:  # fmt: skip
    """`zuka invoice edit ID`: change some columns (checked as a whole, as on add)."""
    if not changes:
        raise InputError("invoice edit", row_id, _("nothing to change: give at least one option"))
    rows = ledger.book_rows("invoice", "id = ?", [row_id])
    if rows:  # the fields first, then the day against today
        BOOKS["invoice"].check({**{k: v for k, v in rows[0].items() if k != "id"}, **changes})
    _not_future(ledger, changes.get("issued_on"), tz)
    edited = ledger.edit_book("invoice", row_id, changes)
    return edited, _("updated invoice #{id} {number}").format(id=row_id, number=edited["number"])


def delete_invoice(ledger: Ledger, row_id: int) -> tuple[Record, str]:
    gone = ledger.delete_book("invoice", row_id)
    return gone, _("deleted invoice #{id} {number} (zuka undo puts it back)").format(
        id=row_id, number=gone["number"]
    )


def invoices(ledger: Ledger, *, provider: str | None = None, month: str | None = None,
             issued_too: bool = False) -> list[Invoice]:  # fmt: skip
    """The invoices (of a provider; whose period meets a month, or, `issued_too`, that were
    issued in it), by provider and period."""
    names = {p.id: p.name for p in ledger.providers()}
    where: list[str] = []
    params: list[Any] = []
    if provider is not None:
        where.append("provider_id = ?")
        params.append(ledger.provider(provider).id)
    if month is not None:
        lo, hi = month_days(month, "month")
        meets = "period_start < ? AND period_end > ?"
        params += [hi.isoformat(), lo.isoformat()]
        if issued_too:
            meets = f"(({meets}) OR (issued_on >= ? AND issued_on < ?))"
            params += [lo.isoformat(), hi.isoformat()]
        where.append(meets)
    nodes = {le.id: le.node for le in ledger.leases()}
    found = [
        invoice_of(r, names.get(r["provider_id"], "?"), nodes.get(r["lease_id"]))
        for r in ledger.book_rows("invoice", " AND ".join(where), params)
    ]
    return sorted(found, key=lambda i: (i.provider, i.period_start, i.number))


def invoice_of(row: Mapping[str, Any], provider: str, node: str | None) -> Invoice:
    return Invoice(
        id=int(row["id"]),
        provider=provider,
        number=str(row["number"]),
        issued_on=date.fromisoformat(row["issued_on"]),
        period_start=date.fromisoformat(row["period_start"]),
        period_end=date.fromisoformat(row["period_end"]),
        amount=Decimal(row["amount"]),
        vat_rate=Decimal(row["vat_rate"]),
        tax_included=bool(row["tax_included"]),
        kind=str(row["kind"]),
        currency=str(row["currency"]),
        lease_id=row["lease_id"],
        node=node,
        notes=str(row["notes"]),
    )


# The rows of a window's report ([since, until), uncut by now): what every chain was charged
# in it (leases.app.monthreport.build's rows).
RowsIn = Callable[[datetime, datetime], Sequence[LeaseRow]]


def _months(lo: date, hi: date) -> list[str]:
    """The months YYYY-MM that the days [lo, hi) meet."""
    out, day = [], date(lo.year, lo.month, 1)
    while day < hi:
        out.append(f"{day.year:04d}-{day.month:02d}")
        day = month_days(out[-1])[1]
    return out


def _in_scope(inv: Invoice, r: LeaseRow) -> bool:
    return (r.provider, r.currency) == (inv.provider, inv.currency) and (
        inv.node is None or r.node == inv.node)  # fmt: skip


def _share(inv: Invoice, month: str, tz: str, rows_in: RowsIn) -> tuple[Decimal, str | None]:
    """The invoice's part in `month` and a note on it: its total allotted to the months of
    its period by what its scope was charged in each (leases.money.invoices.allot), to the
    month it was issued in when its period holds no charge zuka knows."""
    zone = fields.timezone(tz, "billing.tz")
    charged = []
    for m in _months(inv.period_start, inv.period_end):
        first, after = month_days(m)
        lo, hi = max(first, inv.period_start), min(after, inv.period_end)
        since, until = (datetime.combine(d, time(), zone) for d in (lo, hi))
        rows = rows_in(since, until)
        charged.append((m, sum((r.charged for r in rows if _in_scope(inv, r)), Decimal(0))))
    parts, total = allot(inv.vat.total, charged), inv.vat.total
    if not parts:
        if month != f"{inv.issued_on.year:04d}-{inv.issued_on.month:02d}":
            return Decimal(0), None
        return total, _(
            "invoice {number} ({first} to {last}) covers no charge zuka knows: counted in"
            " {month}, the month it was issued"
        ).format(number=inv.number, first=inv.period_start, last=inv.period_to, month=month)
    part = parts.get(month, Decimal(0))
    if part in (0, total):
        return part, None
    return part, _(
        "invoice {number} covers {first} to {last}: {amount} of it here, by the charges of"
        " each month").format(number=inv.number, first=inv.period_start, last=inv.period_to,
                              amount=money_words(part, inv.currency))  # fmt: skip


def with_invoicing(ledger: Ledger, report: Report, rows_in: RowsIn) -> Report:
    """The report with its month's invoicing: each provider's cash charged in the month
    (the rows' charged, storage in) and each lease's that an invoice names (its renewal
    chain's row), against the invoices' parts in the month (`_share`; `rows_in` gives the
    charges of the other months of their periods). Unchanged while the ledger holds no
    invoice at all."""
    if not ledger.book_rows("invoice", "id = (SELECT min(id) FROM invoices)"):
        return report  # a lab that records no invoices is not told every charge is uninvoiced
    cache: dict[tuple[datetime, datetime], Sequence[LeaseRow]] = {}

    def cached(since: datetime, until: datetime) -> Sequence[LeaseRow]:
        if (since, until) not in cache:
            cache[since, until] = rows_in(since, until)
        return cache[since, until]

    found = invoices(ledger, month=report.month, issued_too=True)
    shares = [(i, *_share(i, report.month, report.tz, cached)) for i in found]
    shares = [s for s in shares if s[1] or s[2]]
    named = {(i.provider, i.node) for i, _part, _note in shares if i.node is not None}
    charged: Charged = {}
    for r in report.rows:
        keys: list[tuple[str, str | None, str]] = [(r.provider, None, r.currency)]
        if (r.provider, r.node) in named:
            keys.append((r.provider, r.node, r.currency))
        for key in keys:
            charged[key] = charged.get(key, Decimal(0)) + r.charged
    return dataclasses.replace(report, invoicing=coverage(charged, shares))


def invoice_json(inv: Invoice) -> dict[str, Any]:
    v = inv.vat
    return {
        "id": inv.id, "provider": inv.provider, "node": inv.node, "number": inv.number,
        "issued_on": inv.issued_on.isoformat(), "period_start": inv.period_start.isoformat(),
        "period_to": inv.period_to.isoformat(), "amount": fen_json(inv.amount),
        "currency": inv.currency, "vat_rate": str(inv.vat_rate),
        "tax_included": inv.tax_included, "kind": inv.kind, "net": fen_json(v.net),
        "tax": fen_json(v.tax), "total": fen_json(v.total), "notes": inv.notes,
    }  # fmt: skip


def rate_shown(rate: Decimal) -> str:
    """0.06 as '6 %'."""
    return f"{(rate * 100).normalize():f} %"
