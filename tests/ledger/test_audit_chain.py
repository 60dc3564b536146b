"""The audit log's hash chain: rewritten rows, dropped triggers, changed bytes, forged rows
and an upgrade from a ledger written before the chain all show up in `zuka audit verify`."""

from __future__ import annotations

import contextlib
import io
import itertools
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from leases.ledger import records
from leases.ledger.auditchain import AUDIT_TRIGGERS, GENESIS, links
from leases.ledger.schema import MIGRATIONS
from leases.ledger.store import Ledger
from tui.cli.main import main


def _ledger(tmp_path: Path, nodes: int = 3) -> Path:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        for i in range(nodes):
            node = records.node_from(
                {"name": f"n{i}", "ssh_host": f"h{i}.example", "notes": f"marker-{i}-zzqx"}
            )
            ledger.add_node(node)
        ledger.update_node("n0", {"gpu_count": 8})
    return path


def _verify(path: Path, *extra: str) -> tuple[int, str]:
    buf = io.StringIO()
    code = main(["audit", "verify", "--ledger", str(path), *extra], out=buf)
    return code, buf.getvalue()


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    return conn


@contextlib.contextmanager
def _tampered(path: Path, *triggers: str) -> Iterator[sqlite3.Connection]:
    """Writing as someone who has the file: the named triggers (all when none are named)
    dropped, then put back exactly as they were, so that only the chain can tell."""
    names = triggers or tuple(AUDIT_TRIGGERS)
    with _raw(path) as conn:
        for name in names:
            conn.execute(f"DROP TRIGGER {name}")
        yield conn
        for name in names:
            conn.execute(AUDIT_TRIGGERS[name])


