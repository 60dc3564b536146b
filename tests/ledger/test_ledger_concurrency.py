"""A dashboard and a collector share one ledger file: no lock errors, consistent reads.

Both are real processes (tests/support/ledger_workers.py) on a real SQLite file in WAL mode: the
collector ends and starts leases, edits nodes and records resources, one transaction each;
the dashboard reads everything in one snapshot in a loop and checks that the audit log, the
nodes and the leases agree and that nothing it saw goes backwards.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leases.ledger.store import Ledger

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = ROOT / "tests" / "support" / "ledger_workers.py"
SECONDS = 2.0


def _start(mode: str, path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, str(path), str(SECONDS)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> dict[str, int]:
    out, err = proc.communicate(timeout=60)
    assert "database is locked" not in err
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


@pytest.mark.slow
def test_dashboard_reads_while_collector_writes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger.open(path).close()

    collector = _start("collector", path)
    dashboard = _start("dashboard", path)
    cli = [
        subprocess.run(
            [sys.executable, "-m", "tui.cli.main", "node", "list", "--json", "--ledger", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        for _ in range(3)
    ]
    wrote = _finish(collector)
    read = _finish(dashboard)

    for run in cli:
        assert run.returncode == 0, run.stderr
        assert isinstance(json.loads(run.stdout), list)
    assert wrote["writes"] > 50, wrote
    assert read["reads"] > 10, read

    with Ledger.open(path, create=False) as ledger:
        leases = ledger.leases()
        assert len(ledger.nodes()) == 8
        assert sum(1 for le in leases if le.open) == 8
        audit = ledger.history()
    assert len(audit) == wrote["writes"]
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


def test_dashboard_and_collector_create_the_ledger_together(tmp_path: Path) -> None:
    """`zuka collect` and the dashboard started at once on a ledger that does not exist yet."""
    for trial in range(4):
        path = tmp_path / f"ledger{trial}.db"
        at = time.time() + 0.5
        procs = [
            subprocess.Popen(
                [sys.executable, str(WORKER), "open", str(path), str(at)],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        for proc in procs:
            err = proc.communicate(timeout=60)[1]
            assert proc.returncode == 0, err.strip().splitlines()[-1:]
        with Ledger.open(path, create=False) as ledger:
            assert ledger.nodes() == []
