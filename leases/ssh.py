"""asyncssh sessions: one persistent connection per node, bounded, timed out, backed off.

A NodeSession connects lazily on its first command and keeps the connection open; commands
run as channels on it (one exec costs two round trips instead of a whole handshake). A node
that fails is retried no sooner than its backoff allows, and never holds up other nodes.
Every failure ends up as a NodeHealth plus a readable last_error; nothing here raises
anything but SshError (and StreamExited from stream()) for a node's faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final

import asyncssh

from leases import hostkeys
from leases.models import Node, NodeHealth, SshTarget


class _Default(Enum):
    TOKEN = "default"


# "Do what ssh would do": read ~/.ssh/config, use $SSH_AUTH_SOCK.
DEFAULT: Final = _Default.TOKEN

# How long to wait for a channel to finish closing after we closed it ourselves.
_CLOSE_GRACE_S = 2.0
# The most text one read of a chunked stream takes.
_CHUNK = 65536
# Retries of a refused channel open (see _open_process).
_CHANNEL_RETRY_DELAYS = (0.01, 0.02, 0.05, 0.1, 0.2)
# How much of a stream's output to keep for the error it ends with.
_STDERR_KEEP = 8192
_STREAM_KEEP_LINES = 50
# The most of one kept stream line or chunk (for StreamExited): the error is at its end.
_STREAM_KEEP_CHARS = 2048

# Output caps (characters; nvidia-smi prints ASCII, so about bytes). Sizes measured here:
# an 8-GPU --query-gpu round is ~2 KB, compute-apps with hundreds of processes ~50 KB,
# `nvidia-smi -q -x` of 8 GPUs ~150 KB, `topo -m` under 4 KB. 4 MiB is 25x the largest of
# them and small next to what a node pushing output as fast as it can sends in a second.
DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024
# A real line is a few hundred characters (a CSV row; a process path is at most 4096).
DEFAULT_MAX_LINE = 64 * 1024


@dataclass(frozen=True)
class CommandResult:
    exit_status: int | None  # None: the channel closed without reporting one
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True)
class SshOptions:
    connect_timeout: float = 10.0  # TCP + handshake + auth, for the whole ProxyJump chain
    command_timeout: float = 10.0
    keepalive_interval: float = 15.0
    keepalive_count_max: int = 3
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    # Stock sshd: MaxStartups 10 unauthenticated connects, MaxSessions 10 channels. Those
    # are limits of one server, so connects are bounded per first hop (the node, or its
    # jump host); the fleet-wide bound only spares the client's own CPU.
    max_concurrent_connects: int = 32
    max_connects_per_host: int = 8
    max_channels_per_connection: int = 8
    # A command that prints more than max_output characters, or a line longer than
    # max_line, is stopped (its channel closed): the node is `garbage` (OutputTooLarge).
    # A stream() has no total (it runs for hours) but the same line bound.
    max_output: int = DEFAULT_MAX_OUTPUT
    max_line: int = DEFAULT_MAX_LINE
    # Put first, ahead of asyncssh's defaults: aes128-gcm costs ~1/1.6 of chacha20 here.
    preferred_ciphers: tuple[str, ...] = ("aes128-gcm@openssh.com",)
    # The first file is zuka's own, where accepted keys go (see leases.hostkeys).
    known_hosts: tuple[Path, ...] = field(default_factory=hostkeys.default_known_hosts_paths)
    # None: the node's key_path plus whatever ~/.ssh/config and the agent offer.
    client_keys: Sequence[str | Path | asyncssh.SSHKey] | None = None
    agent_path: str | _Default | None = DEFAULT  # None disables the agent
    config: Sequence[str | Path] | _Default = DEFAULT  # [] ignores ~/.ssh/config

    @property
    def trust_path(self) -> Path:
        return self.known_hosts[0] if self.known_hosts else hostkeys.default_known_hosts_path()


@dataclass(frozen=True)
class OfferedHostKey:
    """A host key the node (or one of its jump hosts) presented that we did not accept."""

    host: str
    port: int | None  # None for 22
    key: asyncssh.SSHKey
    status: hostkeys.HostKeyStatus
    addr: str = ""

    @property
    def fingerprint(self) -> str:
        return hostkeys.fingerprint(self.key)


class SshError(Exception):
    """A node could not run a command; health says why."""

    def __init__(self, node: str, health: NodeHealth, message: str) -> None:
        super().__init__(f"{node}: {message}")
        self.node = node
        self.health = health
        self.message = message


class BackingOff(SshError):
    """Not attempted: the last connect failed and its backoff has not run out."""

    def __init__(self, node: str, health: NodeHealth, message: str, retry_at: float) -> None:
        super().__init__(node, health, message)
        self.retry_at = retry_at


class CommandTimeout(SshError):
    """The command did not finish in time; the connection is kept."""


class ConnectionDropped(SshError):
    """The connection went away under a running command; the next command reconnects."""


class HostKeyRejected(SshError):
    """The host key is unknown (UNTRUSTED) or differs from the one on file (HOSTKEY_CHANGED)."""

    def __init__(self, node: str, health: NodeHealth, message: str, offered: OfferedHostKey):
        super().__init__(node, health, message)
        self.offered = offered


class ShellUnavailable(SshError):
    """The node would not open a shell channel; query() falls back to exec."""


class OutputTooLarge(SshError):
    """The command printed more than the caps allow; it was stopped (health GARBAGE)."""


class _OverCap(Exception):
    """Output passed a cap; the message says which."""


class _Capped:
    """Splits output text into lines as it arrives, refusing more than the caps allow.

    Memory is bounded by max_output (whole output kept) or by max_line (lines handed out
    as they complete): a node printing without newlines, or without end, costs no more.
    """

    def __init__(self, max_output: int | None, max_line: int) -> None:
        self.max_output = max_output
        self.max_line = max_line
        self.total = 0
        self._partial: list[str] = []
        self._partial_len = 0

    def feed(self, chunk: str) -> list[str]:
        """The lines (with their newline) that chunk completes; raises _OverCap once a
        cap is passed."""
        self.total += len(chunk)
        if self.max_output is not None and self.total > self.max_output:
            raise _OverCap(f"output over {_size(self.max_output)}")
        lines: list[str] = []
        start = 0
        while (end := chunk.find("\n", start)) >= 0:
            piece = chunk[start : end + 1]
            if self._partial:
                piece = "".join(self._partial) + piece
                self._partial, self._partial_len = [], 0
            if len(piece) > self.max_line + 1:
                raise _OverCap(f"a line over {_size(self.max_line)}")
            lines.append(piece)
            start = end + 1
        rest = chunk[start:]
        if rest:
            self._partial_len += len(rest)
            if self._partial_len > self.max_line:
                raise _OverCap(f"a line over {_size(self.max_line)}")
            self._partial.append(rest)
        return lines

    def rest(self) -> str:
        """What came after the last newline."""
        rest = "".join(self._partial)
        self._partial, self._partial_len = [], 0
        return rest


def _size(chars: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if chars >= scale and chars % scale == 0:
            return f"{chars // scale} {unit}"
    return f"{chars} characters"


@dataclass(eq=False)
class _Shell:
    """A shell channel kept open on a node for short commands, and its stderr so far."""

    link: _Link
    process: asyncssh.SSHClientProcess[str]
    stderr: list[str]
    reader: asyncio.Task[None] | None = None
    answered: bool = False  # has it ever run a command to its end marker?


async def _collect(reader: asyncssh.SSHReader[str], into: list[str]) -> None:
    """Read a stream to its end, keeping in `into` only its last _STDERR_KEEP characters
    (a node may print stderr without end; the end of it says why a command failed)."""
    with contextlib.suppress(asyncssh.Error, OSError):
        while data := await reader.read(_CHUNK):
            into.append(data[-_STDERR_KEEP:])
            kept = sum(len(x) for x in into)
            while len(into) > 1 and kept - len(into[0]) >= _STDERR_KEEP:
                kept -= len(into.pop(0))


class StreamExited(Exception):
    """A streamed command ended with a non-zero or missing exit status."""

    def __init__(self, node: str, result: CommandResult) -> None:
        super().__init__(f"{node}: stream exited with status {result.exit_status}")
        self.node = node
        self.result = result


@dataclass(frozen=True)
class JumpHost:
    host: str
    port: int | None = None
    user: str | None = None


def parse_jump(spec: str) -> list[JumpHost]:
    """Parse an OpenSSH -J / ProxyJump value: `[user@]host[:port]`, comma-separated hops."""
    hops = []
    for raw in spec.split(","):
        hop = raw.strip().removeprefix("ssh://")
        if not hop:
            raise ValueError(f"jump: empty hop in {spec!r}")
        user, _, hostport = hop.rpartition("@")
        port: int | None = None
        if hostport.startswith("["):
            host, _, rest = hostport[1:].partition("]")
            if rest:
                port = _parse_port(rest.removeprefix(":"), spec)
        elif hostport.count(":") == 1:
            host, _, port_text = hostport.partition(":")
            port = _parse_port(port_text, spec)
        else:
            host = hostport
        if not host:
            raise ValueError(f"jump: no host in {spec!r}")
        hops.append(JumpHost(host, port, user or None))
    return hops


def _parse_port(text: str, spec: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"jump: bad port {text!r} in {spec!r}")
    return int(text)


class _Client(asyncssh.SSHClient):
    """Remembers the host key it was offered, and tells the session when the link drops."""

    def __init__(self, on_lost: Callable[[_Client, Exception | None], None]) -> None:
        self.offered: tuple[str, str, int | None, asyncssh.SSHKey] | None = None
        self._on_lost = on_lost

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only called for a key known_hosts did not already vouch for: record it, refuse it.
        self.offered = (host, addr, port if port != hostkeys.DEFAULT_PORT else None, key)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(self, exc)


@dataclass
class _Link:
    """An open connection to the node, the jump connections under it, and its channel bound."""

    conn: asyncssh.SSHClientConnection
    client: _Client
    channels: asyncio.Semaphore
    jumps: list[asyncssh.SSHClientConnection]
    lost: bool = False

    def close(self) -> None:
        self.conn.close()
        for jump in reversed(self.jumps):
            jump.close()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class NodeSession:
    """One node's persistent SSH connection, its health and its backoff."""

    def __init__(
        self,
        node: Node,
        options: SshOptions | None = None,
        *,
        connect_limiter: asyncio.Semaphore | None = None,
        host_limiter: asyncio.Semaphore | None = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.node = node
        self.options = options or SshOptions()
        self._limiter = connect_limiter or asyncio.Semaphore(self.options.max_concurrent_connects)
        self._host_limiter = host_limiter or asyncio.Semaphore(self.options.max_connects_per_host)
        self._clock = clock
        self._random = random
        self.health = NodeHealth.CONNECTING
        self.last_error = ""
        self.offered_key: OfferedHostKey | None = None
        self.failures = 0
        self.next_attempt_at = 0.0
        self.connects = 0  # successful connects, for tests and the status line
        self._link: _Link | None = None
        self._connect_lock = asyncio.Lock()
        self._shell: _Shell | None = None
        self._shell_lock = asyncio.Lock()
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
        """Forget the backoff, e.g. after the user trusted a key or fixed a config."""
        self.next_attempt_at = 0.0

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

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """Run cmd on the node and collect its output; raises SshError (OutputTooLarge
        when it prints more than options.max_output / max_line allow)."""
        link = await self._connection()
        limit = self.options.command_timeout if timeout is None else timeout
        async with link.channels:
            process = await self._open_process(link, cmd)
            stderr = _Tail(process.stderr)
            out = _Capped(self.options.max_output, self.options.max_line)
            lines: list[str] = []
            try:
                async with asyncio.timeout(limit):
                    while chunk := await process.stdout.read(_CHUNK):
                        lines += out.feed(chunk)
                    await process.wait_closed()
                    await stderr.done()
            except TimeoutError as exc:
                self._set(NodeHealth.TIMEOUT, f"{cmd!r} did not finish within {limit:g} s")
                raise CommandTimeout(self.name, NodeHealth.TIMEOUT, self.last_error) from exc
            except _OverCap as exc:
                raise self._too_large(cmd, str(exc)) from None
            except (asyncssh.Error, OSError) as exc:
                raise self._dropped(link, exc) from exc
            finally:
                stderr.cancel()
                await self._close_process(process)
        if process.exit_status is None and self._is_lost(link):
            raise self._dropped(link, None)
        self._set(NodeHealth.OK)
        return CommandResult(process.exit_status, "".join(lines) + out.rest(), stderr.text)

    def _too_large(self, cmd: str, reason: str) -> OutputTooLarge:
        self._set(NodeHealth.GARBAGE, f"{cmd.split(' ', 1)[0]!r} printed {reason}: stopped")
        return OutputTooLarge(self.name, NodeHealth.GARBAGE, self.last_error)

    async def stream(
        self, cmd: str, idle_timeout: float | None = None, *, chunks: bool = False
    ) -> AsyncIterator[str]:
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
            stderr = _Tail(process.stderr)
            recent: deque[str] = deque(maxlen=_STREAM_KEEP_LINES)
            # No total for a stream (it runs for hours), but a line may not grow unbounded.
            lines = _Capped(None, self.options.max_line)
            try:
                while True:
                    try:
                        async with asyncio.timeout(idle_timeout):
                            chunk = await process.stdout.read(_CHUNK)
                        complete = lines.feed(chunk)
                    except TimeoutError as exc:
                        message = f"{cmd!r} printed nothing in {idle_timeout:g} s"
                        self._set(NodeHealth.TIMEOUT, message)
                        raise CommandTimeout(self.name, NodeHealth.TIMEOUT, message) from exc
                    except _OverCap as exc:
                        raise self._too_large(cmd, str(exc)) from None
                    except (asyncssh.Error, OSError) as exc:
                        raise self._dropped(link, exc) from exc
                    if not chunk:
                        if not chunks and (rest := lines.rest()):
                            recent.append(rest[-_STREAM_KEEP_CHARS:])
                            yield rest.rstrip("\r\n")
                        break
                    self._set(NodeHealth.OK)
                    if chunks:
                        recent.append(chunk[-_STREAM_KEEP_CHARS:])
                        yield chunk
                        continue
                    for line in complete:
                        recent.append(line[-_STREAM_KEEP_CHARS:])
                        yield line.rstrip("\r\n")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_CLOSE_GRACE_S):
                        await process.wait_closed()
                        await stderr.done()
                if process.exit_status is None and self._is_lost(link):
                    raise self._dropped(link, None)
                if process.exit_status != 0:
                    result = CommandResult(process.exit_status, "".join(recent), stderr.text)
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
        return await self.run(cmd, timeout)

    async def run_in_shell(self, cmd: str, timeout: float | None = None) -> CommandResult:
        """Run cmd on one shell channel kept open per node, one command at a time.

        One round trip a command instead of two (channel open, then exec), and no new
        sshd session, login shell or ~/.bashrc per command: what all-smi does, and what
        measured fastest here. The end of the output is a marker line echoed with $?.
        cmd must not read stdin. Raises ShellUnavailable when no shell can be had.
        """
        limit = self.options.command_timeout if timeout is None else timeout
        async with self._shell_lock:
            link = await self._connection()
            shell = self._shell
            if shell is None or shell.link is not link or shell.process.is_closing():
                await self._drop_shell()
                shell = await self._open_shell(link)
            marker = f"__zuka_done_{_random.getrandbits(48):012x}__"
            shell.stderr.clear()
            out: list[str] = []
            status: int | None = None
            # Read in bounded chunks, never readline: a node that prints no newline would
            # make readline hold everything it sends.
            capped = _Capped(self.options.max_output, self.options.max_line)
            pending: deque[str] = deque()
            try:
                shell.process.stdin.write(f"{cmd}\necho {marker} $?\n")
                async with asyncio.timeout(limit):
                    while True:
                        if not pending:
                            chunk = await shell.process.stdout.read(_CHUNK)
                            pending.extend(capped.feed(chunk))
                            if chunk and not pending:
                                continue  # part of a line: read on
                            if not chunk and (rest := capped.rest()):
                                pending.append(rest)
                        line = pending.popleft() if pending else ""
                        if not line:
                            if not shell.answered and not self._is_lost(link):
                                # Closed before its first answer: no usable shell here.
                                raise ShellUnavailable(
                                    self.name, NodeHealth.OK, "the node closed its shell"
                                )
                            raise ConnectionDropped(
                                self.name, NodeHealth.UNREACHABLE, "the shell channel closed"
                            )
                        at = line.find(marker)
                        if at < 0:
                            out.append(line)
                            continue
                        out.append(line[:at])  # output that did not end in a newline
                        shell.answered = True
                        word = line[at + len(marker) :].strip()
                        status = int(word) if word.isdigit() and len(word) <= 3 else None
                        break
            except TimeoutError as exc:
                await self._drop_shell()  # the command may still be running in it
                self._set(NodeHealth.TIMEOUT, f"{cmd!r} did not finish within {limit:g} s")
                raise CommandTimeout(self.name, NodeHealth.TIMEOUT, self.last_error) from exc
            except _OverCap as exc:
                await self._drop_shell()  # stops the command: the channel is closed
                raise self._too_large(cmd, str(exc)) from None
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
                    raise ShellUnavailable(self.name, NodeHealth.OK, _describe(exc)) from exc
                raise self._dropped(link, exc) from exc
            await asyncio.sleep(0)  # let the stderr reader take what came before the marker
            self._set(NodeHealth.OK)
            return CommandResult(status, "".join(out), "".join(shell.stderr))

    async def _open_shell(self, link: _Link) -> _Shell:
        await link.channels.acquire()  # held for the shell's life
        try:
            # `sh` run as a command, not a login shell: the same environment as an exec
            # (no /etc/profile resetting PATH), POSIX $? whatever the login shell is.
            process = await link.conn.create_process("sh", encoding="utf-8", errors="replace")
        except asyncssh.ChannelOpenError as exc:
            link.channels.release()
            raise ShellUnavailable(self.name, NodeHealth.OK, _describe(exc)) from exc
        except BaseException:
            link.channels.release()
            raise
        shell = _Shell(link, process, [])
        shell.reader = asyncio.create_task(_collect(process.stderr, shell.stderr))
        self._shell = shell
        return shell

    async def _drop_shell(self) -> None:
        shell, self._shell = self._shell, None
        if shell is None:
            return
        if shell.reader is not None:
            shell.reader.cancel()
        with contextlib.suppress(Exception):
            shell.process.close()
        shell.link.channels.release()

    def abandon(self) -> None:
        """Close the connection without waiting for the server to acknowledge it."""
        self._forget_shell()
        link, self._link = self._link, None
        if link is not None:
            link.lost = True
            link.close()

    def _forget_shell(self) -> None:
        shell, self._shell = self._shell, None
        if shell is not None and shell.reader is not None:
            shell.reader.cancel()

    async def close(self) -> None:
        """Close the connection (the next command opens a new one)."""
        await self._drop_shell()
        link, self._link = self._link, None
        if link is None:
            return
        link.lost = True
        link.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await link.conn.wait_closed()

    # -- connecting ---------------------------------------------------------------

    async def _connection(self) -> _Link:
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
                    f"waiting {self.next_attempt_at - now:.1f} s before retrying: "
                    f"{self.last_error}",
                    self.next_attempt_at,
                )
            try:
                # The timeout starts once a connect slot is ours: queueing behind other
                # nodes is not this node's fault.
                async with (
                    self._host_limiter,
                    self._limiter,
                    asyncio.timeout(self.options.connect_timeout),
                ):
                    link = await self._open()
            except HostKeyRejected as exc:
                self._failed(exc.health, exc.message)
                raise
            except TimeoutError as exc:
                limit = self.options.connect_timeout
                self._failed(NodeHealth.TIMEOUT, f"connect timed out after {limit:g} s")
                raise SshError(self.name, NodeHealth.TIMEOUT, self.last_error) from exc
            except asyncssh.PermissionDenied as exc:
                self._failed(NodeHealth.AUTH_FAILED, _describe(exc))
                raise SshError(self.name, NodeHealth.AUTH_FAILED, self.last_error) from exc
            except asyncssh.KeyImportError as exc:
                self._failed(NodeHealth.AUTH_FAILED, _describe(exc))
                raise SshError(self.name, NodeHealth.AUTH_FAILED, self.last_error) from exc
            except Exception as exc:  # DNS, refused, reset, protocol: the node is not reachable
                self._failed(NodeHealth.UNREACHABLE, _describe(exc))
                raise SshError(self.name, NodeHealth.UNREACHABLE, self.last_error) from exc
            self._link = link
            self.connects += 1
            self.failures = 0
            self.next_attempt_at = 0.0
            self.offered_key = None
            self._set(NodeHealth.OK)
            return link

    async def _open(self) -> _Link:
        target = self.target
        key_path = target.key_path
        if key_path and not Path(key_path).expanduser().is_file():
            raise asyncssh.KeyImportError(f"key file not found: {key_path}")
        hops = parse_jump(target.jump) if target.jump else []
        jumps: list[asyncssh.SSHClientConnection] = []
        try:
            tunnel: asyncssh.SSHClientConnection | None = None
            for hop in hops:
                tunnel, _ = await self._connect_one(hop.host, hop.port, hop.user, None, tunnel)
                jumps.append(tunnel)
            conn, client = await self._connect_one(
                target.host, target.port, target.user, key_path, tunnel
            )
        except BaseException:
            for jump in reversed(jumps):
                jump.close()
            raise
        channels = asyncio.Semaphore(self.options.max_channels_per_connection)
        return _Link(conn, client, channels, jumps)

    async def _connect_one(
        self,
        host: str,
        port: int | None,
        user: str | None,
        key_path: str | None,
        tunnel: asyncssh.SSHClientConnection | None,
    ) -> tuple[asyncssh.SSHClientConnection, _Client]:
        opts = self.options
        client = _Client(self._on_lost)
        kwargs: dict[str, Any] = {
            "known_hosts": hostkeys.known_hosts_matcher(opts.known_hosts),
            "keepalive_interval": opts.keepalive_interval,
            "keepalive_count_max": opts.keepalive_count_max,
            "connect_timeout": opts.connect_timeout,
        }
        if opts.preferred_ciphers:
            # "^" puts these first and keeps asyncssh's defaults after them.
            kwargs["encryption_algs"] = "^" + ",".join(opts.preferred_ciphers)
        if port is not None:
            kwargs["port"] = port
        if user:
            kwargs["username"] = user
        if tunnel is not None:
            kwargs["tunnel"] = tunnel
        if not isinstance(opts.config, _Default):
            kwargs["config"] = [str(p) for p in opts.config]
        if not isinstance(opts.agent_path, _Default):
            kwargs["agent_path"] = opts.agent_path
        keys: list[str | Path | asyncssh.SSHKey] = []
        if key_path:
            keys.append(str(Path(key_path).expanduser()))
        if opts.client_keys is not None:
            keys += [str(k) if isinstance(k, Path) else k for k in opts.client_keys]
        if keys:
            kwargs["client_keys"] = keys
        try:
            conn = await asyncssh.connect(host, client_factory=lambda: client, **kwargs)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(client, host, port, exc) from exc
        return conn, client

    def _host_key_error(
        self, client: _Client, host: str, port: int | None, exc: Exception
    ) -> Exception:
        if client.offered is None:
            # Refused before our callback ran (e.g. a revoked key): nothing to offer the user.
            return exc
        seen_host, addr, seen_port, key = client.offered
        status = hostkeys.classify(seen_host, seen_port, key, self.options.known_hosts, addr=addr)
        offered = OfferedHostKey(seen_host, seen_port, key, status, addr)
        self.offered_key = offered
        where = hostkeys.host_pattern(seen_host, seen_port)
        if status is hostkeys.HostKeyStatus.UNKNOWN:
            return HostKeyRejected(
                self.name,
                NodeHealth.UNTRUSTED,
                f"host key of {where} is not known yet ({offered.fingerprint}); "
                "accept it once you have checked the fingerprint",
                offered,
            )
        return HostKeyRejected(
            self.name,
            NodeHealth.HOSTKEY_CHANGED,
            f"HOST KEY OF {where} HAS CHANGED: it now presents {offered.fingerprint}, "
            "which differs from the key on file. Refused (possible man-in-the-middle, "
            "or the node was reinstalled).",
            offered,
        )

    def _failed(self, health: NodeHealth, message: str) -> None:
        self.failures += 1
        opts = self.options
        ceiling = min(opts.backoff_cap, opts.backoff_base * 2 ** (self.failures - 1))
        self.next_attempt_at = self._clock() + self._random() * ceiling  # full jitter
        self._set(health, message)

    # -- the open connection ------------------------------------------------------

    def _on_lost(self, client: _Client, exc: Exception | None) -> None:
        link = self._link
        if link is not None and link.client is client:
            link.lost = True
            self._link = None
            if exc is not None:
                self._set(NodeHealth.UNREACHABLE, f"connection lost: {_describe(exc)}")

    def _is_lost(self, link: _Link) -> bool:
        return link.lost or link.conn.is_closed()

    def _dropped(self, link: _Link, exc: BaseException | None) -> SshError:
        if self._is_lost(link):
            link.lost = True
            if self._link is link:
                self._link = None
            reason = _describe(exc) if exc else "connection closed"
            self._set(NodeHealth.UNREACHABLE, f"connection lost during command: {reason}")
            return ConnectionDropped(self.name, NodeHealth.UNREACHABLE, self.last_error)
        # The connection is fine; only this channel failed (e.g. the server refused it).
        return SshError(self.name, self.health, f"channel failed: {_describe(exc or '')}")

    async def _open_process(self, link: _Link, cmd: str) -> asyncssh.SSHClientProcess[str]:
        delays = iter(_CHANNEL_RETRY_DELAYS)
        while True:
            try:
                return await link.conn.create_process(
                    cmd, stdin=asyncssh.DEVNULL, encoding="utf-8", errors="replace"
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

    async def _close_process(self, process: asyncssh.SSHClientProcess[str]) -> None:
        # Release the channel slot only once the server has let go of the channel too,
        # so the bound below MaxSessions holds on the server's side.
        process.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await process.wait_closed()

    def _set(self, health: NodeHealth, message: str = "") -> None:
        self.health = health
        self.last_error = message


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


class _Tail:
    """Reads a stream to its end in the background, keeping only its last few KB."""

    def __init__(self, reader: asyncssh.SSHReader[str]) -> None:
        self.text = ""
        self._task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncssh.SSHReader[str]) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            while chunk := await reader.read(4096):
                self.text = (self.text + chunk)[-_STDERR_KEEP:]

    async def done(self) -> None:
        await self._task

    def cancel(self) -> None:
        self._task.cancel()


