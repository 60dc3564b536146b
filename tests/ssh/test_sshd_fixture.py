"""The private sshd of the integration tier starts even when its first port is taken (an
xdist worker, or any other process, may bind it between free_port() and sshd's bind)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import asyncssh
import pytest

import tests.support.sshd as sshd_module
from tests.support.sshd import Sshd, sshd_unavailable

_why_not = sshd_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


def test_sshd_moves_to_another_port_when_its_port_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        real = sshd_module.free_port
        offered: Iterator[int] = iter([taken])
        monkeypatch.setattr(sshd_module, "free_port", lambda: next(offered, None) or real())
        with Sshd.start_new([asyncssh.generate_private_key("ssh-ed25519")]) as server:
            assert server.running and server.port != taken
            assert f"Port {server.port}\n" in server.config_path.read_text()
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                assert s.recv(4) == b"SSH-"
