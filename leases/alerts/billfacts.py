"""A month's reconciliation of the providers' bills with the ledger, read from the ledger:
what `zuka bill check` prints (through leases.app.bills), what the dashboard's header
says of it, and what the bill alerts (bill_mismatch per lease, bill_unmatched per resource
id) are raised from. The figures are the month's report rows
(leases.money.report.build_report, as `zuka report` builds them) and the stored bill
lines; the matching is leases.money.bills.reconcile's."""

from __future__ import annotations

import shlex
import weakref
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from leases.alerts.alert import LEDGER, Alert, AlertKind
from leases.alerts.said import call, phrase, say
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.money import report
from leases.money.billing import CardHours
from leases.money.bills.reconcile import BillLine, Reconciliation, Tolerance, reconcile
from leases.money.units import ZERO


def _no_usage(le: Lease, since: datetime, until: datetime, cards: int | None) -> CardHours:
    """The report's card-hours are not read: its cash (LeaseRow.charged) does not use them."""
    return CardHours(ZERO, ZERO, ZERO, ZERO)


def month_lines(
    ledger: Ledger, since: datetime, until: datetime, provider: str | None = None
) -> list[BillLine]:
    """The stored lines whose period starts in [since, until), of one provider or all."""
    # The text compare narrows by day (the stored moments carry their own offsets); the
    # exact test is on the parsed moments.
    lo = (since - timedelta(days=1)).date().isoformat()
    hi = (until + timedelta(days=1)).date().isoformat()
    sql = (
        "SELECT l.bill_id, l.line_no, p.name, l.period_start, l.resource_id, l.product,"
        " l.kind, l.amount, l.currency, l.period_end FROM bill_lines l"
        " JOIN bills b ON b.id = l.bill_id"
        " JOIN providers p ON p.id = b.provider_id WHERE l.period_start >= ?"
        " AND l.period_start < ?"
    )
    params: list[object] = [lo, hi]
    if provider is not None:
        sql += " AND p.name = ?"
        params.append(provider)
    out: list[BillLine] = []
    for bill_id, no, prov, start, rid, product, kind, amount, currency, end in ledger.conn.execute(
        sql + " ORDER BY l.bill_id, l.line_no", params
    ):
        at = datetime.fromisoformat(start)
        if since <= at < until:
            upto = datetime.fromisoformat(end) if end else None
            out.append(
                BillLine(bill_id, no, prov, at, rid, product, kind, Decimal(amount), currency, upto)
            )
    return out


def month_check(
    ledger: Ledger,
    month: str,
    *,
    tz: str,
    currency: str,
    tol: Tolerance,
    provider: str | None = None,
    now: datetime | None = None,
    untouched: bool = False,
) -> Reconciliation | None:
    """The month's reconciliation; None when no bill line falls in it. Worked out again only
    when something was committed since the last time with the same question: the
    collector's alerts and the dashboard's header ask every minute. `untouched`: refused
    (InputError) when a bill it rests on is not what zuka imported (`zuka bill check`)."""
    window, complete = report.month_window(month, tz, now or ledger.clock())
    conn = ledger.conn
    key = (
        int(conn.execute("PRAGMA data_version").fetchone()[0]),
        int(conn.execute("SELECT coalesce(max(id), 0) FROM audit").fetchone()[0]),
        month, tz, currency, tol, provider, complete, untouched,
    )  # fmt: skip
    seen = _CHECKED.get(ledger)
    if seen is not None and seen[0] == key:
        return seen[1]
    found = _month_check(ledger, month, window, complete, tz=tz, currency=currency, tol=tol,
                         provider=provider, untouched=untouched)  # fmt: skip
    _CHECKED[ledger] = (key, found)
    return found


# Of each open ledger: the last reconciliation worked out, and what it was asked with.
_CHECKED: weakref.WeakKeyDictionary[Ledger, tuple[tuple[object, ...], Reconciliation | None]] = (
    weakref.WeakKeyDictionary()
)


def forget(ledger: Ledger) -> None:
    """Drop what was worked out for this ledger (a benchmark times the work itself)."""
    _CHECKED.pop(ledger, None)


