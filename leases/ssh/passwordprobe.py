"""The remote proof that a node's sshd never asks for a password: a fresh connection
offering no key and no agent, through the node's jump hosts, its host key pinned as for
every connect, whose client records being asked for a password or a keyboard-interactive
answer and answers None each time. No password is ever sent; the methods the node offered
are the proof.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import asyncssh

from leases.core.models import Node, NodeHealth
from leases.core.textsafe import visible
from leases.ssh.bounds import Budget
from leases.ssh.connect import Connector, kept_cancel
from leases.ssh.faults import HopFailed
from leases.ssh.jumps import JumpHosts
from leases.ssh.keys import ClientKey
from leases.ssh.link import Client
from leases.ssh.options import SshOptions
from leases.ssh.route import Endpoint
from leases.ssh.speech import _


@dataclass(frozen=True)
class Attempt:
    """What a login offering nothing met: whether the node itself refused it, the methods
    it asked for in the order it asked, and words (a refusal's or a failure's)."""

    refused: bool
    methods: tuple[str, ...]  # "publickey", "password", "keyboard-interactive"; "none" if let in
    words: str


class ProofClient(Client):
    """Offers nothing: records each method the server asks the client to try."""

    def __init__(self) -> None:
        super().__init__(lambda client, exc: None)
        self.asked: list[str] = []

    def _ask(self, method: str) -> None:
        if method not in self.asked:
            self.asked.append(method)

    def public_key_auth_requested(self) -> None:
        self._ask("publickey")
        return None

    def password_auth_requested(self) -> None:
        self._ask("password")
        return None

    def kbdint_auth_requested(self) -> None:
        self._ask("keyboard-interactive")
        return None


class _ProofConnector(Connector):
    """The node's usual route and jump hosts; the node's own leg offers nothing."""

    client: ProofClient | None = None

    async def _connect_one(
        self,
        end: Endpoint,
        keys: list[ClientKey],
        tunnel: asyncssh.SSHClientConnection | None,
        *,
        on_lost: Callable[[Client, Exception | None], None] | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, Client]:
        if on_lost is not None:  # a jump host: as every connect makes it
            return await super()._connect_one(end, keys, tunnel, on_lost=on_lost)
        client = self.client = ProofClient()
        kwargs = self.connect_kwargs(end, tunnel) | {
            # None, not []: [] would make asyncssh load ~/.ssh/id_* itself.
            "client_keys": None,
            "agent_path": None,
            "password_auth": True,
            "kbdint_auth": True,
            "gss_auth": False,
            "gss_kex": False,
            "host_based_auth": False,
        }
        conn = await kept_cancel(
            asyncssh.connect(end.host, client_factory=lambda: client, **kwargs)
        )
        return conn, client


def password_probe(node: Node, options: SshOptions) -> Callable[[], Awaitable[Attempt]]:
    """An async callable making one such attempt on node and returning its Attempt."""

    async def attempt() -> Attempt:
        # The jump hosts log in as usual (their keys, the agent); only the node's own
        # leg offers nothing (_ProofConnector), whatever the options and ssh config hold.
        budget = Budget(options)
        jumps = JumpHosts(options, budget)
        connector = _ProofConnector(node.name, options, budget, jumps, lambda c, e: None)
        target = dataclasses.replace(node.ssh, key_path=None)  # not even loaded
        try:
            link = await connector.open(target, False)
        except HopFailed as exc:
            jumps.close_all()
            return _failed(connector.client, exc)
        except Exception as exc:  # zuka refused the route, a key file, ...: no proof
            jumps.close_all()
            return Attempt(False, (), visible(getattr(exc, "message", exc), 400))
        link.close()
        jumps.close_all()
        asked = tuple(connector.client.asked) if connector.client else ()
        # Let in with nothing offered: sshd's "none" method succeeded (an empty password).
        return Attempt(False, (*asked, "none"), _("the node let the login in with no key"))

    return attempt


def _failed(client: ProofClient | None, exc: HopFailed) -> Attempt:
    words = visible(exc.message, 400)
    cause = exc.__cause__
    refused = (
        exc.health is NodeHealth.AUTH_FAILED
        and exc.at_node
        and isinstance(cause, asyncssh.PermissionDenied)
    )
    asked = tuple(client.asked) if client is not None and refused else ()
    return Attempt(refused, asked, words)
