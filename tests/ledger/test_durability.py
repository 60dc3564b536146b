"""The ledger survives SIGKILL: a writer killed at random moments loses no committed write.

A child process (tests/support/ledger_workers.py writer) adds nodes and leases, one transaction each,
and prints each write only after it committed. It is killed with SIGKILL after a random delay,
over and over, against the same file. Afterwards the file must pass integrity_check and hold
every write the children reported.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from leases.ledger.store import Ledger

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = ROOT / "tests" / "support" / "ledger_workers.py"
ROUNDS = 25
SEED = 20250101


class _Child:
    """A writer child whose stdout lines are collected by a thread, so its pipe never fills."""

    def __init__(self, path: Path, round_no: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), "writer", str(path), str(round_no)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.endswith("\n"):
                break  # cut off by the kill: that write was not reported
            if line == "ready\n":
                self.ready.set()
            else:
                self.lines.append(line.rstrip("\n"))
        self.ready.set()

    def kill_after(self, delay: float) -> str:
        """SIGKILL the child `delay` seconds after it opened the ledger; its stderr."""
        assert self.ready.wait(30), "the writer never opened the ledger"
        # From its first committed write on (on a loaded machine the first may take longer
        # than the delay): the kill lands amid the writes that follow.
        deadline = time.monotonic() + 30
        while not self.lines and self.proc.poll() is None:
            assert time.monotonic() < deadline, "the writer committed nothing in 30 s"
            time.sleep(0.005)
        time.sleep(delay)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def _integrity(path: Path) -> tuple[str, str]:
    conn = sqlite3.connect(path)
    try:
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()
    return check, mode


@pytest.mark.slow
def test_ledger_survives_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    rng = random.Random(SEED)
    reported: list[str] = []
    for round_no in range(ROUNDS):
        child = _Child(path, round_no)
        stderr = child.kill_after(rng.uniform(0.020, 0.200))
        assert child.proc.returncode == -signal.SIGKILL, f"round {round_no}: {stderr}"
        assert child.lines, f"round {round_no}: no write committed before the kill"
        reported += child.lines
        assert _integrity(path) == ("ok", "wal"), f"after round {round_no}"

    nodes_seen = {line.split()[1] for line in reported if line.startswith("node ")}
    leases_seen = {
        (name, datetime.fromisoformat(start))
        for kind, name, start in (line.split() for line in reported if line.startswith("lease "))
    }
    assert len(nodes_seen) >= ROUNDS
    assert len(leases_seen) >= ROUNDS

    with Ledger.open(path, create=False) as ledger:
        nodes = {n.name for n in ledger.nodes()}
        leases = {(le.node, le.start) for le in ledger.leases()}
        audit = ledger.history()
    assert nodes_seen <= nodes
    assert leases_seen <= leases
    # At most the one write in flight per kill can be present without being reported.
    assert len(nodes) - len(nodes_seen) + len(leases) - len(leases_seen) <= ROUNDS
    # Every committed row has its audit entry, written in the same transaction.
    assert sum(e.action == "node.add" for e in audit) == len(nodes)
    assert sum(e.action == "lease.add" for e in audit) == len(leases)

    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    for extra in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        if extra.exists():
            assert stat.S_IMODE(os.stat(extra).st_mode) == 0o600, extra.name
    assert _integrity(path) == ("ok", "wal")
