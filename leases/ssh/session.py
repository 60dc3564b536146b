"""asyncssh sessions: one persistent connection per node, bounded, timed out, backed off.

A NodeSession connects lazily on its first command and keeps the connection open; commands
run as channels on it (one exec costs two round trips instead of a whole handshake). A node
that fails is retried no sooner than its backoff allows, and never holds up other nodes.
Every failure ends up as a NodeHealth plus a readable last_error; nothing here raises
anything but SshError (and StreamExited from stream()) for a node's faults.

Its parts live beside it: connecting through the route and jump hosts in leases.ssh.connect,
the kept-open shell's protocol in leases.ssh.shell, bounded reading in leases.ssh.stream;
SshPool (leases.ssh.pool) holds a fleet's sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, NoReturn

import asyncssh

from leases.core.models import Node, NodeHealth
from leases.ssh.bounds import Budget
from leases.ssh.deadline import Deadline
from leases.ssh.errors import (
    CommandTimeout,
    ConnectionDropped,
    HostKeyRejected,
    OfferedHostKey,
    OutputTooLarge,
    ShellUnavailable,
    SshError,
    StreamExited,
)
from leases.ssh.faults import describe
from leases.ssh.jumps import JumpHosts
from leases.ssh.link import Link
from leases.ssh.nodelink import NodeLink
from leases.ssh.options import SshOptions
from leases.ssh.posixsh import under_sh, unwrap_sh
from leases.ssh.shell import (
    FRAME_CHARS,
    AnswerReader,
    Asked,
    Shell,
    close_shell,
    framed,
    new_marker,
    open_shell,
)
from leases.ssh.speech import _
from leases.ssh.stream import (
    CHUNK,
    Capped,
    CommandResult,
    KeptEnd,
    OverCap,
    Tail,
    over_output,
)
from leases.ssh.turns import Turns

# How long to wait for a channel to finish closing after we closed it ourselves.
_CLOSE_GRACE_S = 2.0
# Retries of a refused channel open (see _open_process).
_CHANNEL_RETRY_DELAYS = (0.01, 0.02, 0.05, 0.1, 0.2)
# How much of a stream's output to keep for the error it ends with (StreamExited): the
# error is at its end.
_STREAM_KEEP_CHARS = 4096


class NodeSession(NodeLink):
    """One node's persistent SSH connection (NodeLink: its health and backoff) and the
    commands run on it: execs, streams, terminals, and short commands on its kept shell."""

    def __init__(
        self,
        node: Node,
        options: SshOptions | None = None,
        *,
        budget: Budget | None = None,
        jumps: JumpHosts | None = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        super().__init__(node, options, budget=budget, jumps=jumps, clock=clock, random=random)
        self._shell: Shell | None = None
        self._turns = Turns()  # one command at a time on the kept shell
        # A kept shell being opened on a link, waited for by the commands that need it.
        self._opening: tuple[Link, asyncio.Task[Shell]] | None = None
        self._deadline = Deadline()  # the kept shell's commands' time limit
        # False once the node refused a shell channel (ForceCommand, a restricted
        # account): query() then runs every command as its own exec.
        self.shell_works = True

    async def run_sh(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """run() of a POSIX sh command, handed to sh whatever the login's shell
        (leases.ssh.posixsh)."""
        return await self.run(under_sh(cmd), timeout)

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """Run cmd on the node and collect its output; raises SshError (OutputTooLarge
        when it prints more than options.max_output / max_line allow)."""
        link = await self._connection()
        limit = self.options.command_timeout if timeout is None else timeout
        async with link.channels:
            process = await self._open_process(link, cmd)
            stderr = Tail(process.stderr)
            out = Capped(self.options.max_output, self.options.max_line)
            parts: list[str] = []
            try:
                async with asyncio.timeout(limit):
                    while chunk := await process.stdout.read(CHUNK):
                        out.check(chunk)
                        parts.append(chunk)
                    await process.wait_closed()
                    await stderr.done()
            except TimeoutError as exc:
                raise self._timed_out(cmd, limit) from exc
            except OverCap as exc:
                raise self._too_large(cmd, str(exc)) from None
            except (asyncssh.Error, OSError) as exc:
                raise self._dropped(link, exc) from exc
            finally:
                stderr.cancel()
                await self._close_process(process)
        if process.exit_status is None and self._is_lost(link):
            raise self._dropped(link, None)
        self._set(NodeHealth.OK)
        return CommandResult(process.exit_status, "".join(parts), stderr.text)

    @contextlib.asynccontextmanager
    async def binary(self, cmd: str) -> AsyncIterator[asyncssh.SSHClientProcess[bytes]]:
        """cmd as a process on the node's connection whose output is read as bytes, by the
        caller and within its own bounds (leases.ssh.throughput); it holds a channel slot
        while open and is closed on leaving. Raises SshError."""
        link = await self._connection()
        async with link.channels:
            process = await self._open_process(link, cmd, binary=True)
            try:
                yield process
            except (asyncssh.Error, OSError) as exc:
                raise self._dropped(link, exc) from exc
            finally:
                await self._close_process(process)

    @contextlib.asynccontextmanager
    async def terminal(
        self, cmd: str | None, term_type: str | None, term_size: tuple[int, int] | None
    ) -> AsyncIterator[asyncssh.SSHClientProcess[bytes]]:
        """An interactive channel on the node's connection (leases.ssh.interactive): its
        login shell (cmd None) or cmd, with a PTY of term_type and (columns, rows) unless
        term_type is None; bytes both ways. Closed on leaving. Raises SshError."""
        link = await self._connection()
        async with link.channels:
            try:
                process = await link.conn.create_process(
                    cmd,
                    term_type=term_type,
                    term_size=term_size if term_type is not None else None,
                    encoding=None,
                )
            except (asyncssh.Error, OSError) as exc:
                raise self._dropped(link, exc) from exc
            try:
                yield process
            finally:
                await self._close_process(process)

    def _too_large(self, cmd: str, reason: str) -> OutputTooLarge:
        words = _("{command!r} printed {what}: stopped")
        self._set(NodeHealth.GARBAGE, words.format(command=_named(cmd), what=reason))
        return OutputTooLarge(self.name, NodeHealth.GARBAGE, self.last_error)

    def _timed_out(self, cmd: str, limit: float) -> CommandTimeout:
        words = _("{command!r} did not finish within {seconds:g} s")
        self._set(NodeHealth.TIMEOUT, words.format(command=_named(cmd), seconds=limit))
        return CommandTimeout(self.name, NodeHealth.TIMEOUT, self.last_error)

    async def stream(
        self, cmd: str, idle_timeout: float | None = None, *, chunks: bool = False
    ) -> AsyncGenerator[str, None]:
        """Yield the lines a long-running command prints (newline stripped), as they come;
        with chunks=True, whatever text has arrived instead (cheaper: one read, not one per
        line, for a caller that splits lines itself).

        Ends when the command exits 0; raises StreamExited when it exits otherwise (its
        result holds the last lines printed and the end of stderr: a failing nvidia-smi
        says why on stdout), ConnectionDropped when the connection goes, CommandTimeout
        when no line came within idle_timeout. Holds one channel while open: use
        contextlib.aclosing, or iterate to the end, so the remote command is closed.
        """
        link = await self._connection()
        async with link.channels:
            process = await self._open_process(link, cmd)
            stderr = Tail(process.stderr)
            recent = KeptEnd(_STREAM_KEEP_CHARS)
            # No total for a stream (it runs for hours), but a line may not grow unbounded.
            lines = Capped(None, self.options.max_line)
            try:
                while True:
                    try:
                        async with asyncio.timeout(idle_timeout):
                            chunk = await process.stdout.read(CHUNK)
                        complete = lines.feed(chunk)
                    except TimeoutError as exc:
                        message = _("{command!r} printed nothing in {seconds:g} s").format(
                            command=cmd, seconds=idle_timeout
                        )
                        self._set(NodeHealth.TIMEOUT, message)
                        raise CommandTimeout(self.name, NodeHealth.TIMEOUT, message) from exc
                    except OverCap as exc:
                        raise self._too_large(cmd, str(exc)) from None
                    except (asyncssh.Error, OSError) as exc:
                        raise self._dropped(link, exc) from exc
                    if not chunk:
                        if not chunks and (rest := lines.rest()):
                            recent.add(rest)
                            yield rest.rstrip("\r\n")
                        break
                    self._set(NodeHealth.OK)
                    if chunks:
                        recent.add(chunk)
                        yield chunk
                        continue
                    for line in complete:
                        recent.add(line)
                        yield line.rstrip("\r\n")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_CLOSE_GRACE_S):
                        await process.wait_closed()
                        await stderr.done()
                if process.exit_status is None and self._is_lost(link):
                    raise self._dropped(link, None)
                if process.exit_status != 0:
                    result = CommandResult(process.exit_status, recent.text, stderr.text)
                    raise StreamExited(self.name, result)
            finally:
                stderr.cancel()
                await self._close_process(process)

    async def query(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """Run a short command the cheapest way the node allows: on its kept-open shell
        channel, else as an exec of its own. Raises SshError like run()."""
        if self.shell_works:
            try:
                return await self.run_in_shell(cmd, timeout)
            except ShellUnavailable:
                self.shell_works = False
        return await self.run_sh(cmd, timeout)  # as the kept shell would: sh, whatever the login

    async def run_in_shell(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """Run cmd on one shell channel kept open per node, one command at a time (the
        protocol is leases.ssh.shell's). cmd must not read stdin. Raises ShellUnavailable
        when no shell can be had.
        """
        limit = self.options.command_timeout if timeout is None else timeout
        async with self._turns:
            link = await self._connection()
            shell = self._shell
            began = asyncio.get_running_loop().time()
            if shell is None or not shell.usable(link):
                self._drop_shell()
                shell = self._shell = await self._new_shell(link, cmd, limit)
            asked = self._ask(shell, cmd, limit)
            # asyncio.timeout's, one timer kept (.deadline); what the shell's opening left.
            self._deadline.arm(max(0.0, began + limit - asyncio.get_running_loop().time()))
            try:
                answer = await asked.waiter
            except asyncio.CancelledError:
                if not self._deadline.expired():
                    self._drop_shell()  # its answer, unread, would open the next one's
                    raise
                self._fail(asked, TimeoutError())
            except Exception as exc:  # OverCap, set on the waiter
                self._fail(asked, exc)
            except BaseException:
                self._drop_shell()
                raise
            finally:
                self._deadline.disarm()
                shell.session.settled()
            return self._shell_result(asked, answer)

    async def _new_shell(self, link: Link, cmd: str, limit: float) -> Shell:
        """A new kept shell on link, within the command's limit (a node that stopped, its
        connection still open, confirms no channel). An open that takes longer is not
        cancelled: asyncssh has sent the node its request, and a cancelled open would
        leave the node a channel nobody owns once it answers, a session slot held for the
        connection's life. It goes on, and the next command waits for the same open."""
        opening = self._opening
        if opening is None or opening[0] is not link:
            task = asyncio.ensure_future(open_shell(link, self.name))
            task.add_done_callback(_retrieved)
            opening = self._opening = (link, task)
        task = opening[1]
        try:
            return await asyncio.wait_for(asyncio.shield(task), limit)
        except TimeoutError as exc:
            raise self._timed_out(cmd, limit) from exc
        except ShellUnavailable as exc:
            if self._is_lost(link):  # the connection went while the shell opened
                raise self._dropped(link, exc) from exc
            raise
        finally:
            if task.done() and self._opening is opening:
                self._opening = None

    def _drop_opening(self) -> None:
        """The session closes: a shell being opened is not waited for (its channel goes
        with the connection), one opened since is closed."""
        opening, self._opening = self._opening, None
        if opening is None:
            return
        task = opening[1]
        if not task.done():
            task.cancel()
        elif not task.cancelled() and task.exception() is None:
            close_shell(task.result())

    def ask_now(self, cmd: str) -> Asked | None:
        """cmd written at once into the kept shell when the shell is ready now: connected,
        open, in step, and no other command's turn; None when it is not (query() then).
        The turn is held until the answer is taken (`answer_of`, once asked.waiter is
        done) or given up (`timed_out`, `give_up`). Raises SshError as query() would for
        a write that failed; a shell found unusable then is not used again (None)."""
        link, shell = self._link, self._shell
        if not self.shell_works or link is None or link.lost or shell is None:
            return None
        if not shell.usable(link) or not self._turns.try_take():
            return None
        try:
            return self._ask(shell, cmd, self.options.command_timeout)
        except BaseException as exc:
            self._turns.give()  # not written: no answer to wait for
            if not isinstance(exc, ShellUnavailable):
                raise
            self.shell_works = False
            return None

    def answer_of(self, asked: Asked) -> CommandResult | None:
        """The answer to a command ask_now wrote, its waiter done, and the turn given back.
        Raises SshError as query() does; None where query() would run the command as an
        exec instead (the shell cannot run it: shell_works is now False)."""
        asked.shell.session.settled()
        try:
            if (exc := asked.waiter.exception()) is not None:
                self._fail(asked, exc)
            return self._shell_result(asked, asked.waiter.result())
        except ShellUnavailable:
            self.shell_works = False
            return None
        finally:
            self._turns.give()

    def timed_out(self, asked: Asked) -> SshError:
        """A command ask_now wrote, not answered within its limit: its shell dropped (the
        command may still run in it), the turn given back, and the error query() raises."""
        asked.shell.session.settled()
        self._turns.give()
        failed = self._shell_failed(asked, TimeoutError())
        assert isinstance(failed, SshError)
        return failed

    def give_up(self, asked: Asked) -> None:
        """A command ask_now wrote whose answer is no longer wanted (its reader was
        cancelled): its shell dropped, as its answer would open the next one's."""
        asked.shell.session.settled()
        self._drop_shell(asked.shell)
        self._turns.give()

    def _ask(self, shell: Shell, cmd: str, limit: float) -> Asked:
        """Write cmd, framed, into the shell; raises SshError (its shell dropped)."""
        marker = new_marker()
        shell.session.stderr.clear()
        # The cap is on the command's output: the frame's own lines come on top.
        capped = Capped(self.options.max_output + FRAME_CHARS, self.options.max_line)
        asked = Asked(shell, cmd, limit, capped)
        try:
            text = framed(cmd, marker, _held_bytes(self.options))
            asked.waiter = shell.session.ask(shell.channel, text, AnswerReader(marker, capped))
        except Exception as exc:
            self._fail(asked, exc)
        except BaseException:
            self._drop_shell()
            raise
        return asked

    def _shell_result(self, asked: Asked, answer: tuple[str, int | None] | None) -> CommandResult:
        """The CommandResult of a framed command's answer; raises SshError (its shell
        dropped) for an answer that is none or too long."""
        shell = asked.shell
        try:
            if answer is not None and answer[1] is not None:
                shell.answered = True
            if answer is None:
                if not shell.answered and not self._is_lost(shell.link):
                    # Closed before its first answer: no usable shell here.
                    raise ShellUnavailable(self.name, NodeHealth.OK, _("the node closed its shell"))
                raise ConnectionDropped(
                    self.name, NodeHealth.UNREACHABLE, _("the shell channel closed")
                )
            if len(answer[0]) > self.options.max_output:
                raise over_output(self.options.max_output)
        except Exception as exc:
            self._fail(asked, exc)
        out, status = answer  # stderr: all that came before it, as packets came
        if status is None:  # the marker without the frame's status line
            self._drop_shell(shell)  # the next command starts afresh
            if not shell.answered:  # never framed right here (no `head -c`?): execs
                raise ShellUnavailable(
                    self.name, NodeHealth.OK, _("the node's shell printed no exit status")
                )
        self._set(NodeHealth.OK)
        return CommandResult(status, out, shell.session.stderr.text)

    def _fail(self, asked: Asked, exc: BaseException) -> NoReturn:
        """Raise what a kept shell's command raises for exc (a TimeoutError: its limit
        passed), its shell dropped: an SshError, or exc itself when it is not the node's."""
        failed = self._shell_failed(asked, exc)
        if failed is exc:
            raise exc
        raise failed from exc

    def _shell_failed(self, asked: Asked, exc: BaseException) -> BaseException:
        shell, link = asked.shell, asked.shell.link
        self._drop_shell(shell)
        if isinstance(exc, TimeoutError):
            return self._timed_out(asked.cmd, asked.limit)
        if isinstance(exc, OverCap):  # the channel is closed: the command stops
            # The whole output's cap as the user set it (the frame's lines come on top).
            capped = asked.capped
            over = capped.max_output is not None and capped.total > capped.max_output
            reason = over_output(self.options.max_output) if over else exc
            return self._too_large(asked.cmd, str(reason))
        if isinstance(exc, ConnectionDropped):
            return self._dropped(link, None) if self._is_lost(link) else exc
        if isinstance(exc, SshError):
            return exc
        if isinstance(exc, asyncssh.Error | OSError):
            if not shell.answered and not self._is_lost(link):
                return ShellUnavailable(self.name, NodeHealth.OK, describe(exc))
            return self._dropped(link, exc)
        return exc

    def _drop_shell(self, only: Shell | None = None) -> None:
        """Close the kept shell; with `only`, only if the kept shell is still that one (a
        command's, which another may have replaced since)."""
        if only is not None and self._shell is not only:
            return
        shell, self._shell = self._shell, None
        if shell is not None:
            close_shell(shell)

    def abandon(self) -> None:
        """Close the connection without waiting for the server to acknowledge it."""
        self._drop_opening()
        self._forget_shell()
        self._deadline.close()
        self._abandon_link()

    def _forget_shell(self) -> None:
        self._shell = None  # its channel goes with the connection

    async def close(self) -> None:
        """Close the connection (the next command opens a new one)."""
        self._drop_opening()
        self._drop_shell()
        self._deadline.close()
        await self._close_link()

    async def _open_process(
        self, link: Link, cmd: str, *, binary: bool = False
    ) -> asyncssh.SSHClientProcess[Any]:
        delays = iter(_CHANNEL_RETRY_DELAYS)
        encoding = None if binary else "utf-8"
        while True:
            try:
                return await link.conn.create_process(
                    cmd, stdin=asyncssh.DEVNULL, encoding=encoding, errors="replace"
                )
            except asyncssh.ChannelOpenError as exc:
                # sshd frees a closed session's MaxSessions slot only on its next loop
                # turn, so an open sent right behind a close can be refused although we
                # stay below the limit: try again shortly.
                delay = next(delays, None)
                if delay is None or self._is_lost(link):
                    raise self._dropped(link, exc) from exc
                await asyncio.sleep(delay)
            except (asyncssh.Error, OSError) as exc:
                raise self._dropped(link, exc) from exc

    async def _close_process(self, process: asyncssh.SSHClientProcess[Any]) -> None:
        # Release the channel slot only once the server has let go of the channel too,
        # so the bound below MaxSessions holds on the server's side.
        process.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await process.wait_closed()


def _named(cmd: str) -> str:
    """A command as a message names it: the start of what sh runs, on one line, at most
    60 characters (a reading's command runs to kilobytes of shell)."""
    text = " ".join((unwrap_sh(cmd) or cmd).lstrip("( ").split())
    return text if len(text) <= 60 else f"{text[:59]}…"


def _retrieved(task: asyncio.Task[Shell]) -> None:
    """A shell's open that ended with no one waiting: its failure is not an error
    to report (the next command that needs a shell opens another)."""
    if not task.cancelled():
        task.exception()


def _held_bytes(options: SshOptions) -> int:
    """The most a node's shell holds of one framed command's output (leases.ssh.shell): 4
    bytes a character (UTF-8's most) past the output cap, so that an output sh cut is over
    the cap and refused as too long, as an exec's would be (one that lost its NULs may be
    under it: it has no status line, so no status)."""
    return 4 * (options.max_output + 1)


async def offered_host_key(session: NodeSession) -> OfferedHostKey | None:
    """The host key a node offers that we do not trust yet, or None when its key is
    trusted (and a login works). Raises SshError for any other failure."""
    try:
        await session.run("true")
    except HostKeyRejected as exc:
        return exc.offered
    return None
