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
import errno
import os
import random as _random
import re
import socket
import stat
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final

import asyncssh

from leases.core.errors import InputError
from leases.core.models import Node, NodeHealth, SshTarget
from leases.core.textsafe import visible
from leases.ssh import config as sshconfig
from leases.ssh import hostkeys
from leases.ssh import login as sshcmd


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
# The largest private key or certificate file read (a 16k-bit RSA key is ~13 KB).
MAX_KEY_FILE_BYTES = 64 * 1024
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
    # Nodes whose last connect failed get their own, smaller budget: live nodes never
    # queue behind dead ones.
    max_concurrent_retries: int = 8
    # A connect with no result after this long gives its fleet slot to the next node and
    # waits among at most max_stalled_connects others (a blackholed node costs no CPU).
    stall_after: float = 1.5
    max_stalled_connects: int = 512
    max_channels_per_connection: int = 8
    # A command that prints more than max_output characters, or a line longer than
    # max_line, is stopped (its channel closed): the node is `garbage` (OutputTooLarge).
    # A stream() has no total (it runs for hours) but the same line bound.
    max_output: int = DEFAULT_MAX_OUTPUT
    max_line: int = DEFAULT_MAX_LINE
    # Put first, ahead of asyncssh's defaults: aes128-gcm costs ~1/1.6 of chacha20 here.
    preferred_ciphers: tuple[str, ...] = ("aes128-gcm@openssh.com",)
    # The first file is zuka's own, where accepted keys go (see leases.ssh.hostkeys).
    known_hosts: tuple[Path, ...] = field(default_factory=hostkeys.default_known_hosts_paths)
    # None: the node's key_path plus whatever ~/.ssh/config and the agent offer.
    client_keys: Sequence[str | Path | asyncssh.SSHKey] | None = None
    agent_path: str | _Default | None = DEFAULT  # None disables the agent
    # The ssh config files zuka resolves a node through (see leases.ssh.config); DEFAULT:
    # ~/.ssh/config and /etc/ssh/ssh_config; [] reads none. asyncssh itself never reads one.
    config: Sequence[str | Path] | _Default = DEFAULT

    @property
    def config_paths(self) -> tuple[Path, ...]:
        if isinstance(self.config, _Default):
            return sshconfig.default_config_paths()
        return tuple(Path(p) for p in self.config)

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
    stderr: _Tail  # cleared before each command
    answered: bool = False  # has it ever run a command to its end marker?


class StreamExited(Exception):
    """A streamed command ended with a non-zero or missing exit status."""

    def __init__(self, node: str, result: CommandResult) -> None:
        super().__init__(f"{node}: stream exited with status {result.exit_status}")
        self.node = node
        self.result = result


class TargetRefused(SshError):
    """zuka will not connect the way the ledger or ~/.ssh/config asks (a ProxyCommand, a
    value that is not a plain host or user name, a key file it will not read)."""


@dataclass(frozen=True)
class Endpoint:
    """One server a connect reaches, a jump host or the node, as zuka resolved it."""

    host: str
    port: int | None = None
    user: str | None = None
    key_files: tuple[str, ...] = ()  # IdentityFile lines of ~/.ssh/config; missing ones skipped
    identities_only: bool = False

    def __str__(self) -> str:
        where = hostkeys.host_pattern(self.host, self.port)
        return f"{self.user}@{where}" if self.user else where


@dataclass(frozen=True)
class Route:
    node: Endpoint
    hops: tuple[Endpoint, ...] = ()


def _checked(what: str, value: str, check: Callable[[str, str], str] = sshcmd.check_host) -> str:
    """A value from the ledger or the ssh config, through the ledger's own validator."""
    try:
        return check(value, what)
    except InputError as exc:
        raise sshconfig.ConfigRefused(f"{what} {exc.value!r} {exc.reason}") from None


def _endpoint(
    host: str, port: int | None, user: str | None, conf: sshconfig.HostConfig
) -> Endpoint:
    if conf.refusals:
        raise sshconfig.ConfigRefused(f"ssh config for {host}: " + "; ".join(conf.refusals))
    user = user or conf.user
    return Endpoint(
        _checked("HostName", conf.hostname or host),
        port if port is not None else conf.port,
        _checked("User", user, sshcmd.check_user) if user else None,
        conf.identity_files,
        conf.identities_only,
    )


