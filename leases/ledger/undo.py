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

import json
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from leases.core.auditentry import AuditEntry
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import NodeState
from leases.core.origin import who
from leases.core.textsafe import visible
from leases.ledger import nodelog, records, stops
from leases.ledger.book_rows import put_lines
from leases.ledger.books import BOOKS
from leases.ledger.node_rows import node_row
from leases.ledger.nodelog import UNDO
from leases.ledger.rowaudit import DERIVED, own, plain, recorded, stored_record
from leases.ledger.store import Ledger
from leases.ledger.wording import entity_word

Record = dict[str, Any]
_ENTITIES = ("provider", "node", "lease", "resource", "stop", *BOOKS)


def undo_last(
    ledger: Ledger, *, any_user: bool = False, entry: int | None = None
) -> list[AuditEntry]:
    """Undo the last change, in one transaction; returns the entries it undid.

    Refused unless the whole audit chain verifies: an entry changed behind the triggers
    would otherwise be applied (and copied into a properly chained undo entry). Refused
    too when the change is another user's (unless any_user), or when `entry` is given
    and is not an entry of the last change (two undos at once: the second is refused
    instead of redoing the first).
    """
    with ledger.transaction() as conn:
        report = ledger.verify_audit()
        if not report.ok:
            where = (
                _("entry {id}").format(id=report.broken_at)
                if report.broken_at is not None
                else _("the log")
            )
            raise InputError(
                "undo",
                None,
                _(
                    "the audit log does not verify ({where}: {reason}), so no entry of it can be "
                    "trusted to undo: nothing was undone; see `zuka audit verify`"
                ).format(where=where, reason=report.reason),
            )
        unit = last_change(ledger)
        if not unit:
            raise InputError("undo", None, _("nothing to undo: the audit log is empty"))
        if entry is not None and entry not in {e.id for e in unit}:
            raise InputError(
                "entry",
                entry,
                _("is not the last change, which is {unit}: nothing was undone").format(
                    unit=describe(unit)
                ),
            )
        others = sorted({e.actor for e in unit if e.actor != ledger.actor})
        if others and not any_user:
            raise InputError(
                "undo",
                None,
                _(
                    "the last change, {unit}, was made by {join}, not by you ({actor}): give "
                    "--any-user to undo it anyway"
                ).format(unit=describe(unit), join=", ".join(others), actor=ledger.actor),
            )
        for e in unit:
            _undoable(e)
        for e in unit:
            _held_before(ledger, e)
        for e in reversed(unit):
            _reverse(ledger, conn, e)
        return unit


def last_change(ledger: Ledger) -> list[AuditEntry]:
    """The entries of the last change, in log order: everything the last transaction
    wrote (its batch); for entries written before batches, nodelog.last_change's rule."""
    tail = ledger.last_entries(1)
    if tail and tail[0].batch is not None:
        return ledger.batch_entries(tail[0].batch)
    return nodelog.last_change(ledger.last_entries(4))


def describe(unit: list[AuditEntry]) -> str:
    """'entry 7 (node.edit of n1 by alice from 203.0.113.7 at 2026-...)', or 'entries 7-8
    (...; ...)'."""
    what = "; ".join(
        _("{action} of {what} by {who} at {at}").format(
            action=e.action,
            what=e.node or e.entity,
            who=who(e.actor, e.origin),
            at=e.at.isoformat(timespec="seconds"),
        )
        for e in unit
    )
    if len(unit) == 1:
        said = _("entry {id} ({what})").format(id=unit[0].id, what=what)
    else:
        said = _("entries {first}-{last} ({what})").format(
            first=unit[0].id, last=unit[-1].id, what=what
        )
    return visible(said, 400)


def _undoable(e: AuditEntry) -> None:
    if e.problem:
        raise InputError(
            "undo", e.id, _("the last entry cannot be read ({problem})").format(problem=e.problem)
        )
    if e.action == "import":
        counts = ", ".join(f"{n} {k}" for k, n in (e.after or {}).items())
        raise InputError(
            "undo",
            e.id,
            _(
                "the last change imported {counts}: zuka undo does not take back an import; "
                "delete what it added (`zuka node delete NAME --force`)"
            ).format(counts=counts),
        )
    if e.entity not in _ENTITIES or e.entity_id is None or (e.before is None and e.after is None):
        raise InputError(
            "undo",
            e.id,
            _("entry {id} ({action}) cannot be undone").format(id=e.id, action=e.action),
        )


