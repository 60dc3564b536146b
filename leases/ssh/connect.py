"""Connecting one node: its route through the ssh config, its keys, its jump hosts, within
the connect bounds, every host key verified against known_hosts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncssh

from leases.core.models import NodeHealth, SshTarget
from leases.ssh import hostkeys
from leases.ssh.bounds import Budget
from leases.ssh.errors import HostKeyRejected, OfferedHostKey
from leases.ssh.faults import HopFailed, classify, hop_words
from leases.ssh.jumps import JumpHosts
from leases.ssh.keys import ClientKey, load_keys, load_own_key
from leases.ssh.link import Client, Link
from leases.ssh.options import Default, SshOptions
from leases.ssh.route import Endpoint, Route, resolve_route
from leases.ssh.speech import _


async def kept_cancel(
    connecting: Awaitable[asyncssh.SSHClientConnection],
) -> asyncssh.SSHClientConnection:
    """Await a connect without losing a cancel. asyncssh.connect runs in asyncio.wait_for,
    which on Python 3.11 returns the connection when the task is cancelled in the loop turn
    the connect completes: the cancel was lost, and a poller told to stop went on streaming
    for ever (`zuka demo` hung on SIGTERM under load). The connection is closed and the
    cancel raised again."""
    task = asyncio.current_task()
    asked = task.cancelling() if task is not None else 0
    conn = await connecting
    if task is not None and task.cancelling() > asked:
        conn.close()
        raise asyncio.CancelledError
    return conn


def _route_and_keys(
    target: SshTarget, paths: Sequence[Path], identity: Path | None = None
) -> tuple[Route, list[ClientKey] | Exception]:
    """The route to target and its keys (or why they cannot be loaded: the route is kept
    even so); with an identity, that key alone. Blocking: reads the ssh config and the key
    files."""
    route = resolve_route(target, paths)
    try:
        if identity is not None:
            return route, load_own_key(identity)
        return route, load_keys(target.key_path, route.node.key_files)
    except Exception as exc:
        return route, exc


def _ignore_lost(client: Client, exc: Exception | None) -> None:
    """A jump host's link: JumpHosts notices a closed one when it is next needed."""


