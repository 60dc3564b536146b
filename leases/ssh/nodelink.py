"""One node's persistent SSH connection, its health and its backoff: what a NodeSession
(leases.ssh.session) runs its commands on. It connects lazily, through the node's route and
jump hosts (leases.ssh.connect), no sooner than the backoff allows after a failure, and says
every failure as a NodeHealth with a readable last_error."""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
import time
from collections.abc import Callable

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh import config as sshconfig
from leases.ssh import hostkeys
from leases.ssh.bounds import Budget, retry_at
from leases.ssh.connect import Connector
from leases.ssh.errors import (
    BackingOff,
    ConnectionDropped,
    HostKeyRejected,
    OfferedHostKey,
    SshError,
    TargetRefused,
)
from leases.ssh.faults import classify, describe
from leases.ssh.jumps import JumpHosts
from leases.ssh.link import Client, Link
from leases.ssh.options import SshOptions
from leases.ssh.speech import _

# How long to wait for a connection to finish closing after we closed it ourselves.
_CLOSE_GRACE_S = 2.0


class NodeLink:
    """One node's persistent SSH connection, its health and its backoff."""

    def __init__(
        self,
        node: Node,
        options: SshOptions | None = None,
        *,
        budget: Budget | None = None,
        jumps: JumpHosts | None = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.node = node
        self.options = options or SshOptions()
        # A pool shares these between its sessions; a session alone has its own.
        self._budget = budget or Budget(self.options)
        self._jumps = jumps or JumpHosts(self.options, self._budget, clock=clock, random=random)
        # The name a pool keys its sessions by: a node renamed gets a new session.
        self._connector = Connector(
            node.name, self.options, self._budget, self._jumps, self._on_lost
        )
        self._clock = clock
        self._random = random
        self.health = NodeHealth.CONNECTING
        self.last_error = ""
        self.offered_key: OfferedHostKey | None = None
        self.failures = 0
        self.next_attempt_at = 0.0
        self.connects = 0  # successful connects, for tests and the status line
        self._link: Link | None = None
        self._connect_lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def target(self) -> SshTarget:
        return self.node.ssh

    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.lost

    @property
    def fingerprint(self) -> str | None:
        """SHA256 fingerprint of a host key we refused, for the user to check."""
        return self.offered_key.fingerprint if self.offered_key else None

    @property
    def cipher(self) -> str | None:
        """The negotiated cipher of the open connection, for the status line."""
        link = self._link
        return None if link is None else link.conn.get_extra_info("send_cipher")

    def retry_now(self) -> None:
        """Forget the backoff (its jump hosts' too), e.g. after the user trusted a key."""
        self.next_attempt_at = 0.0
        route = self._connector.route
        if route is not None:
            self._jumps.retry_now(route.hops)

    def accept_host_key(self, seen_fingerprint: str) -> bool:
        """Trust the offered unknown key, if it is the one whose fingerprint the user saw.

        Writes it to zuka's own known_hosts and lets the next command connect at once.
        A changed key is never accepted here. Returns whether a key was trusted.
        """
        offered = self.offered_key
        if offered is None or offered.status is not hostkeys.HostKeyStatus.UNKNOWN:
            return False
        if offered.fingerprint != seen_fingerprint:
            return False
        hostkeys.trust(
            offered.host,
            offered.port,
            offered.key,
            self.options.trust_path,
            known_hosts_paths=self.options.known_hosts,
        )
        self.offered_key = None
        self.retry_now()
        return True

    # -- connecting ---------------------------------------------------------------

    async def _connection(self) -> Link:
        link = self._link
        if link is not None and not link.lost:
            return link
        async with self._connect_lock:
            link = self._link
            if link is not None and not link.lost:
                return link
            now = self._clock()
            if now < self.next_attempt_at:
                raise BackingOff(
                    self.name,
                    self.health,
                    _("waiting {seconds:.1f} s before retrying: {why}").format(
                        seconds=self.next_attempt_at - now, why=self.last_error
                    ),
                    self.next_attempt_at,
                )
            try:
                link = await self._connector.open(self.target, self.failures > 0)
            except Exception as exc:
                health, message, offered = classify(exc, self.options.connect_timeout)
                if offered is not None:
                    self.offered_key = offered
                self._failed(health, message)
                if offered is not None:
                    raise HostKeyRejected(self.name, health, message, offered) from exc
                if isinstance(exc, sshconfig.ConfigRefused):
                    raise TargetRefused(self.name, health, message) from exc
                raise SshError(self.name, health, message) from exc
            self._link = link
            self.connects += 1
            self.failures = 0
            self.next_attempt_at = 0.0
            self.offered_key = None
            self._set(NodeHealth.OK)
            return link

    def _failed(self, health: NodeHealth, message: str) -> None:
        self.failures += 1
        self.next_attempt_at = retry_at(self.options, self.failures, self._clock, self._random)
        self._set(health, message)

    # -- the open connection ------------------------------------------------------

    def _on_lost(self, client: Client, exc: Exception | None) -> None:
        link = self._link
        if link is not None and link.client is client:
            link.lost = True
            self._link = None
            link.close()  # lets go of its jump hosts
            if exc is not None:
                self._set(
                    NodeHealth.UNREACHABLE, _("connection lost: {why}").format(why=describe(exc))
                )

    def _is_lost(self, link: Link) -> bool:
        return link.lost or link.conn.is_closed()

    def _dropped(self, link: Link, exc: BaseException | None) -> SshError:
        if self._is_lost(link):
            link.lost = True
            if self._link is link:
                self._link = None
            link.close()
            reason = describe(exc) if exc else _("connection closed")
            words = _("connection lost during command: {why}").format(why=reason)
            self._set(NodeHealth.UNREACHABLE, words)
            return ConnectionDropped(self.name, NodeHealth.UNREACHABLE, self.last_error)
        # The connection is fine; only this channel failed (e.g. the server refused it).
        reason = describe(exc) if exc else _("it closed without an exit status")
        return SshError(self.name, self.health, _("channel failed: {why}").format(why=reason))

    def _set(self, health: NodeHealth, message: str = "") -> None:
        self.health = health
        self.last_error = message

    def _abandon_link(self) -> None:
        """Close the connection without waiting for the server to acknowledge it."""
        link, self._link = self._link, None
        if link is not None:
            link.lost = True
            link.close()

    async def _close_link(self) -> None:
        """Close the connection, waiting a little for the server's side of it."""
        link, self._link = self._link, None
        if link is None:
            return
        link.lost = True
        link.close(release=False)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_GRACE_S):
                    await link.conn.wait_closed()
        finally:
            link.release()  # the jump host only once the node's close went through it


__all__ = ["NodeLink"]
