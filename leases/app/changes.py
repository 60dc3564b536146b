"""Which lease of its node a lease is, and whether a command changed anything: the words
every ledger use case shares."""

from __future__ import annotations

from leases.core.models import Lease
from leases.ledger.store import Ledger
from leases.money import renewals


def audit_head(ledger: Ledger) -> int | None:
    """The id of the audit log's last entry: a command that left it so changed nothing
    (and gave `zuka undo` nothing new to take back)."""
    last = ledger.last_entries(1)
    return last[0].id if last else None


def which_lease(ledger: Ledger, lease: Lease) -> str:
    """Which lease of its node this is, as lease list shows it (renewals.describe)."""
    leases = ledger.leases(lease.node)
    found = next((le for le in leases if le.id == lease.id), lease)
    return renewals.describe(found, leases, ledger.clock())
