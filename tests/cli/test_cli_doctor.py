"""`zuka doctor`: each finding is what is really there, with its fix, and nothing changes."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from leases.app import doctor
from leases.app.doctor import Finding, Level, NodeSeen, Setting
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger.store import Ledger
from leases.telemetry.lock import PollerLock
from leases.telemetry.rollups import HistoryStore
from tests.support.cli import Cli, json_of


def _found(cli: Cli) -> list[dict[str, str]]:
    """`zuka doctor --json`, whatever its exit status (1 when something must be fixed)."""
    r = cli("doctor", "--json")
    assert r.code in (0, 1), r.err
    found: list[dict[str, str]] = json.loads(r.out)
    assert r.code == (1 if any(f["level"] == "fail" for f in found) else 0)
    return found


NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
GIVE = "give the key"


def _levels(found: list[Finding]) -> dict[str, Level]:
    return {f.what: f.level for f in found}


def test_a_refused_login_is_a_failure_with_the_way_to_give_the_key() -> None:
    seen = [
        NodeSeen("b", NodeHealth.AUTH_FAILED, NOW),
        NodeSeen("a", NodeHealth.OK, NOW),
        NodeSeen("c", NodeHealth.UNTRUSTED, NOW),
        NodeSeen("d", NodeHealth.HOSTKEY_CHANGED, NOW),
    ]
    found = doctor.node_findings(seen, now=NOW, polled_by="pid 7 (user zuka)", give_key=GIVE)
    by = {f.what.split()[0]: f for f in found if f.area == "nodes"}
    assert set(by) == {"b", "c", "d"}
    assert by["b"].level is Level.FAIL and by["b"].fix == GIVE
    assert by["c"].level is Level.WARN and by["c"].fix.endswith("zuka node trust c")
    assert by["d"].level is Level.FAIL and "--fingerprint" in by["d"].fix
    assert [f.what for f in found if f.area == "collector"] == [
        "the fleet is polled by pid 7 (user zuka)"
    ]


@pytest.mark.parametrize(
    ("age", "total", "level", "words"),
    [
        (timedelta(minutes=10), None, Level.WARN, "from 10 min ago"),
        (timedelta(minutes=1), None, Level.OK, "recent"),
        (None, 3, Level.WARN, "no node has been read yet"),
    ],
)
def test_nobody_polling_is_said_with_the_age_of_the_newest_reading(
    age: timedelta | None, total: int | None, level: Level, words: str
) -> None:
    seen = [] if age is None else [NodeSeen("a", NodeHealth.OK, NOW - age)]
    found = doctor.node_findings(seen, now=NOW, polled_by=None, give_key=GIVE, total=total)
    (collector,) = [f for f in found if f.area == "collector"]
    assert collector.level is level and words in collector.what
    assert collector.level is Level.OK or "zuka collect" in collector.fix


def test_an_empty_ledger_says_nothing_of_polling() -> None:
    assert doctor.node_findings([], now=NOW, polled_by=None, give_key=GIVE, total=0) == []


def test_a_check_that_crashes_is_a_finding_and_the_others_still_run(tmp_path: Path) -> None:
    def broken(s: Setting) -> Iterator[Finding]:
        raise OSError("disk on fire")

    def fine(s: Setting) -> Iterator[Finding]:
        yield Finding("x", Level.OK, "fine")

    found = doctor.diagnose(Setting(tmp_path / "l.db", "--ledger", NOW), [broken, fine])
    assert [f.level for f in found] == [Level.FAIL, Level.OK]
    assert "disk on fire" in found[0].what and found[0].area == "broken"
    assert doctor.worst(found) is Level.FAIL


@pytest.fixture
def private(cli: Cli, ledger_path: Path) -> Path:
    """A ledger with one node, private as zuka makes it."""
    assert cli("node", "add", "n1", "--ssh", "root@10.0.0.1").code == 0
    ledger_path.parent.chmod(0o700)
    return ledger_path


def test_a_private_ledger_is_ok_and_doctor_changes_nothing(
    cli: Cli, private: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    before = {p.name: (p.stat().st_mode, p.stat().st_mtime_ns) for p in private.parent.iterdir()}
    found = json_of(cli, "doctor")
    perms = [f for f in found if f["area"] == "permissions"]
    assert [f["level"] for f in perms] == ["ok"]
    after = {p.name: (p.stat().st_mode, p.stat().st_mtime_ns) for p in private.parent.iterdir()}
    assert after == before


def test_a_ledger_others_can_read_must_be_fixed_and_the_fix_is_given(
    cli: Cli, private: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    private.chmod(0o644)
    private.parent.chmod(0o755)
    r = cli("doctor")
    assert r.code == 1
    assert f"FAIL  the ledger {private} is readable or writable by others (mode 0644)" in r.out
    assert f"fix: chmod 600 {private}" in r.out
    assert f"fix: chmod 700 {private.parent}" in r.out
    assert stat.S_IMODE(private.stat().st_mode) == 0o644  # looked, changed nothing
    private.chmod(0o600)
    private.parent.chmod(0o700)
    assert cli("doctor").code == 0


def test_node_keys_missing_or_open_to_others_are_failures(
    cli: Cli, private: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    loose = home / "loose"
    loose.write_text("not read")
    loose.chmod(0o640)
    assert cli("node", "add", "k1", "--ssh", f"ssh -i {loose} root@10.0.0.2").code == 0
    gone = tmp_path / "gone"
    assert cli("node", "add", "k2", "--ssh", f"ssh -i {gone} root@10.0.0.3").code == 0
    mine = home / ".ssh" / "id_ed25519"
    mine.write_text("not read")
    mine.chmod(0o600)
    found = _found(cli)
    keys = {f["what"]: f for f in found if f["area"] == "ssh keys"}
    assert (
        keys[f"node k1's key {loose} is readable by others (mode 0640): ssh refuses such a key"][
            "fix"
        ]
        == f"chmod 600 {loose}"
    )
    assert keys[f"node k2 logs in with {gone}, which does not exist here"]["level"] == "fail"
    assert keys[f"your key {mine} is private"]["level"] == "ok"


def test_an_agent_that_is_gone_or_answers(
    cli: Cli, private: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    dead = tmp_path / "agent.dead"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(dead))
    found = _found(cli)
    (agent,) = [f for f in found if "SSH_AUTH_SOCK" in f["what"]]
    assert agent["level"] == "warn" and "does not exist" in agent["what"]
    live = tmp_path / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(live))
    server.listen(1)
    try:
        monkeypatch.setenv("SSH_AUTH_SOCK", str(live))
        found = _found(cli)
        assert f"the SSH agent at {live} answers" in _levels_of(found)
    finally:
        server.close()


def _levels_of(found: list[dict[str, str]]) -> dict[str, str]:
    return {f["what"]: f["level"] for f in found}


def test_nodes_refusing_the_login_and_who_polls(
    cli: Cli, private: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with Ledger.open(private) as ledger:
        store = HistoryStore(ledger)
        store.set_nodes(ledger.nodes())
        store.write_latest([NodeStatus("n1", NodeHealth.AUTH_FAILED, "denied", NOW)])
    found = _found(cli)
    (node,) = [f for f in found if f["area"] == "nodes"]
    assert node["level"] == "fail" and node["what"] == "n1 refused zuka's login"
    assert "authorized_keys" in node["fix"]
    lock = PollerLock(private)
    assert lock.acquire()
    try:
        found = _found(cli)
        (who,) = [f for f in found if f["area"] == "collector"]
        assert who["level"] == "ok"
        assert who["what"].startswith(f"the fleet is polled by pid {os.getpid()} (user ")
    finally:
        lock.release()
