"""Issue 18 end to end: a real `zuka collect` process, a local HTTP catcher behind a
DingTalk-style URL, a fleet with one broken lease row, a warning and a critical, and `zuka
alerts` run before the collector starts and again while it runs. Every alert arrives exactly
once (reading alerts first never swallows a notification), the criticals go first, and the
broken row is an alert of its own while every other alert still speaks.

The leases are set relative to the moment the test runs (the collector reads the wall
clock): nothing depends on the hour or day it runs at. The only info-level alert (a lease
ending after a finished offboarding) needs a whole offboarding run; notify's tests cover
info delivery by min_severity.
"""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.ledger import records
from leases.ledger.store import Ledger
from tests.notify.test_notify import Hook
from tests.support.waiting import wait_until_sync

ZUKA = [sys.executable, "-m", "tui.cli.main"]


def _closed_port() -> int:
    """A port nothing listens on: the nodes are refused at once, never waited for."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fleet(path: Path, now: datetime) -> None:
    """w: a monthly lease ending in 2.5 days (a warning); c: ending in 12 hours (critical);
    b: a lease whose price was spoilt in SQLite (it cannot be read: the broken row)."""
    port = _closed_port()
    with Ledger.open(path) as ledger:
        for name in ("w", "c", "b"):
            ledger.add_node(records.node_from({"name": name, "ssh_host": "127.0.0.1",
                                               "ssh_port": port, "ssh_user": "root",
                                               "gpu_count": 8}))  # fmt: skip
        for name, left in (("w", timedelta(days=2, hours=12)), ("c", timedelta(hours=12)),
                           ("b", timedelta(days=20))):  # fmt: skip
            ledger.add_lease(records.lease_from({
                "node": name, "billing_type": "monthly", "unit_price": "30000",
                "start": (now - timedelta(days=20)).isoformat(),
                "end": (now + left).isoformat(),
            }))  # fmt: skip
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE leases SET unit_price = 'lots' WHERE node_id ="
            " (SELECT id FROM nodes WHERE name = 'b')"
        )


def _zuka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ZUKA, *args], capture_output=True, text=True, timeout=120)


def _titles(hook: Hook) -> list[str]:
    return [got.body["text"]["content"].splitlines()[0] for got in hook.got if got.body]


def _evaluations(path: Path) -> str:
    """The latest time any open alert was seen: it moves on each evaluation."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return str(conn.execute("SELECT max(last_seen) FROM alerts").fetchone()[0])


EXPECTED = {
    "[zuka] warning: lease ending on w",
    "[zuka] critical: lease ending on c",
    "[zuka] warning: cannot evaluate on b",
    "[zuka] critical: edited outside zuka on b",
}


def test_every_alert_arrives_once_criticals_first_and_the_broken_row_is_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lab.db"
    _fleet(path, datetime.now(UTC))
    hook = Hook().start()
    config = tmp_path / "config.toml"
    config.write_text(f'[notify]\nurls = ["{hook.url("dingtalk")}"]\nmin_severity = "info"\n')
    common = ("--ledger", str(path), "--config", str(config))
    try:
        # Looked at first: before, what `zuka alerts` stored was never sent.
        first = _zuka("alerts", "--json", *common)
        assert first.returncode == 0, first.stderr
        listed = {(a["kind"], a["node"], a["severity"]) for a in json.loads(first.stdout)}
        assert {("lease_ending", "w", "warning"), ("lease_ending", "c", "critical"),
                ("cannot_evaluate", "b", "warning"),
                ("edited_outside_zuka", "b", "critical")} <= listed  # fmt: skip
        collector = subprocess.Popen(
            [*ZUKA, "collect", *common, "--interval", "1", "--alerts-every", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_until_sync(lambda: set(_titles(hook)) >= EXPECTED, timeout=60,
                            what="every alert at the catcher")  # fmt: skip
            arrived = _titles(hook)
            # The criticals went first: nothing held them behind the warnings.
            assert {t.split(":")[0] for t in arrived[:2]} == {"[zuka] critical"}, arrived
            # Looked at again while the collector runs, then three more evaluations.
            assert _zuka("alerts", *common).returncode == 0
            for _ in range(3):
                seen = _evaluations(path)
                wait_until_sync(lambda s=seen: _evaluations(path) > s, timeout=60,  # type: ignore[misc]
                                what="the collector's next evaluation")  # fmt: skip
            again = _titles(hook)
            assert sorted(again) == sorted(EXPECTED), again  # each once, nothing else
        finally:
            collector.send_signal(signal.SIGTERM)
            _, err = collector.communicate(timeout=60)
        assert collector.returncode == 0, err
    finally:
        hook.stop()
