"""Whether each row of the ledger is what zuka last wrote of it on the audit log.

Every change zuka makes to a provider, node, lease, resource or stop writes the row's
record after it on the hash-chained audit log (leases.auditchain), in the same
transaction. A row changed, added or removed with sqlite3 behind zuka's back leaves the
chain intact but no longer matches its last entry: a price edited in the table would
otherwise flow into every figure, a stop removed would bill a stopped node. `drifted`
replays the log and compares; the money commands refuse to figure on a drifted row and
`zuka audit verify` lists them; `zuka audit accept` puts a row as it is now on the chain,
in the accepting user's name, once somebody has checked it.

The replay reads only the log and the rows; what a row "should be" is the record of the
last entry about it (a delete entry, with what went with the row, says it is gone; an
undo of it, with the same bundle, says it is back).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leases import records, stops
from leases.errors import InputError
from leases.ledger import Ledger
from leases.models import AuditEntry
from leases.records import UNREADABLE, unreadable
from leases.textsafe import visible

Record = dict[str, Any]
ENTITIES = ("provider", "node", "lease", "resource", "stop")
TABLES = {"provider": "providers", "node": "nodes", "lease": "leases",
          "resource": "resources", "stop": "stops"}  # fmt: skip
# What a record shows of its neighbours, not a column of its own row: a lease's node name
# follows a rename of the node, a resource's lease start an edit of the lease.
_DERIVED = frozenset({"node", "lease_start"})
# What a bundle (a delete entry's record, and its undo's) holds beside the row's own record.
_BUNDLED = frozenset({"id", "leases", "resources", "stops", "gpu_history"})
ACCEPT = "row.accept"


class _Back:
    """A row an undo of a delete put back from a bundle whose shape for it is not a record
    (a stop is bundled as its raw row): known to exist, its values not compared."""


BACK = _Back()
Expected = Record | None | _Back


@dataclass(frozen=True)
class Drift:
    """One row that is not what the audit log last wrote of it."""

    entity: str
    entity_id: int
    node: str | None
    what: str  # "edited", "added" (no entry wrote it) or "removed" (its entry says it is)
    entry: int | None  # the last entry about it
    fields: tuple[tuple[str, object, object], ...] = ()  # (field, on the log, in the table)
    problem: str = ""  # the row does not even read

    def said(self) -> str:
        who = f"{self.entity} {self.entity_id}" + (
            f" of node {visible(self.node, 80)!r}" if self.node else ""
        )
        if self.what == "added":
            return f"{who} is in the ledger but no audit entry wrote it: added outside zuka"
        if self.what == "removed":
            return f"{who} was removed outside zuka: audit entry {self.entry} last wrote it"
        if self.problem:
            return f"{who} was edited outside zuka and does not read: {self.problem}"
        changes = "; ".join(
            f"{name} {_shown(logged)} on the audit log, {_shown(now)} in the table"
            for name, logged, now in self.fields
        )
        return f"{who} was edited outside zuka since audit entry {self.entry}: {changes}"

    @property
    def accept(self) -> str:
        """The command that takes the row as it is now, once somebody has checked it."""
        return f"zuka audit accept {self.entity} {self.entity_id}"


def _shown(value: object) -> str:
    return visible(json.dumps(value, ensure_ascii=False), 60)


def _plain(value: object) -> object:
    """As JSON holds it: tuples are lists, and a record read back compares with a logged one."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def own(record: Mapping[str, Any]) -> Record:
    """A record without what a bundle adds to it."""
    return {k: v for k, v in record.items() if k not in _BUNDLED}


def _children(entity: str, bundle: Mapping[str, Any]) -> Iterable[tuple[str, int, Expected]]:
    """The rows a delete entry's bundle (or its undo's) holds beside its own, with their
    records where the bundle holds them as records."""
    leases = bundle.get("leases") if entity == "node" else [bundle] if entity == "lease" else []
    for le in leases if isinstance(leases, list) else []:
        if not isinstance(le, Mapping):
            continue
        if entity == "node" and isinstance(le.get("id"), int):
            yield "lease", le["id"], own(le)
        for res in le.get("resources") or []:
            if isinstance(res, Mapping) and isinstance(res.get("id"), int):
                yield "resource", res["id"], own(res)
        for stop in le.get("stops") or []:
            if isinstance(stop, Mapping) and isinstance(stop.get("id"), int):
                yield "stop", stop["id"], BACK