def test_an_untouched_log_verifies_and_prints_its_head(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    code, text = _verify(path)
    assert code == 0, text
    assert "4 entries" in text
    with Ledger.open(path) as ledger:
        report = ledger.verify_audit()
    assert report.ok and report.head_id == 4
    assert f"head 4:{report.head_hash}" in text
    # The head, kept elsewhere, checks out later.
    assert _verify(path, "--anchor", f"4:{report.head_hash}")[0] == 0


def test_every_write_extends_the_chain(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        rows = conn.execute("SELECT id, prev_hash, hash FROM audit ORDER BY id").fetchall()
    assert rows[0][1] == GENESIS
    for (_, _, before), (_, prev, _) in itertools.pairwise(rows):
        assert prev == before


def test_insert_or_replace_is_refused_by_the_triggers(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    before = path.read_bytes()
    with _raw(path) as conn, pytest.raises(sqlite3.IntegrityError, match="hash chain"):
        conn.execute(
            "INSERT OR REPLACE INTO audit (id, at, actor, action, entity, prev_hash, hash)"
            " VALUES (1, '2026-01-01T00:00:00+00:00', 'mallory', 'node.add', 'node', ?, 'x')",
            [GENESIS],
        )
    with _raw(path) as conn, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE audit SET actor = 'mallory' WHERE id = 2")
    assert _verify(path)[0] == 0
    assert path.read_bytes() == before


def test_a_replace_rewritten_row_is_found(tmp_path: Path) -> None:
    """With the insert trigger dropped for the REPLACE and put back exactly as it was,
    only the chain can tell: the rewritten entry no longer hashes to what it stores."""
    path = _ledger(tmp_path)
    with _tampered(path, "audit_chain_only") as conn:
        row = conn.execute("SELECT prev_hash, hash FROM audit WHERE id = 2").fetchone()
        conn.execute(
            "INSERT OR REPLACE INTO audit (id, at, actor, action, entity, node, after,"
            " prev_hash, hash) VALUES (2, '2026-01-01T00:00:00+00:00', 'mallory',"
            " 'node.add', 'node', 'n1', '{}', ?, ?)",
            row,
        )
    code, text = _verify(path)
    assert code == 1
    assert "entry 2: its content was changed" in text


def test_a_dropped_trigger_is_found(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        conn.execute("DROP TRIGGER audit_no_delete")
    code, text = _verify(path)
    assert code == 1
    assert "protection removed or altered: audit_no_delete" in text


def test_a_weakened_trigger_is_found(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        conn.execute("DROP TRIGGER audit_no_update")
        conn.execute(
            "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit WHEN 0"
            " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"
        )
    assert "audit_no_update" in _verify(path)[1]


def test_a_deleted_middle_entry_is_found(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _tampered(path, "audit_no_delete") as conn:
        conn.execute("DELETE FROM audit WHERE id = 2")
    code, text = _verify(path)
    assert code == 1
    assert "entry 3: does not link" in text


def test_a_cut_tail_is_found_with_an_anchor(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with Ledger.open(path) as ledger:
        head = ledger.verify_audit()
    with _tampered(path, "audit_no_delete") as conn:
        conn.execute("DELETE FROM audit WHERE id = 4")
    # Without an anchor a cut tail looks like a shorter log; but the row its last entry
    # wrote (n0's 8 GPUs) is no longer what the log says, and that is named.
    code, text = _verify(path)
    assert code == 1 and "node 1 of node 'n0' was edited outside zuka" in text
    assert "gpu_count 0 on the audit log, 8 in the table" in text
    code, text = _verify(path, "--anchor", f"{head.head_id}:{head.head_hash}")
    assert code == 1
    assert "cut short" in text


def test_a_rebuilt_chain_differs_from_the_anchor(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with Ledger.open(path) as ledger:
        head = ledger.verify_audit()
    # Someone with the file rewrites entry 1 and re-hashes everything after it.
    with _tampered(path) as conn:
        conn.execute("UPDATE audit SET actor = 'mallory' WHERE id = 1")
        cur = conn.execute("SELECT * FROM audit ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, values, strict=True)) for values in cur.fetchall()]
        for entry_id, prev, digest in links(rows):
            conn.execute(
                "UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", [prev, digest, entry_id]
            )
    assert _verify(path)[0] == 0
    code, text = _verify(path, "--anchor", f"{head.head_id}:{head.head_hash}")
    assert code == 1 and "differs from the anchor" in text


def test_one_changed_byte_in_the_file_is_found(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    data = bytearray(path.read_bytes())
    # The notes text stands alone in the nodes table; inside a JSON object only in audit.
    needle = b'"notes": "marker-1-zzqx"'
    at = data.find(needle)
    assert at > 0 and data.find(needle, at + 1) < 0
    data[at + len(needle) - 3] ^= 0x01  # one bit of one byte: 'q' becomes 'p'
    path.write_bytes(bytes(data))
    code, text = _verify(path)
    assert code == 1
    assert "entry 2: its content was changed" in text


def test_a_forged_row_is_shown_and_does_not_crash_log(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        conn.execute("DROP TRIGGER audit_chain_only")
        conn.execute(
            "INSERT INTO audit (id, at, actor, action, entity, node, before, after)"
            " VALUES (99, 'yesterday', 'x', 'node.edit', 'node', 'n0', '{not json', '[1]')"
        )
    buf, err = io.StringIO(), io.StringIO()

    with contextlib.redirect_stderr(err):
        assert main(["log", "--ledger", str(path)], out=buf) == 0
    text = buf.getvalue()
    assert "unreadable entry 99" in text and "before is not JSON" in text
    assert "THE AUDIT LOG DOES NOT VERIFY" in err.getvalue()
    buf = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["log", "--ledger", str(path), "--json"], out=buf) == 0
    assert '"problem"' in buf.getvalue()


def test_a_ledger_from_before_the_chain_is_chained_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    db = Database(conn)
    MIGRATIONS.apply(db, stop_before="m004_audit_chain")
    conn.execute("PRAGMA user_version = 3")
    for i in range(3):
        conn.execute(
            "INSERT INTO audit (at, actor, action, entity, node, after)"
            " VALUES (?, 'old', 'node.add', 'node', ?, '{}')",
            [f"2026-0{i + 1}-01T00:00:00+00:00", f"n{i}"],
        )
    conn.commit()
    conn.close()
    with Ledger.open(path) as ledger:
        report = ledger.verify_audit()
        assert report.ok and report.entries == 3
        assert [e.actor for e in ledger.history()] == ["old", "old", "old"]


def test_a_bad_anchor_is_refused(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    err = io.StringIO()

    with contextlib.redirect_stderr(err):
        code = main(["audit", "verify", "--ledger", str(path), "--anchor", "x:y"])
    assert code == 2
    assert "anchor" in err.getvalue()


def test_an_extra_trigger_that_silences_the_log_is_found(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _raw(path) as conn:
        conn.execute(
            "CREATE TRIGGER audit_zz BEFORE INSERT ON audit BEGIN SELECT RAISE(IGNORE); END"
        )
    code, text = _verify(path)
    assert code == 1 and "unexpected trigger audit_zz" in text


def test_a_blob_in_the_log_is_a_changed_entry_not_a_crash(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with _tampered(path) as conn:
        conn.execute("UPDATE audit SET after = CAST(after AS BLOB) WHERE id = 2")
    code, text = _verify(path)
    assert code == 1 and "entry 2: its content was changed" in text
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["log", "--ledger", str(path)], out=io.StringIO()) == 0
