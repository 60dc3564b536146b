"""The collector run as its system unit would run it, without systemd: as the service
user (its own groups), in exactly the unit's environment (Environment=, UnsetEnvironment=,
WorkingDirectory= parsed from the rendered unit), with ExecStart's words, its own key
(readable by it alone) against a node that accepts only that key; the ledger shows the
reading. And the same collector refused a key others may read."""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.app import service as svc
from leases.ledger.store import Ledger
from leases.service.units import Mode, parse_words, settings
from leases.telemetry.rollups import HistoryStore
from tests.service.support import ServiceFolder, make_service_folder
from tests.support.unixusers import LabUsers, as_user, lab_users  # noqa: F401
from tests.support.waiting import wait_until_sync


# status's clock: the age it reports is not what these tests look at.
def T0() -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def folder(lab_users: LabUsers) -> Iterator[ServiceFolder]:  # noqa: F811
    yield from make_service_folder(lab_users)


def unit_of(sf: ServiceFolder, tmp_path: Path, web_port: int | None = None) -> str:
    """The collector's system unit (or, given a port, zuka web's)."""
    req = svc.Request(
        Mode.SYSTEM,
        sf.lab.ledger,
        root=tmp_path / "root",
        web=web_port is not None,
        web_port=web_port or svc.DEFAULT_WEB_PORT,
    )
    return svc.plan_install(req, euid=0).units[-1].text


def service_env(unit: str, inherited: dict[str, str]) -> dict[str, str]:
    """What systemd gives the service: the inherited environment, Environment= set on
    it, UnsetEnvironment= taken off."""
    conf = settings(unit)
    env = dict(inherited)
    for line in conf.get("Environment", []):
        for word in parse_words(line):
            name, _, value = word.partition("=")
            env[name] = value
    for line in conf.get("UnsetEnvironment", []):
        for name in parse_words(line):
            env.pop(name, None)
    return env


def start_as_service(
    users: LabUsers, unit: str, agent_sock: str = "/nonexistent/agent"
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    conf = settings(unit)
    (exec_start,) = conf["ExecStart"]
    argv = parse_words(exec_start)
    user = conf["User"][0]
    assert conf["Group"] == [users.viewers]
    # A person's login would carry an agent: the unit takes it away.
    env = service_env(unit, {"PATH": "/usr/bin:/bin", "SSH_AUTH_SOCK": agent_sock})
    proc = subprocess.Popen(
        [*as_user(user), *argv],
        env=env,
        cwd=conf["WorkingDirectory"][0],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as systemd's cgroup: zuka web's tabs too
    )
    return proc, env


def readings(ledger: Path) -> list[str]:
    with Ledger.open(ledger, readonly=True) as led:
        return [st.health.value for st in HistoryStore(led).latest_by_id().values()]


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    return proc.communicate(timeout=60)


def test_the_collector_runs_as_its_unit_says_and_the_ledger_shows_the_reading(
    lab_users: LabUsers,  # noqa: F811
    folder: ServiceFolder,
    tmp_path: Path,
) -> None:
    unit = unit_of(folder, tmp_path)
    proc, env = start_as_service(lab_users, unit)
    assert "SSH_AUTH_SOCK" not in env and env["ZUKA_SERVICE"] == "zuka-collect"
    assert env["HOME"] == str(folder.lab.collector_key_dir)
    try:
        wait_until_sync(
            lambda: readings(folder.lab.ledger) == ["ok"] or proc.poll() is not None,
            timeout=60,
            interval=0.2,
            what="the service's first reading in the ledger",
        )
        assert proc.poll() is None, stop(proc)
        assert readings(folder.lab.ledger) == ["ok"]
        # Who polls: the service user, by the lock it holds (what `zuka service status` says).
        st = svc.status(Mode.SYSTEM, folder.lab.ledger, tmp_path / "root", tmp_path, clock=T0)
        assert st.poller_user == lab_users.service
        assert st.last_reading is not None
    finally:
        out, err = stop(proc)
    assert proc.returncode == 0, err
    assert "zuka collect: 1 nodes" in out
    # The ledger's files are still the service user's: nothing was made as root.
    assert os.stat(folder.lab.ledger).st_uid == pwd.getpwnam(lab_users.service).pw_uid


def test_without_its_own_key_the_collector_cannot_read_the_node(
    lab_users: LabUsers,  # noqa: F811
    folder: ServiceFolder,
    tmp_path: Path,
) -> None:
    """The control of the test above: the node refuses every other key (the ledger's own
    for it), so the reading there came by --identity."""
    unit = unit_of(folder, tmp_path).replace(f" --identity {folder.lab.collector_key}", "")
    assert "--identity" not in unit
    proc, _ = start_as_service(lab_users, unit)
    try:
        wait_until_sync(
            lambda: readings(folder.lab.ledger) or proc.poll() is not None,
            timeout=60,
            interval=0.2,
            what="the service's first (failed) reading",
        )
        # The collector's own words when it ended instead (a CI run once saw it end with
        # no reading, which a loaded machine has not shown again).
        said = proc.communicate(timeout=60) if proc.poll() is not None else ("", "")
        assert readings(folder.lab.ledger) == ["auth_failed"], (proc.returncode, said)
    finally:
        stop(proc)


def test_the_service_refuses_a_key_its_group_may_read(
    lab_users: LabUsers,  # noqa: F811
    folder: ServiceFolder,
    tmp_path: Path,
) -> None:
    folder.lab.collector_key.chmod(0o640)
    unit = unit_of(folder, tmp_path)
    proc, _ = start_as_service(lab_users, unit)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert f"chmod 600 {folder.lab.collector_key}" in err
    assert readings(folder.lab.ledger) == []


def test_another_user_cannot_read_the_collectors_key(
    lab_users: LabUsers,  # noqa: F811
    folder: ServiceFolder,
) -> None:
    for user in (lab_users.editor, lab_users.viewer):
        r = lab_users.run(user, ["cat", str(folder.lab.collector_key)])
        assert r.returncode != 0 and "Permission denied" in r.stderr


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_zuka_web_runs_as_its_unit_says_and_serves_the_page(
    lab_users: LabUsers,  # noqa: F811
    folder: ServiceFolder,
    tmp_path: Path,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    unit = unit_of(folder, tmp_path, web_port=port)
    assert settings(unit)["SyslogIdentifier"] == ["zuka-web"]
    proc, env = start_as_service(lab_users, unit)
    assert env["ZUKA_SERVICE"] == "zuka-web"
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # what the journal shows: the address and its token
        assert first.startswith(f"zuka web: open http://127.0.0.1:{port}/?token="), (
            first,
            proc.poll() is not None and proc.stderr and proc.stderr.read(),
        )
        url = first.split("open ", 1)[1].strip()
        wait_until_sync(lambda: listening(port) or proc.poll() is not None, what="zuka web")
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200
    finally:
        stop(proc)