def recorded(entries: Iterable[AuditEntry]) -> dict[tuple[str, int], tuple[int, Expected]]:
    """(entity, id) -> (the last entry about the row, the record it left: None when it
    said the row is gone). Entries that do not read are the chain's problem (`zuka audit
    verify` reports them) and are skipped here."""
    out: dict[tuple[str, int], tuple[int, Expected]] = {}
    for e in entries:
        if e.problem or e.entity not in ENTITIES or e.entity_id is None or e.id is None:
            continue
        if e.before is None and e.after is None:
            continue
        if e.after is None:
            out[(e.entity, e.entity_id)] = (e.id, None)
            for entity, row_id, _ in _children(e.entity, e.before or {}):
                out[(entity, row_id)] = (e.id, None)
        else:
            out[(e.entity, e.entity_id)] = (e.id, own(e.after))
            if e.before is None:  # a bundle put back (an undone delete): its rows too
                for entity, row_id, rec in _children(e.entity, e.after):
                    out[(entity, row_id)] = (e.id, rec)
    return out


def stored_record(
    ledger: Ledger, entity: str, entity_id: int, like: Mapping[str, Any] | None
) -> Record | None:
    """The row's record now, in the shape of `like` (a bundle when it is one); None when
    there is no such row. Raises what records raise for a row that does not read."""
    if entity == "provider":
        rows = ledger._rows("SELECT * FROM providers WHERE id = ?", [entity_id])
        return records.provider_record(records.provider_from(rows[0])) if rows else None
    if entity == "node":
        node = ledger.node_by_id(entity_id)
        if node is None:
            return None
        if like is not None and "leases" in like:
            return dict(ledger._node_bundle(node))
        return records.node_record(node)
    if entity == "lease":
        if not ledger._rows("SELECT 1 FROM leases WHERE id = ?", [entity_id]):
            return None
        lease = ledger._lease_by_id(entity_id)
        if like is not None and "resources" in like:
            return dict(ledger._lease_bundle(lease))
        return records.lease_record(lease)
    if entity == "stop":
        rows = ledger._rows(
            "SELECT s.*, n.name AS node FROM stops s JOIN nodes n ON n.id = s.node_id"
            " WHERE s.id = ?",
            [entity_id],
        )
        return stops.record(stops.from_row(rows[0])) if rows else None
    found = ledger._resource_rows(" WHERE r.id = ?", [entity_id])
    return dict(found[0][1]) if found else None


def _ids(ledger: Ledger, entity: str) -> list[int]:
    return [int(r[0]) for r in ledger.conn.execute(f"SELECT id FROM {TABLES[entity]} ORDER BY id")]


def _node_of(ledger: Ledger, entity: str, entity_id: int, logged: Expected) -> str | None:
    if isinstance(logged, dict):
        name = logged.get("name" if entity == "node" else "node")
        if isinstance(name, str):
            return name
    try:
        now = stored_record(ledger, entity, entity_id, None)
    except UNREADABLE:
        return None
    name = (now or {}).get("name" if entity == "node" else "node")
    return name if isinstance(name, str) else None


def compare(
    entity: str, entity_id: int, logged: tuple[int, Expected] | None, now: Record | None
) -> Drift | None:
    """The drift of one row (None: it is as logged). `now` is the row's record (None: no
    row); `logged` the last entry about it and the record it left."""
    entry, expected = logged if logged is not None else (None, None)
    node = (now or {}).get("name" if entity == "node" else "node")
    node = node if isinstance(node, str) else None
    if now is None:
        if expected is None:
            return None
        return Drift(entity, entity_id, _name(entity, expected), "removed", entry)
    if logged is None or expected is None:
        return Drift(entity, entity_id, node, "added", entry)
    if isinstance(expected, _Back):
        return None
    a, b = _plain(expected), _plain(own(now))
    assert isinstance(a, dict) and isinstance(b, dict)
    differ = tuple((k, a[k], b[k]) for k in a if k in b and k not in _DERIVED and a[k] != b[k])
    return Drift(entity, entity_id, node, "edited", entry, differ) if differ else None


