"""Whether each row of the ledger is what zuka last wrote of it on the audit log.

Every change zuka makes to a provider, node, lease, resource or stop writes the row's
record after it on the hash-chained audit log (leases.ledger.auditchain), in the same
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
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leases.core.auditentry import AuditEntry
from leases.core.errors import InputError
from leases.core.i18n import N_, _, ngettext
from leases.core.textsafe import visible
from leases.ledger import books, records, stops
from leases.ledger.book_rows import lines_digest
from leases.ledger.books import BOOKS
from leases.ledger.lease_rows import lease_row
from leases.ledger.node_rows import node_row
from leases.ledger.records import UNREADABLE, unreadable
from leases.ledger.store import Ledger
from leases.ledger.wording import entity_word

Record = dict[str, Any]
ENTITIES = ("provider", "node", "lease", "resource", "stop", *BOOKS)
TABLES = {"provider": "providers", "node": "nodes", "lease": "leases",
          "resource": "resources", "stop": "stops"} | {
          e: b.table for e, b in BOOKS.items()}  # fmt: skip
# What every figure but the provider's bill's reconciliation rests on: not the bills, whose
# lines (tens of thousands) are hashed to be checked.
FIGURES = tuple(e for e in ENTITIES if e != "bill")
# What a record shows of its neighbours, not a column of its own row: a lease's node name
# follows a rename of the node, a resource's lease start an edit of the lease.
DERIVED = frozenset({"node", "lease_start"})
# What a bundle (a delete entry's record, and its undo's) holds beside the row's own record.
_BUNDLED = frozenset({"id", "leases", "resources", "stops", "gpu_history", "lines"})
ACCEPT = "row.accept"


# Columns added by a migration after a row's last entry was written: the entry's record
# lacks them, and the migration gave the row these values (leases.ledger.schema m006, m013,
# m015, m017, m018).
# Any other value there was written behind zuka's back.
_SOURCE = {"reading_source": None, "prom_url": "", "prom_match": "", "prom_token_file": ""}  # m021
_ADDED: dict[str, dict[str, object]] = {
    "lease": {"stopped_billing": "full", "month_count": "calendar", "partial_unit": None,
              "renew_charge_days": None, "hourly_price": None, "refund_rule": "",
              "rounding": "bill", "payment_schedule": "upfront"},
    "resource": {"price": None, "price_per": "month"},
    "node": {"instance_id": "", "instance_endpoint": "", "nvlinks": None, "ib_gbps": None,
             "ssh_tunnels": [], **_SOURCE},  # a record's value: node_row writes "[]" for it
    "provider": {"return_days": None, **_SOURCE},
}  # fmt: skip
# Which row a row belongs to, by id: a lease to its node, a resource to its lease. The
# records name them only by name and start (shown, and renamed with them), so a row moved
# to another owner in SQLite would look unchanged.
OWNER = {"lease": ("leases", "node_id"), "resource": ("resources", "lease_id")}


@dataclass(frozen=True)
class Logged:
    """What the audit log last said of a row: the entry, the record it left (None: the
    row is gone), the id of the row's owner then (None: not known), and whether the
    record is the raw table row (a stop in a delete entry's bundle) rather than a record."""

    entry: int
    record: Record | None
    owner: int | None = None
    raw: bool = False


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
    row: Record | None = None  # an added row's record, to be seen before it is accepted

    def said(self) -> str:
        who = (
            _("{entity} {id} of node {node}").format(
                entity=entity_word(self.entity),
                id=self.entity_id,
                node=repr(visible(self.node, 80)),
            )
            if self.node
            else f"{entity_word(self.entity)} {self.entity_id}"
        )
        if self.what == "added":
            shown = ", ".join(
                f"{k} {_shown(v)}" for k, v in (self.row or {}).items() if v not in (None, "")
            )
            if shown:
                return _(
                    "{who} is in the ledger but no audit entry wrote it: added outside zuka"
                    " ({values})"
                ).format(who=who, values=visible(shown, 400))
            return _(
                "{who} is in the ledger but no audit entry wrote it: added outside zuka"
            ).format(who=who)
        if self.what == "removed":
            return _("{who} was removed outside zuka: audit entry {entry} last wrote it").format(
                who=who, entry=self.entry
            )
        if self.problem:
            return _("{who} was edited outside zuka and does not read: {problem}").format(
                who=who, problem=self.problem
            )
        changes = "; ".join(
            _("{name} {logged} on the audit log, {now} in the table").format(
                name=name, logged=_shown(logged), now=_shown(now)
            )
            for name, logged, now in self.fields
        )
        return _("{who} was edited outside zuka since audit entry {entry}: {changes}").format(
            who=who, entry=self.entry, changes=changes
        )

    @property
    def accept(self) -> str:
        """The command that takes the row as it is now, once somebody has checked it."""
        return f"zuka audit accept {self.entity} {self.entity_id}"


def _shown(value: object) -> str:
    return visible(json.dumps(value, ensure_ascii=False), 60)


def plain(value: object) -> object:
    """As JSON holds it: tuples are lists, and a record read back compares with a logged one."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def own(record: Mapping[str, Any]) -> Record:
    """A record without what a bundle adds to it."""
    return {k: v for k, v in record.items() if k not in _BUNDLED}


def _instant(value: object) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


class _Replay:
    """The audit log replayed entry by entry: what it last said of each row, and the
    names and lease starts it knew then, to tell which row a record named by name."""

    def __init__(self) -> None:
        self.out: dict[tuple[str, int], Logged] = {}
        self.names: dict[int, tuple[str, str]] = {}  # node id -> (name, state)
        self.leases: dict[int, tuple[int | None, datetime | None]] = {}  # -> (node, start)

    def node_named(self, name: object, imported: bool = False) -> int | None:
        """The node of that name then: the only one, or the only live one (zuka adds leases
        and resources to live nodes by name; an import also to released ones, so there a
        name two nodes share is not known); None when it cannot be told."""
        found = [(i, state) for i, (n, state) in self.names.items() if n == name]
        live = [i for i, state in found if state != "released"]
        if len(found) == 1:
            return found[0][0]
        return live[0] if len(live) == 1 and not imported else None

    def lease_of(self, node: int | None, start: object) -> int | None:
        at = _instant(start)
        found = [i for i, (n, s) in self.leases.items() if n == node and s is not None and s == at]
        return max(found) if found else None

    def put(
        self,
        entity: str,
        row_id: int,
        entry: int,
        rec: Record | None,
        owner: int | None = None,
        raw: bool = False,
        imported: bool = False,
    ) -> None:
        if rec is not None and not raw:
            if entity == "node":
                self.names[row_id] = (str(rec.get("name")), str(rec.get("state")))
            elif entity == "lease":
                if owner is None:
                    owner = self.node_named(rec.get("node"), imported)
                self.leases[row_id] = (owner, _instant(rec.get("start")))
            elif entity == "resource" and owner is None:
                node = self.node_named(rec.get("node"), imported)
                owner = None if node is None else self.lease_of(node, rec.get("lease_start"))
        if rec is None:
            self.names.pop(row_id, None) if entity == "node" else None
            self.leases.pop(row_id, None) if entity == "lease" else None
        self.out[(entity, row_id)] = Logged(entry, rec, owner, raw)

    def children(self, entity: str, row_id: int, entry: int, bundle: Mapping[str, Any],
                 gone: bool) -> None:  # fmt: skip
        """The rows a delete entry's bundle (or its undo's) holds beside its own."""
        leases = bundle.get("leases") if entity == "node" else [bundle] if entity == "lease" else []
        for le in leases if isinstance(leases, list) else []:
            if not isinstance(le, Mapping):
                continue
            lease_id = le.get("id") if entity == "node" else row_id
            if not isinstance(lease_id, int):
                continue
            if entity == "node":
                self.put("lease", lease_id, entry, None if gone else own(le), row_id)
            for res in le.get("resources") or []:
                if isinstance(res, Mapping) and isinstance(res.get("id"), int):
                    self.put("resource", res["id"], entry, None if gone else own(res), lease_id)
            for stop in le.get("stops") or []:
                if isinstance(stop, Mapping) and isinstance(stop.get("id"), int):
                    raw = {k: v for k, v in stop.items() if k != "id"}
                    self.put("stop", stop["id"], entry, None if gone else raw, raw=True)


def recorded(entries: Iterable[AuditEntry]) -> dict[tuple[str, int], Logged]:
    """(entity, id) -> what the last entry about the row said of it. Entries that do not
    read are the chain's problem (`zuka audit verify` reports them) and are skipped."""
    replay = _Replay()
    entries = list(entries)
    imports = {e.batch for e in entries if e.action == "import" and e.batch is not None}
    for e in entries:
        if e.problem or e.entity not in ENTITIES or e.entity_id is None or e.id is None:
            continue
        if e.before is None and e.after is None:
            continue
        if e.after is None:
            replay.children(e.entity, e.entity_id, e.id, e.before or {}, gone=True)
            replay.put(e.entity, e.entity_id, e.id, None)
        else:
            imported = e.batch is not None and e.batch in imports
            replay.put(e.entity, e.entity_id, e.id, own(e.after), imported=imported)
            if e.before is None:  # a bundle put back (an undone delete): its rows too
                replay.children(e.entity, e.entity_id, e.id, e.after, gone=False)
    return replay.out