def _held_before(ledger: Ledger, e: AuditEntry) -> None:
    """Refuse to undo a change whose `before` is not what the chain held of the row before
    it: the row had been changed outside zuka when the change was made (a price set to 3
    with sqlite3, then the lease edited), and the undo would put the outside values back
    as zuka's own, with a chain that verifies."""
    if e.before is None or e.id is None or e.entity_id is None:
        return
    prior = recorded(x for x in ledger.history() if x.id is not None and x.id < e.id).get(
        (e.entity, e.entity_id)
    )
    if prior is None or prior.record is None or prior.raw:
        return  # a row the chain never held (written before the chain knew of it)
    then, said = plain(own(prior.record)), plain(own(e.before))
    assert isinstance(then, dict) and isinstance(said, dict)
    # What a record shows of its neighbours (a lease's node name follows a rename) is not
    # the row's own.
    differ = [k for k in then if k in said and k not in DERIVED and then[k] != said[k]]
    if differ:
        k = differ[0]
        raise InputError(
            "undo",
            e.id,
            _(
                "entry {id} ({action}) was made on a {entity} changed outside zuka ({k} {dumps} "
                "then, not {dumps2} as the audit log had it): undoing it would put values nobody "
                "recorded back as zuka's; nothing was undone. Set the row right with zuka instead"
            ).format(
                id=e.id,
                action=e.action,
                entity=entity_word(e.entity),
                k=k,
                dumps=visible(json.dumps(said[k], ensure_ascii=False), 40),
                dumps2=visible(json.dumps(then[k], ensure_ascii=False), 40),
            ),
        )


