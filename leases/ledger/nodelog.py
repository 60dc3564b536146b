"""One node's history in the audit log, across renames and reused names.

The audit log names each entry's node as it was called then; a rename (a node.edit whose
name changes) and a released node's name given to a new node make the name a poor key.
This walks the log in order, keeping which node held which name and which lease and
resource belonged to which node, so the entries of one node are found whatever it was
called. Pure: entries in, entries out; the stored (hashed) entries are never changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import count

from leases.core.auditentry import AuditEntry

UNDO = "undo #"


def _children(rec: Mapping[str, object] | None, key: str) -> list[Mapping[str, object]]:
    """The leases of a node bundle, or the resources of a lease bundle (delete entries)."""
    found = (rec or {}).get(key)
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def node_entries(entries: Iterable[AuditEntry], node_id: int) -> list[AuditEntry]:
    """The entries about the node whose row id is node_id now, and its leases and resources.

    Row ids can come back after a delete (SQLite reuses the highest one), so each run of a
    node row from its insert to its delete is its own lineage; an undo that puts a deleted
    node back continues the lineage it had.
    """
    tagged, lineage, _ = _walk(entries)
    target = lineage.get(node_id)
    return [e for owner, e in tagged if target is not None and owner == target]


def name_entries(entries: Iterable[AuditEntry], name: str) -> list[AuditEntry]:
    """The entries of the node that was last given this name (deleted or renamed since,
    or not), across all its names: never those of another node that had it before."""
    tagged, _, holder = _walk(entries)
    target = holder.get(name)
    return [e for owner, e in tagged if target is not None and owner == target]


def renamed(entries: Sequence[AuditEntry], name: str) -> tuple[str, AuditEntry] | None:
    """For a name no node has now: the name the node last called so has today, and the
    entry that renamed it away; None if that node was deleted or there was none."""
    nodes = [e for e in name_entries(entries, name) if e.entity == "node"]
    if not nodes or nodes[-1].after is None:
        return None
    now = nodes[-1].after.get("name")
    away = [
        e for e in nodes
        if (e.before or {}).get("name") == name and (e.after or {}).get("name") != name
    ]  # fmt: skip
    if not isinstance(now, str) or now == name or not away:
        return None
    return now, away[-1]


def _walk(
    entries: Iterable[AuditEntry],
) -> tuple[list[tuple[int | None, AuditEntry]], dict[int, int], dict[str, int]]:
    """Each entry with its lineage; node row id -> lineage now; name -> lineage last
    given it."""
    fresh = count()
    lineage: dict[int, int] = {}  # node row id -> lineage now
    gone: dict[int, int] = {}  # node row id -> lineage of the row last deleted
    holder: dict[str, int] = {}  # name -> lineage that has it
    lease_of: dict[int, int] = {}  # lease id -> lineage
    resource_of: dict[int, int] = {}  # resource id -> lineage
    plan_of: dict[int, int] = {}  # offboarding plan id -> lineage
    tagged: list[tuple[int | None, AuditEntry]] = []
    for e in entries:
        eid = e.entity_id
        owner: int | None = None
        if e.entity == "node" and eid is not None:
            if eid not in lineage:
                back = e.action.startswith(UNDO) and e.before is None and eid in gone
                lineage[eid] = gone[eid] if back else next(fresh)
            owner = lineage[eid]
            name = (e.after or {}).get("name")
            if isinstance(name, str):
                holder[name] = owner
            for rec in (e.before, e.after):
                for le in _children(rec, "leases"):
                    _own(le, owner, lease_of, resource_of)
            if e.after is None:
                gone[eid] = lineage.pop(eid)
        elif e.entity == "lease" and eid is not None:
            if eid not in lease_of and e.node is not None and e.node in holder:
                lease_of[eid] = holder[e.node]
            owner = lease_of.get(eid)
            for rec in (e.before, e.after):
                _own({"id": eid, "resources": _children(rec, "resources")}, owner, {}, resource_of)
            if e.after is None:
                lease_of.pop(eid, None)
        elif e.entity == "resource" and eid is not None:
            if eid not in resource_of and e.node is not None and e.node in holder:
                resource_of[eid] = holder[e.node]
            owner = resource_of.get(eid)
            if e.after is None:
                resource_of.pop(eid, None)
        elif e.entity == "stop" and eid is not None:
            # A stop's record names its node by row id (leases.ledger.stops.record).
            rec = e.after or e.before or {}
            node_id = rec.get("node_id")
            owner = lineage.get(node_id) if isinstance(node_id, int) else None
        elif e.entity in ("process", "hostkey"):
            # A process stop and a host key trusted name their node by row id
            # (leases.app.processes, leases.app.trust).
            node_id = (e.after or {}).get("node_id")
            owner = lineage.get(node_id) if isinstance(node_id, int) else None
        elif e.entity == "offboard" and eid is not None:
            # The plan's entry names its node by row id (leases.offboard.evidence.store).
            body = (e.after or {}).get("body")
            node_id = body.get("node_id") if isinstance(body, dict) else None
            if eid not in plan_of and isinstance(node_id, int) and node_id in lineage:
                plan_of[eid] = lineage[node_id]
            owner = plan_of.get(eid)
        tagged.append((owner, e))
    return tagged, lineage, holder


def _own(
    lease: Mapping[str, object],
    owner: int | None,
    lease_of: dict[int, int],
    resource_of: dict[int, int],
) -> None:
    if owner is None:
        return
    if isinstance(lease.get("id"), int):
        lease_of[lease["id"]] = owner  # type: ignore[index]
    for res in _children(lease, "resources"):
        if isinstance(res.get("id"), int):
            resource_of[res["id"]] = owner  # type: ignore[index]


def undone_id(action: str) -> int | None:
    """The entry id an undo entry reversed ('undo #17' -> 17)."""
    if not action.startswith(UNDO) or not action[len(UNDO) :].isdigit():
        return None
    return int(action[len(UNDO) :])


def last_change(entries: Sequence[AuditEntry]) -> list[AuditEntry]:
    """The entries the last change is made of, in log order, from the log's last entries.

    One entry, except: a renewal (lease.renew then lease.add of the renewal); an undo of
    several entries (undo #k+1 then undo #k). Undoing an undo redoes what it undid.
    """
    if not entries:
        return []
    unit = [entries[-1]]
    ref = undone_id(unit[0].action)
    if ref is not None:
        for e in reversed(entries[:-1]):
            prev = undone_id(e.action)
            if prev is None or prev != ref + 1:
                break
            unit.insert(0, e)
            ref = prev
        return unit
    last = unit[0]
    if last.action == "lease.add" and len(entries) > 1:
        renew = entries[-2]
        if (
            renew.action == "lease.renew"
            and renew.node == last.node
            and renew.after is not None
            and last.after is not None
            and renew.after.get("end") == last.after.get("start")
        ):
            unit.insert(0, renew)
    return unit
