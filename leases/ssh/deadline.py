"""A time limit for one command at a time, for a session that runs many: what
`asyncio.timeout` does, with one timer kept from command to command.

`asyncio.timeout` sets a timer for every command and cancels it when the command ends:
two operations on the event loop's heap of timers, each ordered by Python-level
comparisons (a poller of 300 nodes holds 300 and more timers). Measured in one process
on 300 kept shells, that was about 6 % of a warm sweep's CPU. Here the timer set for one
command stays when the command ends in time; the next command only moves the deadline.
When the timer fires before the deadline it is set again for it, so a node answering
every 5 s within a 30 s limit costs one timer every 30 s, not two heap operations a
command; the limit is kept to the timer's precision all the same.

The fired deadline cancels the task that armed it; `expired()` then tells that
cancellation from any other (asyncio.timeout's rule: uncancel, and only a task no more
cancelled than when the limit began sees a timeout: a cancel caught and kept uncounted
further up, as Python 3.11's wait_for may leave, does not turn a timeout into one)."""

from __future__ import annotations

import asyncio
import time

# A timer the loop runs this early (its clock's resolution) counts as on time.
EARLY_S = max(0.001, time.get_clock_info("monotonic").resolution)


class Deadline:
    """One running command's time limit (arm, then disarm in a finally)."""

    def __init__(self) -> None:
        self._task: asyncio.Task[object] | None = None
        self._when = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # when the timer fires (its when(), without the call)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fired = False
        self._cancelling = 0  # the task's cancel requests when the limit began

    def arm(self, limit: float) -> None:
        """Start the limit for the running task's command: it is cancelled `limit`
        seconds from now unless disarmed before."""
        loop = asyncio.get_running_loop()
        task = self._task = asyncio.current_task()
        self._cancelling = task.cancelling() if task is not None else 0
        self._when = loop.time() + limit
        self._fired = False
        timer = self._timer
        if timer is not None and loop is self._loop and self._timer_at <= self._when:
            return  # fires first and moves on to the deadline (_fire)
        if timer is not None:
            timer.cancel()  # a later one, or another loop's
        self._loop = loop
        self._timer, self._timer_at = loop.call_at(self._when, self._fire), self._when

    def disarm(self) -> None:
        """The command ended: no limit until the next arm (the timer stays)."""
        self._task = None

    def expired(self) -> bool:
        """Whether the CancelledError being handled is this deadline's alone: it fired,
        and no one else cancelled the task (then it is a cancellation, not a timeout)."""
        if not self._fired:
            return False
        self._fired = False
        task = asyncio.current_task()
        return task is not None and task.uncancel() <= self._cancelling

    def close(self) -> None:
        """Drop the timer (the session is closing)."""
        self._task = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        task, loop = self._task, self._loop
        if task is None or loop is None or task.done():
            return  # nothing running now: the next arm sets a timer again
        if loop.time() + EARLY_S < self._when:  # a command armed after this timer was set
            self._timer, self._timer_at = loop.call_at(self._when, self._fire), self._when
            return
        self._task, self._fired = None, True
        task.cancel()