def _reverse(ledger: Ledger, conn: sqlite3.Connection, e: AuditEntry) -> None:
    assert e.entity_id is not None
    now = stored_record(ledger, e.entity, e.entity_id, e.after)
    if _comparable(now) != _comparable(e.after):
        raise InputError(
            "undo",
            e.id,
            _("the {entity} of entry {id} ({action}) changed since: nothing was undone").format(
                entity=entity_word(e.entity), id=e.id, action=e.action
            ),
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
    # The undo's entry holds the rows as they were read back, never the entry's raw JSON.
    then = stored_record(ledger, e.entity, e.entity_id, e.before)
    node = (then or now or {}).get("node" if e.entity != "node" else "name")
    ledger.audit(
        conn, f"{UNDO}{e.id}", e.entity, e.entity_id, node if isinstance(node, str) else None,
        now, then,
    )  # fmt: skip


def _comparable(rec: Mapping[str, Any] | None) -> Record | None:
    """A record as compared with the rows: the GPU history counts are not kept."""
    if rec is None:
        return None
    return {k: v for k, v in rec.items() if k != "gpu_history"}


def _delete(
    ledger: Ledger, conn: sqlite3.Connection, entity: str, entity_id: int, rec: Record
) -> None:
    if entity in BOOKS:
        spec = BOOKS[entity]
        if spec.lines is not None:
            conn.execute(f"DELETE FROM {spec.lines[0]} WHERE {spec.lines[1]} = ?", [entity_id])
        conn.execute(f"DELETE FROM {spec.table} WHERE id = ?", [entity_id])
    elif entity == "provider":
        if conn.execute("SELECT 1 FROM nodes WHERE provider_id = ?", [entity_id]).fetchone():
            raise InputError("undo", rec.get("name"), _("nodes refer to this provider now"))
        conn.execute("DELETE FROM providers WHERE id = ?", [entity_id])
    elif entity == "node":
        node = ledger.node_by_id(entity_id)
        assert node is not None
        bundle = ledger.node_bundle(node)
        if any(bundle["gpu_history"].values()):
            raise InputError(
                "undo",
                node.name,
                _(
                    "the node has GPU history now: delete it with `zuka node delete {name} --force`"
                ).format(name=node.name),
            )
        if bundle["leases"] and "leases" not in rec:
            raise InputError("undo", node.name, _("leases refer to the node now"))
        for le in bundle["leases"]:
            conn.execute("DELETE FROM resources WHERE lease_id = ?", [le["id"]])
            conn.execute("DELETE FROM stops WHERE lease_id = ?", [le["id"]])
            conn.execute("DELETE FROM leases WHERE id = ?", [le["id"]])
        conn.execute("DELETE FROM nodes WHERE id = ?", [entity_id])
    elif entity == "stop":
        conn.execute("DELETE FROM stops WHERE id = ?", [entity_id])
    elif entity == "lease":
        if (
            "stops" not in rec
            and conn.execute("SELECT 1 FROM stops WHERE lease_id = ?", [entity_id]).fetchone()
        ):
            raise InputError("undo", rec.get("start"), _("stops refer to the lease now"))
        if (
            "resources" not in rec
            and conn.execute("SELECT 1 FROM resources WHERE lease_id = ?", [entity_id]).fetchone()
        ):
            raise InputError("undo", rec.get("start"), _("resources refer to the lease now"))
        conn.execute("DELETE FROM resources WHERE lease_id = ?", [entity_id])
        conn.execute("DELETE FROM stops WHERE lease_id = ?", [entity_id])
        conn.execute("DELETE FROM leases WHERE id = ?", [entity_id])
    else:
        conn.execute("DELETE FROM resources WHERE id = ?", [entity_id])


def _insert(
    ledger: Ledger, conn: sqlite3.Connection, entity: str, entity_id: int, rec: Record
) -> None:
    if entity in BOOKS:
        spec = BOOKS[entity]
        lines = rec.pop("lines", None) or []
        _put(conn, spec.table, {"id": entity_id, **spec.check(rec)})
        if spec.lines is not None:
            put_lines(conn, spec, entity_id, lines)
    elif entity == "provider":
        provider = records.provider_from(rec)
        if conn.execute("SELECT 1 FROM providers WHERE name = ?", [provider.name]).fetchone():
            raise InputError("undo", provider.name, _("a provider of that name exists now"))
        _put(conn, "providers", {"id": entity_id, **records.provider_record(provider)})
    elif entity == "node":
        node = records.node_from(rec)
        if node.state is not NodeState.RELEASED and ledger.live_named(conn, node.name, None):
            raise InputError("undo", node.name, _("a live node of that name exists now"))
        if node.state is not NodeState.RELEASED:
            ledger.look_alike(conn, node.name, None)
        provider_id = ledger.provider_id(conn, node.provider)
        _put(conn, "nodes", {"id": entity_id, **node_row(records.node_record(node), provider_id)})
        # The node's own leases, by its id: an archived node's name may be taken now.
        for le in rec.get("leases") or ():
            _put_lease(conn, int(le["id"]), entity_id, le)
    elif entity == "lease":
        lease = records.lease_from(rec)
        node_id = ledger.node(lease.node).id
        assert node_id is not None
        _put_lease(conn, entity_id, node_id, rec)
    elif entity == "stop":
        _put(conn, "stops", _stop_row(rec, entity_id))
    else:
        lease = ledger.lease_for(str(rec.get("node")), rec.get("lease_start"))
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
    for stop in rec.get("stops") or ():
        _put(conn, "stops", _stop_row({**stop, "lease_id": lease_id, "node_id": node_id},
                                      int(stop["id"])))  # fmt: skip


def _stop_row(rec: Mapping[str, Any], stop_id: int) -> Record:
    """A stop's row from its record, checked as a stored one is (leases.ledger.stops.from_row)."""
    s = stops.from_row(rec)
    row = stops.record(s)
    return {"id": stop_id, **{k: row[k] for k in ("node_id", "lease_id", "start", "end",
                                                  "source", "who")}}  # fmt: skip


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
    if entity in BOOKS:
        _set(conn, BOOKS[entity].table, entity_id, BOOKS[entity].check(rec))
    elif entity == "node":
        node = records.node_from(rec)
        if node.state is not NodeState.RELEASED and ledger.live_named(conn, node.name, entity_id):
            raise InputError("undo", node.name, _("a live node of that name exists now"))
        if node.state is not NodeState.RELEASED:
            ledger.look_alike(conn, node.name, entity_id)
        row = node_row(records.node_record(node), ledger.provider_id(conn, node.provider))
        _set(conn, "nodes", entity_id, row)
    elif entity == "lease":
        row = records.lease_record(records.lease_from(rec))
        _set(conn, "leases", entity_id, {k: v for k, v in row.items() if k != "node"})
    elif entity == "stop":
        row = _stop_row(rec, entity_id)
        _set(conn, "stops", entity_id, {k: v for k, v in row.items() if k != "id"})
    elif entity == "resource":
        found = ledger.resource_rows(" WHERE r.id = ?", [entity_id])
        lease = ledger.lease_by_id(found[0][0].lease_id)
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