def resolve_route(target: SshTarget, config_paths: Sequence[Path]) -> Route:
    """Where a connect to target goes, through the ssh config as zuka reads it (see
    leases.ssh.config). The ledger's port, user and jump win over the config's, as ssh's
    command-line options do. Raises sshconfig.ConfigRefused."""
    conf = sshconfig.host_config(_checked("host", target.host), config_paths)
    node = _endpoint(target.host, target.port, target.user, conf)
    jump = target.jump or conf.proxy_jump
    hops: list[Endpoint] = []
    if jump and jump.lower() != "none":
        parsed = _hops(jump)
        for hop in parsed:
            hop_conf = sshconfig.host_config(_checked("jump host", hop.host), config_paths)
            own = hop_conf.proxy_jump
            # `Host * / ProxyJump bastion` matches the bastion too: ssh would loop on it.
            if own and own.lower() != "none" and not _names_itself(own, hop.host):
                raise sshconfig.ConfigRefused(
                    f"jump host {hop.host} has a ProxyJump of its own in the ssh config; "
                    "zuka does not chain those: give the whole chain as the node's jump"
                )
            hops.append(_endpoint(hop.host, hop.port, hop.user, hop_conf))
    return Route(node, tuple(hops))


def _hops(spec: str) -> list[sshcmd.JumpHop]:
    try:
        return sshcmd.parse_jump_hops(spec, "ProxyJump")
    except InputError as exc:
        raise sshconfig.ConfigRefused(f"ProxyJump {exc.value!r}: {exc.reason}") from None


def _names_itself(spec: str, host: str) -> bool:
    try:
        return all(h.host == host for h in _hops(spec))
    except sshconfig.ConfigRefused:
        return False


ClientKey = asyncssh.SSHKey | tuple[asyncssh.SSHKey, asyncssh.SSHCertificate]


class KeyFileRefused(Exception):
    """A key file zuka will not read: missing, not a regular file, or too large."""


