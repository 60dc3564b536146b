"""One short command written at once into many nodes' kept shells, each answer handed to a
callback in the loop turn its last packet comes in, and one timer for all their limits.

What NodeSession.query does for one node, a warm sweep does here for a whole fleet without
a task, a coroutine chain, a turn awaited or a deadline armed per node: measured on 300
kept shells behind 50 ms, that was about a fifth of the client's CPU per plain sweep, more
than zuka's own reading of the answers. A node whose shell is not ready this instant
(not connected, no shell yet, another command's turn) is not asked here: `add` says so,
and the caller reads it the usual way. What each callback gets is what query() gives or
raises, with the same words and the same effect on the session (NodeSession.answer_of)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

from leases.ssh.deadline import EARLY_S
from leases.ssh.errors import SshError
from leases.ssh.session import NodeSession
from leases.ssh.shell import Asked
from leases.ssh.stream import CommandResult

# What a callback is handed: the answer, the error query() would raise, or None where
# query() would run the command as an exec instead (the node's shell cannot run it); any
# other exception is zuka's own, taking the answer.
Answer = CommandResult | Exception | None


class AskBatch:
    """Commands asked at once (`add`), their answers handed to their callbacks as they
    come; `wait` until every one is answered or past its limit. Made and used in one
    running loop. A callback's exception is the loop's to report (its exception
    handler), not the batch's: the other answers are still handed on."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._pending: dict[Asked, tuple[NodeSession, Callable[[Answer], None], float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._all_in: asyncio.Future[None] | None = None

    def add(self, session: NodeSession, cmd: str, then: Callable[[Answer], None]) -> bool:
        """Write cmd into the session's kept shell when it is ready now, its answer for
        `then`; False when it is not (nothing written: ask it the usual way). A write
        that fails is answered at once."""
        try:
            asked = session.ask_now(cmd)
        except SshError as exc:
            self._hand(then, exc)
            return True
        if asked is None:
            return False
        when = self._loop.time() + asked.limit
        self._pending[asked] = (session, then, when)
        asked.waiter.add_done_callback(partial(self._answered, asked))
        if self._timer is None or when < self._timer_at:
            self._arm(when)
        return True

    async def wait(self) -> None:
        """Until every command asked is answered or past its limit. Cancelled, it gives
        up on those still to come (give_up)."""
        if not self._pending:
            return
        self._all_in = self._loop.create_future()
        try:
            await self._all_in
        except asyncio.CancelledError:
            self.give_up()
            raise
        finally:
            self._disarm()

    def give_up(self) -> None:
        """No answer still to come is wanted (its reader was cancelled): their shells
        dropped, as an answer no one reads would open the next command's, and their
        turns given back. Their callbacks are not called."""
        pending, self._pending = self._pending, {}
        for asked, (session, _, _) in pending.items():
            session.give_up(asked)
        self._disarm()

    def _answered(self, asked: Asked, _: object) -> None:
        got = self._pending.pop(asked, None)
        if got is None:  # past its limit, or given up, before this callback ran
            return
        session, then, _when = got
        try:
            answer: Answer = session.answer_of(asked)
        except Exception as exc:  # an SshError, as query() raises it; or zuka's own
            answer = exc
        self._hand(then, answer)

    def _hand(self, then: Callable[[Answer], None], answer: Answer) -> None:
        """Hand an answer to its callback; the batch goes on whatever it raises."""
        try:
            then(answer)
        except Exception as exc:
            self._loop.call_exception_handler(
                {"message": "an answer's callback failed (leases.ssh.asks)", "exception": exc}
            )
        finally:
            if not self._pending and self._all_in is not None and not self._all_in.done():
                self._all_in.set_result(None)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, when: float) -> None:
        self._disarm()
        self._timer, self._timer_at = self._loop.call_at(when, self._expire), when

    def _expire(self) -> None:
        """The timer: every command past its limit, not answered by now, timed out."""
        self._timer = None
        now = self._loop.time() + EARLY_S  # a timer this early is on time
        late = [a for a, (_, _, when) in self._pending.items() if when <= now]
        for asked in late:
            if asked.waiter.done():  # answered; its callback is on its way
                continue
            session, then, _when = self._pending.pop(asked)
            try:
                answer: Answer = session.timed_out(asked)
            except Exception as exc:  # zuka's own
                answer = exc
            self._hand(then, answer)
        upcoming = [w for a, (_, _, w) in self._pending.items() if not a.waiter.done()]
        if upcoming:
            self._arm(min(upcoming))


__all__ = ["Answer", "AskBatch"]