async def offered_host_key(session: NodeSession) -> OfferedHostKey | None:
    """The host key a node offers that we do not trust yet, or None when its key is
    trusted (and a login works). Raises SshError for any other failure."""
    try:
        await session.run("true")
    except HostKeyRejected as exc:
        return exc.offered
    return None


class SshPool:
    """The NodeSessions of a fleet, sharing one bound on concurrent connects."""

    def __init__(
        self,
        options: SshOptions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.options = options or SshOptions()
        self._clock = clock
        self._random = random
        self.connect_limiter = asyncio.Semaphore(self.options.max_concurrent_connects)
        self._host_limiters: dict[tuple[str, int | None], asyncio.Semaphore] = {}
        self.sessions: dict[str, NodeSession] = {}

    def host_limiter(self, target: SshTarget) -> asyncio.Semaphore:
        """The connect bound of the first server a connect to target reaches."""
        host, port = target.host, target.port
        if target.jump:
            try:
                first = parse_jump(target.jump)[0]
                host, port = first.host, first.port
            except ValueError:
                pass  # the connect itself reports the bad jump spec
        key = (host, port or 22)
        limiter = self._host_limiters.get(key)
        if limiter is None:
            limiter = asyncio.Semaphore(self.options.max_connects_per_host)
            self._host_limiters[key] = limiter
        return limiter

    def add(self, node: Node) -> NodeSession:
        """Add a node, or return its session; a node whose login changed gets a fresh one."""
        session = self.sessions.get(node.name)
        if session is not None and session.target == node.ssh:
            session.node = node
            return session
        if session is not None:
            session.abandon()
        session = NodeSession(
            node,
            self.options,
            connect_limiter=self.connect_limiter,
            host_limiter=self.host_limiter(node.ssh),
            clock=self._clock,
            random=self._random,
        )
        self.sessions[node.name] = session
        return session

    def monotonic(self) -> float:
        """The pool's clock, in which BackingOff.retry_at is given."""
        return self._clock()

    def __getitem__(self, name: str) -> NodeSession:
        return self.sessions[name]

    def __contains__(self, name: object) -> bool:
        return name in self.sessions

    async def remove(self, name: str) -> None:
        session = self.sessions.pop(name, None)
        if session is not None:
            await session.close()

    async def run(self, name: str, cmd: str, timeout: float | None = None) -> CommandResult:
        return await self.sessions[name].run(cmd, timeout)

    async def run_many(
        self, names: Iterable[str], cmd: str, timeout: float | None = None
    ) -> dict[str, CommandResult | Exception]:
        """Run cmd on every named node at once; a node's failure is its value, not a raise."""
        names = list(dict.fromkeys(names))
        results = await asyncio.gather(
            *(self.run(name, cmd, timeout) for name in names), return_exceptions=True
        )
        out: dict[str, CommandResult | Exception] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation and the like are not a node's fault
            out[name] = result
        return out

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()))
