"""What a user sees around the ledger and export paths: a new or missing ledger said so,
path errors in one line with what to do, export formats by file name (issue 7 review)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tui.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent.parent


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- a new or a missing ledger --------------------------------------------------------------


def test_a_command_that_creates_the_ledger_says_so(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "x.db"  # (a folder that does not exist: test_typed_amounts)
    r = cli("node", "add", "zz", "--ssh", "ssh root@h", ledger=path)
    assert r.code == 0
    assert f"created a new ledger at {path}" in r.err
    again = cli("node", "add", "zy", "--ssh", "ssh root@h", ledger=path)
    assert again.code == 0 and again.err == ""


@pytest.mark.parametrize(
    "args", [("node", "list"), ("lease", "list"), ("resource", "list"), ("log",), ("export",)]
)
def test_a_read_on_a_missing_ledger_says_there_is_none(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "nothing.db"
    r = cli(*args, ledger=path)
    assert r.code == 1
    line = one_line(r.err)
    assert f"no ledger at {path}" in line and "wrong --ledger" in line
    assert r.out == ""
    assert not path.exists()


def test_a_ledger_in_proc_is_not_a_place_for_one(cli: Cli) -> None:
    r = cli("node", "add", "zz", "--ssh", "ssh root@h", ledger=Path("/proc/x.db"))
    assert r.code == 1
    line = one_line(r.err)
    assert "/proc" in line and "not writable" in line
    assert "no such file" not in line


def test_help_shows_the_default_ledger_path() -> None:
    from leases.ledger.paths import default_ledger_path

    assert str(default_ledger_path()) in build_parser().format_help().replace("\n", "")


# -- export and import paths --------------------------------------------------------------


def _seed(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.5").code == 0


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("{tmp}/nodir/x.json", "directory"),
        ("/proc/version", "cannot"),
    ],
)
def test_export_path_errors_name_the_path_and_what_to_do(
    cli: Cli, tmp_path: Path, target: str, words: str
) -> None:
    _seed(cli)
    output = target.format(tmp=tmp_path)
    r = cli("export", "-o", output, "--format", "json")
    assert r.code != 0
    line = one_line(r.err)
    assert output in line and words in line
    assert "output:" not in line
    if output.startswith("/proc"):
        assert "No such file" not in line


@pytest.mark.parametrize("kind", ["directory", "proc"])
def test_import_path_errors_name_the_path_and_what_to_do(
    cli: Cli, tmp_path: Path, kind: str
) -> None:
    source = str(tmp_path) if kind == "directory" else "/proc/version"
    r = cli("import", source)
    assert r.code == 2
    line = one_line(r.err)
    assert source in line
    if kind == "directory":
        assert "is a directory" in line and "file:" not in line
    else:
        assert "not a zuka export" in line and "line 1" not in line


# -- export formats -----------------------------------------------------------------------


def test_export_follows_the_file_name(cli: Cli, tmp_path: Path) -> None:
    _seed(cli)
    csv_out, json_out = tmp_path / "f.csv", tmp_path / "f.json"
    assert cli("export", "-o", str(csv_out)).code == 0
    assert csv_out.read_text().startswith("record,")
    assert cli("export", "-o", str(json_out)).code == 0
    assert json.loads(json_out.read_text())["format"] == "zuka-ledger"
    r = cli("export", "-o", str(tmp_path / "f.txt"))
    assert r.code == 2 and "--format" in r.err
    assert not (tmp_path / "f.txt").exists()
    assert cli("export", "-o", str(tmp_path / "f.txt"), "--format", "csv").code == 0


def test_export_help_says_the_default() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    text = sub.choices["export"].format_help()  # type: ignore[attr-defined]
    assert "default: from the -o file name, else json" in " ".join(text.split())


def test_csv_from_stdin_is_recognised(cli: Cli, tmp_path: Path) -> None:
    _seed(cli)
    exported = cli("export", "--format", "csv").out
    other = tmp_path / "o.db"
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli.main", "import", "-", "--ledger", str(other)],
        input=exported,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    names = [r[0] for r in sqlite3.connect(other).execute("SELECT name FROM nodes")]
    assert names == ["n1"]


@pytest.mark.parametrize("args", [("node", "list"), ("node", "add", "zz", "--ssh", "h")])
def test_an_over_long_name_is_a_ledger_error_with_advice(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    r = cli(*args, ledger=tmp_path / ("a" * 300) / "x.db")
    assert r.code == 1
    line = one_line(r.err)
    assert line.startswith("zuka: ledger: ") and "give a shorter path" in line


# -- odd times ------------------------------------------------------------------------------


def _berlin(cli: Cli) -> None:
    assert cli("node", "add", "b1", "--ssh", "ssh root@10.0.0.9").code == 0
    assert cli("lease", "add", "b1", "--billing", "hourly", "--price", "3", "--tz",
               "Europe/Berlin", "--start", "2026-03-01T00:00").code == 0  # fmt: skip


@pytest.mark.parametrize(
    ("when", "words"),
    [
        ("2026-03-29T02:30", "does not exist in Europe/Berlin"),
        ("2026-10-25T02:30", "happens twice in Europe/Berlin"),
        ("2026-03-02T00:00:00.123456789", "finer than a microsecond"),
    ],
)
def test_odd_local_times_are_refused(cli: Cli, when: str, words: str) -> None:
    _berlin(cli)
    r = cli("lease", "edit", "b1", "--start", "2026-03-01", "--new-start", when)
    assert r.code == 2 and words in one_line(r.err)
    [lease] = json.loads(cli("lease", "list", "b1", "--json").out)
    assert lease["start"] == "2026-03-01T00:00:00+01:00"


def test_an_ambiguous_time_with_its_offset_is_taken(cli: Cli) -> None:
    _berlin(cli)
    r = cli("lease", "edit", "b1", "--start", "2026-03-01", "--new-start", "2026-10-25T02:30+01:00")
    assert r.code == 0, r.err
    [lease] = json.loads(cli("lease", "list", "b1", "--json").out)
    assert lease["start"] == "2026-10-25T02:30:00+01:00"


@pytest.mark.parametrize("deleted", ["2026-02-01", "2026-03-01T12:00"])
def test_a_resource_cannot_be_deleted_before_its_lease_or_creation(cli: Cli, deleted: str) -> None:
    _berlin(cli)
    assert cli("resource", "add", "b1", "--kind", "disk", "--id", "d1",
               "--created", "2026-03-02").code == 0  # fmt: skip
    r = cli("resource", "edit", "b1", "--kind", "disk", "--id", "d1", "--deleted", deleted)
    assert r.code == 2 and "is before its" in one_line(r.err)


# -- errors name the option typed --------------------------------------------------------


def test_archive_with_an_open_lease_names_the_command_not_the_state(cli: Cli) -> None:
    _berlin(cli)
    r = cli("node", "archive", "b1")
    assert r.code == 2
    line = one_line(r.err)
    assert line.startswith("zuka: error: node archive b1: ") and "(got" not in line
    assert "zuka lease end b1" in line


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("resource", "add", "b1", "--kind", "disk", "--id", "d9", "--lease-start", "2020-01-01"),
         "--lease-start: "),
        (("resource", "edit", "b1", "--kind", "disk", "--id", "d1", "--deleted", "soon"),
         "--deleted: "),
        (("resource", "edit", "b1", "--kind", "disk", "--id", "d1", "--verified", "soon"),
         "--verified: "),
        (("lease", "end", "b1", "--at", "soon"), "--at: "),
    ],
)  # fmt: skip
def test_errors_name_the_option_typed(cli: Cli, args: tuple[str, ...], flag: str) -> None:
    _berlin(cli)
    assert cli("resource", "add", "b1", "--kind", "disk", "--id", "d1").code == 0
    r = cli(*args)
    assert r.code == 2
    # The option alone, or beside the record key it sets (deleted_at in --json).
    label = one_line(r.err).removeprefix("zuka: error: ").split(": ")[0]
    assert label == flag[:-2] or label.endswith(f" ({flag[:-2]})"), label


def test_undo_of_an_import_names_the_entry_in_words(cli: Cli, tmp_path: Path) -> None:
    _berlin(cli)
    dump = tmp_path / "d.json"
    assert cli("export", "-o", str(dump)).code == 0
    assert cli("import", str(dump), ledger=tmp_path / "o.db").code == 0
    r = cli("undo", ledger=tmp_path / "o.db")
    assert r.code == 2
    line = one_line(r.err)
    assert "(got " not in line and "audit entry" in line


# -- secrets in notes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "note",
    [
        "gitlab glpat-xZ3kq9LmN2pR7sT1vW4y",
        "db postgres://lab:pa55w0rd@db.lab/x",
        "mirror https://ci:tok3nvalue@git.lab.cn/repo.git",
        "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv",
        "alerts https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    ],
)
def test_more_secrets_in_notes_are_refused(cli: Cli, note: str) -> None:
    r = cli("node", "add", "s1", "--ssh", "ssh root@h", "--notes", note)
    assert r.code == 2
    line = one_line(r.err)
    assert "(hidden)" in line and note.split()[-1] not in line


@pytest.mark.parametrize(
    "note",
    [
        "driver fix in 3f1c2a9b7d4e5f60718293a4b5c6d7e8f9012345",
        "see https://wiki.lab.cn/nodes/a800 and ssh://root@10.0.0.1:22",
        "rsync lab@h:/data/ckpt",
    ],
)
def test_commit_hashes_and_plain_urls_are_not_secrets(cli: Cli, note: str) -> None:
    r = cli("node", "add", "s1", "--ssh", "ssh root@h", "--notes", note)
    assert r.code == 0, r.err


# -- small things -------------------------------------------------------------------------


def test_provider_names_are_unique_without_regard_to_case(cli: Cli) -> None:
    assert cli("provider", "add", "Aliyun", "--kind", "cloud").code == 0
    r = cli("provider", "add", "aliyun", "--kind", "cloud")
    assert r.code == 2 and "already exists (Aliyun)" in one_line(r.err)


def test_node_list_shows_an_archived_nodes_own_billing(cli: Cli) -> None:
    assert cli("node", "add", "A", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", "A", "--billing", "hourly", "--price", "9",
               "--start", "2025-01-01T00:00").code == 0  # fmt: skip
    assert cli("lease", "end", "A", "--at", "2025-02-01").code == 0
    assert cli("node", "archive", "A").code == 0
    assert cli("node", "add", "A", "--ssh", "ssh root@10.0.0.2").code == 0
    assert cli("lease", "add", "A", "--billing", "hourly", "--price", "7",
               "--start", "2025-03-01T00:00").code == 0  # fmt: skip
    listed = json.loads(cli("node", "list", "--all", "--json").out)
    by_state = {n["state"]: n for n in listed}
    assert by_state["active"]["lease"]["unit_price"] == "7"
    assert by_state["released"]["lease"] is None


@pytest.mark.parametrize("command", ["sim", "collect"])
def test_json_is_refused_where_a_command_prints_none(cli: Cli, command: str) -> None:
    r = cli(command, "--json")
    assert r.code == 2 and "--json" in r.err and "prints no JSON" in r.err


def test_the_dashboard_refuses_a_pipe(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    assert cli("node", "add", "zz", "--ssh", "ssh root@h", ledger=path).code == 0
    before = path.read_bytes()
    r = cli(ledger=path)
    assert r.code == 2
    assert "needs a terminal" in one_line(r.err)
    assert path.read_bytes() == before
    # A named ledger that does not exist is refused first, and not created.
    missing = tmp_path / "none.db"
    r = cli(ledger=missing)
    assert r.code == 1 and "no ledger at" in one_line(r.err) and not missing.exists()


def test_poll_does_not_cut_details_in_a_pipe() -> None:
    from datetime import UTC, datetime

    from leases.core.models import NodeHealth, NodeStatus
    from tui.cli.fleet import status_row

    detail = "connection refused by the jump host " + "x" * 100
    st = NodeStatus(node="n1", health=NodeHealth.UNREACHABLE, detail=detail,
                    checked=datetime.now(UTC))  # fmt: skip
    assert status_row(st, cut=False)[-1] == detail
    assert status_row(st)[-1].endswith("…")


def test_a_read_waits_out_one_busy_timeout_not_two(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from leases.ledger import files as ledger_module

    path = tmp_path / "l.db"
    assert cli("node", "add", "n1", "--ssh", "ssh root@h", ledger=path).code == 0
    monkeypatch.setattr(ledger_module, "BUSY_TIMEOUT_S", 1.0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        began = time.monotonic()
        r = cli("node", "list", ledger=path)
        took = time.monotonic() - began
    finally:
        holder.rollback()
        holder.close()
    assert r.code == 1 and "locked" in one_line(r.err)
    assert took < 1.9, took


@pytest.mark.parametrize("args", [("node", "list"), ("node", "add", "zz", "--ssh", "h")])
def test_an_empty_database_of_another_application_is_refused(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    before = path.read_bytes()
    r = cli(*args, ledger=path)
    assert r.code == 1
    assert "not a zuka ledger" in one_line(r.err)
    assert path.read_bytes() == before


# -- one time format ----------------------------------------------------------------------


def test_resource_list_prints_times_as_the_lease_tables_do(cli: Cli) -> None:
    _berlin(cli)
    assert cli("resource", "add", "b1", "--kind", "disk", "--id", "d1").code == 0
    assert cli("resource", "edit", "b1", "--kind", "disk", "--id", "d1",
               "--deleted", "2026-03-05T10:20:30").code == 0  # fmt: skip
    out = cli("resource", "list").out
    assert "2026-03-05 10:20:30" in out and "2026-03-01 00:00" in out
    assert "T" not in out.split("\n", 1)[1] and "+01:00" not in out
    # --json keeps ISO.
    [rec] = json.loads(cli("resource", "list", "--json").out)
    assert rec["deleted_at"] == "2026-03-05T10:20:30+01:00"


def test_a_suggested_command_takes_the_value_it_prints(cli: Cli) -> None:
    _berlin(cli)
    r = cli("node", "delete", "b1")
    assert r.code == 2
    line = one_line(r.err)
    assert "--start '2026-03-01 00:00'" in line and "+01:00" not in line
    assert cli("lease", "delete", "b1", "--start", "2026-03-01 00:00").code == 0


def test_messages_print_times_as_the_tables_do(cli: Cli) -> None:
    _berlin(cli)
    r = cli("lease", "edit", "b1", "--start", "2026-03-01", "--end", "2026-02-01")
    assert r.code == 2
    line = one_line(r.err)
    assert "must be after the start 2026-03-01 00:00" in line
    assert "T00:00" not in line.split("(got")[0]


@pytest.mark.parametrize("args", [("poll", "--once"), ("node", "trust", "n1")])
def test_fleet_commands_on_a_missing_ledger_say_there_is_none(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    path = tmp_path / "nothing.db"
    r = cli(*args, ledger=path)
    assert r.code == 1 and f"no ledger at {path}" in one_line(r.err)
    assert not path.exists()


def test_importing_a_file_that_is_not_there_says_so(cli: Cli, tmp_path: Path) -> None:
    """Before: "cannot create a file in /tmp: the directory is not writable...", for a file
    that was only missing (found by a new user's review of issue 19)."""
    missing = tmp_path / "nope.json"
    r = cli("import", str(missing))
    assert r.code == 2 and "no such file: check the path" in r.err, r.err
    assert "cannot create" not in r.err
