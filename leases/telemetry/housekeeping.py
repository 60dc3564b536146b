"""What the owner of a poller does on a timer beside the polling: follow the ledger's nodes
and drop old minute roll-ups. `zuka collect` and a dashboard that polls by itself run this
same code, so history is kept the same way whoever polls. A dashboard where nobody polls
(no collector, no poller of its own) stands in for one here too: it evaluates the alert
rules as a collector's AlertWatch would. These are the dashboard's writes; its fleet
reader (leases.fleet.data) only reads."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from leases.core.errors import InputError, LedgerError, said
from leases.core.i18n import _
from leases.core.models import Node, NodeState
from leases.ledger.store import Ledger
from leases.telemetry.promtarget import ledger_nodes
from leases.telemetry.rollups import DEFAULT_MINUTE_DAYS, HistoryStore

if TYPE_CHECKING:
    from leases.alerts.facts import UsageCache
    from leases.config.sections import AlertsConfig

PURGE_EVERY = timedelta(hours=6)
# Alerts evaluated this often when nobody polls (as often as a collector's AlertWatch).
ALERTS_S = 60.0


FLEET_STATES = (NodeState.ACTIVE, NodeState.OFFBOARDING)  # the nodes a fleet shows and polls


def fleet_nodes(ledger: Ledger) -> tuple[list[Node], list[Node]]:
    """Active and offboarding nodes in one read: those polled, and those polled_nodes
    leaves out (a stored value refused), each with its problem."""
    nodes = ledger_nodes(ledger, ledger.nodes(FLEET_STATES))
    return [n for n in nodes if not n.problem], [n for n in nodes if n.problem]


class Housekeeping:
    def __init__(
        self, minute_days: int = DEFAULT_MINUTE_DAYS, purge_every: timedelta = PURGE_EVERY
    ) -> None:
        self.minute_days = minute_days
        self.purge_every = purge_every
        self.last_purge: datetime | None = None
        self._alerts_at: datetime | None = None
        self._alert_cache: UsageCache = {}

    def purge_if_due(self, store: HistoryStore, now: datetime) -> int | None:
        """Drop minutes older than minute_days, at most once per purge_every; the rows
        removed, or None when it was not due."""
        if self.last_purge is not None and now - self.last_purge < self.purge_every:
            return None
        removed = store.purge(now, self.minute_days)
        self.last_purge = now
        return removed

    def run(
        self, ledger: Ledger, store: HistoryStore, now: datetime
    ) -> tuple[list[Node], list[Node]]:
        """Purge if due, then the fleet as the ledger holds it now: (polled, refused),
        as leases.telemetry.wiring.fleet_nodes reads it; the caller hands the first to its
        poller."""
        self.purge_if_due(store, now)
        return fleet_nodes(ledger)

    def evaluate_alerts_if_due(
        self, ledger: Ledger, config: AlertsConfig, now: datetime
    ) -> str | None:
        """Nobody polls this ledger: evaluate the alert rules and store the outcome, at most
        every ALERTS_S by `now`. What stopped it, in words (None: evaluated or not due)."""
        last = self._alerts_at
        if last is not None and timedelta(0) <= now - last < timedelta(seconds=ALERTS_S):
            return None
        from leases.alerts.watch import check  # here: it brings the notifiers

        self._alerts_at = now
        try:
            check(ledger, config, lambda: now, self._alert_cache)
        except (InputError, LedgerError) as exc:
            return _("alerts not evaluated: {why}").format(why=said(exc))
        return None
