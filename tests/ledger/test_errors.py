"""No tracebacks: every OS or SQLite error on the ledger, export and import paths is one line
on stderr naming the path and what to do, with a non-zero exit; read-only ledgers still
answer the commands that only read; screens refuse --json."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from leases.ledger import files as ledger_files
from leases.ledger.schema import MIGRATIONS
from leases.ledger.store import Ledger
from tests.support.cli import Cli

ROOT = Path(__file__).resolve().parent.parent.parent
# Every command that only reads the ledger, each with the arguments it needs.
READING = [
    ("node", "list"),
    ("node", "show", "n1"),
    ("lease", "list"),
    ("resource", "list"),
    ("log",),
    ("audit", "verify"),
    ("export",),
    ("provider", "list"),
]


def one_line(err: str) -> str:
    """The single line a failure printed; a traceback or a second line fails the test."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _seed(cli: Cli, path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.5", ledger=path).code == 0
    assert cli("provider", "add", "p1", "--kind", "cloud", ledger=path).code == 0


@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """path made unwritable in a way that holds for root too: the immutable attribute
    (chattr +i) as root, a chmod otherwise. Skips where neither works."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(mode & 0o555)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i does not work here: {done.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextlib.contextmanager
def tmpfs(where: Path, size: str = "1m") -> Iterator[Path]:
    """A small tmpfs of its own (for a full disk or a read-only mount); skips where this
    process may not mount."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(folder: Path) -> None:
    """Fill the file system of folder to the last byte."""
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as fh:
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    with contextlib.suppress(OSError), (folder / "filler2").open("wb", buffering=0) as fh:
        while True:
            fh.write(b"\0")


# -- where the ledger is ----------------------------------------------------------------