def read_key_file(path: Path, limit: int = MAX_KEY_FILE_BYTES) -> bytes:
    """A key file's bytes, never more than limit: a regular file only (not /dev/zero, not a
    FIFO, which O_NONBLOCK keeps from blocking the open). Blocking: call it off the loop."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise KeyFileRefused(f"key file not found: {path}") from None
    except OSError as exc:
        raise KeyFileRefused(f"key file {path} cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileRefused(f"key file {path} is not a regular file")
        if info.st_size > limit:
            raise KeyFileRefused(f"key file {path} is larger than {limit} bytes")
        data = os.read(fd, limit + 1)
        if len(data) > limit:  # grew after the stat
            raise KeyFileRefused(f"key file {path} is larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


def load_client_key(path: str) -> ClientKey:
    """A private key (and its -cert.pub beside it, if any), read size-capped. Blocking.
    Raises KeyFileRefused, or asyncssh.KeyImportError for a file that is not a key."""
    file = Path(path).expanduser()
    key = asyncssh.import_private_key(read_key_file(file))
    cert_file = file.with_name(file.name + "-cert.pub")
    if cert_file.exists():
        try:
            return key, asyncssh.import_certificate(read_key_file(cert_file))
        except (KeyFileRefused, asyncssh.KeyImportError):
            pass  # ssh too goes on with the bare key
    return key


def _load_keys(required: str | None, optional: Sequence[str]) -> list[ClientKey]:
    """The ledger's key (must load) and the config's IdentityFiles (skipped when missing
    or encrypted: the agent may hold them). Blocking: call it off the loop."""
    keys = [load_client_key(required)] if required else []
    for path in optional:
        with contextlib.suppress(KeyFileRefused, asyncssh.KeyImportError):
            keys.append(load_client_key(path))
    return keys


class _Budget:
    """A pool's connect bounds: per server (its MaxStartups), and fleet-wide in lanes.

    A node that has not failed takes a fresh slot; one whose last connect failed a retry
    slot, so dead nodes never queue ahead of live ones. A connect still pending after
    stall_after hands its fleet slot on and waits among the stalled, so 300 blackholed
    nodes cannot hold every slot for a whole connect timeout.
    """

    def __init__(self, options: SshOptions) -> None:
        self.options = options
        self.fresh = asyncio.Semaphore(options.max_concurrent_connects)
        self.retry = asyncio.Semaphore(options.max_concurrent_retries)
        self.stalled = 0
        self._hosts: dict[tuple[object, ...], asyncio.Semaphore] = {}

    def host(self, key: tuple[object, ...]) -> asyncio.Semaphore:
        limiter = self._hosts.get(key)
        if limiter is None:
            limiter = asyncio.Semaphore(self.options.max_connects_per_host)
            self._hosts[key] = limiter
        return limiter

    async def run(
        self, host_key: tuple[object, ...], retrying: bool, connect: Callable[[], Any]
    ) -> Any:
        """Await connect() within the bounds; the connect timeout starts once the slots are
        ours (queueing behind other nodes is not this node's fault)."""
        lane = self.retry if retrying else self.fresh
        async with self.host(host_key):
            await lane.acquire()
            demoted = False

            def demote() -> None:
                nonlocal demoted
                if self.stalled < self.options.max_stalled_connects:
                    self.stalled += 1
                    demoted = True
                    lane.release()

            timer = asyncio.get_running_loop().call_later(self.options.stall_after, demote)
            try:
                async with asyncio.timeout(self.options.connect_timeout):
                    return await connect()
            finally:
                timer.cancel()
                if demoted:
                    self.stalled -= 1
                else:
                    lane.release()


class _HopFailed(Exception):
    """A hop could not be reached, its message saying which (a jump host's is raised into
    every node behind it)."""

    def __init__(
        self, health: NodeHealth, message: str, offered: OfferedHostKey | None = None
    ) -> None:
        super().__init__(message)
        self.health = health
        self.message = message
        self.offered = offered


@dataclass(eq=False)
class _Jump:
    """One shared connection to a jump host, reached through the hops before it."""

    hop: Endpoint
    conn: asyncssh.SSHClientConnection | None = None
    client: _Client | None = None
    refs: int = 0
    failures: int = 0
    next_attempt_at: float = 0.0
    fault: _HopFailed | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


Chain = tuple[Endpoint, ...]
# Connects one endpoint through a tunnel; raises as NodeSession._connect_one does.
HopConnect = Callable[
    [Endpoint, asyncssh.SSHClientConnection | None],
    Any,
]


class JumpHosts:
    """One connection per jump host (user, host, port and the chain before it) for every
    node behind it: reference counted, reconnected when it drops, backed off on its own so
    that 40 nodes behind a dead jump host fail after one attempt, not 40 timeouts."""

    def __init__(
        self,
        options: SshOptions,
        budget: _Budget,
        *,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.options = options
        self._budget = budget
        self._clock = clock
        self._random = random
        self._jumps: dict[Chain, _Jump] = {}
        self.connects = 0  # jump connections opened, for tests and benchmarks

    def open_count(self) -> int:
        return sum(1 for j in self._jumps.values() if j.conn is not None)

    async def acquire(self, chain: Chain, connect: HopConnect) -> asyncssh.SSHClientConnection:
        """The connection to the last hop of chain, opening what is not open; counted as
        one more user of every hop until release(chain). Raises _HopFailed."""
        tunnel: asyncssh.SSHClientConnection | None = None
        for i in range(len(chain)):
            tunnel = await self._open(chain[: i + 1], connect, tunnel)
        for i in range(len(chain)):
            self._jumps[chain[: i + 1]].refs += 1
        assert tunnel is not None
        return tunnel

    def release(self, chain: Chain) -> None:
        for i in range(len(chain)):
            jump = self._jumps.get(chain[: i + 1])
            if jump is None:
                continue
            jump.refs -= 1
            if jump.refs <= 0:
                jump.refs = 0
                self._close(jump)

    def retry_now(self, chain: Chain) -> None:
        for i in range(len(chain)):
            jump = self._jumps.get(chain[: i + 1])
            if jump is not None:
                jump.next_attempt_at = 0.0

    def close_all(self) -> None:
        for jump in reversed(list(self._jumps.values())):
            self._close(jump)

    def _close(self, jump: _Jump) -> None:
        conn, jump.conn, jump.client = jump.conn, None, None
        if conn is not None:
            conn.close()

    async def _open(
        self, chain: Chain, connect: HopConnect, tunnel: asyncssh.SSHClientConnection | None
    ) -> asyncssh.SSHClientConnection:
        jump = self._jumps.get(chain)
        if jump is None:
            jump = self._jumps[chain] = _Jump(chain[-1])
        async with jump.lock:
            if jump.conn is not None and not jump.conn.is_closed():
                return jump.conn
            now = self._clock()
            if now < jump.next_attempt_at and jump.fault is not None:
                fault = jump.fault
                wait = jump.next_attempt_at - now
                raise _HopFailed(
                    fault.health, f"{fault.message} (retrying in {wait:.1f} s)", fault.offered
                )
            hop = chain[-1]
            conn: asyncssh.SSHClientConnection
            try:
                conn, client = await self._budget.run(
                    ("jump", *chain), jump.failures > 0, lambda: connect(hop, tunnel)
                )
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    raise
                health, message, offered = _classify(exc, self.options.connect_timeout)
                jump.failures += 1
                jump.next_attempt_at = _retry_at(
                    self.options, jump.failures, self._clock, self._random
                )
                jump.fault = _HopFailed(health, f"jump host {_hop_words(hop)}: {message}", offered)
                raise jump.fault from exc
            jump.conn, jump.client = conn, client
            jump.failures, jump.fault, jump.next_attempt_at = 0, None, 0.0
            self.connects += 1
            return conn


async def kept_cancel(
    connecting: Awaitable[asyncssh.SSHClientConnection],
) -> asyncssh.SSHClientConnection:
    """Await a connect without losing a cancel. asyncssh.connect runs in asyncio.wait_for,
    which on Python 3.11 returns the connection when the task is cancelled in the loop turn
    the connect completes: the cancel was lost, and a poller told to stop went on streaming
    for ever (`zuka demo` hung on SIGTERM under load). The connection is closed and the
    cancel raised again."""
    task = asyncio.current_task()
    asked = task.cancelling() if task is not None else 0
    conn = await connecting
    if task is not None and task.cancelling() > asked:
        conn.close()
        raise asyncio.CancelledError
    return conn


def _retry_at(
    options: SshOptions,
    failures: int,
    clock: Callable[[], float],
    random: Callable[[], float],
) -> float:
    """When a server that failed `failures` times in a row may be tried again:
    exponential backoff with full jitter, capped."""
    ceiling = min(options.backoff_cap, options.backoff_base * 2.0 ** (failures - 1))
    return clock() + random() * ceiling


def _classify(
    exc: Exception, connect_timeout: float
) -> tuple[NodeHealth, str, OfferedHostKey | None]:
    """What a failed connect means for the node: its health, words, and any refused key."""
    if isinstance(exc, HostKeyRejected):
        return exc.health, exc.message, exc.offered
    if isinstance(exc, _HopFailed):
        return exc.health, exc.message, exc.offered
    if isinstance(exc, sshconfig.ConfigRefused):
        return NodeHealth.REFUSED, f"refused by zuka, not connecting: {exc}", None
    if isinstance(exc, KeyFileRefused):
        return NodeHealth.AUTH_FAILED, str(exc), None
    if isinstance(exc, TimeoutError):
        return NodeHealth.TIMEOUT, f"no answer: connect timed out after {connect_timeout:g} s", None
    if isinstance(exc, asyncssh.PermissionDenied):
        # asyncssh's own words when every key was refused, else the server's (shown).
        reason = str(exc.reason)
        if not reason or reason.startswith("Permission denied"):
            reason = "the server accepted none of our keys"
        return NodeHealth.AUTH_FAILED, f"authentication failed: {visible(reason, 200)}", None
    if isinstance(exc, asyncssh.KeyImportError):
        return NodeHealth.AUTH_FAILED, f"cannot use the key: {visible(str(exc), 200)}", None
    # DNS, refused, reset, protocol: the server is not reachable
    return NodeHealth.UNREACHABLE, _connect_words(exc), None


_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset by the server",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "no answer: connect timed out",
}


def _connect_words(exc: BaseException) -> str:
    """Why a connect failed, in words, for a fault detail (not an exception's repr)."""
    if isinstance(exc, socket.gaierror):
        if exc.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):
            return "host name could not be looked up: DNS is not answering"
        return "host name not found (DNS)"
    if isinstance(exc, asyncssh.ChannelOpenError):
        # The jump host could not reach the node. OpenSSH says "Connection refused";
        # asyncssh passes on Python's "[Errno 111] Connect call failed (...)".
        reason = visible(exc.reason, 200)
        code = re.match(r"\[Errno (\d+)\]", reason)
        if code and int(code[1]) in _ERRNO_WORDS:
            reason = _ERRNO_WORDS[int(code[1])]
        return f"the jump host could not reach it: {reason[:1].lower() + reason[1:]}"
    if isinstance(exc, asyncssh.ConnectionLost):
        return "connection closed by the server during the SSH handshake"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"the server ended the SSH handshake: {visible(exc.reason, 200)}"
    if isinstance(exc, OSError) and exc.errno in _ERRNO_WORDS:
        return _ERRNO_WORDS[exc.errno]
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return _describe(exc)


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
    """An open connection to the node, the jump hosts it goes through, its channel bound."""

    conn: asyncssh.SSHClientConnection
    client: _Client
    channels: asyncio.Semaphore
    release_jumps: Callable[[], None] = lambda: None
    lost: bool = False
    _released: bool = False

    def close(self, *, release: bool = True) -> None:
        self.conn.close()
        if release:
            self.release()

    def release(self) -> None:
        if not self._released:  # once per link: a shared jump host counts its users
            self._released = True
            self.release_jumps()


