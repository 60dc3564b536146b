"""One entry of the audit log as the ledger reads it back (leases.ledger.audit): who changed
what, when, from where, with the record before and after."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class AuditEntry:
    """An entry as read: a row that could not be read as it should says why in problem."""

    at: datetime
    action: str
    entity: str
    entity_id: int | None
    node: str | None
    before: dict[str, object] | None
    after: dict[str, object] | None
    actor: str = ""
    id: int | None = None
    problem: str = ""  # why the stored row could not be read as it should
    batch: int | None = None  # the entries one transaction wrote share one (m010)
    origin: str = ""  # where the actor came from (leases.core.origin; m023), as stored
