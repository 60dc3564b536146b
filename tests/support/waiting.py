"""Wait on a condition instead of sleeping a fixed time before an assert.

    await wait_until(lambda: node.channels.now == 0, what="the channel to close")
    wait_until_sync(lambda: path.exists(), timeout=20)

A fixed sleep is too short on a loaded machine (a flake) and too long on an idle one (a
slow suite); these poll often and give up only after a generous timeout, which bounds a
failure, not a pass. On timeout they raise AssertionError naming what never happened and
the last value the predicate returned (so `lambda: rows` shows the rows).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough for a 2-core machine shared by other jobs; a passing wait returns at once.
TIMEOUT_S = 20.0


def _give_up(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"waited {timeout} s for {what}; last value: {last!r}")


async def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = TIMEOUT_S,
    interval: float = 0.01,
    what: str = "the condition",
) -> T:
    """Poll `predicate` in this event loop until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _give_up(what, timeout, last)
        await asyncio.sleep(interval)


def wait_until_sync(
    predicate: Callable[[], T],
    *,
    timeout: float = TIMEOUT_S,
    interval: float = 0.05,
    what: str = "the condition",
) -> T:
    """The same for code outside an event loop (a subprocess, another thread)."""
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _give_up(what, timeout, last)
        time.sleep(interval)
