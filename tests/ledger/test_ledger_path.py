"""Which file is the ledger: symlinks resolved once, and files that are not a zuka ledger
refused before anything is written to them."""

from __future__ import annotations

import contextlib
import io
import sqlite3
from pathlib import Path

import pytest

from leases.ledger.paths import (
    fault_log_path,
    offboard_lock_path,
    poller_lock_path,
    resolve_ledger_path,
    sim_dir,
    trust_store,
)
from tui.cli.main import main


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(argv), out=out)
    return code, out.getvalue(), err.getvalue()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_symlinked_ledger_keeps_its_companions_beside_the_real_file(tmp_path: Path) -> None:
    real_dir, link_dir = tmp_path / "real", tmp_path / "links"
    real_dir.mkdir()
    link_dir.mkdir()
    (link_dir / "zuka.db").symlink_to(real_dir / "ledger.db")
    resolved = resolve_ledger_path(str(link_dir / "zuka.db"))
    assert resolved == (real_dir / "ledger.db").resolve()
    for beside in (poller_lock_path, offboard_lock_path, fault_log_path, trust_store, sim_dir):
        assert beside(resolved).parent == real_dir.resolve()
    # The environment variable goes through the same resolution.
    assert resolve_ledger_path(None, {"ZUKA_LEDGER": str(link_dir / "zuka.db")}) == resolved

    code, _, err = _run(
        "node", "add", "n1", "--ssh", "ssh root@10.0.0.1", "--ledger", str(link_dir / "zuka.db")
    )
    assert code == 0, err
    assert (real_dir / "ledger.db").stat().st_size > 0
    assert sorted(p.name for p in link_dir.iterdir()) == ["zuka.db"]  # nothing beside the link


def _other_app_db(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT)")
        conn.execute("INSERT INTO users (email) VALUES ('a@example.com')")
    conn.close()


@pytest.mark.parametrize(
    "argv",
    [
        ("node", "list"),
        ("log",),
        ("audit", "verify"),
        ("export", "--format", "json"),
        ("node", "add", "n1", "--ssh", "ssh root@10.0.0.1"),
        ("poll", "--once"),
    ],
)
def test_another_applications_database_is_refused_untouched(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    path = tmp_path / "app.db"
    _other_app_db(path)
    before = _files(tmp_path)
    code, _, err = _run(*argv, "--ledger", str(path))
    assert code != 0
    assert "not a zuka ledger" in err and "users" in err
    assert _files(tmp_path) == before  # same bytes, and no -wal or -shm left beside it


def test_an_empty_file_is_refused_by_reading_commands_and_set_up_by_writing_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    for argv in (("node", "list"), ("log",), ("export",)):
        code, _, err = _run(*argv, "--ledger", str(path))
        assert code != 0 and "empty file, not a zuka ledger" in err
        assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    code, _, err = _run("node", "add", "n1", "--ssh", "ssh root@10.0.0.1", "--ledger", str(path))
    assert code == 0, err
    assert _run("node", "list", "--ledger", str(path))[0] == 0


def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    code, _, err = _run("node", "add", "n1", "--ssh", "ssh root@10.0.0.1", "--ledger", str(path))
    assert code != 0 and "not an SQLite database" in err
    assert path.read_text() == "my notes\n"


def test_the_dashboard_refuses_another_applications_database_before_starting(
    tmp_path: Path,
) -> None:
    path = tmp_path / "app.db"
    _other_app_db(path)
    before = _files(tmp_path)
    code, _, err = _run("dashboard", "--ledger", str(path))
    assert code == 1 and "not a zuka ledger" in err
    assert _files(tmp_path) == before