def test_a_command_that_creates_makes_a_missing_directory_private(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default place's folders are made, private, on the first run; a named ledger's
    missing folder is refused as a likely typo (test_typed_amounts)."""
    import io

    from tui.cli.main import main

    monkeypatch.delenv("ZUKA_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "new" / "dir"))
    assert main(["provider", "add", "p1", "--kind", "cloud"], out=io.StringIO()) == 0
    path = tmp_path / "new" / "dir" / "zuka" / "ledger.db"
    assert path.exists() and (path.parent.stat().st_mode & 0o777) == 0o700
    assert f"created a new ledger at {path}" in capsys.readouterr().err
    # A reading command leaves nothing behind in a missing directory, and says so.
    other = tmp_path / "none" / "l.db"
    r = cli("node", "list", ledger=other)
    assert r.code == 1 and f"no ledger at {other}" in one_line(r.err)
    assert not other.parent.exists()


@pytest.mark.parametrize("args", [("node", "list"), ("provider", "add", "p", "--kind", "cloud")])
def test_a_ledger_that_is_a_directory_is_one_line(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = cli(*args, ledger=tmp_path)
    assert result.code == 1
    line = one_line(result.err)
    assert str(tmp_path) in line and "directory" in line


@pytest.mark.parametrize(
    "path", ["/proc/self/status", "/proc/zuka-test.db", "/proc/self/zuka/l.db", "/dev/null"]
)
@pytest.mark.parametrize("args", [("node", "list"), ("provider", "add", "p", "--kind", "cloud")])
def test_a_ledger_under_proc_or_dev_is_one_line(cli: Cli, path: str, args: tuple[str, ...]) -> None:
    result = cli(*args, ledger=Path(path))
    assert result.code == 1
    line = one_line(result.err)
    if not Path(path).exists():
        # A reading command on a ledger that is not there says so, as anywhere; a
        # command that would create it is told the directory takes no ledger.
        if args[0] == "node":
            assert "no ledger at" in line
        else:  # its folder missing is a named ledger's typo; else not a place for one
            assert ("no folder" if not Path(path).parent.exists() else "not writable") in line


# -- read-only ledgers --------------------------------------------------------------------


def test_reading_commands_work_on_an_immutable_ledger_and_writes_say_read_only(
    cli: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "l.db"
    _seed(cli, path)
    with unwritable(path):
        for args in READING:
            result = cli(*args, ledger=path)
            assert result.code == 0, (args, result.err)
        result = cli("provider", "add", "p2", "--kind", "cloud", ledger=path)
        assert result.code == 1
        line = one_line(result.err)
        assert str(path) in line and "read-only" in line
    assert cli("provider", "list", "--json", ledger=path).out.count('"name"') == 1


def test_reading_commands_work_in_a_read_only_directory(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "l.db"
    _seed(cli, path)
    before = sorted(p.name for p in folder.iterdir())
    with unwritable(folder):
        for args in READING:
            result = cli(*args, ledger=path)
            assert result.code == 0, (args, result.err)
        result = cli("node", "edit", "n1", "--notes", "x", ledger=path)
        assert result.code == 1
        assert "read-only" in one_line(result.err)
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_read_only_mount_answers_reads_and_refuses_writes(cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt") as mnt:
        path = mnt / "l.db"
        _seed(cli, path)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        for args in READING:
            result = cli(*args, ledger=path)
            assert result.code == 0, (args, result.err)
        result = cli("provider", "add", "p2", "--kind", "cloud", ledger=path)
        assert result.code == 1
        assert "read-only" in one_line(result.err)
        result = cli("provider", "add", "p2", "--kind", "cloud", ledger=mnt / "new.db")
        assert result.code == 1
        assert "read-only" in one_line(result.err)


def test_a_read_only_ledger_that_needs_an_upgrade_says_so(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    MIGRATIONS.apply(Database(conn), stop_before="m004_audit_chain")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with unwritable(path):
        result = cli("node", "list", ledger=path)
        assert result.code == 1
        line = one_line(result.err)
        assert "read-only" in line and "upgrade" in line
    # Where it can be written, a reading command upgrades it as before.
    assert cli("node", "list", ledger=path).code == 0


# -- full disks, locks --------------------------------------------------------------------


def test_a_full_disk_is_one_line_and_reads_still_work(cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "mnt") as mnt:
        path = mnt / "l.db"
        _seed(cli, path)
        _fill(mnt)
        for args in READING:
            result = cli(*args, ledger=path)
            assert result.code == 0, (args, result.err)
        result = cli("provider", "add", "p2", "--kind", "cloud", ledger=path)
        assert result.code == 1
        assert "no space left" in one_line(result.err)
        result = cli("export", "-o", str(mnt / "e.json"), ledger=path)
        assert result.code == 1
        line = one_line(result.err)
        assert "no space left" in line and str(mnt / "e.json") in line
        assert not [p for p in mnt.iterdir() if p.name.startswith(".e.json")]


def test_a_ledger_locked_by_another_writer_is_one_line(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    _seed(cli, path)
    monkeypatch.setattr(ledger_files, "BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = cli("provider", "add", "p2", "--kind", "cloud", ledger=path)
        assert result.code == 1
        line = one_line(result.err)
        assert "locked" in line and "try again" in line and str(path) in line
        # Readers are not held up by a writer (WAL).
        assert cli("node", "list", ledger=path).code == 0
    finally:
        holder.rollback()
        holder.close()
    assert cli("provider", "add", "p2", "--kind", "cloud", ledger=path).code == 0


# -- export and import --------------------------------------------------------------------


@pytest.mark.parametrize("target", ["missing/dir/e.json", ".", "/dev/full"])
def test_export_to_a_bad_place_is_one_line(cli: Cli, tmp_path: Path, target: str) -> None:
    path = tmp_path / "l.db"
    _seed(cli, path)
    output = target if target.startswith("/") else str(tmp_path / target)
    result = cli("export", "-o", output, ledger=path)
    assert result.code != 0
    assert os.path.normpath(output) in one_line(result.err)


def test_export_to_a_full_stdout_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    Ledger.open(path).close()
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "tui.cli.main", "export", "--ledger", str(path)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
    assert done.returncode == 1
    assert "no space left" in one_line(done.stderr)


@pytest.mark.parametrize("kind", ["missing", "directory", "binary", "latin-1"])
def test_import_of_a_bad_file_is_one_line(cli: Cli, tmp_path: Path, kind: str) -> None:
    source = tmp_path / "in.json"
    if kind == "directory":
        source.mkdir()
    elif kind == "binary":
        source.write_bytes(bytes(range(256)) * 4)
    elif kind == "latin-1":
        source.write_bytes('{"nodes": [{"name": "caf\xe9"}]}'.encode("latin-1"))
    result = cli("import", str(source), ledger=tmp_path / "l.db")
    assert result.code == 2
    assert str(source) in one_line(result.err)


# -- the dashboard and other screens ------------------------------------------------------


def _zuka(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def test_the_dashboard_checks_the_ledger_before_starting(cli: Cli, tmp_path: Path) -> None:
    done = _zuka("--ledger", str(tmp_path))
    assert done.returncode == 1
    assert str(tmp_path) in one_line(done.stderr)
    assert "\x1b" not in done.stdout  # Textual never started
    path = tmp_path / "l.db"
    _seed(cli, path)
    with unwritable(path):
        done = _zuka("dashboard", "--ledger", str(path))
    # A ledger this user may only read (a lab's viewer) is not refused: the dashboard opens
    # it read-only. With no terminal here, it says it needs one, and Textual never started.
    assert done.returncode == 2
    assert "the dashboard needs a terminal" in one_line(done.stderr)
    assert "\x1b" not in done.stdout


@pytest.mark.parametrize(
    "args", [("--json",), ("--json", "dashboard"), ("dashboard", "--json"), ("demo", "--json")]
)
def test_json_with_a_screen_is_an_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = _zuka(*args, "--ledger", str(tmp_path / "l.db"), timeout=20)
    assert done.returncode == 2
    assert "--json" in one_line(done.stderr.replace("usage:", "").split("\n", 1)[-1])
    assert not (tmp_path / "l.db").exists()


def test_demo_help_tells_where_its_ledger_is() -> None:
    done = _zuka("demo", "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "temporary" in text and "user data directory" not in text


async def test_the_dashboard_shows_the_ledger_it_has_open(tmp_path: Path) -> None:
    from tui.dashboard.app import ZukaApp

    path = tmp_path / "shown.db"
    Ledger.open(path).close()
    app = ZukaApp(path, poll=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert str(path) in f"{app.title} {app.sub_title}"
        await pilot.press("q")


# -- a bad row in the audit log -----------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        "(50, 12345, '', '', '', NULL, NULL, NULL)",
        "(50, '2026-01-01T00:00:00+00:00', X'ff00', 'node.add', 'node', 'x', X'ff', X'80')",
        "(50, '2026-01-01', 'x', 'node.add', 'node', 7, 'null', '\"a\"')",
        "(50, '2026-01-01T00:00:00+00:00', 'x', 'node.add', 'node', 'n', '{}', '[]')",
    ],
)
def test_forged_audit_rows_are_shown_not_crashed_on(cli: Cli, tmp_path: Path, values: str) -> None:
    path = tmp_path / "l.db"
    _seed(cli, path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER audit_chain_only")
    conn.execute(
        "INSERT INTO audit (id, at, actor, action, entity, node, before, after) VALUES " + values
    )
    conn.close()
    for args in (("log",), ("log", "--json"), ("log", "n1"), ("audit", "verify")):
        result = cli(*args, ledger=path)
        assert "Traceback" not in result.err
        assert result.code in (0, 1), (args, result.err)
    assert "entry 50" in cli("log", ledger=path).out
