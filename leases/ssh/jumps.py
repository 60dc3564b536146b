"""Jump hosts: one shared connection per jump host for every node behind it."""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncssh

from leases.ssh.bounds import Budget, retry_at
from leases.ssh.faults import HopFailed, classify, hop_words
from leases.ssh.link import Client
from leases.ssh.options import SshOptions
from leases.ssh.route import Endpoint
from leases.ssh.speech import _


@dataclass(eq=False)
class _Jump:
    """One shared connection to a jump host, reached through the hops before it."""

    hop: Endpoint
    conn: asyncssh.SSHClientConnection | None = None
    client: Client | None = None
    refs: int = 0
    failures: int = 0
    next_attempt_at: float = 0.0
    fault: HopFailed | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


Chain = tuple[Endpoint, ...]
# Connects one endpoint through a tunnel; raises as connect.Connector._connect_one does.
HopConnect = Callable[
    [Endpoint, asyncssh.SSHClientConnection | None],
    Any,
]


class JumpHosts:
    """One connection per jump host (user, host, port and the chain before it) for every
    node behind it: reference counted, reconnected when it drops, backed off on its own so
    that 40 nodes behind a dead jump host fail after one attempt, not 40 timeouts."""

    def __init__(
        self,
        options: SshOptions,
        budget: Budget,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.options = options
        self._budget = budget
        self._clock = clock
        self._random = random
        self._jumps: dict[Chain, _Jump] = {}
        self.connects = 0  # jump connections opened, for tests and benchmarks

    def open_count(self) -> int:
        return sum(1 for j in self._jumps.values() if j.conn is not None)

    async def acquire(self, chain: Chain, connect: HopConnect) -> asyncssh.SSHClientConnection:
        """The connection to the last hop of chain, opening what is not open; counted as
        one more user of every hop until release(chain). Raises HopFailed."""
        tunnel: asyncssh.SSHClientConnection | None = None
        for i in range(len(chain)):
            tunnel = await self._open(chain[: i + 1], connect, tunnel)
        for i in range(len(chain)):
            self._jumps[chain[: i + 1]].refs += 1
        assert tunnel is not None
        return tunnel

    def release(self, chain: Chain) -> None:
        for i in range(len(chain)):
            jump = self._jumps.get(chain[: i + 1])
            if jump is None:
                continue
            jump.refs -= 1
            if jump.refs <= 0:
                jump.refs = 0
                self._close(jump)

    def retry_now(self, chain: Chain) -> None:
        for i in range(len(chain)):
            jump = self._jumps.get(chain[: i + 1])
            if jump is not None:
                jump.next_attempt_at = 0.0

    def close_all(self) -> None:
        for jump in reversed(list(self._jumps.values())):
            self._close(jump)

    def _close(self, jump: _Jump) -> None:
        conn, jump.conn, jump.client = jump.conn, None, None
        if conn is not None:
            conn.close()

    async def _open(
        self, chain: Chain, connect: HopConnect, tunnel: asyncssh.SSHClientConnection | None
    ) -> asyncssh.SSHClientConnection:
        jump = self._jumps.get(chain)
        if jump is None:
            jump = self._jumps[chain] = _Jump(chain[-1])
        async with jump.lock:
            if jump.conn is not None and not jump.conn.is_closed():
                return jump.conn
            now = self._clock()
            if now < jump.next_attempt_at and jump.fault is not None:
                fault = jump.fault
                wait = jump.next_attempt_at - now
                raise HopFailed(
                    fault.health,
                    _("{why} (retrying in {seconds:.1f} s)").format(
                        why=fault.message, seconds=wait
                    ),
                    fault.offered,
                )
            hop = chain[-1]
            conn: asyncssh.SSHClientConnection
            try:
                conn, client = await self._budget.run(
                    ("jump", *chain), jump.failures > 0, lambda: connect(hop, tunnel)
                )
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    raise
                health, message, offered = classify(exc, self.options.connect_timeout)
                jump.failures += 1
                jump.next_attempt_at = retry_at(
                    self.options, jump.failures, self._clock, self._random
                )
                words = _("jump host {host}: {why}").format(host=hop_words(hop), why=message)
                jump.fault = HopFailed(health, words, offered)
                raise jump.fault from exc
            jump.conn, jump.client = conn, client
            jump.failures, jump.fault, jump.next_attempt_at = 0, None, 0.0
            self.connects += 1
            return conn
