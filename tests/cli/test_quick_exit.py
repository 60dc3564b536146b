"""`zuka poll` ends its process without Python's teardown (tui.cli.quickexit), and loses
nothing by it: what it printed, its exit status, what it wrote to the ledger, the atexit
handlers; where a thread is still alive, the process ends the normal way.

Whole processes: the `zuka` command's run() is what ends one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.core.models import NodeHealth
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.telemetry.rollups import HistoryStore
from tui.cli.quickexit import QUICK_EXIT

# Run as the `zuka` script runs: tui.cli.main's run(). A module-level object says when it
# is freed: the teardown that a quick exit skips.
ZUKA = textwrap.dedent("""
    import sys

    class Torn:
        def __del__(self):
            sys.stderr.write("TORN DOWN\\n")

    keep = Torn()
    from tui.cli.main import run

    sys.argv = ["zuka", *sys.argv[1:]]
    run()
""")


def zuka(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(home)}
    return subprocess.run([sys.executable, "-c", ZUKA, *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)  # fmt: skip


@pytest.fixture
def fleet_ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "l.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 3, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, path, nodes)
    yield path
    runner.stop()


def test_poll_once_ends_at_once_and_keeps_everything(fleet_ledger: Path) -> None:
    assert "poll" in QUICK_EXIT
    done = zuka(fleet_ledger.parent, "poll", "--once", "--json", "--ledger", str(fleet_ledger))
    assert done.returncode == 0, done.stderr
    assert "TORN DOWN" not in done.stderr  # the teardown was skipped
    rows = json.loads(done.stdout)  # the whole output, flushed before the end
    assert sorted(r["node"] for r in rows) == ["sim-001", "sim-002", "sim-003"]
    assert all(r["health"] == "ok" for r in rows), rows
    with Ledger.open(fleet_ledger, create=False) as ledger:  # the sweep's flush committed
        latest = {s.node: s for s in HistoryStore(ledger).latest_by_id().values()}
    assert {n: s.health for n, s in latest.items()} == dict.fromkeys(latest, NodeHealth.OK)
    assert len(latest) == 3


def test_poll_keeps_its_exit_status(tmp_path: Path) -> None:
    """No node answered (none listens on its port): status 1, said, at once all the same."""
    path = tmp_path / "l.db"
    added = zuka(tmp_path, "node", "add", "gone", "--ssh", "ssh -p 9 root@127.0.0.1",
                 "--ledger", str(path))  # fmt: skip
    assert added.returncode == 0, added.stderr
    done = zuka(tmp_path, "poll", "--once", "--ledger", str(path))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "gone" in done.stdout and "TORN DOWN" not in done.stderr


def test_other_commands_end_the_normal_way(tmp_path: Path) -> None:
    path = str(tmp_path / "l.db")
    assert zuka(tmp_path, "node", "add", "n1", "--local", "--ledger", path).returncode == 0
    done = zuka(tmp_path, "node", "list", "--ledger", path)
    assert done.returncode == 0, done.stderr
    assert "TORN DOWN" in done.stderr


def _ended(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_quick_exit_runs_the_atexit_handlers_and_flushes() -> None:
    done = _ended("""
        import atexit, sys
        from tui.cli.quickexit import quick_exit
        atexit.register(lambda: sys.stdout.write("handler ran"))
        sys.stdout.write("no newline, still buffered; ")
        quick_exit(3)
    """)
    assert done.returncode == 3
    assert done.stdout == "no newline, still buffered; handler ran"


def test_a_live_thread_gets_the_normal_exit(tmp_path: Path) -> None:
    """A thread still at work is joined, not killed: the file it writes last is there."""
    out = tmp_path / "written"
    done = _ended(f"""
        import threading, time
        from pathlib import Path
        from tui.cli.quickexit import quick_exit

        def work():
            time.sleep(0.3)
            Path({str(out)!r}).write_text("done")

        threading.Thread(target=work).start()
        quick_exit(4)
    """)
    assert done.returncode == 4, done.stderr
    assert out.read_text() == "done"
