"""`zuka undo`: reverse the last change in the audit log.

Each entry holds a row's record before and after the change; undoing puts `before` back,
but only while the row is still exactly `after` (else something changed since and the
undo is refused). The change being the last in the log, what comes back is a state the
ledger was in, so the rules between rows (overlapping leases...) are not checked again;
each record still is, and a name a live node has taken since is refused.

The undo is itself an entry, `undo #ID`, with before and after swapped, so undoing an
undo redoes the change. A delete entry holds what went with the row (a node's leases and
their resources, with their ids), so an undo puts them all back; GPU history deleted
with a node is counted in the entry but not kept, so it stays gone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from leases import records
from leases.errors import InputError
from leases.ledger import Ledger, _node_row
from leases.models import AuditEntry, NodeState
from leases.nodelog import UNDO, last_change

Record = dict[str, Any]
_ENTITIES = ("provider", "node", "lease", "resource")


def undo_last(ledger: Ledger) -> list[AuditEntry]:
    """Undo the last change, in one transaction; returns the entries it undid."""
    with ledger.transaction() as conn:
        tail = ledger.last_entries(4)
        unit = last_change(tail)
        if not unit:
            raise InputError("undo", None, "nothing to undo: the audit log is empty")
        for e in unit:
            _undoable(e)
        for e in reversed(unit):
            _reverse(ledger, conn, e)
        return unit


def _undoable(e: AuditEntry) -> None:
    if e.problem:
        raise InputError("undo", e.id, f"the last entry cannot be read ({e.problem})")
    if e.action == "import":
        counts = ", ".join(f"{n} {k}" for k, n in (e.after or {}).items())
        raise InputError(
            "undo",
            e.id,
            f"the last change imported {counts}: zuka undo does not take back an import;"
            " delete what it added (`zuka node delete NAME --force`)",
        )
    if e.entity not in _ENTITIES or e.entity_id is None or (e.before is None and e.after is None):
        raise InputError("undo", e.id, f"entry {e.id} ({e.action}) cannot be undone")


def _reverse(ledger: Ledger, conn: sqlite3.Connection, e: AuditEntry) -> None:
    assert e.entity_id is not None
    current = _current(ledger, e.entity, e.entity_id, e.after)
    if current != _comparable(e.after):
        raise InputError(
            "undo",
            e.id,
            f"the {e.entity} of entry {e.id} ({e.action}) changed since: nothing was undone",
        )
    before = dict(e.before) if e.before is not None else None
    after = dict(e.after) if e.after is not None else None
    if before is None:
        assert after is not None
        _delete(ledger, conn, e.entity, e.entity_id, after)
    elif after is None:
        _insert(ledger, conn, e.entity, e.entity_id, before)
    else:
        _update(ledger, conn, e.entity, e.entity_id, before)
    node = (before or after or {}).get("node" if e.entity != "node" else "name")
    ledger._audit(
        conn, f"{UNDO}{e.id}", e.entity, e.entity_id, node if isinstance(node, str) else None,
        after, before,
    )  # fmt: skip


def _comparable(rec: Mapping[str, Any] | None) -> Record | None:
    """A record as compared with the rows: the GPU history counts are not kept."""
    if rec is None:
        return None
    return {k: v for k, v in rec.items() if k != "gpu_history"}


def _current(
    ledger: Ledger, entity: str, entity_id: int, like: Mapping[str, Any] | None
) -> Record | None:
    """The row's record now, in the shape of `like` (a bundle when it is one)."""
    if entity == "provider":
        rows = ledger._rows("SELECT * FROM providers WHERE id = ?", [entity_id])
        return records.provider_record(records.provider_from(rows[0])) if rows else None
    if entity == "node":
        node = ledger.node_by_id(entity_id)
        if node is None:
            return None
        if like is not None and "leases" in like:
            return _comparable(ledger._node_bundle(node))
        return records.node_record(node)
    if entity == "lease":
        if not ledger._rows("SELECT 1 FROM leases WHERE id = ?", [entity_id]):
            return None
        lease = ledger._lease_by_id(entity_id)
        if like is not None and "resources" in like:
            return ledger._lease_bundle(lease)
        return records.lease_record(lease)
    found = ledger._resource_rows(" WHERE r.id = ?", [entity_id])
    return found[0][1] if found else None


