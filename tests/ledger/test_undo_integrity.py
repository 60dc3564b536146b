"""`zuka undo` only applies what the audit chain vouches for, takes back everything one
command wrote, says what it undoes and whose change that was, and no-op edits write
nothing for it to take back (issue 7, item 1, reviewers' defects)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from leases.ledger import auditchain, records
from leases.ledger.auditchain import AUDIT_TRIGGERS
from leases.ledger.store import Ledger
from tests.support.cli import Cli


@contextlib.contextmanager
def _tampered(path: Path) -> Iterator[sqlite3.Connection]:
    """Writing as someone who has the file: the triggers dropped, then put back."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for name in AUDIT_TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        yield conn
        for sql in AUDIT_TRIGGERS.values():
            conn.execute(sql)
    finally:
        conn.close()


def _entries(path: Path) -> list[dict[str, object]]:
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM audit ORDER BY id")]


def _node(cli: Cli, name: str) -> dict[str, object]:
    r = cli("node", "show", name, "--json")
    assert r.code == 0, r.err
    return dict(json.loads(r.out)["node"])


def _leases(cli: Cli, name: str) -> list[dict[str, object]]:
    r = cli("lease", "list", name, "--json")
    assert r.code == 0, r.err
    return list(json.loads(r.out))


def _forged_before(path: Path) -> str:
    with Ledger.open(path) as ledger:
        rec = records.node_record(ledger.node("n1"))
    return json.dumps({**rec, "ssh_host": "evil.example", "ssh_user": "root", "extra": "x"})


# -- 1. undo applies only entries the hash chain vouches for --------------------------------


