"""The dashboard's header line: GPUs busy / total, the month's cost, what idle cards cost
this month, the next lease to end, the ledger file. Pure but for month_money, which reads."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from leases.core.i18n import _
from leases.core.models import Node, NodeStatus
from leases.core.textsafe import visible
from leases.fleet.nodestatus import status_figures
from leases.ledger.store import Ledger
from leases.money.amounts import whole
from leases.money.renewals import BillingNow
from leases.telemetry.rollups import HistoryStore

if TYPE_CHECKING:
    pass

LEDGER_WIDTH = 40  # of the header's ledger path, in characters


@dataclass(frozen=True)
class MonthMoney:
    month: str  # YYYY-MM in the billing zone
    currency: str
    cost: Decimal  # accrued this month so far, storage included
    idle: Decimal  # of which paid for cards history read as idle
    # The cost node by node, by node id (a released node's name may be reused).
    by_node: Mapping[int, Decimal] = field(default_factory=dict)
    # The month's other currencies (their leases' own), each (cost, idle): never added to
    # `cost`; the header says each with its own sign.
    others: Mapping[str, tuple[Decimal, Decimal]] = field(default_factory=dict)
    # A node (by id) whose leases this month are in another currency than `currency`: that
    # one (its by_node amount is in it), or "" where they are in several (no amount).
    node_currency: Mapping[int, str] = field(default_factory=dict)
    # The last complete month's bill reconciliation ("bill 2026-11: 2 differ, 1 unmatched",
    # "no bill imported for 2026-11"); "" in a ledger that never had a bill imported.
    bill: str = ""


def month_money(ledger: Ledger, now: datetime, tz: str, currency: str) -> MonthMoney:
    """This month so far, as `zuka report` computes it (the same rows, the same totals),
    per currency: rows of two currencies are never added up."""
    from leases.money import report  # here: not needed before the dashboard's first paint

    month = f"{now.astimezone(ZoneInfo(tz)):%Y-%m}"
    window, complete = report.month_window(month, tz, now)
    stops = ledger.stop_spans()
    # The rows that read: one the ledger refuses is left out here, and said by the fleet's
    # facts (FleetReader), rather than costing the whole header.
    rep = report.build_report(
        month, window, complete, tz=tz, currency=currency,
        leases=ledger.readable_leases()[0], nodes=ledger.nodes(),
        providers=ledger.readable_providers()[0], resources=ledger.readable_resources()[0],
        usage=HistoryStore(ledger).usage_by(stops), stops=stops,
    )  # fmt: skip
    rows = [r for r in rep.rows if r.currency == currency]
    totals = report.totals(rows)
    others: dict[str, tuple[Decimal, Decimal]] = {}
    for code in sorted({r.currency for r in rep.rows} - {currency}):
        t = report.totals(r for r in rep.rows if r.currency == code)
        others[code] = (t.total, t.idle_yuan)
    codes: dict[int, set[str]] = {}
    for r in rep.rows:
        if r.node_id is not None:  # (every lease read from the ledger has one)
            codes.setdefault(r.node_id, set()).add(r.currency)
    by_node: dict[int, Decimal] = {}
    node_currency: dict[int, str] = {}
    for r in rep.rows:
        if r.node_id is None:
            continue
        if len(codes[r.node_id]) > 1:
            node_currency[r.node_id] = ""  # several currencies: no one amount
            continue
        if r.currency != currency:
            node_currency[r.node_id] = r.currency
        by_node[r.node_id] = by_node.get(r.node_id, Decimal(0)) + r.total
    return MonthMoney(
        month, currency, totals.total, totals.idle_yuan, by_node, others, node_currency
    )


def bill_state(ledger: Ledger, now: datetime, tz: str, currency: str, tol: str = "") -> str:
    """MonthMoney.bill: the last complete month against its bill (leases.alerts.billfacts)."""
    from leases.alerts import billfacts
    from leases.money.bills.reconcile import tolerance

    if ledger.conn.execute("SELECT 1 FROM bills LIMIT 1").fetchone() is None:
        return ""
    month = billfacts.last_month(now, tz)
    rec = billfacts.month_check(ledger, month, tz=tz, currency=currency, tol=tolerance(tol),
                                now=now)  # fmt: skip
    return billfacts.summary(rec, month)


@dataclass(frozen=True)
class Header:
    busy: int  # GPUs read busy now
    read: int  # GPUs with a reading now
    total: int  # GPUs the fleet holds (the ledger's count where no reading says)
    money: MonthMoney | None
    next_end: tuple[str, datetime] | None  # (node, when its paid-for time ends)
    ledger: str


def paid_ends(billing: Mapping[str, BillingNow]) -> list[tuple[datetime, str]]:
    """(when its paid-for time ends, node) of each lease (chain) billing now, soonest first."""
    return sorted(
        (at, name) for name, b in billing.items() if b.bills and (at := b.paid_until or b.lease.end)
    )


def next_end(billing: Mapping[str, BillingNow], now: datetime) -> tuple[str, datetime] | None:
    """The lease (chain) billing now whose paid-for time ends first, after now."""
    upcoming = [(at, name) for at, name in paid_ends(billing) if at > now]
    return (upcoming[0][1], upcoming[0][0]) if upcoming else None


class Ends:
    """next_end's answers for one fleet's billing (by node id, as the fleet read model
    holds it; the same mapping object read after read until the ledger is read again):
    the paid-for ends sorted once, so a refresh asks only which is the first after now
    instead of every node's billing again. The same answer as next_end's."""

    def __init__(self, nodes: Sequence[Node], billing: Mapping[int, BillingNow]) -> None:
        self.nodes, self.billing = nodes, billing  # held: what `of` compares by identity
        named = {n.name: billing[n.id] for n in nodes if n.id is not None and n.id in billing}
        self.ends = paid_ends(named)
        self._ats = [at for at, _name in self.ends]

    def next(self, now: datetime) -> tuple[str, datetime] | None:
        i = bisect.bisect_right(self._ats, now)  # the first strictly after now
        return (self.ends[i][1], self.ends[i][0]) if i < len(self.ends) else None

    @classmethod
    def of(cls, nodes: Sequence[Node], billing: Mapping[int, BillingNow]) -> Ends:
        """The last fleet's Ends while its nodes and billing are the very same objects."""
        held = _ENDS[0] if _ENDS else None
        if held is None or held.nodes is not nodes or held.billing is not billing:
            held = cls(nodes, billing)
            _ENDS[:] = [held]
        return held


