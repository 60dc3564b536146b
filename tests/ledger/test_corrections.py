"""Corrections: lease edit of any lease, lease / node delete, resource edit, undo, reusing
and restoring an archived node's name, and one history across renames (issue 7, item 1)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from leases.core.errors import InputError
from leases.ledger import records
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.schema import (
    MIGRATIONS,
    m006_lease_terms,
    m010_audit_batch,
    m013_lease_rounding,
    m014_stops,
)
from leases.ledger.store import Ledger
from leases.ledger.undo import undo_last
from tests.support.cli import Cli

FIRST = "2026-10-15T00:00:00+08:00"  # as `zuka lease list --json` prints the first start
SECOND = "2026-11-15T00:00:00+08:00"


def _renewed(cli: Cli, name: str = "m1") -> None:
    """A node with a monthly lease from FIRST, renewed once (the second starts at SECOND)."""
    assert cli("node", "add", name, "--ssh", "ssh root@10.0.0.1", "--gpus", "8").code == 0
    r = cli("lease", "add", name, "--billing", "monthly", "--price", "50000",
            "--start", "2026-10-15", "--end", "2026-11-15")  # fmt: skip
    assert r.code == 0, r.err
    assert cli("lease", "renew", name, "--until", "2026-12-15").code == 0


def _leases(cli: Cli, name: str = "m1") -> list[dict[str, object]]:
    r = cli("lease", "list", name, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _log(cli: Cli, *args: str) -> list[dict[str, object]]:
    r = cli("log", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def _verified(cli: Cli) -> None:
    r = cli("audit", "verify")
    assert r.code == 0, r.out + r.err


# -- lease edit ----------------------------------------------------------------------------


def test_lease_edit_picks_an_ended_lease_by_its_start(cli: Cli) -> None:
    _renewed(cli)
    r = cli("lease", "edit", "m1", "--start", FIRST, "--price", "49000", "--notes", "1st")
    assert r.code == 0, r.err
    first, second = _leases(cli)
    assert (first["unit_price"], first["notes"]) == ("49000", "1st")
    assert (second["unit_price"], second["notes"]) == ("50000", "")
    # Without --start the open lease is edited, as before.
    assert cli("lease", "edit", "m1", "--notes", "open one").code == 0
    assert [le["notes"] for le in _leases(cli)] == ["1st", "open one"]
    assert [e["action"] for e in _log(cli, "m1")][-2:] == ["lease.edit", "lease.edit"]


def test_lease_edit_is_validated_as_a_whole(cli: Cli, ledger_path: Path) -> None:
    _renewed(cli)
    before = ledger_path.read_bytes()
    r = cli("lease", "edit", "m1", "--start", SECOND, "--new-start", "2026-11-01")
    assert r.code == 2
    assert "overlaps the lease from 2026-10-15" in r.err
    r = cli("lease", "edit", "m1", "--start", "2026-01-01T00:00:00+08:00", "--notes", "x")
    assert r.code == 2 and "no lease of m1 starts then" in r.err
    r = cli("lease", "edit", "m1", "--start", FIRST, "--end", "2026-10-01")
    assert r.code == 2 and "end: must be after the start" in r.err
    r = cli("lease", "edit", "m1", "--start", FIRST, "--cards", "9")
    assert r.code == 2 and "m1 has only 8 GPUs" in r.err
    assert ledger_path.read_bytes() == before
    # Moving a start where nothing overlaps is a correction like any other.
    r = cli("lease", "edit", "m1", "--start", FIRST, "--new-start", "2026-10-16", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["start"] == "2026-10-16T00:00:00+08:00"


# -- lease delete --------------------------------------------------------------------------


def test_lease_delete_refuses_while_resources_refer_to_it(cli: Cli) -> None:
    _renewed(cli)
    add = cli("resource", "add", "m1", "--kind", "snapshot", "--id", "snap-1",
              "--lease-start", FIRST)  # fmt: skip
    assert add.code == 0, add.err
    r = cli("lease", "delete", "m1", "--start", FIRST)
    assert r.code == 2
    assert "snapshot snap-1" in r.err and "--force" in r.err
    assert len(_leases(cli)) == 2
    r = cli("lease", "delete", "m1", "--start", FIRST, "--force")
    assert r.code == 0, r.err
    assert "snapshot snap-1" in r.out
    assert [le["start"] for le in _leases(cli)] == [SECOND]
    assert json.loads(cli("resource", "list", "m1", "--json").out) == []
    # A lease nothing refers to goes without --force.
    assert cli("lease", "delete", "m1", "--start", SECOND).code == 0
    assert _leases(cli) == []
    assert [e["action"] for e in _log(cli, "m1")][-2:] == ["lease.delete", "lease.delete"]
    _verified(cli)


def test_lease_delete_needs_a_start(cli: Cli) -> None:
    _renewed(cli)
    r = cli("lease", "delete", "m1")
    assert r.code == 2 and "--start" in r.err and "invalid choice" not in r.err


# -- node delete ---------------------------------------------------------------------------


def _history_rows(path: Path, node_id: int) -> None:
    """GPU history as the poller stores it, written straight into the tables."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO gpu_minute VALUES (?, 1, x'00')", [node_id])
        conn.execute("INSERT INTO gpu_minute VALUES (?, 2, x'00')", [node_id])
        conn.execute("INSERT INTO gpu_hour VALUES (?, 0, x'00', 0, 0)", [node_id])
        conn.execute(
            "INSERT INTO poll_gap (node_id, start, health) VALUES (?, '2026-11-01T00:00:00Z',"
            " 'unreachable')",
            [node_id],
        )
        conn.execute(
            "INSERT INTO node_latest (node_id, at, health) VALUES (?, '2026-11-01T00:00Z', 'ok')",
            [node_id],
        )


