"""The audit log as the ledger writes and reads it: one entry per change of a row, with its
record before and after, hash-chained (leases.ledger.auditchain) and guarded by triggers;
everything one transaction writes is one batch, which `zuka undo` takes back whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from leases.core.auditentry import AuditEntry
from leases.core.errors import InputError, UnknownNode
from leases.core.i18n import _
from leases.core.models import Node
from leases.ledger import auditchain, nodelog
from leases.ledger.auditchain import ACCEPTANCE_TRIGGERS, AUDIT_TRIGGERS
from leases.ledger.connection import LedgerConnection
from leases.ledger.records import Record


class AuditLog(LedgerConnection):
    """The audit log's writes and reads, the first layer of a Ledger above its connection
    (see leases.ledger.store)."""

    if TYPE_CHECKING:  # NodeRows', a later layer of the Ledger (leases.ledger.node_rows)

        def node(self, name: str) -> Node: ...
        def archived_nodes(self, name: str) -> list[Node]: ...

    def audit(
        self,
        conn: sqlite3.Connection,
        action: str,
        entity: str,
        entity_id: int | None,
        node: str | None,
        before: Record | None,
        after: Record | None,
    ) -> None:
        """Append the entry of one change, inside the write transaction that makes it
        (conn): the row's record before and after, chained to the entry before it."""
        last = conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
        prev_id, prev_hash = (int(last[0]), str(last[1])) if last else (0, auditchain.GENESIS)
        row: dict[str, Any] = {
            "id": prev_id + 1,
            "at": self.clock().astimezone(UTC).isoformat(timespec="microseconds"),
            "actor": self.actor,
            "action": action,
            "entity": entity,
            "entity_id": entity_id,
            "node": node,
            "before": None if before is None else json.dumps(before, ensure_ascii=False),
            "after": None if after is None else json.dumps(after, ensure_ascii=False),
        }
        # Everything one transaction writes is one batch, named by its first entry: one
        # command, which `zuka undo` takes back whole.
        if self._batch is None:
            self._batch = row["id"]
        row["batch"] = self._batch
        if self.origin:
            row["origin"] = self.origin
        row["prev_hash"] = prev_hash
        row["hash"] = auditchain.entry_hash(row, prev_hash)
        conn.execute(
            f"INSERT INTO audit ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )

    # -- reading the log -----------------------------------------------------------------

    def history(
        self, node: str | None = None, *, archived: bool = False, user: str | None = None
    ) -> list[AuditEntry]:
        """The audit log; of one node: its entries whatever it was called then (see
        leases.ledger.nodelog), for the node that has the name now, or with archived, the latest
        archived node of that name. A deleted node's entries are found by its name. With
        user, only the entries that user wrote (a user who wrote none: none)."""
        found = self._history(node, archived=archived)
        if user is None:
            return found
        return [e for e in found if e.actor == user]

    def _history(self, node: str | None, *, archived: bool) -> list[AuditEntry]:
        everything = [audit_entry(r) for r in self.rows("SELECT * FROM audit ORDER BY id")]
        if node is None:
            return everything
        if archived:
            found = self.archived_nodes(node)
            if not found:
                raise InputError("node", node, _("no archived node of that name"))
            target: Node | None = found[0]
        else:
            try:
                target = self.node(node)
            except UnknownNode:
                target = None
        if target is None or target.id is None:
            # A deleted or renamed name: the lineage of the node last called so only.
            by_name = nodelog.name_entries(everything, node)
            if not by_name:
                raise UnknownNode(node)
            return by_name
        return nodelog.node_entries(everything, target.id)

    def renamed(self, name: str) -> tuple[str, datetime] | None:
        """For a name no node has: (the name the node once called so has now, when it was
        renamed away); None when a node has the name, or it was deleted, or never was."""
        try:
            self.node(name)
            return None
        except UnknownNode:
            pass
        everything = [audit_entry(r) for r in self.rows("SELECT * FROM audit ORDER BY id")]
        found = nodelog.renamed(everything, name)
        return (found[0], found[1].at) if found else None

    def last_entries(self, n: int) -> list[AuditEntry]:
        """The log's last n entries, in order."""
        rows = self.rows("SELECT * FROM audit ORDER BY id DESC LIMIT ?", [n])
        return [audit_entry(r) for r in reversed(rows)]

    def batch_entries(self, batch: int) -> list[AuditEntry]:
        """The entries one transaction wrote (its batch: one command), in order."""
        rows = self.rows("SELECT * FROM audit WHERE batch = ? ORDER BY id", [batch])
        return [audit_entry(r) for r in rows]

    def verify_audit(self, anchor: tuple[int, str] | None = None) -> auditchain.ChainReport:
        """Check the audit log's hash chain and the triggers that guard it."""
        # The ledger has no triggers but these: any other one (a RAISE(IGNORE) that drops
        # audit rows, one that rewrites a node after each edit) is tampering too.
        found = dict(
            self.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        )
        expected = {**AUDIT_TRIGGERS, **ACCEPTANCE_TRIGGERS}
        missing = [name for name, sql in expected.items() if found.get(name) != sql]
        missing += [
            _("unexpected trigger {name}").format(name=name)
            for name in found
            if name not in expected
        ]
        cur = self.conn.execute("SELECT * FROM audit ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = (dict(zip(names, values, strict=True)) for values in cur)
        return auditchain.verify(rows, triggers_missing=missing, anchor=anchor)


def audit_entry(r: Mapping[str, Any]) -> AuditEntry:
    """One audit row as an entry; a row that cannot be read (forged, damaged) becomes an
    entry that says so instead of stopping `zuka log`."""
    problems: list[str] = []

    def change(key: str) -> dict[str, object] | None:
        raw = r.get(key)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except (TypeError, ValueError):
            problems.append(_("{key} is not JSON").format(key=key))
            return None
        if not isinstance(value, dict):
            problems.append(_("{key} is not an object").format(key=key))
            return None
        return value

    try:
        at = datetime.fromisoformat(str(r.get("at")))
        if at.tzinfo is None:
            raise ValueError
    except ValueError:
        problems.append(_("its time is unreadable"))
        at = datetime.min.replace(tzinfo=UTC)
    entity_id = r.get("entity_id")
    node = r.get("node")
    return AuditEntry(
        at=at,
        action=str(r.get("action") or ""),
        entity=str(r.get("entity") or ""),
        entity_id=entity_id if isinstance(entity_id, int) else None,
        node=node if isinstance(node, str) else None,
        before=change("before"),
        after=change("after"),
        actor=str(r.get("actor") or ""),
        id=r.get("id") if isinstance(r.get("id"), int) else None,
        problem="; ".join(problems),
        batch=r.get("batch") if isinstance(r.get("batch"), int) else None,
        origin=str(r.get("origin") or ""),
    )