def _delete(
    ledger: Ledger, conn: sqlite3.Connection, entity: str, entity_id: int, rec: Record
) -> None:
    if entity == "provider":
        if conn.execute("SELECT 1 FROM nodes WHERE provider_id = ?", [entity_id]).fetchone():
            raise InputError("undo", rec.get("name"), "nodes refer to this provider now")
        conn.execute("DELETE FROM providers WHERE id = ?", [entity_id])
    elif entity == "node":
        node = ledger.node_by_id(entity_id)
        assert node is not None
        bundle = ledger._node_bundle(node)
        if any(bundle["gpu_history"].values()):
            raise InputError(
                "undo",
                node.name,
                f"the node has GPU history now: delete it with `zuka node delete {node.name}"
                " --force`",
            )
        if bundle["leases"] and "leases" not in rec:
            raise InputError("undo", node.name, "leases refer to the node now")
        for le in bundle["leases"]:
            conn.execute("DELETE FROM resources WHERE lease_id = ?", [le["id"]])
            conn.execute("DELETE FROM leases WHERE id = ?", [le["id"]])
        conn.execute("DELETE FROM nodes WHERE id = ?", [entity_id])
    elif entity == "lease":
        if (
            "resources" not in rec
            and conn.execute("SELECT 1 FROM resources WHERE lease_id = ?", [entity_id]).fetchone()
        ):
            raise InputError("undo", rec.get("start"), "resources refer to the lease now")
        conn.execute("DELETE FROM resources WHERE lease_id = ?", [entity_id])
        conn.execute("DELETE FROM leases WHERE id = ?", [entity_id])
    else:
        conn.execute("DELETE FROM resources WHERE id = ?", [entity_id])


def _insert(
    ledger: Ledger, conn: sqlite3.Connection, entity: str, entity_id: int, rec: Record
) -> None:
    if entity == "provider":
        provider = records.provider_from(rec)
        if conn.execute("SELECT 1 FROM providers WHERE name = ?", [provider.name]).fetchone():
            raise InputError("undo", provider.name, "a provider of that name exists now")
        _put(conn, "providers", {"id": entity_id, **records.provider_record(provider)})
    elif entity == "node":
        node = records.node_from(rec)
        if node.state is not NodeState.RELEASED and ledger._live_named(conn, node.name, None):
            raise InputError("undo", node.name, "a live node of that name exists now")
        provider_id = ledger._provider_id(conn, node.provider)
        _put(conn, "nodes", {"id": entity_id, **_node_row(records.node_record(node), provider_id)})
        # The node's own leases, by its id: an archived node's name may be taken now.
        for le in rec.get("leases") or ():
            _put_lease(conn, int(le["id"]), entity_id, le)
    elif entity == "lease":
        lease = records.lease_from(rec)
        node_id = ledger.node(lease.node).id
        assert node_id is not None
        _put_lease(conn, entity_id, node_id, rec)
    else:
        lease = ledger._lease_for(str(rec.get("node")), rec.get("lease_start"))
        assert lease.id is not None
        _put(conn, "resources", {"id": entity_id, **_resource_row(rec, lease.id, lease.billing_tz)})


def _put_lease(
    conn: sqlite3.Connection, lease_id: int, node_id: int, rec: Mapping[str, Any]
) -> None:
    lease = records.lease_from(rec)
    row = {k: v for k, v in records.lease_record(lease).items() if k != "node"}
    _put(conn, "leases", {"id": lease_id, "node_id": node_id, **row})
    for res in rec.get("resources") or ():
        _put(
            conn,
            "resources",
            {"id": int(res["id"]), **_resource_row(res, lease_id, lease.billing_tz)},
        )


def _resource_row(rec: Mapping[str, Any], lease_id: int, tz: str) -> Record:
    """A resource's row from its record, validated as when it was added."""
    res = records.resource_from(rec, lease_id, tz)
    out = records.resource_record(res, "", datetime.min.replace(tzinfo=UTC))
    return {
        "lease_id": lease_id,
        **{k: v for k, v in out.items() if k not in ("node", "lease_start")},
    }


def _update(
    ledger: Ledger, conn: sqlite3.Connection, entity: str, entity_id: int, rec: Record
) -> None:
    if entity == "node":
        node = records.node_from(rec)
        if node.state is not NodeState.RELEASED and ledger._live_named(conn, node.name, entity_id):
            raise InputError("undo", node.name, "a live node of that name exists now")
        row = _node_row(records.node_record(node), ledger._provider_id(conn, node.provider))
        _set(conn, "nodes", entity_id, row)
    elif entity == "lease":
        row = records.lease_record(records.lease_from(rec))
        _set(conn, "leases", entity_id, {k: v for k, v in row.items() if k != "node"})
    elif entity == "resource":
        found = ledger._resource_rows(" WHERE r.id = ?", [entity_id])
        lease = ledger._lease_by_id(found[0][0].lease_id)
        assert lease.id is not None
        _set(conn, "resources", entity_id, _resource_row(rec, lease.id, lease.billing_tz))
    else:
        _set(conn, "providers", entity_id, records.provider_record(records.provider_from(rec)))


def _put(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> None:
    cols = ", ".join(f'"{k}"' for k in row)
    conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})",
                 list(row.values()))  # fmt: skip


def _set(conn: sqlite3.Connection, table: str, row_id: int, row: Mapping[str, Any]) -> None:
    sets = ", ".join(f'"{k}" = ?' for k in row)
    conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?", [*row.values(), row_id])
