"""Where each audit entry's user came from (m023): stored with the entry, covered by its hash
when set, so that an origin blanked, changed or added afterwards breaks the chain; entries
written before it keep their hashes; the append-only triggers still hold; undo still asks
by user name."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.ledger import records
from leases.ledger.auditchain import AUDIT_TRIGGERS, COLUMNS, entry_hash
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.store import Ledger
from leases.ledger.undo import undo_last
from tui.cli.main import main

FROM_A = "ssh 203.0.113.7"
FROM_B = "ssh 198.51.100.9 (env)"


def _add(path: Path, name: str, *, actor: str = "alice", origin: str = FROM_A) -> None:
    with Ledger.open(path, actor=actor, origin=origin) as ledger:
        ledger.add_node(records.node_from({"name": name, "ssh_host": f"{name}.example"}))


def _verify(path: Path) -> tuple[int, str]:
    buf = io.StringIO()
    code = main(["audit", "verify", "--ledger", str(path)], out=buf)
    return code, buf.getvalue()


def _raw_update(path: Path, sql: str, params: list[object]) -> None:
    """As someone who has the file: the triggers dropped, the row changed, the triggers put
    back exactly as they were, so that only the chain can tell."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for name in AUDIT_TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(sql, params)
        for sql_text in AUDIT_TRIGGERS.values():
            conn.execute(sql_text)
    finally:
        conn.close()


def _origins(path: Path) -> list[tuple[int, str, str]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, actor, origin FROM audit ORDER BY id").fetchall()
    finally:
        conn.close()


def test_an_entry_records_its_origin_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1")
    _add(path, "n2", actor="bob", origin=FROM_B)
    _add(path, "n3", actor="carol", origin="")
    assert _origins(path) == [(1, "alice", FROM_A), (2, "bob", FROM_B), (3, "carol", "")]
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify_audit().ok
        assert [e.origin for e in ledger.history()] == [FROM_A, FROM_B, ""]
    assert _verify(path)[0] == 0


def test_an_entry_without_origin_hashes_as_before_m023() -> None:
    """The hash of an entry with no origin is the one written before the column existed
    (pinned here as that code computed it), so no old entry changes its hash."""
    row = {"id": 3, "at": "2026-12-01T00:00:00+00:00", "actor": "alice", "action": "node.add",
           "entity": "node", "entity_id": 3, "node": "n3", "before": None, "after": "{}",
           "batch": 3}  # fmt: skip
    prev = "ab" * 32
    old = json.dumps([prev, *(row[c] for c in COLUMNS), 3], separators=(",", ":"))
    pinned = hashlib.sha256(old.encode()).hexdigest()
    assert entry_hash(row, prev) == pinned
    assert entry_hash({**row, "origin": ""}, prev) == pinned
    assert entry_hash({**row, "origin": FROM_A}, prev) != pinned
    # The origin is tagged: no origin ever hashes like a batch, nor a batch like one.
    no_batch = {**row, "batch": None}
    assert entry_hash({**no_batch, "origin": "3"}, prev) != entry_hash(row, prev)


def test_a_ledger_from_before_m023_upgrades_and_its_old_entries_still_verify(
    tmp_path: Path,
) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1", origin="")
    _add(path, "n2", origin="")
    # The ledger as schema 22 left it: no origin column.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE audit DROP COLUMN origin")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = 'm023_audit_origin'")
    conn.execute("PRAGMA user_version = 22")
    conn.close()
    _add(path, "n3", actor="bob", origin=FROM_B)
    with Ledger.open(path, readonly=True) as ledger:
        version = ledger.conn.execute("PRAGMA user_version").fetchone()[0]
        report = ledger.verify_audit()
    assert version == SCHEMA_VERSION
    assert report.ok and report.entries == 3
    assert _origins(path) == [(1, "alice", ""), (2, "alice", ""), (3, "bob", FROM_B)]


@pytest.mark.parametrize(
    ("entry", "forged"),
    [
        (2, ""),  # blanked: where the change came from hidden
        (2, "ssh 10.9.9.9"),  # changed: blamed on another address
        (1, FROM_B),  # added to an entry written without one
    ],
)
def test_an_origin_changed_by_hand_breaks_the_chain(
    tmp_path: Path, entry: int, forged: str
) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1", origin="")
    _add(path, "n2")
    _add(path, "n3")
    assert _verify(path)[0] == 0
    _raw_update(path, "UPDATE audit SET origin = ? WHERE id = ?", [forged, entry])
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify_audit()
    assert not report.ok
    assert report.broken_at == entry and report.reason == "its content was changed"
    code, out = _verify(path)
    assert code != 0 and f"entry {entry}" in out


def test_the_triggers_still_refuse_an_edit_of_the_origin(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE audit SET origin = '' WHERE id = 1")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM audit WHERE id = 1")
    finally:
        conn.close()
    assert _origins(path) == [(1, "alice", FROM_A)]


def test_an_origin_given_is_stored_visible_and_bounded(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1", origin="ssh \x1b[31m203.0.113.7\x07" + "x" * 500)
    ((_, _, stored),) = _origins(path)
    assert "\x1b" not in stored and "\x07" not in stored
    assert stored.startswith("ssh ") and len(stored) <= 80


def test_undo_asks_by_user_name_not_by_origin(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _add(path, "n1")
    # The same user from another address undoes it as their own.
    with Ledger.open(path, actor="alice", origin=FROM_B) as ledger:
        assert [e.node for e in undo_last(ledger)] == ["n1"]
    # Another user from the same address is refused without --any-user.
    with (
        Ledger.open(path, actor="bob", origin=FROM_B) as ledger,
        pytest.raises(
            InputError, match=r"by alice from 198\.51\.100\.9 \(env\) at .* not by you \(bob\)"
        ),
    ):
        undo_last(ledger)
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify_audit().ok
        assert [e.origin for e in ledger.history()] == [FROM_A, FROM_B]


def test_the_process_origin_is_the_default(tmp_path: Path) -> None:
    from leases.core import origin

    path = tmp_path / "l.db"
    with Ledger.open(path, actor="alice") as ledger:
        assert ledger.origin == origin.this_process()
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h"}))
    assert _origins(path) == [(1, "alice", origin.this_process())]