def stored_record(
    ledger: Ledger, entity: str, entity_id: int, like: Mapping[str, Any] | None
) -> Record | None:
    """The row's record now, in the shape of `like` (a bundle when it is one); None when
    there is no such row. Raises what records raise for a row that does not read."""
    if entity in BOOKS:
        return _book_record(ledger, entity, entity_id, like)
    if entity == "provider":
        rows = ledger.rows("SELECT * FROM providers WHERE id = ?", [entity_id])
        return records.provider_record(records.provider_from(rows[0])) if rows else None
    if entity == "node":
        node = ledger.node_by_id(entity_id)
        if node is None:
            return None
        if like is not None and "leases" in like:
            return dict(ledger.node_bundle(node))
        return records.node_record(node)
    if entity == "lease":
        if not ledger.rows("SELECT 1 FROM leases WHERE id = ?", [entity_id]):
            return None
        lease = ledger.lease_by_id(entity_id)
        if like is not None and "resources" in like:
            return dict(ledger.lease_bundle(lease))
        return records.lease_record(lease)
    if entity == "stop":
        rows = ledger.rows(
            "SELECT s.*, n.name AS node FROM stops s JOIN nodes n ON n.id = s.node_id"
            " WHERE s.id = ?",
            [entity_id],
        )
        return stops.record(stops.from_row(rows[0])) if rows else None
    found = ledger.resource_rows(" WHERE r.id = ?", [entity_id])
    return dict(found[0][1]) if found else None


