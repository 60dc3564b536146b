"""The password prober (leases.ssh.passwordprobe) through a jump host, against in-process
asyncssh servers: the jump host logs in with the lab's key as usual, the node is offered
nothing, and what the node asks for is the proof. No password is ever sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import ClassVar

import asyncssh
import pytest

from leases.core.models import Node, SshTarget
from leases.ssh import hostkeys
from leases.ssh.options import SshOptions
from leases.ssh.passwordprobe import password_probe


class Jump(asyncssh.SSHServer):
    def connection_requested(self, *args: object) -> bool:
        return True  # direct-tcpip to the node


class PasswordNode(asyncssh.SSHServer):
    """Offers password and keyboard-interactive login; records any password sent."""

    sent: ClassVar[list[str]] = []

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        PasswordNode.sent.append(password)
        return False

    def kbdint_auth_supported(self) -> bool:
        return True

    def get_kbdint_challenge(
        self, username: str, lang: str, submethods: str
    ) -> tuple[str, str, str, list[tuple[str, bool]]]:
        PasswordNode.sent.append("kbdint challenge answered")
        return ("", "", "", [("Password: ", False)])


class KeyNode(asyncssh.SSHServer):
    pass


NodeWith = Callable[[type[asyncssh.SSHServer]], Awaitable[Node]]


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[NodeWith, SshOptions]]:
    lab = asyncssh.generate_private_key("ssh-ed25519")
    hk = asyncssh.generate_private_key("ssh-ed25519")
    authorized = asyncssh.import_authorized_keys(lab.export_public_key().decode())
    jump = await asyncssh.create_server(
        Jump, "127.0.0.1", 0, server_host_keys=[hk], authorized_client_keys=authorized
    )
    made: list[asyncssh.SSHAcceptor] = [jump]
    known = tmp_path / "known_hosts"
    jport = jump.sockets[0].getsockname()[1]
    hostkeys.trust("127.0.0.1", jport, hk, known)

    async def node_with(cls: type[asyncssh.SSHServer]) -> Node:
        srv = await asyncssh.create_server(
            cls, "127.0.0.1", 0, server_host_keys=[hk], authorized_client_keys=authorized
        )
        made.append(srv)
        port = srv.sockets[0].getsockname()[1]
        hostkeys.trust("127.0.0.1", port, hk, known)
        return Node("n1", SshTarget("127.0.0.1", port=port, user="lab",
                                    jump=f"lab@127.0.0.1:{jport}"))  # fmt: skip

    options = SshOptions(
        known_hosts=(known,), client_keys=[lab], agent_path=None, config=[], connect_timeout=5
    )
    yield node_with, options
    for srv in made:
        srv.close()


async def test_password_node_through_a_jump_host(
    servers: tuple[NodeWith, SshOptions],
) -> None:
    node_with, options = servers
    PasswordNode.sent.clear()
    node = await node_with(PasswordNode)
    got = await password_probe(node, options)()
    assert got.refused
    # In asyncssh's order of preference, each asked once and answered None.
    assert got.methods == ("publickey", "keyboard-interactive", "password")
    assert PasswordNode.sent == []  # nothing was ever typed


async def test_key_only_node_is_refused_offering_publickey(
    servers: tuple[NodeWith, SshOptions],
) -> None:
    node_with, options = servers
    # The lab's key would log in to this node: the prober must not offer it.
    node = await node_with(KeyNode)
    got = await password_probe(node, options)()
    assert (got.refused, got.methods) == (True, ("publickey",))


async def test_unknown_node_host_key_is_no_proof(
    servers: tuple[NodeWith, SshOptions], tmp_path: Path
) -> None:
    node_with, options = servers
    node = await node_with(KeyNode)
    lonely = SshOptions(known_hosts=(tmp_path / "empty",), client_keys=options.client_keys,
                        agent_path=None, config=[], connect_timeout=5)  # fmt: skip
    got = await password_probe(node, lonely)()
    assert not got.refused and got.methods == ()
    assert "jump host" in got.words  # the jump host's key is not known either
