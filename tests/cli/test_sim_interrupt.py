"""Ctrl-C during `zuka sim`'s backfill stops it within a moment (it was ~20 s: asyncio's
own Ctrl-C waits for an await the backfill never reaches), and no node's history is left
half-written (issue 22)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parent.parent.parent


def _counts(path: Path) -> dict[int, tuple[int, int]]:
    """Each node's (hours, minutes) of history, read beside the writer."""
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            nodes = [r[0] for r in conn.execute("SELECT id FROM nodes")]
            hours = dict(conn.execute("SELECT node_id, COUNT(*) FROM gpu_hour GROUP BY node_id"))
            minutes = dict(
                conn.execute("SELECT node_id, COUNT(*) FROM gpu_minute GROUP BY node_id")
            )
    except sqlite3.OperationalError:  # the schema not made yet
        return {}
    return {n: (hours.get(n, 0), minutes.get(n, 0)) for n in nodes}


def test_ctrl_c_stops_the_backfill_at_once_and_leaves_no_half_node(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli.main", "sim", "--ledger", str(path), "--nodes", "12",
         "--history", "120"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # The first node's history is in: the backfill runs (12 nodes of 120 days take
        # far longer than the wait below allows).
        wait_until_sync(
            lambda: any(h for h, _ in _counts(path).values()), timeout=60, what="a backfill"
        )
        proc.send_signal(signal.SIGINT)
        asked = time.monotonic()
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - asked
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert took < 3, took  # within a reading and the node being written
    assert "Traceback" not in err, err
    assert "stopped: history written for" in out and "simulated nodes on" not in out, out
    counts = _counts(path)
    assert len(counts) == 12
    whole = [n for n, (h, m) in counts.items() if h]
    assert 1 <= len(whole) < 12  # stopped part way
    for node, (hours, minutes) in counts.items():
        # Whole (120 days of hours and its last 6 hours of minutes) or nothing.
        assert (hours >= 24 * 120 and minutes >= 6 * 60) or (hours, minutes) == (0, 0), node
