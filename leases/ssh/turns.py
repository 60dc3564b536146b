"""Whose turn it is on a node's kept shell: one command at a time, first come, first served,
as asyncio.Lock does, and a turn that is free can also be taken without awaiting
(`try_take`). A warm sweep writes its plain queries into hundreds of kept shells from one
loop and takes their answers in callbacks (leases.ssh.asks): no task per node is there to
await a lock in."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from types import TracebackType


class Turns:
    """One holder at a time; the others wait in the order they came."""

    def __init__(self) -> None:
        self._held = False
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def held(self) -> bool:
        return self._held

    def try_take(self) -> bool:
        """Take the turn if it is free and no one waits for it; whether it was taken."""
        if self._held or self._waiting:
            return False
        self._held = True
        return True

    async def take(self) -> None:
        """Wait for the turn and take it. Cancelled while waiting, it takes none (handed
        the turn as it was cancelled, it hands it on)."""
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiting.remove(waiter)

    def give(self) -> None:
        """Give the turn back: to the first still waiting, else free."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)  # its turn now: still held, by it
                return
        self._held = False

    async def __aenter__(self) -> None:
        await self.take()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.give()


__all__ = ["Turns"]
