"""leases.ssh.deadline: a kept shell's command time limit, on a real event loop. Waits are on
futures and events; the only clock is the loop's own (the limits here are tens of ms)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from leases.ssh.deadline import Deadline


async def _limited(deadline: Deadline, limit: float, work: asyncio.Future[str]) -> str:
    """What run_in_shell does around its read: a timeout, or the cancel as it came."""
    deadline.arm(limit)
    try:
        return await work
    except asyncio.CancelledError:
        if not deadline.expired():
            raise
        raise TimeoutError from None
    finally:
        deadline.disarm()


def _answered(value: str) -> asyncio.Future[str]:
    """A command's answer already there when its limit is armed."""
    done = asyncio.get_running_loop().create_future()
    done.set_result(value)
    return done


async def test_a_command_past_its_limit_times_out() -> None:
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await _limited(deadline, 0.05, loop.create_future())
    assert loop.time() - started >= 0.05 - 0.001
    # The task is not left cancelled: it goes on awaiting.
    await asyncio.sleep(0)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_commands_in_time_keep_one_timer() -> None:
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    timers = set()
    for _ in range(5):
        work = loop.create_future()
        loop.call_later(0.01, work.set_result, "answer")
        assert await _limited(deadline, 2.0, work) == "answer"
        timers.add(id(deadline._timer))
    assert len(timers) == 1  # set by the first command, kept by the next four
    deadline.close()


async def test_a_timer_set_by_an_earlier_command_does_not_cut_a_later_one() -> None:
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    assert await _limited(deadline, 0.05, _answered("first")) == "first"
    first = deadline._timer
    # The first command's timer fires at 50 ms, while this one runs: it is set again for
    # this command's own limit, and the answer at 100 ms comes well within it.
    later = loop.create_future()
    loop.call_later(0.1, later.set_result, "second")
    assert await _limited(deadline, 0.6, later) == "second"
    assert deadline._timer is not None and deadline._timer is not first  # set again
    deadline.close()


async def test_a_shorter_limit_after_a_longer_one_is_kept() -> None:
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    assert await _limited(deadline, 30.0, _answered("quick")) == "quick"
    started = loop.time()
    with pytest.raises(TimeoutError):
        await _limited(deadline, 0.05, loop.create_future())
    assert loop.time() - started < 5.0  # not the 30 s timer of the command before


async def test_a_cancel_from_outside_is_a_cancel_not_a_timeout() -> None:
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(_limited(deadline, 10.0, loop.create_future()))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline.close()


async def test_a_cancel_in_the_same_turn_as_the_timeout_stays_a_cancel() -> None:
    """Both land: the task was cancelled by someone else too, so it must stop (as
    asyncio.timeout: uncancel leaves the other's cancel counted)."""
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(_limited(deadline, 0.05, loop.create_future()))
    await asyncio.sleep(0)  # armed
    loop.call_at(deadline._when, task.cancel)  # after the deadline's own timer, same turn
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_deadline_used_from_another_loop_gets_a_timer_there() -> None:
    deadline = Deadline()

    def elsewhere() -> None:  # a loop that ends with the deadline's 30 s timer pending
        async def go() -> None:
            assert await _limited(deadline, 30.0, _answered("there")) == "there"

        asyncio.run(go())

    await asyncio.to_thread(elsewhere)
    with pytest.raises(TimeoutError):
        await _limited(deadline, 0.02, asyncio.get_running_loop().create_future())
    deadline.close()


async def test_an_idle_timer_cancels_nothing() -> None:
    """The timer of a command that ended fires with nothing armed: no task is touched."""
    deadline = Deadline()
    loop = asyncio.get_running_loop()
    assert await _limited(deadline, 0.02, _answered("ok")) == "ok"
    fired = asyncio.Event()
    loop.call_later(0.05, fired.set)
    await fired.wait()  # the deadline's timer fired before this, with nothing armed
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    assert deadline._timer is None


async def test_a_timeout_in_a_task_that_kept_an_earlier_cancel_is_a_timeout() -> None:
    """A cancel caught further up and never uncancelled (Python 3.11's wait_for can leave
    one: leases.ssh.connect.kept_cancel) leaves the task counted as cancelling: a timeout
    after it is still a timeout, as asyncio.timeout makes it."""
    deadline = Deadline()
    loop = asyncio.get_running_loop()

    async def after_a_kept_cancel() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):  # caught, not uncancelled
            await asyncio.sleep(1)
        assert task.cancelling() == 1
        try:
            await _limited(deadline, 0.02, loop.create_future())
        except TimeoutError:
            return f"timeout, cancelling {task.cancelling()}"
        return "answered"

    assert await asyncio.create_task(after_a_kept_cancel()) == "timeout, cancelling 1"
    deadline.close()
