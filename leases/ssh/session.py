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
from typing import Any

import asyncssh

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh import config as sshconfig
from leases.ssh import hostkeys
from leases.ssh.bounds import Budget, retry_at
from leases.ssh.connect import Connector
from leases.ssh.deadline import Deadline
from leases.ssh.errors import (
    BackingOff,
    CommandTimeout,
    ConnectionDropped,
    HostKeyRejected,
    OfferedHostKey,
    OutputTooLarge,
    ShellUnavailable,
    SshError,
    StreamExited,
    TargetRefused,
)
from leases.ssh.faults import classify, describe
from leases.ssh.jumps import JumpHosts
from leases.ssh.link import Client, Link
from leases.ssh.options import SshOptions
from leases.ssh.posixsh import under_sh
from leases.ssh.shell import (
    FRAME_CHARS,
    AnswerReader,
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

# How long to wait for a channel to finish closing after we closed it ourselves.
_CLOSE_GRACE_S = 2.0
# Retries of a refused channel open (see _open_process).
_CHANNEL_RETRY_DELAYS = (0.01, 0.02, 0.05, 0.1, 0.2)
# How much of a stream's output to keep for the error it ends with (StreamExited): the
# error is at its end.
_STREAM_KEEP_CHARS = 4096


class NodeSession:
    """One node's persistent SSH connection, its health and its backoff."""

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
        self.node = node
        self.options = options or SshOptions()
        # A pool shares these between its sessions; a session alone has its own.
        self._budget = budget or Budget(self.options)
        self._jumps = jumps or JumpHosts(self.options, self._budget, clock=clock, random=random)
        # The name a pool keys its sessions by: a node renamed gets a new session.
        self._connector = Connector(
            node.name, self.options, self._budget, self._jumps, self._on_lost
        )
        self._clock = clock
        self._random = random
        self.health = NodeHealth.CONNECTING
        self.last_error = ""
        self.offered_key: OfferedHostKey | None = None
        self.failures = 0
        self.next_attempt_at = 0.0
        self.connects = 0  # successful connects, for tests and the status line
        self._link: Link | None = None
        self._connect_lock = asyncio.Lock()
        self._shell: Shell | None = None
        self._shell_lock = asyncio.Lock()
        self._deadline = Deadline()  # the kept shell's commands' time limit
        # False once the node refused a shell channel (ForceCommand, a restricted
        # account): query() then runs every command as its own exec.
        self.shell_works = True

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def target(self) -> SshTarget:
        return self.node.ssh

    @property
    def connected(self) -> bool:
        return self._link is not None and not self._link.lost

    @property
    def fingerprint(self) -> str | None:
        """SHA256 fingerprint of a host key we refused, for the user to check."""
        return self.offered_key.fingerprint if self.offered_key else None

    @property
    def cipher(self) -> str | None:
        """The negotiated cipher of the open connection, for the status line."""
        link = self._link
        return None if link is None else link.conn.get_extra_info("send_cipher")

    def retry_now(self) -> None:
        """Forget the backoff (its jump hosts' too), e.g. after the user trusted a key."""
        self.next_attempt_at = 0.0
        route = self._connector.route
        if route is not None:
            self._jumps.retry_now(route.hops)

    def accept_host_key(self, seen_fingerprint: str) -> bool:
        """Trust the offered unknown key, if it is the one whose fingerprint the user saw.

        Writes it to zuka's own known_hosts and lets the next command connect at once.
        A changed key is never accepted here. Returns whether a key was trusted.
        """
        offered = self.offered_key
        if offered is None or offered.status is not hostkeys.HostKeyStatus.UNKNOWN:
            return False
        if offered.fingerprint != seen_fingerprint:
            return False
        hostkeys.trust(
            offered.host,
            offered.port,
            offered.key,
            self.options.trust_path,
            known_hosts_paths=self.options.known_hosts,
        )
        self.offered_key = None
        self.retry_now()
        return True

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
                words = _("{command!r} did not finish within {seconds:g} s")
                self._set(NodeHealth.TIMEOUT, words.format(command=cmd, seconds=limit))
                raise CommandTimeout(self.name, NodeHealth.TIMEOUT, self.last_error) from exc
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
        self._set(NodeHealth.GARBAGE, words.format(command=cmd.split(" ", 1)[0], what=reason))
        return OutputTooLarge(self.name, NodeHealth.GARBAGE, self.last_error)

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
        async with self._shell_lock:
            link = await self._connection()
            shell = self._shell
            if shell is None or not shell.usable(link):
                await self._drop_shell()
                shell = self._shell = await open_shell(link, self.name)
            marker = new_marker()
            shell.session.stderr.clear()
            # The cap is on the command's output: the frame's own lines come on top.
            capped = Capped(self.options.max_output + FRAME_CHARS, self.options.max_line)
            try:
                text = framed(cmd, marker, _held_bytes(self.options))
                waiter = shell.session.ask(shell.channel, text, AnswerReader(marker, capped))
                self._deadline.arm(limit)  # asyncio.timeout's, one timer kept (.deadline)
                try:
                    answer = await waiter
                except asyncio.CancelledError:
                    if not self._deadline.expired():
                        raise
                    raise TimeoutError from None
                finally:
                    self._deadline.disarm()
                    shell.session.settled()
                if answer is not None and answer[1] is not None:
                    shell.answered = True
                if answer is None:
                    if not shell.answered and not self._is_lost(link):
                        # Closed before its first answer: no usable shell here.
                        raise ShellUnavailable(
                            self.name, NodeHealth.OK, _("the node closed its shell")
                        )
                    raise ConnectionDropped(
                        self.name, NodeHealth.UNREACHABLE, _("the shell channel closed")
                    )
                if len(answer[0]) > self.options.max_output:
                    raise over_output(self.options.max_output)
            except TimeoutError as exc:
                await self._drop_shell()  # the command may still be running in it
                words = _("{command!r} did not finish within {seconds:g} s")
                self._set(NodeHealth.TIMEOUT, words.format(command=cmd, seconds=limit))
                raise CommandTimeout(self.name, NodeHealth.TIMEOUT, self.last_error) from exc
            except OverCap as exc:
                await self._drop_shell()  # stops the command: the channel is closed
                # The whole output's cap as the user set it (the frame's lines come on top).
                over = capped.max_output is not None and capped.total > capped.max_output
                reason = over_output(self.options.max_output) if over else exc
                raise self._too_large(cmd, str(reason)) from None
            except ShellUnavailable:
                await self._drop_shell()
                raise
            except ConnectionDropped:
                await self._drop_shell()
                if self._is_lost(link):
                    raise self._dropped(link, None) from None
                raise
            except (asyncssh.Error, OSError) as exc:
                await self._drop_shell()
                if not shell.answered and not self._is_lost(link):
                    raise ShellUnavailable(self.name, NodeHealth.OK, describe(exc)) from exc
                raise self._dropped(link, exc) from exc
            except BaseException:  # cancelled: its answer, unread, would open the next one's
                await self._drop_shell()
                raise
            out, status = answer  # stderr: all that came before it, as packets came
            if status is None:  # the marker without the frame's status line
                await self._drop_shell()  # the next command starts afresh
                if not shell.answered:  # never framed right here (no `head -c`?): execs
                    raise ShellUnavailable(
                        self.name, NodeHealth.OK, _("the node's shell printed no exit status")
                    )
            self._set(NodeHealth.OK)
            return CommandResult(status, out, shell.session.stderr.text)

    async def _drop_shell(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None:
            close_shell(shell)

    def abandon(self) -> None:
        """Close the connection without waiting for the server to acknowledge it."""
        self._forget_shell()
        self._deadline.close()
        link, self._link = self._link, None
        if link is not None:
            link.lost = True
            link.close()

    def _forget_shell(self) -> None:
        self._shell = None  # its channel goes with the connection

    async def close(self) -> None:
        """Close the connection (the next command opens a new one)."""
        await self._drop_shell()
        self._deadline.close()
        link, self._link = self._link, None
        if link is None:
            return
        link.lost = True
        link.close(release=False)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_GRACE_S):
                    await link.conn.wait_closed()
        finally:
            link.release()  # the jump host only once the node's close went through it

    # -- connecting ---------------------------------------------------------------

    async def _connection(self) -> Link:
        link = self._link
        if link is not None and not link.lost:
            return link
        async with self._connect_lock:
            link = self._link
            if link is not None and not link.lost:
                return link
            now = self._clock()
            if now < self.next_attempt_at:
                raise BackingOff(
                    self.name,
                    self.health,
                    _("waiting {seconds:.1f} s before retrying: {why}").format(
                        seconds=self.next_attempt_at - now, why=self.last_error
                    ),
                    self.next_attempt_at,
                )
            try:
                link = await self._connector.open(self.target, self.failures > 0)
            except Exception as exc:
                health, message, offered = classify(exc, self.options.connect_timeout)
                if offered is not None:
                    self.offered_key = offered
                self._failed(health, message)
                if offered is not None:
                    raise HostKeyRejected(self.name, health, message, offered) from exc
                if isinstance(exc, sshconfig.ConfigRefused):
                    raise TargetRefused(self.name, health, message) from exc
                raise SshError(self.name, health, message) from exc
            self._link = link
            self.connects += 1
            self.failures = 0
            self.next_attempt_at = 0.0
            self.offered_key = None
            self._set(NodeHealth.OK)
            return link

    def _failed(self, health: NodeHealth, message: str) -> None:
        self.failures += 1
        self.next_attempt_at = retry_at(self.options, self.failures, self._clock, self._random)
        self._set(health, message)

    # -- the open connection ------------------------------------------------------

    def _on_lost(self, client: Client, exc: Exception | None) -> None:
        link = self._link
        if link is not None and link.client is client:
            link.lost = True
            self._link = None
            link.close()  # lets go of its jump hosts
            if exc is not None:
                self._set(
                    NodeHealth.UNREACHABLE, _("connection lost: {why}").format(why=describe(exc))
                )

    def _is_lost(self, link: Link) -> bool:
        return link.lost or link.conn.is_closed()

    def _dropped(self, link: Link, exc: BaseException | None) -> SshError:
        if self._is_lost(link):
            link.lost = True
            if self._link is link:
                self._link = None
            link.close()
            reason = describe(exc) if exc else _("connection closed")
            words = _("connection lost during command: {why}").format(why=reason)
            self._set(NodeHealth.UNREACHABLE, words)
            return ConnectionDropped(self.name, NodeHealth.UNREACHABLE, self.last_error)
        # The connection is fine; only this channel failed (e.g. the server refused it).
        reason = describe(exc) if exc else _("it closed without an exit status")
        return SshError(self.name, self.health, _("channel failed: {why}").format(why=reason))

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

    def _set(self, health: NodeHealth, message: str = "") -> None:
        self.health = health
        self.last_error = message


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
