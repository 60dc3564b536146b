"""Evaluating alerts now and telling people: what `zuka alerts`, the collector and the
dashboard's own poller all call.

check() reads the facts, applies the rules and stores the result. AlertWatch runs check()
every `every_s` seconds at most (a poller calls it after each flush; most calls return at
once) and hands new and escalated alerts to a notify.Notifier, whose submit() never blocks:
a dead notification endpoint costs the poller nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from leases.alertfacts import UsageCache, gather
from leases.alerts import evaluate
from leases.alertstate import Change, Changed, StoredAlert, reconcile
from leases.config import AlertsConfig, Config
from leases.ledger import Clock, Ledger
from leases.notify import Message, Notifier
from leases.pacing import Every

DEFAULT_EVERY_S = 60.0
_TOLD = (Change.NEW, Change.ESCALATED)


def check(
    ledger: Ledger, config: AlertsConfig, clock: Clock, cache: UsageCache | None = None
) -> list[Changed]:
    """Evaluate every rule now and store the outcome; returns what changed. `cache` keeps
    the hour-grained history figures between calls (leases.alertfacts.gather)."""
    now = clock()
    return reconcile(ledger, evaluate(gather(ledger, config, now, cache), config, now), now)


def message_of(alert: StoredAlert) -> Message:
    """The notification for an alert; one per alert and severity (the dedupe key)."""
    body = alert.message + (f"\n→ {alert.action}" if alert.action else "")
    return Message(
        # notify.render puts "[zuka] SEVERITY: " before it: said once.
        f"{alert.kind.replace('_', ' ')} on {alert.node}",
        body,
        alert.severity,
        key=f"alert:{alert.id}:{alert.severity.value}",
    )


class AlertWatch:
    def __init__(
        self,
        ledger: Ledger,
        config: AlertsConfig,
        *,
        clock: Clock,
        notifier: Notifier | None = None,
        every_s: float = DEFAULT_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self.ledger = ledger
        self.config = config
        self.clock = clock
        self.notifier = notifier
        self.every_s = every_s
        self._pace = Every(every_s, monotonic)
        self.log = log or logging.getLogger(__name__)
        self.runs = 0
        self.last_changes: list[Changed] = []
        self._cache: UsageCache = {}

    def due(self) -> bool:
        return self._pace.due()

    def tick(self) -> list[Changed]:
        """check() if due; never raises (a failure is logged and tried next time)."""
        if not self._pace.take():
            return []
        try:
            changes = check(self.ledger, self.config, self.clock, self._cache)
        except Exception:
            self.log.exception("evaluating alerts failed")
            return []
        self.runs += 1
        self.last_changes = changes
        if self.notifier is not None:
            for c in changes:
                if c.change in _TOLD:
                    self.notifier.submit(message_of(c.alert))
        return changes

    def close(self, timeout: float = 5.0) -> None:
        """Stop the notifier's worker (a send in flight is left to end with the process)."""
        if self.notifier is not None:
            self.notifier.close(timeout)


def watch_ledger(
    ledger: Ledger,
    ledger_path: Path | None,
    config: Config,
    *,
    clock: Clock,
    every_s: float = DEFAULT_EVERY_S,
    log: logging.Logger | None = None,
) -> AlertWatch:
    """The AlertWatch a poller of this ledger runs (the collector's and the dashboard's),
    with a started Notifier when the config names notification URLs."""
    notifier = None
    if config.notify.urls:
        notifier = Notifier(config.notify, ledger_path, clock=clock, tz=config.billing.tz).start()
    return AlertWatch(ledger, config.alerts, clock=clock, notifier=notifier, every_s=every_s,
                      log=log)  # fmt: skip