def _book_record(
    ledger: Ledger, entity: str, entity_id: int, like: Mapping[str, Any] | None
) -> Record | None:
    """A book's row as its record (leases.ledger.books), checked as a write is; a bill's
    lines_hash and line_count are those of its lines as they are now, so that a line
    changed behind zuka's back shows as its bill's change."""
    spec = BOOKS[entity]
    row = _row(ledger, entity, entity_id)
    if row is None:
        return None
    rec = {k: v for k, v in row.items() if k != "id"}
    if spec.lines is not None:
        digest, count = lines_digest(ledger.conn, spec, entity_id)
        # Lines whose hash is the one stored with them are as written (each was checked
        # then); lines changed since are read and checked again.
        wanted = like is not None and "lines" in like
        changed = digest != row.get("lines_hash")
        lines = ledger.book_lines(entity, entity_id) if wanted or changed else []
        for line in lines if changed else ():
            books.check_bill_line(line)
        rec["lines_hash"] = digest
        rec["line_count"] = count
        if wanted:
            return {**spec.check(rec), "lines": lines}
    return spec.check(rec)


def _row(ledger: Ledger, entity: str, row_id: int) -> Record | None:
    """The table row as stored (None: no such row)."""
    rows = ledger.rows(f"SELECT * FROM {TABLES[entity]} WHERE id = ?", [row_id])
    return rows[0] if rows else None


def _owner(entity: str, row: Mapping[str, Any] | None) -> int | None:
    """The id of the row a table row belongs to (OWNER), as stored."""
    if entity not in OWNER or row is None:
        return None
    owner = row.get(OWNER[entity][1])
    return owner if isinstance(owner, int) else None


def _raw(row: Mapping[str, Any] | None) -> Record | None:
    """A table row without its id: what a bundle holds of a stop."""
    return None if row is None else {k: v for k, v in row.items() if k != "id"}


def _name(entity: str, rec: Mapping[str, Any] | None) -> str | None:
    name = (rec or {}).get("name" if entity == "node" else "node")
    return name if isinstance(name, str) else None