def _month_check(
    ledger: Ledger,
    month: str,
    window: tuple[datetime, datetime],
    complete: bool,
    *,
    tz: str,
    currency: str,
    tol: Tolerance,
    provider: str | None,
    untouched: bool,
) -> Reconciliation | None:
    lines = month_lines(ledger, *window, provider)
    if untouched:
        ledger.check_untouched("bill", sorted({ln.bill_id for ln in lines}))
    if not lines:
        return None
    stops = ledger.stop_spans()
    leases = ledger.leases()
    nodes = ledger.nodes()
    resources = ledger.resources()
    rep = report.build_report(
        month,
        window,
        complete,
        tz=tz,
        currency=currency,
        leases=leases,
        nodes=nodes,
        providers=ledger.providers(),
        resources=resources,
        usage=_no_usage,
        stops=stops,
    )
    return reconcile(
        month, lines, rep.rows, leases=leases, nodes=nodes, resources=resources, tol=tol
    )


def last_month(now: datetime, tz: str) -> str:
    """The last complete calendar month in the zone: the one whose bill is due."""
    local = now.astimezone(ZoneInfo(tz)).replace(day=1) - timedelta(days=1)
    return f"{local:%Y-%m}"


def summary(rec: Reconciliation | None, month: str) -> str:
    """The header's words: 'bill 2026-11: 2 differ, 1 unmatched'."""
    if rec is None:
        return _("no bill imported for {month}").format(month=month)
    parts = []
    if rec.differing:
        parts.append(_("{n} differ").format(n=len(rec.differing)))
    if rec.unmatched:
        parts.append(_("{n} unmatched").format(n=len(rec.unmatched)))
    return _("bill {month}: {said}").format(
        month=month, said=_(", ").join(parts) if parts else _("agrees")
    )


def bill_alerts(
    ledger: Ledger, tz: str, currency: str, tol_text: str, now: datetime
) -> Iterator[Alert]:
    """The last complete month's bill alerts: a warning per lease whose bill differs beyond
    the tolerance (or which is not on the bill), and per resource id the bill charges that
    matches nothing in the ledger. None when no bill covers that month."""
    from leases.money.bills.reconcile import tolerance

    month = last_month(now, tz)
    try:
        rec = month_check(ledger, month, tz=tz, currency=currency, tol=tolerance(tol_text), now=now)
    except InputError:
        return
    if rec is None:
        return
    for r in rec.differing:
        name = visible(r.node)
        said = (
            say(
                N_("{name}: not on {provider}'s {month} bill, though zuka has {zuka} charged"),
                name=name,
                provider=r.provider,
                month=month,
                zuka=call("money", r.zuka, r.currency),
            )
            if r.lines == 0
            else say(
                N_(
                    "{name}: {provider}'s {month} bill says {billed}, zuka {zuka} (difference"
                    " {difference})"
                ),
                name=name,
                provider=r.provider,
                month=month,
                billed=call("money", r.billed, r.currency),
                zuka=call("money", r.zuka, r.currency),
                difference=call("money", r.difference, r.currency),
            )
        )
        yield Alert(
            AlertKind.BILL_MISMATCH,
            Severity.WARNING,
            r.node,
            r.node_id,
            None,
            None,
            f"{month}:{r.start.isoformat()}",
            said,
            say(
                N_("compare the lease with the bill: zuka bill check --month {month}"), month=month
            ),
            r.difference,
            currency=r.currency,
        )
    for u in rec.unmatched:
        rid = visible(u.resource_id, 80)
        yield Alert(
            AlertKind.BILL_UNMATCHED,
            Severity.WARNING,
            LEDGER,
            None,
            None,
            None,
            f"{month}:{u.provider}:{u.resource_id}",
            say(
                N_(
                    "{provider}'s {month} bill charges {money} for {rid} ({product}), which"
                    " matches no lease: {why}"
                ),
                provider=u.provider,
                month=month,
                money=call("money", u.amount, u.currency),
                rid=rid,
                product=visible(u.product, 40) or say(N_("no product")),
                why=phrase(u.why),
            ),
            say(
                N_(
                    "record it (zuka node edit NODE --instance-id {rid}, or zuka resource add)"
                    " or ask the provider why it bills it"
                ),
                rid=shlex.quote(rid),
            ),
            u.amount,
            currency=u.currency,
        )
