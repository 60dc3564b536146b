"""An interactive session on a node (`zuka ssh`, the dashboard's i and I): what the remote
side runs, made only of validated words, and the pump between a local terminal and a PTY
channel of zuka's own connection (leases.ssh.session.NodeSession.terminal: the same route,
jump hosts, identity and pinned host keys that polling uses).

The terminal itself (raw mode, its size, restoring and resetting it) is the edge's, in
leases.ssh.interactive_tty; here it is a Terminal: two file descriptors, a size, a raw()."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import asyncssh

from leases.core.errors import InputError
from leases.core.textsafe import visible
from leases.ssh.speech import _

TMUX_DEFAULT = "zuka"
# A tmux session name zuka sends: tmux itself refuses ':' and '.' changes meaning in a
# target, so the set is small on purpose; quoted all the same.
_TMUX_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# What $TERM may be to be sent as the PTY's terminal type (a terminfo name).
_TERM_TYPE = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
FALLBACK_TERM = "xterm-256color"
# How often the terminal's size is looked at when no SIGWINCH can be had (a thread).
RESIZE_POLL_S = 0.25
READ_CHUNK = 65536
# Exit status of a command the shell could not find.
NOT_FOUND = 127

# Written after a session, before the dashboard or the shell prompt comes back: whatever
# the remote program left on is turned off. Kitty keyboard modes popped (several: a program
# may push more than one), modifyOtherKeys off, focus events and every mouse mode off,
# bracketed paste and synchronized output off, every alternate screen left, normal cursor
# keys and keypad, G0 back to ASCII and shifted in, autowrap on, insert and origin modes
# off, no reverse video, the default cursor style, shown; no origin mode and no scroll
# region (the cursor saved around both: resetting either moves it home, where the next
# line would overwrite what the session printed last); default colours.
RESET = (
    b"\x1b[<u" * 8
    + b"\x1b[>4;0m"
    + b"\x1b[?1004l"
    + b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l"
    + b"\x1b[?2004l\x1b[?2026l"
    + b"\x1b[?1049l\x1b[?1047l\x1b[?47l"
    + b"\x1b[?1l\x1b>"
    + b"\x1b(B\x0f"
    + b"\x1b[?7h\x1b[4l\x1b[?5l"
    + b"\x1b[0 q\x1b[?25h"
    + b"\x1b7\x1b[?6l\x1b[r\x1b8"
    + b"\x1b[0m"
)


def tmux_name(name: str | None) -> str:
    """The tmux session name to attach or create: TMUX_DEFAULT when none is given.
    Raises InputError for anything outside [A-Za-z0-9_.-]{1,64}."""
    if name is None:
        return TMUX_DEFAULT
    if not _TMUX_NAME.fullmatch(name):
        raise InputError(
            "tmux session", visible(name, 80), _("use 1 to 64 of A-Z a-z 0-9 _ . - (no spaces)")
        )
    return name


def tmux_command(name: str) -> str:
    """Attach the tmux session `name` on the node, creating it when there is none."""
    return f"tmux new-session -A -s {shlex.quote(tmux_name(name))}"


def remote_command(tmux: str | None, words: list[str] | None) -> str | None:
    """What the node runs: its login shell (None), tmux, or the user's own command line,
    joined with spaces as ssh joins it (the user's words, typed for the remote shell; never
    a value from the ledger). tmux and a command together are refused."""
    if tmux is not None and words:
        raise InputError("command", " ".join(words), _("give --tmux or a command, not both"))
    if tmux is not None:
        return tmux_command(tmux)
    if words:
        return " ".join(words)
    return None


def term_type(value: str | None) -> str:
    """$TERM as the PTY's terminal type; a missing or odd one becomes FALLBACK_TERM."""
    if value and _TERM_TYPE.fullmatch(value) and value != "dumb":
        return value
    return FALLBACK_TERM


@dataclass(frozen=True)
class Ended:
    """How a session ended: the remote exit status or signal, or the link lost."""

    status: int | None
    signal: str | None = None
    lost: bool = False


def ended_words(end: Ended, *, tmux: bool = False) -> str:
    """How the session ended, said for a toast or the shell's stderr."""
    if end.lost:
        return _("the connection was lost")
    if end.signal:
        return _("ended by signal {signal}").format(signal=visible(end.signal, 32))
    if end.status is None:
        return _("ended without an exit status")
    if tmux and end.status == NOT_FOUND:
        return _("exit status 127: tmux is not installed on the node")
    return _("exit status {status}").format(status=end.status)


