"""Evaluating alerts now and telling people: what `zuka alerts`, the collector and the
dashboard's own poller all call.

check() reads the facts, applies the rules and stores the result; the new and escalated
alerts are written to the ledger's alert_outbox in the same transaction (leases.alerts.state),
whoever called it. AlertWatch runs check() every `every_s` seconds at most (a poller calls
it after each flush; most calls return at once) and gives its notify.Notifier the
AlertFeed, which takes each waiting outbox row once, in the transaction that queues its
message: what `zuka alerts` or the dashboard stored first is sent all the same, and never
twice. The notifier works in its own thread: a dead endpoint costs the poller nothing.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.alerts.alert import LEDGER, Alert, AlertKind
from leases.alerts.balance import provider_alerts, unjudged_balances
from leases.alerts.billfacts import bill_alerts
from leases.alerts.drift import drift_said
from leases.alerts.facts import UsageCache, gather
from leases.alerts.rules import evaluate, unjudged
from leases.alerts.said import decode, say
from leases.alerts.state import Changed, StoredAlert, by_ids, reconcile
from leases.alerts.wording import kind_word, node_shown
from leases.config.sections import AlertsConfig, Config
from leases.core.clock import Clock
from leases.core.i18n import EN, N_, _, speaking
from leases.core.severity import Severity
from leases.ledger import rowaudit
from leases.ledger.store import Ledger
from leases.notify.message import Message
from leases.notify.outbox import Notifier
from leases.telemetry.pacing import Every

DEFAULT_EVERY_S = 60.0
# An outbox row no notifier took within this long is dropped unsent: a collector started
# after days off does not replay old news.
TOLD_WITHIN = timedelta(hours=24)


def check(
    ledger: Ledger, config: AlertsConfig, clock: Clock, cache: UsageCache | None = None
) -> list[Changed]:
    """Evaluate every rule now and store the outcome; returns what changed. `cache` keeps
    the hour-grained history figures between calls (leases.alerts.facts.gather)."""
    now = clock()
    # What is stored is language-neutral (leases.alerts.said); words read from elsewhere (an
    # error's reason, another module's phrase) are stored as they were said, so they are
    # said in English: in this thread or task only (`speaking`), so the dashboard, which
    # evaluates in a worker thread, keeps drawing in its language meanwhile.
    with speaking(EN):
        found = evaluate(gather(ledger, config, now, cache), config, now)
        found += provider_alerts(ledger, config, now)  # of providers, not nodes: balance_low
        bills = list(bill_alerts(ledger, config.billing_tz, "CNY", config.bill_tolerance, now))
        edited = edited_rows(ledger)
    held = unjudged(found) | unjudged_balances(found)
    return reconcile(ledger, [*found, *edited, *bills], now, held)


def edited_rows(ledger: Ledger) -> list[Alert]:
    """A critical alert for each row changed behind zuka's back (leases.ledger.rowaudit): the
    money commands and offboarding refuse it, and the alerts on its lease use it as it is
    now, so somebody must look."""
    return [
        Alert(
            AlertKind.EDITED,
            Severity.CRITICAL,
            d.node or LEDGER,
            None,  # the row may be a node that is gone: not a key into nodes
            None,
            None,
            f"{d.entity}:{d.entity_id}",
            say(
                N_(
                    "{said}; figures and offboarding that rest on it are refused until it is"
                    " checked"
                ),
                said=drift_said(d),
            ),
            say(
                N_("check it, then correct it with zuka or take it as it is: {command}"),
                command=d.accept,
            ),
        )
        for d in rowaudit.drifted_since(ledger)
    ]


def message_of(alert: StoredAlert) -> Message:
    """The notification for an alert; one per alert and severity (the dedupe key)."""
    body = alert.message + (f"\n→ {alert.action}" if alert.action else "")
    return Message(
        # notify.render puts "[zuka] SEVERITY: " before it: said once.
        _("{kind} on {node}").format(kind=kind_word(alert.kind), node=node_shown(alert.node)),
        body,
        alert.severity,
        key=f"alert:{alert.id}:{alert.severity.value}",
    )


@dataclass(frozen=True)
class AlertFeed:
    """The alerts' outbox (alert_outbox) as a notify.outbox.Feed: each row taken once."""

    within: timedelta = TOLD_WITHIN

    def waiting(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute("SELECT 1 FROM alert_outbox WHERE taken_at IS NULL LIMIT 1")
        return row.fetchone() is not None

    def take(self, conn: sqlite3.Connection, now: datetime) -> list[Message]:
        rows = conn.execute(
            "SELECT id, alert_id, severity, message, action, at FROM alert_outbox"
            " WHERE taken_at IS NULL ORDER BY id"
        ).fetchall()
        conn.executemany(
            "UPDATE alert_outbox SET taken_at = ? WHERE id = ?",
            [(now.astimezone(UTC).isoformat(), r[0]) for r in rows],
        )
        stored = by_ids(conn, sorted({r[1] for r in rows if isinstance(r[1], int)}))
        out = []
        oldest = now - self.within
        for _row_id, alert_id, severity, message, action, at in rows:
            try:
                if datetime.fromisoformat(str(at)) < oldest:
                    continue
                # The alert as it was told: its severity, message and action at the change.
                alert = replace(stored[alert_id], severity=Severity(str(severity)),
                                message=decode(str(message)),
                                action=decode(str(action)))  # fmt: skip
            except (ValueError, TypeError, LookupError):
                # A row edited behind zuka's back is skipped (marked taken), never the round.
                continue
            out.append(message_of(alert))
        return out

    def current(self, conn: sqlite3.Connection, key: str) -> Message | bool | None:
        """An alert's message that waited, as it stands now (notify.outbox.Feed.current): False
        once the alert cleared, or stands at another severity than it was told at (a
        worse one was queued on its own)."""
        kind, _sep, rest = key.partition(":")
        alert_id, _sep, severity = rest.partition(":")
        if kind != "alert" or not alert_id.isdigit():
            return None
        found = by_ids(conn, [int(alert_id)])
        alert = found.get(int(alert_id))
        if alert is None or alert.cleared_at is not None or alert.severity.value != severity:
            return False
        return message_of(alert)


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
        if notifier is not None:
            notifier.add_feed(AlertFeed())

    def due(self) -> bool:
        return self._pace.due()

    def tick(self) -> list[Changed]:
        """check() if due; never raises (a failure is logged and tried next time). The
        notifier is woken either way: `zuka alerts` may have stored something to send."""
        if not self._pace.take():
            return []
        try:
            changes = check(self.ledger, self.config, self.clock, self._cache)
        except Exception:
            self.log.exception("evaluating alerts failed")
            return []
        finally:
            if self.notifier is not None:
                self.notifier.wake()
        self.runs += 1
        self.last_changes = changes
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
