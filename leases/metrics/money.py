"""The money gauges' figures, from the ledger, by the computations `zuka cost` and the
underuse rule use (never derived another way):

- cost to date: `leases.money.leasecost.node_cost` (its estimate's `to_date`), the figure
  `zuka cost` shows in TO DATE;
- idle this month: `HistoryStore.lease_usage(...).idle_yuan` over the calendar month in
  the lease's billing zone up to the current whole hour, the call the underuse rule makes
  (`leases.alerts.facts._usage_facts`) over its window;
- the lease's end: the same estimate's `lease_end`.

A ledger with rows changed outside zuka exports no figure: each lease is refused instead
(`zuka cost` refuses the same rows). Worked out at most once every `every_s` seconds
(MoneyCache): a scrape reads the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal

from leases.core.errors import InputError
from leases.core.models import Lease
from leases.ledger import rowaudit
from leases.ledger.store import Ledger
from leases.metrics.gauges import LeaseMoney, Money, Place
from leases.money import leasecost, report
from leases.money.billing import Stop
from leases.money.estimate import month_of
from leases.money.periods import zone
from leases.money.renewals import billing_now
from leases.telemetry.rollups import HistoryStore

EVERY_S = 60.0


def places(ledger: Ledger) -> dict[str, Place]:
    """Node name -> its provider's channel and name (for the labels)."""
    kinds = {p.name: p.kind.value for p in ledger.providers()}
    return {
        n.name: Place(kinds.get(n.provider or "", ""), n.provider or "")
        for n in ledger.nodes()
        if n.state != "released"
    }


def _idle_month(
    store: HistoryStore, lease: Lease, at: datetime, stops: Sequence[Stop], cards: int | None
) -> Decimal | None:
    """What this month's idle card-hours cost, to the current whole hour (None: no whole
    hour of the month billed yet)."""
    since = max(lease.start, month_of(at, zone(lease))[0])
    until = at.replace(minute=0, second=0, microsecond=0)
    if since >= until:
        return None
    return store.lease_usage(lease, since, until, stops=stops, cards=cards).idle_yuan


def money(ledger: Ledger, at: datetime) -> Money:
    """Every node's lease billing at `at`, with its figures; all refused when a row
    the figures rest on was changed outside zuka."""
    where = places(ledger)
    nodes = report.nodes_by_key(ledger.nodes())
    readable, _ = ledger.readable_leases()
    by_node: dict[int | str, list[Lease]] = {}
    for le in readable:
        by_node.setdefault(le.node_key, []).append(le)
    billing = {
        key: now
        for key, leases in by_node.items()
        if (now := billing_now(sorted(leases, key=lambda le: le.start), at)) is not None
        and now.bills
    }
    if [d for d in rowaudit.drifted_since(ledger) if d.entity in rowaudit.FIGURES]:
        return Money(
            refused=tuple(
                (b.lease.node, str(b.lease.id), where.get(b.lease.node, Place()))
                for b in billing.values()
            )
        )
    resources = ledger.resources()
    stops = ledger.stop_spans()
    store = HistoryStore(ledger)
    out: list[LeaseMoney] = []
    refused: list[tuple[str, str, Place]] = []
    for key in sorted(billing, key=lambda k: (billing[k].lease.node, str(k))):
        lease = billing[key].lease
        node = nodes.get(key)
        place = where.get(lease.node, Place())
        try:
            c = leasecost.node_cost(node, by_node[key], resources, None, at, stops=stops)
        except InputError:  # a figure that cannot be worked out: said, never a zero
            refused.append((lease.node, str(lease.id), place))
            continue
        cards = node.gpu_count if node is not None and node.gpu_count else None
        try:
            idle = _idle_month(store, lease, at, stops.get(lease.id or 0, ()), cards)
        except InputError:  # not known (no card count to weigh a card-hour by): no sample,
            idle = None  # and the lease's other figures still go out

        if c is None:
            continue
        e = c.estimate
        out.append(
            LeaseMoney(
                node=lease.node,
                lease=str(lease.id),
                place=place,
                billing=lease.billing_type.value,
                currency=lease.currency,
                cost_to_date=e.to_date if e is not None else None,
                idle_month=idle,
                end=e.lease_end if e is not None else None,
            )
        )
    return Money(tuple(out), tuple(refused))


class MoneyCache:
    """money(), worked out again only when `every_s` seconds have passed since the last
    time (a scrape every second reads the ledger once a minute). A ledger that cannot be
    read exports no money, one refusal with empty labels instead, and the fault is logged:
    the GPU gauges of the same scrape still go out."""

    def __init__(
        self,
        ledger: Ledger,
        clock: Callable[[], datetime],
        every_s: float = EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self._ledger = ledger
        self._log = log or logging.getLogger(__name__)
        self._clock = clock
        self._every = every_s
        self._mono = monotonic
        self._at: float | None = None
        self._money = Money()
        self.computed = 0  # how many times it was worked out (tests)

    def __call__(self) -> Money:
        now = self._mono()
        if self._at is None or now - self._at >= self._every:
            try:
                self._money = money(self._ledger, self._clock())
            except Exception as exc:  # a locked or damaged ledger: no figure, said, GPUs go on
                self._log.error("metrics: the money figures could not be read", exc_info=exc)
                self._money = Money(refused=(("", "", Place()),))
            self._at = now  # tried again in a minute, not at every scrape
            self.computed += 1
        return self._money
