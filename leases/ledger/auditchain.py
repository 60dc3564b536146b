"""The hash chain that makes an append-only log tamper-evident.

Each entry stores the hash of the entry before it and its own hash over its columns and
that previous hash, so a changed byte, a rewritten row (INSERT OR REPLACE) or a removed
row in the middle breaks the chain at that entry. Triggers refuse UPDATE, DELETE and any
insert that does not extend the chain; `verify` also checks that those triggers are still
there. Someone who can write the file can still rebuild the whole chain: keep the head
(`zuka audit verify` prints it) somewhere else and check it with `--anchor ID:HASH`.

Pure: rows in, verdict out. The ledger's audit log uses it, and so will the offboarding
evidence log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from leases.core.i18n import _

GENESIS = "0" * 64
# The columns an entry's hash covers, in this order; `prev_hash` is hashed first.
COLUMNS = ("id", "at", "actor", "action", "entity", "entity_id", "node", "before", "after")
# Hashed after COLUMNS when set (m010): entries written before it keep their hashes, and
# a batch set, cleared or widened by hand (to make `zuka undo` take more) breaks the chain.
BATCH = "batch"
# Hashed last when not empty (m023): where the entry's user came from (leases.core.origin).
# Entries written before keep their hashes; an origin blanked, changed or added by hand
# breaks the chain at its entry.
ORIGIN = "origin"


# The audit log's protections (installed by migration m004, checked by `zuka audit verify`):
# no UPDATE, no DELETE, and an INSERT only at the end of the hash chain.
AUDIT_TRIGGERS = {
    "audit_no_update": "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
    "audit_no_delete": "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END",
    "audit_chain_only": "CREATE TRIGGER audit_chain_only BEFORE INSERT ON audit"
    " WHEN NEW.id IS NULL OR NEW.hash IS NULL"
    " OR NEW.id <= (SELECT coalesce(max(id), 0) FROM audit)"
    " OR NEW.prev_hash IS NOT coalesce((SELECT hash FROM audit ORDER BY id DESC LIMIT 1),"
    " '0000000000000000000000000000000000000000000000000000000000000000')"
    " BEGIN SELECT RAISE(ABORT, 'the audit log only grows at the end of its hash chain'); END",
}

# Stored acceptance runs are never edited nor deleted (leases.ledger.acceptance_rows;
# made by schema.m019_acceptance): `zuka audit verify` expects these too.
ACCEPTANCE_TRIGGERS = {
    "acceptance_runs_no_update": "CREATE TRIGGER acceptance_runs_no_update"
    " BEFORE UPDATE ON acceptance_runs"
    " BEGIN SELECT RAISE(ABORT, 'acceptance runs are never edited'); END",
    "acceptance_runs_no_delete": "CREATE TRIGGER acceptance_runs_no_delete"
    " BEFORE DELETE ON acceptance_runs"
    " BEGIN SELECT RAISE(ABORT, 'acceptance runs are never deleted'); END",
}


def entry_hash(row: Mapping[str, Any], prev_hash: str) -> str:
    """sha256 over the previous hash and the entry's columns, as stored."""
    batch = row.get(BATCH)
    origin = row.get(ORIGIN)
    payload = json.dumps(
        [prev_hash, *(_plain(row.get(c)) for c in COLUMNS)]
        + ([] if batch is None else [_plain(batch)])
        # Tagged: an origin is never read as a batch, nor a batch as an origin.
        + ([] if origin is None or origin == "" else [{ORIGIN: _plain(origin)}]),
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def links(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Any, str, str]]:
    """(id, prev_hash, hash) of each row, chained anew from GENESIS in the order given:
    what an upgrade stores for entries written before the chain."""
    prev = GENESIS
    for row in rows:
        digest = entry_hash(row, prev)
        yield row.get("id"), prev, digest
        prev = digest


@dataclass(frozen=True)
class ChainReport:
    entries: int
    head_id: int | None
    head_hash: str
    broken_at: int | None = None  # id of the first entry that does not verify
    reason: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


def verify(
    rows: Iterable[Mapping[str, Any]],
    *,
    triggers_missing: Iterable[str] = (),
    anchor: tuple[int, str] | None = None,
) -> ChainReport:
    """Walk the rows in id order; report the first entry that breaks the chain.

    triggers_missing names protections found absent or altered (the caller reads the
    schema); anchor is an (id, hash) the user kept from an earlier verify.
    """
    prev = GENESIS
    prev_id = 0
    count = 0
    head_id: int | None = None
    anchor_seen = anchor is None
    for row in rows:
        count += 1
        entry_id = row.get("id")
        if not isinstance(entry_id, int) or entry_id <= prev_id:
            return ChainReport(count, head_id, prev, _id(entry_id), _("entry ids out of order"))
        if row.get("prev_hash") != prev:
            reason = _("does not link to the entry before it (an entry was removed or inserted)")
            return ChainReport(count, head_id, prev, entry_id, reason)
        if row.get("hash") != entry_hash(row, prev):
            return ChainReport(count, head_id, prev, entry_id, _("its content was changed"))
        prev, prev_id, head_id = str(row["hash"]), entry_id, entry_id
        if anchor is not None and entry_id == anchor[0]:
            if prev != anchor[1]:
                reason = _("differs from the anchor you kept (the log was rebuilt)")
                return ChainReport(count, head_id, prev, entry_id, reason)
            anchor_seen = True
    missing = sorted(set(triggers_missing))
    if missing:
        reason = _("protection removed or altered: {names}").format(names=", ".join(missing))
        return ChainReport(count, head_id, prev, None, reason)
    if not anchor_seen:
        assert anchor is not None
        reason = _("entry {anchor} of the anchor is gone (the log was cut short)").format(
            anchor=anchor[0]
        )
        return ChainReport(count, head_id, prev, anchor[0], reason)
    return ChainReport(count, head_id, prev)


def _plain(value: object) -> object:
    """A stored value as JSON can hash it: zuka writes text, integers and NULL only, so a
    BLOB or a REAL is hashed in a form no written value has (and so never matches)."""
    if isinstance(value, bytes):
        return {"blob": value.hex()}
    if isinstance(value, float):
        return {"real": repr(value)}
    return value


def _id(value: object) -> int | None:
    return value if isinstance(value, int) else None
