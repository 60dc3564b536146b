"""A service's own key (SshOptions.identity, `zuka collect --identity`): the only key a
connect offers, never an SSH agent's, even with SSH_AUTH_SOCK set; a key file that is not
the running user's own, or that others may read, is refused naming the chmod."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import NodeHealth
from leases.ledger.paths import poller_lock_path
from leases.ledger.store import Ledger
from leases.ssh.errors import SshError
from leases.ssh.keys import KeyFileRefused, load_own_key
from leases.ssh.options import DEFAULT
from leases.ssh.session import NodeSession
from leases.ssh.stream import CommandResult
from tests.support.cli import Cli
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until_sync


class RecordingNode(FakeNode):
    """A node that notes every public key a client offered it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.offered: list[bytes] = []

    def accepts(self, key: asyncssh.SSHKey) -> bool:
        self.offered.append(key.public_data)
        return super().accepts(key)


def write_key(path: Path, key: asyncssh.SSHKey, mode: int = 0o600) -> Path:
    path.write_bytes(key.export_private_key("openssh"))
    path.chmod(mode)
    return path


def _accepts(sock: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(sock))
        except OSError:
            return False
    return True


@pytest.fixture
def agent(tmp_path: Path, keys: TestKeys) -> Iterator[str]:
    """A real ssh-agent holding keys.client_key (the key the nodes accept), its socket in
    SSH_AUTH_SOCK as a person's login would have it."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        # The socket's file appears when ssh-agent binds it, a moment before it listens: a
        # connect in between is refused. Wait until one is accepted.
        wait_until_sync(lambda: _accepts(sock), what="ssh-agent listening on its socket")
        key_file = write_key(tmp_path / "person_key", keys.client_key)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        added = subprocess.run(
            ["ssh-add", str(key_file)], env=env, capture_output=True, text=True, timeout=30
        )
        assert added.returncode == 0, added.stderr
        key_file.unlink()  # only the agent holds it now
        yield str(sock)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_the_agent_would_log_in_without_an_identity(
    keys: TestKeys, tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the agent of this test does log in when it is allowed to, so the test
    below fails for the identity alone."""
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    async with RecordingNode(keys) as node:
        opts = node_options(keys, tmp_path, [node], client_keys=None, agent_path=DEFAULT)
        session = NodeSession(node.as_node("gpu1"), opts)
        assert await session.run("echo via agent") == CommandResult(0, "via agent\n", "")
        await session.close()
        assert keys.client_key.public_data in node.offered


async def test_with_an_identity_the_agent_is_never_asked(
    keys: TestKeys, tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    refused = write_key(tmp_path / "service_key", keys.stranger_key)
    async with RecordingNode(keys) as node:
        opts = node_options(
            keys, tmp_path, [node], client_keys=None, agent_path=DEFAULT, identity=refused
        )
        session = NodeSession(node.as_node("gpu1"), opts)
        with pytest.raises(SshError):
            await session.run("echo never")
        await session.close()
        assert session.health is NodeHealth.AUTH_FAILED, session.last_error
        assert node.offered  # it did try, with the service's key ...
        assert set(node.offered) == {keys.stranger_key.public_data}  # ... and nothing else


async def test_an_identity_the_node_accepts_logs_in_with_that_key_alone(
    keys: TestKeys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    own = write_key(tmp_path / "service_key", keys.stranger_key)
    async with RecordingNode(keys, authorized={keys.stranger_key.convert_to_public()}) as node:
        # client_keys of the options (a person's key) are not offered either.
        opts = node_options(keys, tmp_path, [node], identity=own)
        session = NodeSession(node.as_node("gpu1", key_path=str(tmp_path / "absent")), opts)
        assert await session.run("echo own key") == CommandResult(0, "own key\n", "")
        await session.close()
        assert set(node.offered) == {keys.stranger_key.public_data}


def test_a_key_others_may_read_is_refused_naming_the_chmod(keys: TestKeys, tmp_path: Path) -> None:
    for mode in (0o640, 0o604, 0o644):
        path = write_key(tmp_path / f"key{mode:o}", keys.client_key, mode)
        with pytest.raises(KeyFileRefused) as refused:
            load_own_key(path)
        assert f"chmod 600 {path}" in str(refused.value)
        assert f"{mode:04o}" in str(refused.value)


def test_a_key_that_was_read_once_is_refused_after_a_chmod(keys: TestKeys, tmp_path: Path) -> None:
    path = write_key(tmp_path / "key", keys.client_key)
    assert load_own_key(path)
    path.chmod(0o644)
    with pytest.raises(KeyFileRefused, match="chmod 600"):
        load_own_key(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_key_of_another_user_is_refused(keys: TestKeys, tmp_path: Path) -> None:
    path = write_key(tmp_path / "key", keys.client_key)
    os.chown(path, 65534, 65534)
    with pytest.raises(KeyFileRefused, match="not by the user zuka runs as"):
        load_own_key(path)


def test_a_link_to_a_key_is_refused(keys: TestKeys, tmp_path: Path) -> None:
    real = write_key(tmp_path / "key", keys.client_key)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(KeyFileRefused, match="symbolic link"):
        load_own_key(link)


def test_a_missing_key_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(KeyFileRefused, match="not found"):
        load_own_key(tmp_path / "nope")


async def test_the_jump_host_too_is_reached_with_the_identity_alone(
    keys: TestKeys, tmp_path: Path, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSH_AUTH_SOCK", agent)
    own = write_key(tmp_path / "service_key", keys.stranger_key)
    only_own = {keys.stranger_key.convert_to_public()}
    async with (
        RecordingNode(keys, authorized=only_own) as node,
        RecordingNode(keys, forwarding=True, authorized=only_own) as bastion,
    ):
        opts = node_options(
            keys, tmp_path, [node, bastion], client_keys=None, agent_path=DEFAULT, identity=own
        )
        target = node.as_node("gpu1", jump=f"ops@127.0.0.1:{bastion.port}")
        session = NodeSession(target, opts)
        assert (await session.run("echo through")).stdout == "through\n"
        await session.close()
        for server in (node, bastion):
            assert set(server.offered) == {keys.stranger_key.public_data}


def test_zuka_collect_refuses_an_identity_before_it_starts(
    cli: Cli, ledger_path: Path, tmp_path: Path, keys: TestKeys
) -> None:
    Ledger.open(ledger_path).close()
    missing = cli("collect", "--identity", str(tmp_path / "nope"))
    assert missing.code == 2 and "identity" in missing.err and "not found" in missing.err
    garbage = tmp_path / "garbage"
    garbage.write_text("not a key\n")
    garbage.chmod(0o600)
    r = cli("collect", "--identity", str(garbage))
    assert r.code == 2 and "is not a private key" in r.err, r.err
    shared = write_key(tmp_path / "shared", keys.client_key, 0o644)
    r = cli("collect", "--identity", str(shared))
    assert r.code == 2 and f"chmod 600 {shared}" in r.err, r.err
    assert not poller_lock_path(ledger_path).exists()  # refused before the lock was taken