def compare(
    entity: str,
    entity_id: int,
    logged: Logged | None,
    now: Record | None,
    owner: int | None = None,
    raw: Record | None = None,
) -> Drift | None:
    """The drift of one row (None: it is as logged). `now` is the row's record (None: no
    row), `owner` the id of the row it belongs to now (OWNER), `raw` its table row (for a
    record the log holds raw)."""
    expected = logged.record if logged is not None else None
    entry = logged.entry if logged is not None else None
    if now is None:
        if expected is None:
            return None
        shown = None if logged is None or logged.raw else _name(entity, expected)
        return Drift(entity, entity_id, shown, "removed", entry)
    node = _name(entity, now)
    if logged is None or expected is None:
        return Drift(entity, entity_id, node, "added", entry, row=own(now))
    a = plain(expected)
    assert isinstance(a, dict)
    differ: list[tuple[str, object, object]] = []
    if logged.raw:
        b = plain(raw or {})
        assert isinstance(b, dict)
        differ += [(k, a[k], b.get(k)) for k in a if a[k] != b.get(k)]
    else:
        b = plain(own(now))
        assert isinstance(b, dict)
        added = _ADDED.get(entity, {})
        for k, value in b.items():
            if k in DERIVED or (k not in a and k not in added):
                continue  # shown from another row, or a key no entry nor migration knows
            was = a[k] if k in a else added[k]
            if was != value:
                differ.append((k, was, value))
    if logged.owner is not None and entity in OWNER and owner != logged.owner:
        differ.append((OWNER[entity][1], logged.owner, owner))  # moved to another owner
    return Drift(entity, entity_id, node, "edited", entry, tuple(differ)) if differ else None


def _as_written(
    entity: str, rec: Mapping[str, Any], owner: int | None, provider_ids: Mapping[str, int]
) -> Record | None:
    """The table row zuka writes for a record (the ledger's own node_row and lease_row; a
    resource or stop row is its record without what names its neighbours): what a row as
    logged holds, column for column. None: a record too old to tell (no tags)."""
    if entity == "node":
        if "tags" not in rec:
            return None
        provider = rec.get("provider")
        return node_row(
            dict(rec), provider_ids.get(provider) if isinstance(provider, str) else None
        )
    if entity == "lease":
        return lease_row(dict(rec), owner)
    row = {k: v for k, v in rec.items() if k not in ("node", "lease_start")}
    if entity in OWNER and owner is not None:
        row[OWNER[entity][1]] = owner
    return row


def _as_logged(entity: str, raw: Mapping[str, Any], was: Logged, ids: Mapping[str, int]) -> bool:
    """Whether a table row is, column for column, what zuka wrote from the logged record
    (columns a migration added since hold its default): the quick answer for the rows
    nobody touched. Anything else is read and compared field by field (compare)."""
    assert was.record is not None
    if entity in BOOKS and BOOKS[entity].lines is not None:
        return False  # its lines are compared by their hash, read only the slow way
    row = _as_written(entity, was.record, was.owner, ids)
    if row is None:
        return False
    added = _ADDED.get(entity, {})
    mine = {"id", *(OWNER[entity][1:] if entity in OWNER else ())}
    for column, value in raw.items():
        if column in row:
            if row[column] != value:
                return False
        elif column in added:
            if added[column] != value:
                return False
        elif column not in mine:
            return False  # a column this check does not know: the slow way says
    return all(column in raw for column in row)


def drifted(ledger: Ledger, entities: Sequence[str] = ENTITIES) -> list[Drift]:
    """Every row of these kinds that is not what the audit log last wrote of it, and
    every row the log says is there that is not; by kind, then id."""
    logged = recorded(ledger.history())
    provider_ids = {str(name): int(i) for i, name in ledger.conn.execute(
        "SELECT id, name FROM providers")}  # fmt: skip
    out: list[Drift] = []
    for entity in entities:
        table = {int(r["id"]): r for r in ledger.rows(f"SELECT * FROM {TABLES[entity]}")}
        ids = set(table)
        ids |= {i for (kind, i), x in logged.items() if kind == entity and x.record is not None}
        for row_id in sorted(ids):
            was = logged.get((entity, row_id))
            raw_row = table.get(row_id)
            if (
                was is not None
                and was.record is not None
                and not was.raw
                and raw_row is not None
                and _as_logged(entity, raw_row, was, provider_ids)
            ):
                continue
            try:
                now = stored_record(ledger, entity, row_id, None)
            except UNREADABLE as exc:
                node = _name(entity, None if was is None or was.raw else was.record)
                entry = None if was is None else was.entry
                out.append(Drift(entity, row_id, node, "edited", entry, problem=unreadable(exc)))
                continue
            raw = _raw(raw_row) if was is not None and was.raw else None
            found = compare(entity, row_id, was, now, _owner(entity, raw_row), raw)
            if found is not None:
                out.append(found)
    return out