def _node_id(path: Path, name: str) -> int:
    with Ledger.open(path) as ledger:
        node_id = ledger.node(name).id
    assert node_id is not None
    return node_id


def test_node_delete_only_when_nothing_refers_to_it(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "typo", "--ssh", "ssh root@10.0.0.9").code == 0
    assert cli("node", "add", "busy", "--ssh", "ssh root@10.0.0.8").code == 0
    _history_rows(ledger_path, _node_id(ledger_path, "busy"))
    r = cli("node", "delete", "typo")
    assert r.code == 0, r.err
    assert "deleted node typo" in r.out
    r = cli("node", "delete", "busy")
    assert r.code == 2
    assert "2 gpu_minute rows" in r.err and "--force" in r.err
    r = cli("node", "delete", "busy", "--force")
    assert r.code == 0, r.err
    assert "2 gpu_minute rows" in r.out and "1 node_latest row" in r.out
    assert json.loads(cli("node", "list", "--all", "--json").out) == []
    with sqlite3.connect(ledger_path) as conn:
        for table in ("gpu_minute", "gpu_hour", "poll_gap", "node_latest"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    _verified(cli)


def test_node_delete_with_leases_and_an_open_one(cli: Cli, ledger_path: Path) -> None:
    _renewed(cli)
    assert cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1").code == 0
    before = ledger_path.read_bytes()
    r = cli("node", "delete", "m1", "--force")
    assert r.code == 2
    assert "open lease" in r.err and "zuka lease end m1" in r.err
    assert ledger_path.read_bytes() == before
    assert cli("lease", "end", "m1", "--at", "2026-11-20").code == 0
    r = cli("node", "delete", "m1")
    assert r.code == 2 and "2 leases" in r.err and "1 resource" in r.err
    r = cli("node", "delete", "m1", "--force")
    assert r.code == 0, r.err
    assert "2 leases" in r.out and "1 resource" in r.out
    assert json.loads(cli("lease", "list", "--json").out) == []
    assert json.loads(cli("resource", "list", "--json").out) == []
    assert cli("node", "show", "m1").code == 2
    _verified(cli)


# -- resource edit -------------------------------------------------------------------------


def test_resource_edit_marks_deleted_and_verified_on_an_ended_lease(cli: Cli) -> None:
    _renewed(cli)
    assert cli("resource", "add", "m1", "--kind", "snapshot", "--id", "snap-9").code == 0
    assert cli("lease", "end", "m1", "--at", "2026-11-20").code == 0
    r = cli("resource", "edit", "m1", "--kind", "snapshot", "--id", "snap-9",
            "--deleted", "2026-11-21T10:00")  # fmt: skip
    assert r.code == 0, r.err
    r = cli("resource", "edit", "m1", "--kind", "snapshot", "--id", "snap-9", "--verified")
    assert r.code == 2 and "notes" in r.err
    r = cli("resource", "edit", "m1", "--kind", "snapshot", "--id", "snap-9", "--verified",
            "--notes", "console shows no snapshot snap-9 (screenshot in ticket 42)", "--json")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads(r.out)
    assert res["deleted_at"] == "2026-11-21T10:00:00+08:00"
    assert res["verified_at"] is not None and "ticket 42" in res["notes"]
    assert [e["action"] for e in _log(cli, "m1")][-2:] == ["resource.edit", "resource.edit"]


def test_resource_edit_refuses_nonsense(cli: Cli, ledger_path: Path) -> None:
    _renewed(cli)
    assert cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1").code == 0
    before = ledger_path.read_bytes()
    base = ["resource", "edit", "m1", "--kind", "disk", "--id", "d-1"]
    for args, message in [
        (["resource", "edit", "m1", "--kind", "disk", "--id", "d-2", "--deleted"], "no disk d-2"),
        ([*base, "--verified", "--notes", "ok"], "not marked deleted"),
        ([*base, "--deleted", "2099-01-01"], "is in the future"),
        ([*base, "--deleted", "tomorrowish"], "deleted_at"),
        (base, "nothing to change"),
    ]:
        r = cli(*args)
        assert r.code == 2, (args, r.out)
        assert message in r.err, r.err
    assert ledger_path.read_bytes() == before


# -- undo ----------------------------------------------------------------------------------


def test_undo_reverses_the_last_change_and_undo_again_redoes_it(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1", "--gpus", "8").code == 0
    assert cli("node", "edit", "n1", "--gpus", "4").code == 0
    r = cli("undo")
    assert r.code == 0, r.err
    assert "node.edit" in r.out
    assert json.loads(cli("node", "show", "n1", "--json").out)["node"]["gpu_count"] == 8
    log = _log(cli, "n1")
    assert log[-1]["action"] == f"undo #{log[-2]['id']}"
    assert cli("undo").code == 0  # an undo of an undo is a redo
    assert json.loads(cli("node", "show", "n1", "--json").out)["node"]["gpu_count"] == 4
    assert cli("undo").code == 0
    assert cli("undo").code == 0
    _verified(cli)


def test_undo_of_add_removes_it(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("undo").code == 0
    assert cli("node", "show", "n1").code == 2
    assert cli("undo").code == 0  # redo: the node is back, with its id
    assert json.loads(cli("node", "show", "n1", "--json").out)["node"]["name"] == "n1"


def test_undo_refuses_when_the_row_changed_since(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("node", "edit", "n1", "--notes", "one").code == 0
    with sqlite3.connect(ledger_path) as conn:  # a write that left no audit entry
        conn.execute("UPDATE nodes SET notes = 'two'")
    before = ledger_path.read_bytes()
    r = cli("undo")
    assert r.code == 2
    assert "changed since" in r.err
    assert ledger_path.read_bytes() == before


def test_undo_of_a_renewal_is_one_unit(cli: Cli) -> None:
    _renewed(cli)
    assert cli("undo").code == 0
    (only,) = _leases(cli)
    assert only["start"] == FIRST and only["ended_at"] is None
    assert cli("undo").code == 0  # and the redo brings both back
    assert [le["start"] for le in _leases(cli)] == [FIRST, SECOND]
    _verified(cli)


def test_undo_of_forced_deletes_brings_everything_back(cli: Cli) -> None:
    _renewed(cli)
    assert cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1").code == 0
    assert cli("lease", "delete", "m1", "--start", SECOND, "--force").code == 0
    assert cli("undo").code == 0
    assert len(_leases(cli)) == 2
    assert [r["native_id"] for r in json.loads(cli("resource", "list", "--json").out)] == ["d-1"]
    assert cli("lease", "end", "m1", "--at", "2026-11-20").code == 0
    assert cli("node", "delete", "m1", "--force").code == 0
    r = cli("undo")
    assert r.code == 0, r.err
    assert len(_leases(cli)) == 2
    assert len(json.loads(cli("resource", "list", "m1", "--json").out)) == 1
    _verified(cli)


def test_undo_of_an_import_is_refused_clearly(cli: Cli, tmp_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1").code == 0
    dump = tmp_path / "d.json"
    dump.write_text(cli("export").out.replace('"n1"', '"n2"'))
    assert cli("import", str(dump)).code == 0
    r = cli("undo")
    assert r.code == 2
    assert "the last change imported" in r.err
    assert cli("node", "show", "n2").code == 0


def test_undo_with_nothing_to_undo(cli: Cli, ledger_path: Path) -> None:
    Ledger.open(ledger_path).close()
    r = cli("undo")
    assert r.code == 2 and "nothing to undo" in r.err


# -- reusing and restoring an archived name ------------------------------------------------


def _archived(cli: Cli, name: str = "m1") -> None:
    _renewed(cli, name)
    assert cli("lease", "end", name, "--at", "2026-11-20").code == 0
    assert cli("node", "archive", name).code == 0


def test_an_archived_name_can_be_reused_and_restored(cli: Cli) -> None:
    _archived(cli)
    r = cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.2", "--gpus", "4")
    assert r.code == 0, r.err
    r = cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.3")
    assert r.code == 2 and "a node of that name already exists" in r.err
    shown = json.loads(cli("node", "show", "m1", "--json").out)
    assert shown["node"]["ssh_host"] == "10.0.0.2" and shown["leases"] == []
    listed = json.loads(cli("node", "list", "--all", "--json").out)
    assert sorted(n["state"] for n in listed) == ["active", "released"]
    r = cli("node", "restore", "m1")
    assert r.code == 2 and "m1" in r.err and "--rename" in r.err
    assert cli("node", "edit", "m1", "--rename", "m1-new").code == 0
    r = cli("node", "restore", "m1")
    assert r.code == 0, r.err
    shown = json.loads(cli("node", "show", "m1", "--json").out)
    assert shown["node"]["state"] == "active" and len(shown["leases"]) == 2
    assert cli("node", "restore", "m1").code == 2  # nothing archived by that name now
    _verified(cli)


def test_ledger_reaches_live_and_archived_nodes(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        old = ledger.add_node(records.node_from({"name": "a", "ssh_host": "h1"}))
        ledger.archive_node("a")
        new = ledger.add_node(records.node_from({"name": "a", "ssh_host": "h2"}))
        assert ledger.node("a").id == new.id
        assert [n.id for n in ledger.archived_nodes("a")] == [old.id]
        with pytest.raises(InputError, match="a live node a"):
            ledger.restore_node("a")
        ledger.archive_node("a")
        # Two archived: the latest comes back.
        assert ledger.restore_node("a").id == new.id


# -- the migration -------------------------------------------------------------------------


def _ledger_before_m005(path: Path) -> None:
    """A ledger as current main writes it: the migrations up to m004, then real writes."""
    conn = sqlite3.connect(path)
    db = Database(conn)
    MIGRATIONS.apply(db, stop_before="m005_reusable_names")
    # Today's writes need the lease-term columns; m006 touches only leases and resources,
    # so running it early leaves what m005 rebuilds (nodes) as main wrote it.
    m006_lease_terms(db)
    MIGRATIONS._record_applied(db, "m006_lease_terms")
    # Likewise the audit batch column (m010 only adds it) that today's writes fill.
    m010_audit_batch(db)
    MIGRATIONS._record_applied(db, "m010_audit_batch")
    m013_lease_rounding(db)  # and the rounding term (m013 only adds a lease column)
    MIGRATIONS._record_applied(db, "m013_lease_rounding")
    conn.executescript(
        "ALTER TABLE leases ADD COLUMN payment_schedule TEXT NOT NULL DEFAULT 'upfront';"
        " ALTER TABLE nodes ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';"
        " ALTER TABLE nodes ADD COLUMN instance_endpoint TEXT NOT NULL DEFAULT '';"
        " ALTER TABLE nodes ADD COLUMN nvlinks INTEGER;"
        " ALTER TABLE nodes ADD COLUMN ib_gbps INTEGER;"
        " ALTER TABLE nodes ADD COLUMN ssh_tunnels TEXT NOT NULL DEFAULT '[]';"
        " ALTER TABLE nodes ADD COLUMN reading_source TEXT;"
        " ALTER TABLE nodes ADD COLUMN prom_url TEXT NOT NULL DEFAULT '';"
        " ALTER TABLE nodes ADD COLUMN prom_match TEXT NOT NULL DEFAULT '';"
        " ALTER TABLE nodes ADD COLUMN prom_token_file TEXT NOT NULL DEFAULT '';"
    )
    m014_stops(db)  # read by lease add; dropped again below, made again by m014
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.execute("PRAGMA foreign_keys = ON")
    ledger = Ledger(conn, actor="main")
    ledger.add_node(records.node_from({"name": "a", "ssh_host": "h1", "gpu_count": 8}))
    ledger.add_node(records.node_from({"name": "b", "ssh_host": "h2"}))
    ledger.add_lease(
        records.lease_from(
            {"node": "a", "billing_type": "hourly", "unit_price": "3", "start": "2026-10-01"}
        )
    )
    ledger.add_resource("a", {"kind": "disk", "native_id": "d-1"})
    ledger.update_node("b", {"notes": "spare"})
    # m015's, m018's and m021's node columns, which today's node writes fill, go again: m005
    # rebuilds nodes as main wrote them before m015, and m015 and m018 add them back when
    # the ledger is opened (and m017 the lease's payment schedule).
    conn.executescript(
        "DROP TABLE stops; ALTER TABLE leases DROP COLUMN payment_schedule;"
        " ALTER TABLE nodes DROP COLUMN instance_id;"
        " ALTER TABLE nodes DROP COLUMN instance_endpoint;"
        " ALTER TABLE nodes DROP COLUMN nvlinks; ALTER TABLE nodes DROP COLUMN ib_gbps;"
        " ALTER TABLE nodes DROP COLUMN ssh_tunnels;"
        " ALTER TABLE nodes DROP COLUMN reading_source; ALTER TABLE nodes DROP COLUMN prom_url;"
        " ALTER TABLE nodes DROP COLUMN prom_match;"
        " ALTER TABLE nodes DROP COLUMN prom_token_file;"
    )
    conn.close()


def test_m005_keeps_ids_references_and_the_audit_chain(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _ledger_before_m005(path)
    with sqlite3.connect(path) as conn:
        nodes_before = conn.execute("SELECT * FROM nodes ORDER BY id").fetchall()
        audit_before = conn.execute("SELECT * FROM audit ORDER BY id").fetchall()
        assert conn.execute("PRAGMA user_version").fetchone() == (4,)
    _history_rows(path, 1)
    with Ledger.open(path) as ledger:
        assert ledger.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        # The columns m015 and m018 add after m005 come last, empty.
        width = len(nodes_before[0])
        nodes_after = ledger.conn.execute("SELECT * FROM nodes ORDER BY id").fetchall()
        assert [r[:width] for r in nodes_after] == nodes_before
        assert {r[width:] for r in nodes_after} == {("", "", None, None, "[]", None, "", "", "")}
        # m023's origin comes last, empty: the entries' hashes cover none.
        audit_after = ledger.conn.execute("SELECT * FROM audit ORDER BY id").fetchall()
        assert [r[: len(audit_before[0])] for r in audit_after] == audit_before
        assert {r[len(audit_before[0]) :] for r in audit_after} == {("",)}
        assert ledger.conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert ledger.conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert ledger.verify_audit().ok
        assert [le.node for le in ledger.leases("a")] == ["a"]
        # The name is free once the node is archived; the live one stays unique.
        ledger.end_lease("a")
        ledger.archive_node("a")
        ledger.add_node(records.node_from({"name": "a", "ssh_host": "h3"}))
        with pytest.raises(sqlite3.IntegrityError):
            ledger.conn.execute("INSERT INTO nodes (name, ssh_host) VALUES ('a', 'h4')")
        # References from history still point at the archived node.
        assert ledger.conn.execute("SELECT node_id FROM gpu_minute").fetchall() == [(1,), (1,)]
        assert ledger.verify_audit().ok


# -- one history across renames ------------------------------------------------------------


def test_log_follows_a_node_across_renames(cli: Cli) -> None:
    assert cli("node", "add", "a", "--ssh", "ssh root@10.0.0.1").code == 0
    r = cli("lease", "add", "a", "--billing", "hourly", "--price", "3", "--start", "2026-10-01")
    assert r.code == 0, r.err
    assert cli("node", "edit", "a", "--rename", "b").code == 0
    assert cli("lease", "edit", "b", "--notes", "after the rename").code == 0
    assert cli("node", "edit", "b", "--rename", "c").code == 0
    actions = [e["action"] for e in _log(cli, "c")]
    assert actions == ["node.add", "lease.add", "node.edit", "lease.edit", "node.edit"]
    # A new node takes the old name: `log a` is that node's history only.
    assert cli("node", "add", "a", "--ssh", "ssh root@10.0.0.5").code == 0
    assert [e["action"] for e in _log(cli, "a")] == ["node.add"]
    human = cli("log", "c").out
    assert "name: a -> b" in human and "name: b -> c" in human


def test_log_of_a_reused_name_shows_the_live_node_and_says_how_to_see_the_old(
    cli: Cli,
) -> None:
    _archived(cli)
    assert cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.2").code == 0
    r = cli("log", "m1")
    assert r.code == 0
    assert "--archived" in r.err
    assert [e["action"] for e in _log(cli, "m1")] == ["node.add"]
    old = [e["action"] for e in _log(cli, "m1", "--archived")]
    assert old[0] == "node.add" and old[-1] == "node.edit" and "lease.renew" in old


# -- undo and redo of any change, as a property ----------------------------------------------

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NAMES = ("a", "b")


def _op(ledger: Ledger, kind: str, name: str, k: int) -> None:
    """One change of the kinds `zuka` makes; many are refused in a given state."""
    day = f"2026-{10 + k % 2:02d}-{1 + k:02d}"
    if kind == "node.add":
        ledger.add_node(records.node_from({"name": name, "ssh_host": f"h{k}", "gpu_count": 8}))
    elif kind == "node.edit":
        ledger.update_node(name, {"notes": f"n{k}", "gpu_count": 4 + k % 5})
    elif kind == "rename":
        ledger.update_node(name, {"name": NAMES[(NAMES.index(name) + 1) % 2]})
    elif kind == "archive":
        ledger.archive_node(name)
    elif kind == "restore":
        ledger.restore_node(name)
    elif kind == "lease.add":
        ledger.add_lease(
            records.lease_from(
                {"node": name, "billing_type": "monthly", "unit_price": str(100 + k),
                 "start": day, "end": f"2026-{11 + k % 2:02d}-{1 + k:02d}"}
            )
        )  # fmt: skip
    elif kind == "lease.end":
        ledger.end_lease(name)
    elif kind == "lease.renew":
        ledger.renew_lease(name, datetime(2027, 3, 1, tzinfo=UTC))
    elif kind == "lease.edit":
        ledger.update_lease(name, {"notes": f"e{k}"}, start=ledger.leases(name)[0].start)
    elif kind == "lease.delete":
        ledger.delete_lease(name, ledger.leases(name)[0].start.isoformat(), force=k % 2 == 0)
    elif kind == "resource.add":
        ledger.add_resource(
            name,
            {"kind": "disk", "native_id": f"d-{k}", "lease_start": ledger.leases(name)[-1].start},
        )
    elif kind == "resource.edit":
        _, _, res = ledger.resources(name)[0]
        ledger.update_resource(name, "disk", res.native_id, {"deleted_at": "now"})
    elif kind == "node.delete":
        ledger.delete_node(name, force=k % 2 == 0)


OPS = ("node.add", "node.edit", "rename", "archive", "restore", "lease.add", "lease.end",
       "lease.renew", "lease.edit", "lease.delete", "resource.add", "resource.edit",
       "node.delete")  # fmt: skip


@settings(max_examples=40)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(NAMES), st.integers(0, 9)),
                min_size=1, max_size=16))  # fmt: skip
def test_every_change_undoes_and_redoes_exactly(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, int]]
) -> None:
    path = tmp_path_factory.mktemp("undo") / "l.db"
    prelude = [("node.add", "a", 0), ("lease.add", "a", 0), ("resource.add", "a", 1)]
    with Ledger.open(path, clock=lambda: NOW) as ledger:
        for kind, name, k in [*prelude, *ops]:
            before = ledger.export_records()
            try:
                _op(ledger, kind, name, k)
            except (InputError, IndexError):
                assert ledger.export_records() == before  # a refusal changes nothing
                continue
            after = ledger.export_records()
            if after == before:
                continue  # an edit to the same values writes no entry
            undo_last(ledger)
            assert ledger.export_records() == before, kind
            undo_last(ledger)  # the undo of the undo: a redo
            assert ledger.export_records() == after, kind
        assert ledger.verify_audit().ok


def test_log_of_a_node_whose_row_id_was_reused(cli: Cli) -> None:
    """SQLite gives a deleted newest row's id to the next node: the logs stay apart."""
    assert cli("node", "add", "typo", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("node", "delete", "typo").code == 0
    assert cli("node", "add", "right", "--ssh", "ssh root@10.0.0.1").code == 0
    assert [e["action"] for e in _log(cli, "right")] == ["node.add"]
    assert [e["action"] for e in _log(cli, "typo")] == ["node.add", "node.delete"]
    # An undo that puts a deleted node back continues its own history.
    assert cli("node", "delete", "right").code == 0
    assert cli("undo").code == 0
    assert [e["action"] for e in _log(cli, "right")] == ["node.add", "node.delete", "undo #4"]


def test_undo_of_a_node_add_keeps_gpu_history(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.1").code == 0
    _history_rows(ledger_path, _node_id(ledger_path, "n1"))
    r = cli("undo")
    assert r.code == 2
    assert "GPU history" in r.err and "zuka node delete n1 --force" in r.err


def test_log_of_a_deleted_name_is_that_nodes_history_only(cli: Cli) -> None:
    assert cli("node", "add", "B", "--ssh", "ssh u@10.9.9.9").code == 0
    assert cli("node", "edit", "B", "--rename", "C").code == 0
    assert cli("node", "add", "B", "--local").code == 0
    assert cli("node", "delete", "B").code == 0
    log = _log(cli, "B")
    assert [e["action"] for e in log] == ["node.add", "node.delete"]
    assert all(e["after"] is None or e["after"]["local"] for e in log)


def test_log_and_show_of_an_old_name_point_to_the_new_one(cli: Cli) -> None:
    assert cli("node", "add", "old", "--ssh", "ssh u@10.9.9.9").code == 0
    assert cli("node", "edit", "old", "--rename", "new").code == 0
    r = cli("log", "old")
    assert r.code == 0, r.err
    assert "now called new" in r.err
    assert "name: old -> new" in r.out
    r = cli("node", "show", "old")
    assert r.code == 2
    assert "no node of that name; it was renamed to new on " in r.err


def test_log_names_which_lease_changed(cli: Cli) -> None:
    _renewed(cli)
    assert cli("lease", "edit", "m1", "--start", FIRST, "--notes", "x").code == 0
    last = cli("log", "m1").out.splitlines()[-1]
    assert "lease from 2026-10-15 00:00: notes:" in last
