"""Ending a process that shows the dashboard (`zuka demo`, `zuka web --demo`) on SIGHUP and
SIGTERM as `q` does, so that every `finally` on the way out runs."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def ended_by_signals(exit_running: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """SIGHUP (the terminal closed: tmux kill-session) and SIGTERM end the demo as `q`
    does, through every `finally` on the way out, so that its folder (the ledger and the
    simulated nodes' private key) is removed; by default either signal kills the process
    before any cleanup runs. In the running event loop, exit_running is called there (the
    dashboard exits as on `q`, stopping its terminal threads); elsewhere SystemExit is
    raised. Yields the signals received; later ones are ignored."""
    received: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        for sig in caught:
            signal.signal(sig, signal.SIG_IGN)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or exit_running is None:
            raise SystemExit(128 + signum)
        # Asked again every 2 s until the process ends: an exit asked while the app is
        # still starting (a loaded machine) can be lost, and the demo then never ended.
        assert loop is not None and exit_running is not None
        ask, running = exit_running, loop

        def again() -> None:
            ask()
            running.call_later(2.0, again)

        loop.call_soon_threadsafe(again)

    caught = (signal.SIGHUP, signal.SIGTERM)
    before = {sig: signal.signal(sig, stop) for sig in caught}
    try:
        yield received
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
