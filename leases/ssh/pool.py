"""A fleet's SSH sessions: one NodeSession per node, sharing connect bounds and jump hosts."""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import Callable, Iterable

from leases.core.models import Node
from leases.ssh.bounds import Budget
from leases.ssh.jumps import JumpHosts
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from leases.ssh.stream import CommandResult


class SshPool:
    """The NodeSessions of a fleet, sharing connect bounds and jump host connections."""

    def __init__(
        self,
        options: SshOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.options = options or SshOptions()
        self._clock = clock
        self._random = random
        self.budget = Budget(self.options)
        self.jumps = JumpHosts(self.options, self.budget, clock=clock, random=random)
        self.sessions: dict[str, NodeSession] = {}

    def add(self, node: Node) -> NodeSession:
        """Add a node, or return its session; a node whose login changed gets a fresh one."""
        session = self.sessions.get(node.name)
        if session is not None and (session.node is node or session.target == node.ssh):
            session.node = node
            return session
        if session is not None:
            session.abandon()
        session = NodeSession(
            node,
            self.options,
            budget=self.budget,
            jumps=self.jumps,
            clock=self._clock,
            random=self._random,
        )
        self.sessions[node.name] = session
        return session

    def monotonic(self) -> float:
        """The pool's clock, in which BackingOff.retry_at is given."""
        return self._clock()

    def __getitem__(self, name: str) -> NodeSession:
        return self.sessions[name]

    def __contains__(self, name: object) -> bool:
        return name in self.sessions

    async def remove(self, name: str) -> None:
        session = self.sessions.pop(name, None)
        if session is not None:
            await session.close()

    async def run(self, name: str, cmd: str, timeout: float | None = None) -> CommandResult:
        return await self.sessions[name].run(cmd, timeout)

    async def run_many(
        self, names: Iterable[str], cmd: str, timeout: float | None = None
    ) -> dict[str, CommandResult | Exception]:
        """Run cmd on every named node at once; a node's failure is its value, not a raise."""
        names = list(dict.fromkeys(names))
        results = await asyncio.gather(
            *(self.run(name, cmd, timeout) for name in names), return_exceptions=True
        )
        out: dict[str, CommandResult | Exception] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation and the like are not a node's fault
            out[name] = result
        return out

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()))
        self.jumps.close_all()

    def abandon(self) -> None:
        """Close every connection without waiting for the servers to acknowledge it (a
        process about to end: `zuka poll --once`)."""
        for session in self.sessions.values():
            session.abandon()
        self.jumps.close_all()
