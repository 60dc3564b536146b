"""Connect bounds and backoff: how many connects run at once (per server, fleet-wide, in
lanes for fresh and retried nodes), and when a failed server may be tried again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from leases.ssh.options import SshOptions


class Budget:
    """A pool's connect bounds: per server (its MaxStartups), and fleet-wide in lanes.

    A node that has not failed takes a fresh slot; one whose last connect failed a retry
    slot, so dead nodes never queue ahead of live ones. A connect still pending after
    stall_after hands its fleet slot on and waits among the stalled, so 300 blackholed
    nodes cannot hold every slot for a whole connect timeout.
    """

    def __init__(self, options: SshOptions) -> None:
        self.options = options
        self.fresh = asyncio.Semaphore(options.max_concurrent_connects)
        self.retry = asyncio.Semaphore(options.max_concurrent_retries)
        self.stalled = 0
        self._hosts: dict[tuple[object, ...], asyncio.Semaphore] = {}

    def host(self, key: tuple[object, ...]) -> asyncio.Semaphore:
        limiter = self._hosts.get(key)
        if limiter is None:
            limiter = asyncio.Semaphore(self.options.max_connects_per_host)
            self._hosts[key] = limiter
        return limiter

    async def run(
        self, host_key: tuple[object, ...], retrying: bool, connect: Callable[[], Any]
    ) -> Any:
        """Await connect() within the bounds; the connect timeout starts once the slots are
        ours (queueing behind other nodes is not this node's fault)."""
        lane = self.retry if retrying else self.fresh
        async with self.host(host_key):
            await lane.acquire()
            demoted = False

            def demote() -> None:
                nonlocal demoted
                if self.stalled < self.options.max_stalled_connects:
                    self.stalled += 1
                    demoted = True
                    lane.release()

            timer = asyncio.get_running_loop().call_later(self.options.stall_after, demote)
            try:
                async with asyncio.timeout(self.options.connect_timeout):
                    return await connect()
            finally:
                timer.cancel()
                if demoted:
                    self.stalled -= 1
                else:
                    lane.release()


def retry_at(
    options: SshOptions,
    failures: int,
    clock: Callable[[], float],
    random: Callable[[], float],
) -> float:
    """When a server that failed `failures` times in a row may be tried again:
    exponential backoff with full jitter, capped."""
    ceiling = min(options.backoff_cap, options.backoff_base * 2.0 ** (failures - 1))
    return clock() + random() * ceiling
