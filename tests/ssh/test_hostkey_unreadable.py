"""A known_hosts file that cannot be read while connecting (out of file descriptors on a
busy jump host, no permission) is never taken for an empty one, and a refused connect
whose key matches the one on file is never reported as a changed key (a false
man-in-the-middle alarm). In-process SSH server; the unreadable file is simulated by
making the read fail (as root, a real permission would not stop the read)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest

from leases.core.models import NodeHealth
from leases.ssh import hostkeys
from leases.ssh.errors import HostKeyRejected, SshError
from leases.ssh.session import NodeSession
from tests.support.sshfixtures import FakeNode, TestKeys, node_options


def test_an_unreadable_known_hosts_is_not_an_empty_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("")
    assert hostkeys.known_keys("h", 22, [tmp_path / "absent"]) == hostkeys.known_keys("h", 22, [])

    def emfile(self: Path, *args: object, **kwargs: object) -> str:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Path, "read_text", emfile)
    with pytest.raises(OSError) as caught:
        hostkeys.known_keys("h", 22, [path])
    assert caught.value.errno == errno.EMFILE


async def test_a_check_that_failed_on_a_trusted_key_is_not_a_changed_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = TestKeys.generate()
    fake = await FakeNode(keys).start()
    try:
        options = node_options(keys, tmp_path, [fake])
        real = hostkeys.known_hosts_matcher

        def failing_once(paths: object) -> Callable[..., object]:
            # The connect's own check finds nothing (what an unreadable file gave before);
            # the key on file, read again afterwards, is the offered one.
            return lambda host, addr, port: ([], [], [])

        monkeypatch.setattr(hostkeys, "known_hosts_matcher", failing_once)
        session = NodeSession(fake.as_node("gpu1"), options)
        with pytest.raises(SshError) as caught:
            await session.run("echo hi")
        assert not isinstance(caught.value, HostKeyRejected)
        assert caught.value.health is NodeHealth.REFUSED
        assert "could not be checked" in str(caught.value) and "CHANGED" not in str(caught.value)
        await session.close()
        monkeypatch.setattr(hostkeys, "known_hosts_matcher", real)
        again = NodeSession(fake.as_node("gpu1"), options)
        assert (await again.run("echo hi")).ok  # the same key, checked: connects
        await again.close()
    finally:
        await fake.stop()