def _ignore_lost(client: _Client, exc: Exception | None) -> None:
    """A jump host's link: JumpHosts notices a closed one when it is next needed."""


def _hop_words(end: Endpoint) -> str:
    """A hop as a fault detail names it: user@host:port, the port always shown."""
    host = f"[{end.host}]" if ":" in end.host else end.host
    where = f"{host}:{end.port or hostkeys.DEFAULT_PORT}"
    return f"{end.user}@{where}" if end.user else where


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
        budget: _Budget | None = None,
        jumps: JumpHosts | None = None,
        clock: Callable[[], float] = time.monotonic,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self.node = node
        self.options = options or SshOptions()
        # A pool shares these between its sessions; a session alone has its own.
        self._budget = budget or _Budget(self.options)
        self._jumps = jumps or JumpHosts(self.options, self._budget, clock=clock, random=random)
        self._route: Route | None = None
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
        """Forget the backoff (its jump hosts' too), e.g. after the user trusted a key."""
        self.next_attempt_at = 0.0
        if self._route is not None:
            self._jumps.retry_now(self._route.hops)

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
            return CommandResult(status, "".join(out), shell.stderr.text)

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
        shell = _Shell(link, process, _Tail(process.stderr))
        self._shell = shell
        return shell

    async def _drop_shell(self) -> None:
        shell, self._shell = self._shell, None
        if shell is None:
            return
        shell.stderr.cancel()
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
        if shell is not None:
            shell.stderr.cancel()

    async def close(self) -> None:
        """Close the connection (the next command opens a new one)."""
        await self._drop_shell()
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
                link = await self._open()
            except Exception as exc:
                health, message, offered = _classify(exc, self.options.connect_timeout)
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

    async def _open(self) -> _Link:
        target = self.target
        paths = self.options.config_paths
        # Files are read off the event loop, each size-capped (leases.ssh.config, read_key_file).
        route = self._route = await asyncio.to_thread(resolve_route, target, paths)
        node = route.node
        node_keys = await asyncio.to_thread(_load_keys, target.key_path, node.key_files)
        tunnel: asyncssh.SSHClientConnection | None = None
        if route.hops:
            tunnel = await self._jumps.acquire(route.hops, self._connect_hop)
        try:
            conn, client = await self._budget.run(
                ("node", *route.hops, node.host, node.port or hostkeys.DEFAULT_PORT),
                self.failures > 0,
                lambda: self._connect_one(node, node_keys, tunnel),
            )
        except Exception as exc:
            if route.hops:
                self._jumps.release(route.hops)
            health, message, _ = _classify(exc, self.options.connect_timeout)
            where = f"node {_hop_words(node)}"
            if route.hops:
                where += f" (via jump host {_hop_words(route.hops[-1])})"
            if isinstance(exc, HostKeyRejected):
                raise HostKeyRejected(
                    self.name, health, f"{where}: {message}", exc.offered
                ) from exc
            raise _HopFailed(health, f"{where}: {message}") from exc
        except BaseException:
            if route.hops:
                self._jumps.release(route.hops)
            raise
        channels = asyncio.Semaphore(self.options.max_channels_per_connection)
        hops = route.hops
        release = (lambda: self._jumps.release(hops)) if hops else (lambda: None)
        return _Link(conn, client, channels, release)

    async def _connect_hop(
        self, hop: Endpoint, tunnel: asyncssh.SSHClientConnection | None
    ) -> tuple[asyncssh.SSHClientConnection, _Client]:
        keys = await asyncio.to_thread(_load_keys, None, hop.key_files)
        return await self._connect_one(hop, keys, tunnel, on_lost=_ignore_lost)

    async def _connect_one(
        self,
        end: Endpoint,
        keys: list[ClientKey],
        tunnel: asyncssh.SSHClientConnection | None,
        *,
        on_lost: Callable[[_Client, Exception | None], None] | None = None,
    ) -> tuple[asyncssh.SSHClientConnection, _Client]:
        opts = self.options
        client = _Client(on_lost or self._on_lost)
        kwargs: dict[str, Any] = {
            "known_hosts": hostkeys.known_hosts_matcher(opts.known_hosts),
            "keepalive_interval": opts.keepalive_interval,
            "keepalive_count_max": opts.keepalive_count_max,
            "connect_timeout": opts.connect_timeout,
            # zuka resolved the config itself (leases.ssh.config): asyncssh must not read
            # one, or it would run a ProxyCommand it finds there.
            "config": [],
        }
        if opts.preferred_ciphers:
            # "^" puts these first and keeps asyncssh's defaults after them.
            kwargs["encryption_algs"] = "^" + ",".join(opts.preferred_ciphers)
        if end.port is not None:
            kwargs["port"] = end.port
        if end.user:
            kwargs["username"] = end.user
        if tunnel is not None:
            kwargs["tunnel"] = tunnel
        if not isinstance(opts.agent_path, _Default):
            kwargs["agent_path"] = opts.agent_path
        all_keys: list[Any] = list(keys)
        if opts.client_keys is not None:
            all_keys += [str(k) if isinstance(k, Path) else k for k in opts.client_keys]
        if all_keys:
            kwargs["client_keys"] = all_keys
            if end.identities_only:
                kwargs["agent_path"] = None
        try:
            conn = await kept_cancel(
                asyncssh.connect(end.host, client_factory=lambda: client, **kwargs)
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise self._host_key_error(client, exc) from exc
        return conn, client

    def _host_key_error(self, client: _Client, exc: Exception) -> Exception:
        if client.offered is None:
            # Refused before our callback ran (e.g. a revoked key): nothing to offer the user.
            return exc
        seen_host, addr, seen_port, key = client.offered
        status = hostkeys.classify(seen_host, seen_port, key, self.options.known_hosts, addr=addr)
        offered = OfferedHostKey(seen_host, seen_port, key, status, addr)
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
        self.next_attempt_at = _retry_at(self.options, self.failures, self._clock, self._random)
        self._set(health, message)

    # -- the open connection ------------------------------------------------------

    def _on_lost(self, client: _Client, exc: Exception | None) -> None:
        link = self._link
        if link is not None and link.client is client:
            link.lost = True
            self._link = None
            link.close()  # lets go of its jump hosts
            if exc is not None:
                self._set(NodeHealth.UNREACHABLE, f"connection lost: {_describe(exc)}")

    def _is_lost(self, link: _Link) -> bool:
        return link.lost or link.conn.is_closed()

    def _dropped(self, link: _Link, exc: BaseException | None) -> SshError:
        if self._is_lost(link):
            link.lost = True
            if self._link is link:
                self._link = None
            link.close()
            reason = _describe(exc) if exc else "connection closed"
            self._set(NodeHealth.UNREACHABLE, f"connection lost during command: {reason}")
            return ConnectionDropped(self.name, NodeHealth.UNREACHABLE, self.last_error)
        # The connection is fine; only this channel failed (e.g. the server refused it).
        reason = _describe(exc) if exc else "it closed without an exit status"
        return SshError(self.name, self.health, f"channel failed: {reason}")

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
    """Reads a stream to its end in the background, keeping only its last few KB (a node
    may print stderr without end; the end of it says why a command failed)."""

    def __init__(self, reader: asyncssh.SSHReader[str]) -> None:
        self.text = ""
        self._task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncssh.SSHReader[str]) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            while chunk := await reader.read(_CHUNK):
                self.text = (self.text + chunk[-_STDERR_KEEP:])[-_STDERR_KEEP:]

    def clear(self) -> None:
        self.text = ""

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
    """The NodeSessions of a fleet, sharing connect bounds and jump host connections."""

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
        self.budget = _Budget(self.options)
        self.jumps = JumpHosts(self.options, self.budget, clock=clock, random=random)
        self.sessions: dict[str, NodeSession] = {}

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
            budget=self.budget,
            jumps=self.jumps,
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
        self.jumps.close_all()
