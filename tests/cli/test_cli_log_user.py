"""`zuka log`: the FROM column (where each entry's user came from), `--user NAME` with the
node argument, `--json`'s origin, and an origin written by hand into the file shown inert."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from leases.ledger import records
from leases.ledger.auditchain import entry_hash
from leases.ledger.store import Ledger
from tests.support.cli import Cli, json_of, ok

ALICE = "ssh 203.0.113.7"
BOB = "ssh 198.51.100.9 (env)"


def _as(path: Path, actor: str, origin: str) -> Ledger:
    return Ledger.open(path, actor=actor, origin=origin)


@pytest.fixture
def two_people(ledger_path: Path) -> Path:
    """alice adds n1 and n2 over SSH; bob, whose address only his environment says, edits
    n1; the collector (a service) adds nothing but a note on n2."""
    with _as(ledger_path, "alice", ALICE) as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h1"}))
        ledger.add_node(records.node_from({"name": "n2", "ssh_host": "h2"}))
    with _as(ledger_path, "bob", BOB) as ledger:
        ledger.update_node("n1", {"notes": "bob was here"})
    with _as(ledger_path, "zuka", "service zuka-collect") as ledger:
        ledger.update_node("n2", {"notes": "seen"})
    return ledger_path


def test_json_carries_each_entrys_origin(cli: Cli, two_people: Path) -> None:
    entries = json_of(cli, "log")
    assert [(e["actor"], e["origin"], e["node"]) for e in entries] == [
        ("alice", ALICE, "n1"),
        ("alice", ALICE, "n2"),
        ("bob", BOB, "n1"),
        ("zuka", "service zuka-collect", "n2"),
    ]


def test_the_table_has_a_from_column(cli: Cli, two_people: Path) -> None:
    lines = ok(cli, "log", "--wide").splitlines()
    assert lines[1].split() == ["ID", "WHEN", "WHO", "FROM", "ACTION", "NODE", "CHANGE"]
    rows = lines[2:]
    assert "alice  ssh 203.0.113.7" in rows[0]
    assert "bob    ssh 198.51.100.9 (env)" in rows[2]
    assert "zuka   service zuka-collect" in rows[3]
    assert len(rows) == 4  # --wide: one line a row


def test_the_table_fits_80_columns(cli: Cli, two_people: Path) -> None:
    """Out of a terminal it keeps to 80 columns: the change moves under its row."""
    out = ok(cli, "log")
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "    change: notes:  -> bob was here" in out
    assert "ssh 198.51.100.9 (env)" in out


def test_user_picks_that_users_entries(cli: Cli, two_people: Path) -> None:
    assert [e["id"] for e in json_of(cli, "log", "--user", "alice")] == [1, 2]
    assert [e["id"] for e in json_of(cli, "log", "--user", "bob")] == [3]
    # With the node argument: that user's entries of that node.
    assert [e["id"] for e in json_of(cli, "log", "n1", "--user", "alice")] == [1]
    assert [e["id"] for e in json_of(cli, "log", "n2", "--user", "zuka")] == [4]
    assert json_of(cli, "log", "n2", "--user", "bob") == []
    table = ok(cli, "log", "--user", "bob", "--wide")
    assert "bob was here" in table and "alice" not in table


def test_a_user_who_wrote_nothing_has_no_entries(cli: Cli, two_people: Path) -> None:
    assert json_of(cli, "log", "--user", "nobody-here") == []
    r = cli("log", "--user", "nobody-here")
    assert r.code == 0 and "(none)" in r.out
    # Names are compared whole and as written: no prefix, no case folding.
    assert json_of(cli, "log", "--user", "ali") == []
    assert json_of(cli, "log", "--user", "Alice") == []


@pytest.mark.parametrize(
    "name",
    ["bad;name", "-rf", "", "alice\n", "a" * 65, "al\x1b[2Jice", "[b]x[/b]", "two  spaces"],
)
def test_a_name_no_user_can_have_is_refused_naming_the_flag(
    cli: Cli, two_people: Path, name: str
) -> None:
    r = cli("log", f"--user={name}")
    assert r.code != 0
    assert "--user" in r.err and "is not a user name" in r.err
    assert "\x1b" not in r.err and r.out == ""


def test_names_unix_systems_give_are_accepted(cli: Cli, ledger_path: Path) -> None:
    for actor in ("j.doe", "svc_backup$", "ann@lab.example", "1001", "zuka demo"):
        with _as(ledger_path, actor, "") as ledger:
            ledger.add_node(records.node_from({"name": f"n{len(actor)}", "ssh_host": "h"}))
        assert [e["actor"] for e in json_of(cli, "log", "--user", actor)] == [actor]


def test_an_origin_forged_into_the_file_is_shown_inert(cli: Cli, two_people: Path) -> None:
    """Someone who can write the file appends an entry, chained properly, whose origin is
    a terminal escape, markup and a mile of text: zuka log shows it, inert and cut."""
    conn = sqlite3.connect(two_people, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        last = dict(conn.execute("SELECT * FROM audit ORDER BY id DESC LIMIT 1").fetchone())
        row = {**last, "id": last["id"] + 1, "batch": last["id"] + 1, "prev_hash": last["hash"]}
        row["origin"] = "\x1b]0;pwned\x07\x1b[2J[red]x[/red]" + "y" * 5000
        row["hash"] = entry_hash(row, last["hash"])
        names = ", ".join(row)
        conn.execute(f"INSERT INTO audit ({names}) VALUES ({', '.join('?' * len(row))})",
                     list(row.values()))  # fmt: skip
    finally:
        conn.close()
    out = ok(cli, "log", "--wide")
    assert "\x1b" not in out and "\x07" not in out
    forged = out.splitlines()[-1]
    assert "yyyy" in forged and "y" * 200 not in forged
    # --json says what is stored, escaped so that no terminal obeys it.
    raw = cli("log", "--json").out
    assert "\x1b" not in raw and json.loads(raw)[-1]["origin"].startswith("\x1b]0;")
    # Forged properly, the chain holds: only an anchor kept elsewhere would tell.
    assert cli("audit", "verify").code == 0


def test_undo_says_who_and_from_where(cli: Cli, two_people: Path) -> None:
    assert json_of(cli, "undo", "--any-user")[0]["origin"] == "service zuka-collect"
    with _as(two_people, "carol", ALICE) as ledger:
        ledger.update_node("n1", {"notes": "carol"})
    out = ok(cli, "undo", "--any-user")
    assert "node.edit of n1 by carol from 203.0.113.7 at " in out


def test_user_with_an_archived_node(cli: Cli, two_people: Path) -> None:
    """--user with --archived: that user's entries of the archived node of a name a new node
    now has."""
    with _as(two_people, "alice", ALICE) as ledger:
        ledger.archive_node("n1")
    with _as(two_people, "bob", BOB) as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h9"}))
    archived = json_of(cli, "log", "n1", "--archived", "--user", "bob")
    assert [(e["id"], e["origin"]) for e in archived] == [(3, BOB)]
    live = json_of(cli, "log", "n1", "--user", "bob")
    assert [e["action"] for e in live] == ["node.add"] and live[0]["id"] > 4
    assert json_of(cli, "log", "n1", "--user", "alice") == []
