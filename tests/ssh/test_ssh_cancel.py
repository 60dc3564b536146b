"""A cancel that lands in the loop turn an SSH connect completes is not lost: asyncssh.connect
runs in asyncio.wait_for, which on Python 3.11 then returns the connection instead (the
poller told to stop went on streaming, and `zuka demo` hung on SIGTERM under load). The
race is made exact with a stand-in connect (wait_for over a future set just before the
cancel); the hang itself was caught under load with every task's stack dumped."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from leases.ssh.connect import kept_cancel


async def _connected_then_cancelled(connecting: Any) -> asyncio.Task[Any]:
    """Run `connecting` in a task, cancelled in the loop turn its inner connect completes."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    async def inner() -> str:
        await done
        return "connection"

    async def connect() -> Any:
        # As asyncssh.connect: the connect in wait_for, its timeout not reached.
        return await asyncio.wait_for(inner(), 30)

    task = asyncio.create_task(connecting(connect()))
    await asyncio.sleep(0.01)  # the task waits in wait_for
    done.set_result(None)
    await asyncio.sleep(0)  # the inner connect completes in this turn...
    task.cancel()  # ...and the task is cancelled in the same one
    return task


async def test_python_loses_the_cancel_without_the_guard() -> None:
    """What the guard is for (Python 3.11; 3.12's wait_for keeps the cancel)."""
    import sys

    async def plain(c: Any) -> Any:
        return await c

    task = await _connected_then_cancelled(plain)
    if sys.version_info >= (3, 12):
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        assert await task == "connection"


async def test_kept_cancel_closes_the_connection_and_raises() -> None:
    closed: list[bool] = []

    class Conn:
        def close(self) -> None:
            closed.append(True)

    async def guarded(c: Any) -> Any:
        async def conn() -> Any:
            await c
            return Conn()

        return await kept_cancel(conn())

    task = await _connected_then_cancelled(guarded)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed == [True]
