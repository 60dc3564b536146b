"""An open connection to a node: the asyncssh client that records the host key it was
offered and reports a dropped link, and the link with its channel bound and jump hosts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import asyncssh

from leases.ssh import hostkeys


class Client(asyncssh.SSHClient):
    """Remembers the host key it was offered, and tells the session when the link drops."""

    def __init__(self, on_lost: Callable[[Client, Exception | None], None]) -> None:
        self.offered: tuple[str, str, int | None, asyncssh.SSHKey] | None = None
        self._on_lost = on_lost

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only called for a key known_hosts did not already vouch for: record it, refuse it.
        self.offered = (host, addr, port if port != hostkeys.DEFAULT_PORT else None, key)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(self, exc)


@dataclass
class Link:
    """An open connection to the node, the jump hosts it goes through, its channel bound."""

    conn: asyncssh.SSHClientConnection
    client: Client
    channels: asyncio.Semaphore
    release_jumps: Callable[[], None] = lambda: None
    lost: bool = False
    _released: bool = False

    def close(self, *, release: bool = True) -> None:
        self.conn.close()
        if release:
            self.release()

    def release(self) -> None:
        if not self._released:  # once per link: a shared jump host counts its users
            self._released = True
            self.release_jumps()