# Of each open ledger: the drifts found, and what they were found at. A row can change
# only by a commit: another connection's (sqlite3 behind zuka's back: PRAGMA data_version
# moves) or zuka's own, which writes an audit entry in the same transaction.
_FOUND: weakref.WeakKeyDictionary[Ledger, tuple[tuple[int, int], list[Drift]]] = (
    weakref.WeakKeyDictionary()
)


def drifted_since(ledger: Ledger) -> list[Drift]:
    """drifted(ledger), read again only when something committed since the last time:
    what the collector's and the dashboard's timers ask every minute."""
    conn = ledger.conn
    mark = (
        int(conn.execute("PRAGMA data_version").fetchone()[0]),
        int(conn.execute("SELECT coalesce(max(id), 0) FROM audit").fetchone()[0]),
    )
    seen = _FOUND.get(ledger)
    if seen is not None and seen[0] == mark:
        return list(seen[1])
    found = drifted(ledger)
    _FOUND[ledger] = (mark, found)
    return list(found)


# What the front ends say would rest on drifted rows (said with _ in refuse): their words,
# marked here so the catalogue has them (tui/cli/opening.trusted's callers and others').
WHAT = (
    N_("the accounts"), N_("the month's cost"), N_("the export"), N_("the balance"),
    N_("the bill"), N_("the bills"), N_("the costs"), N_("the deposits' figures"),
    N_("the figures"), N_("the invoice"), N_("the invoices' figures"), N_("the offer"),
    N_("the offers"), N_("the quote"), N_("the refund"),
)  # fmt: skip


def refuse(found: Sequence[Drift], what: str) -> None:
    """Raise, naming every drifted row, when there are any: `what` (a report, a cost...)
    would rest on values nobody recorded through zuka."""
    if not found:
        return
    shown = [d.said() for d in found[:5]]
    if len(found) > 5:
        shown.append(_("and {count} more").format(count=len(found) - 5))
    raise InputError(
        "ledger",
        None,
        ngettext(
            "{count} row changed outside zuka, so {what} would rest on values nobody"
            " recorded: {rows}. Check each (`zuka audit verify` lists them), then"
            " correct it with zuka or take it as it is: {accept}",
            "{count} rows changed outside zuka, so {what} would rest on values nobody"
            " recorded: {rows}. Check each (`zuka audit verify` lists them), then"
            " correct it with zuka or take it as it is: {accept}",
            len(found),
        ).format(count=len(found), what=_(what), rows="; ".join(shown), accept=found[0].accept),
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
        raise InputError(
            "entity", entity, _("must be one of {join}").format(join=", ".join(ENTITIES))
        )
    with ledger.transaction() as conn:
        report = ledger.verify_audit()
        if not report.ok:
            raise InputError(
                "audit",
                None,
                _(
                    "the audit log does not verify ({reason}): a row cannot be put on a broken "
                    "chain; see `zuka audit verify`"
                ).format(reason=report.reason),
            )
        logged = recorded(ledger.history()).get((entity, entity_id))
        try:
            now = stored_record(ledger, entity, entity_id, None)
        except UNREADABLE as exc:
            raise InputError(
                entity,
                entity_id,
                _(
                    "does not read ({exc}), so it cannot be taken as it is: set the value back to "
                    "one zuka reads, then accept it"
                ).format(exc=unreadable(exc)),
            ) from None
        row = _row(ledger, entity, entity_id)
        raw = _raw(row) if logged is not None and logged.raw else None
        found = compare(entity, entity_id, logged, now, _owner(entity, row), raw)
        if found is None:
            said = (
                _("is as audit entry {entry} wrote it: there is nothing to accept")
                if logged
                else _("is as the audit log wrote it: there is nothing to accept")
            )
            raise InputError(entity, entity_id, said.format(entry=logged.entry if logged else ""))
        before = None if logged is None else logged.record
        ledger.audit(conn, ACCEPT, entity, entity_id, found.node, before, now)
        return found
