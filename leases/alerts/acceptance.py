"""The acceptance_failed rule and the fact it rests on: the last acceptance run of the
node's current lease failed, and the lease can still be returned (the provider's
return_days after its start, or, when that is not recorded, [accept] young_days)."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import datetime, timedelta

from leases.accept.window import returnable_until
from leases.alerts.alert import Accepted, Alert, AlertKind, NodeFacts, make_alert
from leases.alerts.said import say
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.i18n import N_
from leases.core.models import Lease
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.ledger import acceptance_rows
from leases.ledger.store import Ledger
from leases.money.renewals import in_effect

RULE = N_("acceptance")


def _young(lease: Lease, return_days: int | None, config: AlertsConfig, now: datetime) -> bool:
    if return_days is not None:
        until = returnable_until(lease.start, lease.billing_tz, return_days)
        return now.astimezone(fields.timezone(lease.billing_tz)).date() <= until
    return now < lease.start + timedelta(days=config.accept_young_days)


def read(ledger: Ledger, facts: NodeFacts, config: AlertsConfig, now: datetime) -> Accepted | None:
    """The last run of the node's current lease, read only while that lease is young
    (a run changed outside zuka raises acceptance_rows.RunChanged)."""
    lease = in_effect(facts.leases, now)
    if lease is None or lease.id is None or facts.node.id is None:
        return None
    days = ledger.provider(facts.node.provider).return_days if facts.node.provider else None
    if not _young(lease, days, config, now):
        return None
    run_id = acceptance_rows.last_id(ledger, facts.node.id, lease.id)
    if run_id is None:
        return None
    run = acceptance_rows.load(ledger, run_id)
    return Accepted(run.id, run.lease_id, run.status.value, run.verdict.level.value, days)


def acceptance_failed(facts: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    a = facts.acceptance
    lease = in_effect(facts.leases, now)
    if a is None or lease is None or a.lease_id != lease.id or a.status != "failed":
        return
    if not _young(lease, a.return_days, config, now):
        return
    name = facts.node.name
    action = say(
        N_("{command}  (send it to the provider)"),
        command=f"zuka accept {shlex.quote(name)} --last --report md",
    )
    if a.return_days is not None:
        until = returnable_until(lease.start, lease.billing_tz, a.return_days)
        message = say(
            N_("hand-over acceptance failed (run {run}, level {level}): returnable until {until}"),
            run=a.run_id,
            level=a.level,
            until=until.isoformat(),
        )
        severity = Severity.CRITICAL
    else:
        provider = shlex.quote(visible(facts.node.provider or "PROVIDER", 100))
        message = say(
            N_(
                "hand-over acceptance failed (run {run}, level {level}): return window unknown"
                " (record it: zuka provider edit {provider} --return-days N)"
            ),
            run=a.run_id,
            level=a.level,
            provider=provider,
        )
        severity = Severity.WARNING
    yield make_alert(facts, AlertKind.ACCEPTANCE_FAILED, severity, message, action, lease=lease)