def test_undo_refuses_while_the_audit_chain_does_not_verify(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh lab@10.0.0.5").code == 0
    assert cli("node", "edit", "n1", "--notes", "hi").code == 0
    forged = _forged_before(ledger_path)
    with _tampered(ledger_path) as conn:
        conn.execute("UPDATE audit SET before = ? WHERE id = 2", [forged])
    assert cli("audit", "verify").code == 1
    count = len(_entries(ledger_path))
    r = cli("undo")
    assert r.code != 0
    assert "zuka audit verify" in r.err and "entry 2" in r.err
    assert _node(cli, "n1")["ssh_host"] == "10.0.0.5"
    assert len(_entries(ledger_path)) == count


def test_undo_writes_the_normalised_record_never_the_raw_entry(cli: Cli, ledger_path: Path) -> None:
    """Someone who rebuilt the whole chain (only an anchor kept elsewhere shows that) gets
    an unknown key into an entry: the undo's own entry holds the record as zuka reads it."""
    assert cli("node", "add", "n1", "--ssh", "ssh lab@10.0.0.5").code == 0
    assert cli("node", "edit", "n1", "--notes", "hi").code == 0
    with Ledger.open(ledger_path) as ledger:
        rec = records.node_record(ledger.node("n1"))
    before = json.dumps({**rec, "notes": "", "extra": "smuggled"})
    with _tampered(ledger_path) as conn:
        conn.execute("UPDATE audit SET before = ? WHERE id = 2", [before])
        rows = _entries(ledger_path)
        for entry_id, prev, digest in auditchain.links(rows):
            conn.execute(
                "UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", [prev, digest, entry_id]
            )
    assert cli("audit", "verify").code == 0
    assert cli("undo").code == 0
    last = _entries(ledger_path)[-1]
    assert last["action"] == "undo #2"
    assert "extra" not in json.loads(str(last["after"]))
    assert json.loads(str(last["after"]))["notes"] == ""


# -- 2. one undo takes back everything one command wrote ------------------------------------


def test_undo_of_lease_end_on_a_renewed_lease_restores_the_whole_chain(cli: Cli) -> None:
    assert cli("node", "add", "a1", "--local").code == 0
    r = cli("lease", "add", "a1", "--billing", "monthly", "--price", "100",
            "--start", "2026-01-01", "--end", "2030-01-01")  # fmt: skip
    assert r.code == 0, r.err
    assert cli("lease", "renew", "a1", "--until", "2030-02-01").code == 0
    chain = _leases(cli, "a1")
    assert cli("lease", "end", "a1").code == 0
    r = cli("undo")
    assert r.code == 0, r.err
    assert _leases(cli, "a1") == chain
    assert cli("undo").code == 0  # the redo ends both again
    assert all(le["ended_at"] is not None for le in _leases(cli, "a1"))
    assert cli("audit", "verify").code == 0


def test_entries_of_one_command_share_a_batch_that_the_chain_covers(
    cli: Cli, ledger_path: Path
) -> None:
    assert cli("node", "add", "a1", "--local").code == 0
    assert cli("node", "add", "a2", "--local").code == 0
    r = cli("lease", "add", "a1", "--billing", "monthly", "--price", "100",
            "--start", "2026-01-01", "--end", "2030-01-01")  # fmt: skip
    assert r.code == 0
    assert cli("lease", "renew", "a1", "--until", "2030-02-01").code == 0
    rows = _entries(ledger_path)
    assert [e["batch"] for e in rows] == [1, 2, 3, 4, 4]
    # A batch id widened by hand (to take node a2's add along with the renewal) breaks
    # the chain at that entry, so undo refuses it.
    with _tampered(ledger_path) as conn:
        conn.execute("UPDATE audit SET batch = 4 WHERE id = 2")
    assert cli("audit", "verify").code == 1
    r = cli("undo")
    assert r.code != 0 and "zuka audit verify" in r.err
    assert _node(cli, "a2")["name"] == "a2"


# -- 3. undo says what it undoes, and whose change it was -----------------------------------


def test_undo_names_the_entry_and_refuses_another_users_change(cli: Cli, ledger_path: Path) -> None:
    with Ledger.open(ledger_path, actor="alice") as ledger:
        ledger.add_node(records.node_from({"name": "n1", "local": True}))
        ledger.update_node("n1", {"notes": "alice was here"})
    count = len(_entries(ledger_path))
    r = cli("undo")
    assert r.code == 2
    assert "alice" in r.err and "--any-user" in r.err
    assert len(_entries(ledger_path)) == count
    r = cli("undo", "--any-user", "--entry", "1")
    assert r.code == 2 and "entry 2" in r.err  # not the last change: a race, refused
    assert len(_entries(ledger_path)) == count
    r = cli("undo", "--any-user", "--entry", "2")
    assert r.code == 0, r.err
    assert "entry 2" in r.out and "node.edit" in r.out and "n1" in r.out and "alice" in r.out
    assert _node(cli, "n1")["notes"] == ""
    # The last change is this user's undo now: no --any-user needed to redo it.
    assert cli("undo").code == 0
    assert _node(cli, "n1")["notes"] == "alice was here"


# -- 4. an edit that changes nothing writes nothing -----------------------------------------


def test_edits_that_change_nothing_say_so_and_write_no_entry(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1", "--gpus", "8").code == 0
    r = cli("lease", "add", "n1", "--billing", "hourly", "--price", "1", "--start", "2026-01-01")
    assert r.code == 0, r.err
    assert cli("resource", "add", "n1", "--kind", "disk", "--id", "d-1").code == 0
    assert cli("resource", "edit", "n1", "--kind", "disk", "--id", "d-1", "--notes", "x").code == 0
    count = len(_entries(ledger_path))
    for args in (
        ("node", "edit", "n1", "--gpus", "8"),
        ("lease", "edit", "n1", "--price", "1"),
        ("resource", "edit", "n1", "--kind", "disk", "--id", "d-1", "--notes", "x"),
    ):
        r = cli(*args)
        assert r.code == 0, r.err
        assert "nothing changed" in r.out, args
        assert len(_entries(ledger_path)) == count, args