class Terminal(Protocol):
    """The local end of a session: where keys come from, where output goes."""

    stdin: int
    stdout: int
    term_type: str | None  # None: no PTY is asked for (stdin is not a terminal)
    # An optional `stderr: int` too: where the remote stderr goes (else stdout).

    def size(self) -> tuple[int, int] | None:
        """(columns, rows) now, or None when it cannot be known."""
        ...

    def raw(self) -> contextlib.AbstractContextManager[None]:
        """Keys passed through as they are while inside; restored and reset after."""
        ...


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            done = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[done:]


async def _copy_out(stream: asyncssh.SSHReader[bytes], fd: int) -> None:
    while chunk := await stream.read(READ_CHUNK):
        write_all(fd, chunk)


def _read_keys(fd: int) -> bytes:
    try:
        return os.read(fd, READ_CHUNK)
    except BlockingIOError:
        raise
    except OSError:
        return b""


@contextlib.contextmanager
def _keys_to(process: asyncssh.SSHClientProcess[bytes], fd: int) -> Iterator[None]:
    """Feed what is typed on fd to the channel: from the event loop's reader, or, for an
    fd the loop cannot watch (/dev/null, a regular file: cron and scripts), from a thread
    that reads it (end of input sent at once for /dev/null)."""
    loop = asyncio.get_running_loop()
    done = threading.Event()

    def deliver(data: bytes) -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            if data:
                process.stdin.write(data)
            else:
                process.stdin.write_eof()

    def readable() -> None:
        try:
            data = _read_keys(fd)
        except BlockingIOError:
            return
        if not data:
            loop.remove_reader(fd)
        deliver(data)

    def reader_thread() -> None:
        while not done.is_set():
            try:
                data = _read_keys(fd)
            except BlockingIOError:
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(deliver, data)
            if not data:
                return

    watched = True
    try:
        loop.add_reader(fd, readable)
    except (OSError, ValueError):
        watched = False
        threading.Thread(target=reader_thread, name="zuka-ssh-stdin", daemon=True).start()
    try:
        yield
    finally:
        done.set()
        if watched:
            loop.remove_reader(fd)


async def _follow_size(
    process: asyncssh.SSHClientProcess[bytes], size: Callable[[], tuple[int, int] | None]
) -> None:
    """Send the terminal's new size whenever it changes: at once on SIGWINCH where a
    handler can be set (the main thread), else looked at every RESIZE_POLL_S."""
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    handled = threading.current_thread() is threading.main_thread()
    if handled:
        try:
            loop.add_signal_handler(signal.SIGWINCH, changed.set)
        except (NotImplementedError, RuntimeError, ValueError):
            handled = False
    last = size()
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(None if handled else RESIZE_POLL_S):
                    await changed.wait()
            changed.clear()
            now = size()
            if now is not None and now != last:
                last = now
                with contextlib.suppress(OSError, asyncssh.Error):
                    process.change_terminal_size(*now)
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGWINCH)


async def pump(
    process: asyncssh.SSHClientProcess[bytes], terminal: Terminal, lost: Callable[[], bool]
) -> Ended:
    """Keys to the channel, its output to the terminal, sizes as they change, until the
    remote side ends; returns how it ended (lost: whether the connection went)."""
    tasks: list[asyncio.Task[Any]] = [
        asyncio.create_task(_copy_out(process.stdout, terminal.stdout)),
        asyncio.create_task(
            _copy_out(process.stderr, getattr(terminal, "stderr", terminal.stdout))
        ),
    ]
    if terminal.term_type is not None:
        tasks.append(asyncio.create_task(_follow_size(process, terminal.size)))
    try:
        with _keys_to(process, terminal.stdin):
            await process.wait_closed()
            # What the channel sent before it closed is written out before returning.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await asyncio.gather(*tasks[:2], return_exceptions=True)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    exit_signal = process.exit_signal[0] if process.exit_signal else None
    status = process.exit_status
    if status is not None and status < 0:  # asyncssh's -1: it ended by a signal
        status = None
    return Ended(status, exit_signal, status is None and exit_signal is None and lost())