class Connector:
    """Opens one node's connection, through the jump hosts and within the connect bounds
    that a pool shares between its sessions. The route of the last attempt is kept (the
    session forgets its jump hosts' backoff with it)."""

    def __init__(
        self,
        name: str,
        options: SshOptions,
        budget: Budget,
        jumps: JumpHosts,
        on_lost: Callable[[Client, Exception | None], None],
    ) -> None:
        self.name = name
        self.options = options
        self._budget = budget
        self._jumps = jumps
        self._on_lost = on_lost
        self.route: Route | None = None

    async def open(self, target: SshTarget, retrying: bool) -> Link:
        """A new link to target; raises as a connect fails (see faults.classify)."""
        paths = self.options.config_paths
        # Files are read off the event loop, each size-capped (leases.ssh.config, read_key_file),
        # in one hop to a thread.
        route, node_keys = await asyncio.to_thread(
            _route_and_keys, target, paths, self.options.identity
        )
        self.route = route
        if isinstance(node_keys, Exception):
            raise node_keys
        node = route.node
        tunnel: asyncssh.SSHClientConnection | None = None
        if route.hops:
            tunnel = await self._jumps.acquire(route.hops, self._connect_hop)
        try:
            conn, client = await self._budget.run(
                ("node", *route.hops, node.host, node.port or hostkeys.DEFAULT_PORT),
                retrying,
                lambda: self._connect_one(node, node_keys, tunnel),
            )
        except Exception as exc:
            if route.hops:
                self._jumps.release(route.hops)
            health, message, _offered = classify(exc, self.options.connect_timeout)
            if route.hops:
                where = _("node {node} (via jump host {jump})").format(
                    node=hop_words(node), jump=hop_words(route.hops[-1])
                )
            else:
                where = _("node {node}").format(node=hop_words(node))
            if isinstance(exc, HostKeyRejected):
                said = _("{where}: {why}").format(where=where, why=message)
                raise HostKeyRejected(self.name, health, said, exc.offered) from exc
            said = _("{where}: {why}").format(where=where, why=message)
            raise HopFailed(health, said, at_node=True) from exc
        except BaseException:
            if route.hops:
                self._jumps.release(route.hops)
            raise
        channels = asyncio.Semaphore(self.options.max_channels_per_connection)
        hops = route.hops
        release = (lambda: self._jumps.release(hops)) if hops else (lambda: None)
        return Link(conn, client, channels, release)

    async def _connect_hop(
        self, hop: Endpoint, tunnel: asyncssh.SSHClientConnection | None
    ) -> tuple[asyncssh.SSHClientConnection, Client]:
        if self.options.identity is not None:
            keys = await asyncio.to_thread(load_own_key, self.options.identity)
        else:
            keys = await asyncio.to_thread(load_keys, None, hop.key_files)
        return await self._connect_one(hop, keys, tunnel, on_lost=_ignore_lost)

    def connect_kwargs(
        self, end: Endpoint, tunnel: asyncssh.SSHClientConnection | None
    ) -> dict[str, Any]:
        """asyncssh.connect's arguments for one hop, authentication aside: the pinned host
        keys, keepalives, timeout, ciphers, port, user and the tunnel through the hop
        before."""
        opts = self.options
        kwargs: dict[str, Any] = {
            "known_hosts": hostkeys.known_hosts_matcher(opts.known_hosts),
            "keepalive_interval": opts.keepalive_interval,
            "keepalive_count_max": opts.keepalive_count_max,
            "connect_timeout": opts.connect_timeout,
            # zuka resolved the config itself (leases.ssh.config): asyncssh must not read
            # one, or it would run a ProxyCommand it finds there.
            "config": [],
        }
        if opts.preferred_ciphers:
            # "^" puts these first and keeps asyncssh's defaults after them.
            kwargs["encryption_algs"] = "^" + ",".join(opts.preferred_ciphers)
        if end.port is not None:
            kwargs["port"] = end.port
        if end.user:
            kwargs["username"] = end.user
        if tunnel is not None:
            kwargs["tunnel"] = tunnel
        return kwargs

    async def _connect_one(
        self,
        end: Endpoint,
        keys: list[ClientKey],
        tunnel: asyncssh.SSHClientConnection | None,
        *,
        on_lost: Callable[[Client, Exception | None], None] | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, Client]:
        opts = self.options
        client = Client(on_lost or self._on_lost)
        kwargs = self.connect_kwargs(end, tunnel)
        if not isinstance(opts.agent_path, Default):
            kwargs["agent_path"] = opts.agent_path
        all_keys: list[Any] = list(keys)
        if opts.identity is not None:
            # The service's own key and nothing else: no agent, whatever SSH_AUTH_SOCK says.
            kwargs["agent_path"] = None
            kwargs["client_keys"] = all_keys
        elif opts.client_keys is not None:
            all_keys += [str(k) if isinstance(k, Path) else k for k in opts.client_keys]
        if all_keys:
            kwargs["client_keys"] = all_keys
            if end.identities_only:
                kwargs["agent_path"] = None
        try:
            conn = await kept_cancel(
                asyncssh.connect(end.host, client_factory=lambda: client, **kwargs)
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(client, exc) from exc
        return conn, client

    def _host_key_error(self, client: Client, exc: Exception) -> Exception:
        if client.offered is None:
            # Refused before our callback ran (e.g. a revoked key): nothing to offer the user.
            return exc
        seen_host, addr, seen_port, key = client.offered
        status = hostkeys.classify(seen_host, seen_port, key, self.options.known_hosts, addr=addr)
        offered = OfferedHostKey(seen_host, seen_port, key, status, addr)
        where = hostkeys.host_pattern(seen_host, seen_port)
        if status is hostkeys.HostKeyStatus.TRUSTED:
            # The key on file is the one offered: the check failed for another reason
            # (known_hosts unreadable while connecting, e.g. out of file descriptors).
            # Refused all the same, but never called a changed key.
            return HopFailed(
                NodeHealth.REFUSED,
                _(
                    "host key of {host} could not be checked while connecting (it matches the"
                    " key on file now); not connected, try again"
                ).format(host=where),
                at_node=True,
            )
        if status is hostkeys.HostKeyStatus.UNKNOWN:
            return HostKeyRejected(
                self.name,
                NodeHealth.UNTRUSTED,
                _(
                    "host key of {host} is not known yet ({fingerprint}); accept it once you"
                    " have checked the fingerprint"
                ).format(host=where, fingerprint=offered.fingerprint),
                offered,
            )
        return HostKeyRejected(
            self.name,
            NodeHealth.HOSTKEY_CHANGED,
            _(
                "HOST KEY OF {host} HAS CHANGED: it now presents {fingerprint}, which differs"
                " from the key on file. Refused (possible man-in-the-middle, or the node was"
                " reinstalled)."
            ).format(host=where, fingerprint=offered.fingerprint),
            offered,
        )