def _name(entity: str, rec: Expected) -> str | None:
    if not isinstance(rec, dict):
        return None
    name = rec.get("name" if entity == "node" else "node")
    return name if isinstance(name, str) else None


def drifted(ledger: Ledger, entities: Sequence[str] = ENTITIES) -> list[Drift]:
    """Every row of these kinds that is not what the audit log last wrote of it, and
    every row the log says is there that is not; by kind, then id."""
    logged = recorded(ledger.history())
    out: list[Drift] = []
    for entity in entities:
        ids = set(_ids(ledger, entity))
        ids |= {i for (kind, i), (_, rec) in logged.items() if kind == entity and rec is not None}
        for row_id in sorted(ids):
            try:
                now = stored_record(ledger, entity, row_id, None)
            except UNREADABLE as exc:
                entry, rec = logged.get((entity, row_id), (None, None))
                node = _node_of(ledger, entity, row_id, rec)
                out.append(Drift(entity, row_id, node, "edited", entry, problem=unreadable(exc)))
                continue
            found = compare(entity, row_id, logged.get((entity, row_id)), now)
            if found is not None:
                out.append(found)
    return out


def refuse(found: Sequence[Drift], what: str) -> None:
    """Raise, naming every drifted row, when there are any: `what` (a report, a cost...)
    would rest on values nobody recorded through zuka."""
    if not found:
        return
    shown = [d.said() for d in found[:5]]
    more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
    raise InputError(
        "ledger",
        None,
        f"{len(found)} row{'s' if len(found) != 1 else ''} changed outside zuka, so {what}"
        f" would rest on values nobody recorded: {'; '.join(shown)}{more}. Check each (`zuka"
        f" audit verify` lists them), then correct it with zuka or take it as it is:"
        f" {found[0].accept}",
    )


def concerning(
    found: Sequence[Drift], node: str, rows: Iterable[tuple[str, int | None]]
) -> list[Drift]:
    """The drifts about one node: its own rows (entity, id) and any row the log or the
    table says is the node's by name (a resource removed outside zuka has no row left)."""
    mine = {(entity, row_id) for entity, row_id in rows if row_id is not None}
    return [d for d in found if (d.entity, d.entity_id) in mine or d.node == node]


def accept(ledger: Ledger, entity: str, entity_id: int) -> Drift:
    """Put the row as it is now on the audit log (an entry `row.accept` in the ledger's
    actor's name, with the logged record before and the row's after; `zuka undo` sets the
    logged record back): somebody checked the change made outside zuka and takes it.
    Refused while the chain itself does not verify, for a row that is as logged, and for
    a row that does not read."""
    if entity not in ENTITIES:
        raise InputError("entity", entity, f"must be one of {', '.join(ENTITIES)}")
    with ledger.transaction() as conn:
        report = ledger.verify_audit()
        if not report.ok:
            raise InputError(
                "audit",
                None,
                f"the audit log does not verify ({report.reason}): a row cannot be put on a"
                " broken chain; see `zuka audit verify`",
            )
        logged = recorded(ledger.history()).get((entity, entity_id))
        try:
            now = stored_record(ledger, entity, entity_id, None)
        except UNREADABLE as exc:
            raise InputError(
                entity,
                entity_id,
                f"does not read ({unreadable(exc)}), so it cannot be taken as it is: set the"
                " value back to one zuka reads, then accept it",
            ) from None
        found = compare(entity, entity_id, logged, now)
        if found is None:
            at = f"audit entry {logged[0]}" if logged else "the audit log"
            raise InputError(entity, entity_id, f"is as {at} wrote it: there is nothing to accept")
        before = None if logged is None or not isinstance(logged[1], dict) else logged[1]
        ledger._audit(conn, ACCEPT, entity, entity_id, found.node, before, now)
        return found
