"""What an alert is, and what the rules know of a node to raise one (leases.alerts.rules).

A rule reports an alert at one of two levels: RAISE (the condition crossed its raise
threshold) or HOLD (it is between the clear and the raise threshold: an open alert stays
open, a new one is not raised).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING

from leases.core.i18n import N_
from leases.core.models import Lease, Node, NodeHealth, NodeStatus
from leases.core.severity import Severity
from leases.money import billing
from leases.money.amounts import fen
from leases.money.deposits import Refund
from leases.money.renewals import BillingNow
from leases.telemetry.history import NodeMinute

if TYPE_CHECKING:
    from leases.offboard.evidence import Progress

# The node name of an alert of the ledger itself (a row edited outside zuka, a bill's line
# that matches no lease): stored as it is, shown through the catalogue.
LEDGER = N_("the ledger")
# Readings older than this say nothing about the node now (no collector runs).
FRESH = timedelta(minutes=10)


class AlertKind(StrEnum):
    LEASE_ENDING = "lease_ending"
    UNDERUSED = "underused"
    FORGOTTEN = "forgotten"
    STARVED = "starved"
    RELEASE_SOON = "release_soon"
    DEPOSIT = "deposit_not_refunded"
    AUTORENEW = "autorenew_soon"
    HOURLY_AFTER_END = "hourly_after_end"  # a prepaid lease past its end, billed by the hour
    UNREACHABLE = "unreachable"
    STOPPED_QUESTION = "stopped_question"  # unread for hours: was it stopped? record it
    LOGIN_FAILED = "login_failed"  # it answers but refuses our login: not unreachable
    HOSTKEY = "hostkey_changed"
    TEMPERATURE = "temperature"
    ECC = "ecc_errors"
    # A rule that could not be evaluated on a node (a row it cannot read): said as an
    # alert of its own, so that one bad row silences only that rule on that node.
    UNEVALUATED = "cannot_evaluate"
    # A ledger row changed behind zuka's back (leases.ledger.rowaudit): figures and deletions
    # that rest on it are refused until somebody checks it.
    EDITED = "edited_outside_zuka"
    # The provider's bill for the last complete month (leases.alerts.billfacts): a lease's
    # charge that differs beyond the tolerance, a resource id that matches no lease.
    BILL_MISMATCH = "bill_mismatch"
    BILL_UNMATCHED = "bill_unmatched"
    # A provider account's prepaid balance runs out within [alerts] balance_days (issue 20):
    # of a provider, not a node (leases.alerts.balance).
    BALANCE_LOW = "balance_low"
    # The last hand-over acceptance of the node's current lease failed, while the lease
    # can still be returned (leases.alerts.acceptance).
    ACCEPTANCE_FAILED = "acceptance_failed"
    # The node's host beyond its GPUs (leases.alerts.hostrules): a data disk, quota, root fs
    # or /dev/shm nearly full; memory nearly gone.
    DISK_FULL = "disk_full"
    RAM_FULL = "ram_full"


class Level(StrEnum):
    RAISE = "raise"
    HOLD = "hold"


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    severity: Severity
    node: str  # the name it had when raised (display only: names are reused)
    node_id: int | None
    lease_id: int | None
    lease_start: datetime | None
    key: str  # what tells apart alerts of one kind on one node and lease (a GPU, say)
    message: str  # plain words, with the yuan involved
    action: str  # what to do about it
    yuan: Decimal | None = None  # the amount, in `currency`
    level: Level = Level.RAISE
    currency: str = "CNY"  # of the lease the amount is from

    @property
    def identity(self) -> tuple[str, int | None, int | None, str]:
        return (self.kind.value, self.node_id, self.lease_id, self.key)


@dataclass(frozen=True)
class Gap:
    """An open stretch without readings (a poll_gap row)."""

    start: datetime
    health: NodeHealth
    detail: str


@dataclass(frozen=True)
class Accepted:
    """The node's last stored acceptance run (leases.ledger.acceptance_rows), as its
    chained entry bears it out, and its provider's return window."""

    run_id: int
    lease_id: int | None
    status: str  # leases.core.acceptance.Status's value
    level: str
    return_days: int | None  # the provider's; None: not known


@dataclass(frozen=True)
class NodeFacts:
    """What the rules know of one node (live or archived) at `now`."""

    node: Node
    leases: tuple[Lease, ...] = ()  # this node's leases, by start
    billed: BillingNow | None = None  # the lease billing now and its renewal chain
    usage: billing.CardHours | None = None  # the prepaid lease's use over the window
    usage_since: datetime | None = None
    peak_busy_cards: int | None = None  # most cards busy in any hour of the window
    latest: NodeStatus | None = None
    gap: Gap | None = None
    # The trailing minute roll-ups the forgotten and starved rules look at, oldest first.
    minutes: tuple[NodeMinute, ...] = field(default=())
    # When every minute held is idle: where that idle stretch began before them, read
    # from hour roll-ups (None: not before the first minute held, or unknown).
    idle_from: datetime | None = None
    # Where its offboarding stands (evidence.progress; None: never planned).
    offboard: Progress | None = None
    # The node's recorded stops (leases.ledger.stops), applied by the lease's stopped_billing.
    stops: tuple[billing.Stop, ...] = ()
    # Deposit refunds (the deposit_refund book) of its leases, by lease id.
    refunds: Mapping[int, Sequence[Refund]] = field(default_factory=dict)
    # Facts that could not be read for it (leases.alerts.facts.gather): (rule, why, fix), rule
    # a name of node_alerts' rules or EVERY_RULE; such a rule is not run but said as a
    # "cannot evaluate" alert (a missing fact is never taken for "nothing to say").
    unread: tuple[tuple[str, str, str], ...] = ()
    # The last acceptance run of its current lease while that lease is young (None: none).
    acceptance: Accepted | None = None


def make_alert(
    facts: NodeFacts,
    kind: AlertKind,
    severity: Severity,
    message: str,
    action: str,
    *,
    lease: Lease | None = None,
    key: str = "",
    amount: Decimal | None = None,
    level: Level = Level.RAISE,
) -> Alert:
    return Alert(
        kind,
        severity,
        facts.node.name,
        facts.node.id,
        lease.id if lease else None,
        lease.start if lease else None,
        key,
        message,
        action,
        None if amount is None else fen(amount),
        level,
        lease.currency if lease else "CNY",
    )
