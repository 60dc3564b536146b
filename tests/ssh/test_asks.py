"""leases.ssh.asks and NodeSession.ask_now/answer_of against in-process asyncssh servers:
what a batch hands each callback is what query() gives or raises, with the same effect on
the session; a node past its limit times out alone; a cancelled batch leaves no shell out
of step; a node not ready is not asked. And leases.ssh.turns, the turn those rest on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import NodeHealth
from leases.sim.keptshell import shell_commands
from leases.ssh.asks import Answer, AskBatch
from leases.ssh.errors import CommandTimeout, SshError
from leases.ssh.session import NodeSession
from leases.ssh.turns import Turns
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until


def _answer(word: str, arg: str) -> tuple[str, str, int] | None:
    """What the node prints for a command: `echo X`, `fail N` (stderr, status N),
    `big N` (N characters); None: the command does something else."""
    if word == "echo":
        return f"{arg}\n", "", 0
    if word == "fail":
        return "", "oops\n", int(arg)
    if word == "big":
        return "x" * int(arg), "", 0
    return None


async def _node(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    """A node's sh: each command answered as _answer says; `hang` never answers (sh busy
    with it, as a real one would be); `cut` prints half an answer and closes the channel;
    `nostatus` ends its answer with the marker but no status line."""
    if process.command not in (None, "sh"):  # an exec
        word, _, arg = (process.command or "").partition(" ")
        out, err, status = _answer(word, arg) or ("", "", 0)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)
        return
    async for command in shell_commands(process):
        word, _, arg = command.text.partition(" ")
        if word == "hang":
            await process.channel.wait_closed()
            return
        if word == "cut":
            command.partial("half an ans")
            process.close()
            return
        if word == "nostatus":
            command.partial(f"no status\n{command.marker}\n")
            continue
        made = _answer(word, arg)
        assert made is not None, command.text
        command.reply(*made)


async def _warm(session: NodeSession) -> None:
    """A session connected, its kept shell open and answered once."""
    assert (await session.query("echo warm")).stdout == "warm\n"


async def _batch(pairs: list[tuple[NodeSession, str]]) -> list[Answer]:
    """Each session asked its command in one batch; their answers, in that order."""
    got: dict[int, Answer] = {}
    asks = AskBatch()
    for i, (session, cmd) in enumerate(pairs):

        def then(answer: Answer, i: int = i) -> None:
            got[i] = answer

        assert asks.add(session, cmd, then)
    await asyncio.wait_for(asks.wait(), 10)  # a mutant that never answers fails, not hangs
    return [got[i] for i in range(len(pairs))]


def _outcome(got: object) -> tuple[object, ...]:
    """An answer or error as compared: its type, and its fields or health and words."""
    if isinstance(got, SshError):
        return type(got), got.health, got.message
    return type(got), got


def _state(session: NodeSession) -> tuple[object, ...]:
    return session.health, session.last_error, session.shell_works, session.connects


@pytest.mark.parametrize("cmd", ["echo hi", "fail 3", "big 900", "big 5000", "cut", "nostatus"])
async def test_a_batch_answers_as_query_does(keys: TestKeys, tmp_path: Path, cmd: str) -> None:
    """The same command on two sessions to one node, one through query(), one through a
    batch: the same answer or error (type, health, words), the same session state after
    it, and the same answer to the next command."""
    async with FakeNode(keys, handler=_node) as fake:
        options = node_options(keys, tmp_path, [fake], max_output=1000, command_timeout=5)
        by_query = NodeSession(fake.as_node("n1"), options)
        by_batch = NodeSession(fake.as_node("n1"), options)
        try:
            await _warm(by_query)
            await _warm(by_batch)
            try:
                expected: object = await by_query.query(cmd)
            except SshError as exc:
                expected = exc
            [got] = await _batch([(by_batch, cmd)])
            assert _outcome(got) == _outcome(expected)
            assert _state(by_batch) == _state(by_query)
            after = await asyncio.wait_for(by_batch.query("echo after"), 10)
            assert after == await by_query.query("echo after")
            assert after.stdout == "after\n"
        finally:
            await by_query.close()
            await by_batch.close()


async def test_a_node_past_its_limit_times_out_alone(keys: TestKeys, tmp_path: Path) -> None:
    """One node hangs: the others are answered as they come, not at its limit; it gets
    query()'s timeout, its shell dropped; its next command runs on a new shell, on the
    same connection."""
    async with FakeNode(keys, handler=_node) as fake:
        options = node_options(keys, tmp_path, [fake], command_timeout=0.5)
        quick = NodeSession(fake.as_node("quick"), options)
        stuck = NodeSession(fake.as_node("stuck"), options)
        try:
            for s in (quick, stuck):
                await _warm(s)
            order: list[str] = []
            asks = AskBatch()
            answers: dict[str, Answer] = {}

            def then(name: str) -> Callable[[Answer], None]:
                def record(answer: Answer) -> None:
                    order.append(name)
                    answers[name] = answer

                return record

            loop = asyncio.get_running_loop()
            began = loop.time()
            assert asks.add(stuck, "hang", then("stuck"))
            assert asks.add(quick, "echo fast", then("quick"))
            await wait_until(lambda: "quick" in answers, what="the quick node's answer")
            assert "stuck" not in answers  # answered before the stuck one's limit
            await asyncio.wait_for(asks.wait(), 10)
            assert loop.time() - began >= 0.5 - 0.01
            assert order == ["quick", "stuck"]
            assert answers["quick"] is not None and not isinstance(answers["quick"], SshError)
            assert answers["quick"].stdout == "fast\n"
            late = answers["stuck"]
            assert isinstance(late, CommandTimeout)
            assert late.message == "'hang' did not finish within 0.5 s"
            assert stuck.health is NodeHealth.TIMEOUT and quick.health is NodeHealth.OK
            again = await asyncio.wait_for(stuck.query("echo back"), 10)
            assert again.stdout == "back\n" and stuck.connects == 1
        finally:
            await quick.close()
            await stuck.close()


async def test_a_cancelled_batch_leaves_no_shell_out_of_step(
    keys: TestKeys, tmp_path: Path
) -> None:
    """A batch cancelled while its command runs: the shell it was asked in is dropped
    and the turn given back, so the next command is answered with its own answer."""
    async with FakeNode(keys, handler=_node) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            await _warm(session)
            asks = AskBatch()
            assert asks.add(session, "hang", lambda answer: None)
            waiting = asyncio.create_task(asks.wait())
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert not session._turns.held
            after = await asyncio.wait_for(session.query("echo next"), 5)
            assert after.stdout == "next\n" and session.connects == 1
        finally:
            await session.close()


async def test_a_node_not_ready_now_is_not_asked(keys: TestKeys, tmp_path: Path) -> None:
    """Not connected, its shell busy with another command, or its shell refused: add says
    False, writes nothing, and the callback is never called."""
    async with FakeNode(keys, handler=_node) as fake:
        options = node_options(keys, tmp_path, [fake], command_timeout=5)
        session = NodeSession(fake.as_node("n1"), options)
        called: list[Answer] = []
        try:
            asks = AskBatch()
            assert not asks.add(session, "echo never", called.append)  # not connected
            await _warm(session)
            busy = asyncio.create_task(session.query("hang"))
            await wait_until(lambda: session._turns.held, what="the query's turn")
            assert not asks.add(session, "echo never", called.append)  # another's turn
            busy.cancel()
            with pytest.raises(asyncio.CancelledError):
                await busy
            await _warm(session)
            session.shell_works = False  # as after a node refused its shell
            assert not asks.add(session, "echo never", called.append)
            await asks.wait()  # nothing asked: nothing to wait for
            assert called == []
        finally:
            await session.close()


async def test_many_nodes_in_one_batch_each_get_their_own_answer(
    keys: TestKeys, tmp_path: Path
) -> None:
    async with FakeNode(keys, handler=_node) as fake:
        options = node_options(keys, tmp_path, [fake], command_timeout=5)
        sessions = [NodeSession(fake.as_node(f"n{i}"), options) for i in range(12)]
        try:
            for s in sessions:
                await _warm(s)
            for _ in range(3):
                got = await _batch([(s, f"echo {i}") for i, s in enumerate(sessions)])
                assert [a.stdout for a in got if a is not None and not isinstance(a, SshError)] == [
                    f"{i}\n" for i in range(12)
                ]
        finally:
            for s in sessions:
                await s.close()


async def test_a_callback_that_raises_does_not_stop_the_others(
    keys: TestKeys, tmp_path: Path
) -> None:
    """Two nodes past their limit at the same timer: the first one's callback raises (the
    loop's exception handler hears of it); the second is still timed out and handed on,
    and the batch ends."""
    async with FakeNode(keys, handler=_node) as fake:
        options = node_options(keys, tmp_path, [fake], command_timeout=0.3)
        sessions = [NodeSession(fake.as_node(f"n{i}"), options) for i in range(2)]
        loop = asyncio.get_running_loop()
        reported: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        try:
            for s in sessions:
                await _warm(s)
            handed: list[Answer] = []

            def first(answer: Answer) -> None:
                raise RuntimeError("a callback's own fault")

            asks = AskBatch()
            assert asks.add(sessions[0], "hang", first)
            assert asks.add(sessions[1], "hang", handed.append)
            await asyncio.wait_for(asks.wait(), 10)
            assert len(handed) == 1 and isinstance(handed[0], CommandTimeout)
            assert [str(c["exception"]) for c in reported] == ["a callback's own fault"]
            assert not any(s._turns.held for s in sessions)
        finally:
            loop.set_exception_handler(None)
            for s in sessions:
                await s.close()


# -- Turns ----------------------------------------------------------------------------------


async def test_turns_go_in_the_order_asked_and_can_be_taken_at_once_when_free() -> None:
    turns = Turns()
    assert turns.try_take() and turns.held
    assert not turns.try_take()
    order: list[int] = []

    async def wait(i: int) -> None:
        await turns.take()
        order.append(i)

    waiting = [asyncio.create_task(wait(i)) for i in range(3)]
    await asyncio.sleep(0)
    assert not turns.try_take()  # held, and others wait before a newcomer
    for i in range(3):
        turns.give()
        await wait_until(lambda i=i: len(order) == i + 1, what=f"waiter {i}")
    assert order == [0, 1, 2] and turns.held
    turns.give()
    assert not turns.held
    await asyncio.gather(*waiting)


async def test_a_waiter_cancelled_takes_no_turn_and_one_handed_it_hands_it_on() -> None:
    turns = Turns()
    assert turns.try_take()

    async def wait() -> None:
        async with turns:
            await asyncio.sleep(0)

    gone = asyncio.create_task(wait())
    handed = asyncio.create_task(wait())
    after = asyncio.create_task(wait())
    await asyncio.sleep(0)
    gone.cancel()  # cancelled while waiting: takes nothing
    with pytest.raises(asyncio.CancelledError):
        await gone
    turns.give()  # to `handed`, which is cancelled before it runs: it hands it on
    handed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handed
    await asyncio.wait_for(after, 5)
    assert not turns.held
