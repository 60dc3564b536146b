"""Stopping a GPU process on a real OpenSSH node: the test user's own process, started over
ssh, listed by the fake nvidia-smi (mode apps:PID), read with zuka's owner query and
stopped with stop_process: SIGTERM; SIGKILL after the grace for one that ignores SIGTERM;
and a pid reused between the confirmation and the signal is refused, nothing signalled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.app.processes import Outcome, stop_process
from leases.core.models import GpuProcess, Node, SshTarget
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.ssh import hostkeys
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from leases.telemetry.owners import APPS_OWNERS_COMMAND, parse_apps_owners
from tests.support.sshd import Sshd, sshd_unavailable

_why_not = sshd_unavailable()
pytestmark = [pytest.mark.openssh, pytest.mark.skipif(_why_not is not None, reason=_why_not or "")]


@pytest.fixture
def key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture
def sshd(key: asyncssh.SSHKey) -> Iterator[Sshd]:
    with Sshd.start_new([key], own_home=True) as server:
        yield server


def _session(sshd: Sshd, key: asyncssh.SSHKey, tmp_path: Path) -> NodeSession:
    key_file = tmp_path / "key"
    key.write_private_key(key_file)
    key_file.chmod(0o600)
    known = tmp_path / "known_hosts"
    hostkeys.trust("127.0.0.1", sshd.port, sshd.host_key, known)
    options = SshOptions(
        known_hosts=(known,), client_keys=[], agent_path=None, config=[], connect_timeout=5.0
    )
    node = Node("real1", SshTarget("127.0.0.1", port=sshd.port, user=sshd.user,
                key_path=str(key_file)))  # fmt: skip
    return NodeSession(node, options)


async def _start(session: NodeSession, command: str) -> int:
    result = await session.run(f"nohup {command} >/dev/null 2>&1 & echo $!")
    return int(result.stdout.strip())


async def _read(session: NodeSession, sshd: Sshd, pid: int) -> GpuProcess:
    sshd.set_nvidia_smi_mode(f"apps:{pid}")
    result = await session.run(APPS_OWNERS_COMMAND)
    (p,) = parse_apps_owners(result.stdout, "real1").processes or ()
    assert p.pid == pid and p.visible and p.start and p.cmdline, result.stdout
    # The uptime, printed last by a real sh, gives how long it has run (started by this test).
    assert p.elapsed_s is not None and 0 <= p.elapsed_s < 600, result.stdout
    return p


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0]
    except (OSError, IndexError):
        return "gone"


def _ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": "real1", "ssh_host": "127.0.0.1"}))
    return ledger


async def _stop(session: NodeSession, ledger: Ledger, p: GpuProcess, pid: int | None = None,
                grace: float = 1.0) -> Outcome:  # fmt: skip
    stopped = await stop_process("real1", pid or p.pid, p.start, p.cmdline, str(pid or p.pid),
                                 grace, session, time.monotonic, ledger, user=p.owner)  # fmt: skip
    return stopped.outcome


async def test_stop_term(sshd: Sshd, key: asyncssh.SSHKey, tmp_path: Path) -> None:
    session, ledger = _session(sshd, key, tmp_path), _ledger(tmp_path)
    try:
        pid = await _start(session, "sleep 300")
        p = await _read(session, sshd, pid)
        assert p.owner == sshd.user and p.cmdline == "sleep 300 "
        assert await _stop(session, ledger, p) is Outcome.STOPPED
        assert not _alive(pid)
    finally:
        await session.close()


async def test_term_ignored_then_kill(sshd: Sshd, key: asyncssh.SSHKey, tmp_path: Path) -> None:
    session, ledger = _session(sshd, key, tmp_path), _ledger(tmp_path)
    try:
        pid = await _start(session, "sh -c 'trap \"\" TERM; exec sleep 301'")
        p = await _read(session, sshd, pid)
        assert await _stop(session, ledger, p, grace=1.0) is Outcome.KILLED
        assert not _alive(pid)
        actions = [e.action for e in ledger.history() if e.entity == "process"]
        assert actions == ["process.term", "process.kill", "process.gone"]
    finally:
        await session.close()


async def test_reused_pid_refused(sshd: Sshd, key: asyncssh.SSHKey, tmp_path: Path) -> None:
    """The confirmed process ends and another runs where the stop looks: its start and
    command line differ, so it is refused and the other process is not signalled."""
    session, ledger = _session(sshd, key, tmp_path), _ledger(tmp_path)
    try:
        first = await _start(session, "sleep 302")
        confirmed = await _read(session, sshd, first)
        await session.run(f"kill -KILL {first}")
        second = await _start(session, "sleep 303")
        assert await _stop(session, ledger, confirmed, pid=second) is Outcome.REUSED
        assert _alive(second)
        await session.run(f"kill -KILL {second}")
    finally:
        await session.close()