_ENDS: list[Ends] = []  # the one kept (the dashboard's reader thread is its one user)


def header(
    nodes: Sequence[Node],
    statuses: Mapping[int, NodeStatus],
    billing: Mapping[int, BillingNow],
    money: MonthMoney | None,
    ledger: str,
    now: datetime,
) -> Header:
    """statuses, billing: by node id (leases.fleet.data.FleetData)."""
    busy = read = total = 0
    for n in nodes:
        fig = status_figures(statuses.get(n.id) if n.id is not None else None)
        if fig is None:
            total += n.gpu_count
            continue
        busy += fig.busy
        read += fig.gpus
        total += max(fig.gpus, n.gpu_count)
    return Header(busy, read, total, money, Ends.of(nodes, billing).next(now), ledger)


def countdown(at: datetime, now: datetime) -> str:
    """'3d', '5h', '40m', 'past': how long until `at`, in its largest whole unit."""
    s = (at - now).total_seconds()
    if s < 0:
        return _("past")
    if s >= 86400:
        return _("{n}d").format(n=int(s // 86400))
    if s >= 3600:
        return _("{n}h").format(n=int(s // 3600))
    return _("{n}m").format(n=int(s // 60))


def gpus_busy(h: Header) -> str:
    """'46/78 GPUs busy (8 not read)': busy out of the GPUs read now. A GPU not read (its
    node unreachable, connecting, stale) is neither busy nor idle: counting it in the total
    made a node going down look like cards freed."""
    unread = h.total - h.read
    if unread > 0:
        return _("{busy}/{read} GPUs busy ({unread} not read)").format(
            busy=h.busy, read=h.read, unread=unread
        )
    return _("{busy}/{read} GPUs busy").format(busy=h.busy, read=h.read)


def header_line(h: Header, now: datetime) -> str:
    parts = [gpus_busy(h)]
    if h.money is not None:
        m = h.money
        # One figure per currency, the lab's first: never two currencies added.
        each = [(m.currency, m.cost, m.idle)] if m.cost or not m.others else []
        each += [(code, cost, idle) for code, (cost, idle) in m.others.items()]
        costs = " + ".join(whole(cost, code) for code, cost, _idle in each)
        idles = " + ".join(whole(idle or Decimal(0), code) for code, _cost, idle in each)
        parts.append(_("{money} this month").format(money=costs))
        parts.append(_("{money} idle").format(money=idles))
    if h.money is not None and h.money.bill:
        parts.append(h.money.bill)
    if h.next_end is not None:
        name, at = h.next_end
        # The countdown before the name: at 80 columns a long name is what gets cut.
        parts.append(
            _("next end {countdown} {name}").format(
                countdown=countdown(at, now), name=visible(name, 24)
            )
        )
    parts.append(short_path(visible(h.ledger)))
    return " · ".join(parts)


def short_path(path: str, width: int = LEDGER_WIDTH, home: str | None = None) -> str:
    """The home folder as '~' (home: where it is; None: this user's), then the end of a
    long path (the file's name and the folders nearest it) behind '…'."""
    home = str(Path.home()) if home is None else home
    if home not in ("", "/") and (path == home or path.startswith(home.rstrip("/") + "/")):
        path = "~" + path[len(home.rstrip("/")) :]
    return path if len(path) <= width else "…" + path[-(width - 1) :]
