"""The kept-open shell: one `sh` channel per node that short commands are written into, each
framed so that sh prints its output, its exit status and a marker line in one write, and
read back up to that marker. The channel is asyncssh's callback kind (ShellChannel): each
packet goes to the answer being read as it comes, without the stream API's buffer, lock
and read call (measured on 300 kept shells: about 6 % of the session layer's CPU).

One round trip a command instead of two (channel open, then exec), and no new sshd
session, login shell or ~/.bashrc per command: what all-smi does, and what measured
fastest here. A command must not read stdin.

The frame (`framed`), for a command CMD and a random NONCE:

    __z=$( { ( :
    CMD
    )
    printf '\n%s %s' "$?" NONCE; } | head -c LIMIT); printf '%s\n%s%s\n' "$__z" \
    __zuka_done_ NONCE__; __z=

(the last line is one line, here cut in two). CMD runs in a subshell (`:` first, so that
an empty command is one too; an `exit` ends the subshell, not the kept shell); its output,
with its status and the nonce on a last line, is held by sh, cut at LIMIT bytes by
`head -c` (a node that prints without end costs its shell that much memory, no more), and
printed with the marker `__zuka_done_NONCE__` in one printf. So:
- the answer comes as one write, so as one SSH packet where it is small (a command and
  then `echo MARKER`, two writes, came as two, and each packet costs the client's CPU);
- the marker is never in what is written to the shell (its two halves are printf's
  arguments): a shell that echoes its input cannot end an answer early;
- a status is taken only from a whole status line with this frame's nonce: output that
  sh cut, or one that lost bytes (sh drops NULs from what it holds), has none, and gives
  no status, never a wrong one.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass, field

import asyncssh

from leases.core.models import NodeHealth
from leases.ssh.errors import ShellUnavailable
from leases.ssh.faults import describe
from leases.ssh.link import Link
from leases.ssh.stream import Capped, OverCap, TailTarget


@dataclass(eq=False)
class Shell:
    """A shell channel kept open on a node for short commands (ShellChannel: its answers
    and its stderr so far)."""

    link: Link
    channel: asyncssh.SSHClientChannel[str]
    session: ShellChannel
    answered: bool = False  # has it ever answered a command with its status?

    def usable(self, link: Link) -> bool:
        """Whether the next command may be written into it: on this link, open, in step."""
        session = self.session
        return (
            self.link is link
            and not self.channel.is_closing()
            and not session.ended
            and not session.stray
        )


@dataclass(eq=False)
class Asked:
    """One framed command written into a kept shell, its answer to come on `waiter`
    (ShellChannel.ask's)."""

    shell: Shell  # on its link (Shell.link)
    cmd: str
    limit: float  # seconds it may take
    capped: Capped  # the answer's caps, and how much of it came
    waiter: asyncio.Future[tuple[str, int | None] | None] = field(init=False)


_MARKER_HEAD = "__zuka_done_"
_MARKER_END = "__"
_NONCE_CHARS = 12  # hex digits: 48 random bits
# The frame's first line and how its last line begins: what a simulated shell looks for
# (leases.sim.keptshell).
FRAME_HEAD = "__z=$( { ( :"
FRAME_TAIL = """printf '\\n%s %s' "$?" """
# What the frame adds to an answer past the command's own output: the status line (at most
# 3 digits, a space, the nonce) and the marker line, newlines included.
FRAME_CHARS = 1 + 3 + 1 + _NONCE_CHARS + 1 + len(_MARKER_HEAD) + _NONCE_CHARS + len(_MARKER_END) + 1


def new_marker() -> str:
    """The end-of-answer marker for one command: not guessable by what the command prints,
    nor from markers seen before (secrets, not the process's shared random state)."""
    return f"{_MARKER_HEAD}{secrets.token_hex(_NONCE_CHARS // 2)}{_MARKER_END}"


def _nonce(marker: str) -> str:
    return marker[len(_MARKER_HEAD) : -len(_MARKER_END)]


def framed(cmd: str, marker: str, limit: int) -> str:
    """What is written into the shell for cmd: cmd on lines of its own in a subshell, its
    output and status held (at most `limit` bytes) and printed with marker in one write."""
    nonce = _nonce(marker)
    tail = (
        f"{FRAME_TAIL}{nonce}; }} | head -c {limit}); "
        f"""printf '%s\\n%s%s\\n' "$__z" {_MARKER_HEAD} {nonce}{_MARKER_END}; __z="""
    )
    return f"{FRAME_HEAD}\n{cmd}\n)\n{tail}\n"


def unframed(text: str) -> tuple[str, str, int] | None:
    """(cmd, marker, limit) of a text `framed` made, or None for any other text (checked by
    framing again: no shell parser needed). For simulated shells."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[0] != FRAME_HEAD or not lines[-2].startswith(FRAME_TAIL):
        return None
    tail = lines[-2]
    nonce = tail[len(FRAME_TAIL) :].partition(";")[0]
    limit = tail.partition("| head -c ")[2].partition(")")[0]
    if not limit.isascii() or not limit.isdigit():
        return None
    marker = f"{_MARKER_HEAD}{nonce}{_MARKER_END}"
    cmd = "\n".join(lines[1:-3])
    if framed(cmd, marker, int(limit)) != text:
        return None
    return cmd, marker, int(limit)


def answer_text(out: str, status: int, marker: str) -> str:
    """What sh prints for a framed command that printed out and exited status (its NULs
    dropped, as sh drops them from what it holds). For simulated shells."""
    return f"{out.replace(chr(0), '')}\n{status} {_nonce(marker)}\n{marker}\n"


class AnswerReader:
    """One framed command's answer, fed what the channel brings as it comes (any cut of
    it): the command's output and its exit status from the line before the marker line
    (status None when that is not a status), once the marker's line has ended. Raises
    OverCap (from feed) past the caps.

    Never a line at a time (a node that prints no newline would make a line reader hold
    everything it sends): the marker is looked for in each chunk with the end of the one
    before (it may be split between two)."""

    def __init__(self, marker: str, capped: Capped) -> None:
        self.marker = marker
        self.capped = capped
        self._parts: list[str] = []
        self._size = 0  # characters in _parts
        self._at = -1  # where the marker starts in the output, once seen
        self._carry = ""  # the end of the output, where a marker cut in two begins

    def feed(self, chunk: str) -> tuple[str, int | None] | None:
        """The answer, once this chunk ends the marker's line; None while it has not."""
        self.capped.check(chunk)
        marker = self.marker
        if self._at < 0:
            window = self._carry + chunk
            found = window.find(marker)
            if found >= 0:
                self._at = self._size - len(self._carry) + found
            else:
                self._carry = window[max(0, len(window) - len(marker) + 1) :]
        self._parts.append(chunk)
        self._size += len(chunk)
        if self._at >= 0 and "\n" in chunk:
            text = "".join(self._parts)
            end = text.find("\n", self._at + len(marker))
            if end >= 0:
                return _answered(text, self._at, marker, end)
        return None

    def end(self) -> tuple[str, int | None] | None:
        """The channel ended: the answer, its marker's line cut by that end; None when the
        marker never came."""
        if self._at < 0:
            return None
        text = "".join(self._parts)
        return _answered(text, self._at, self.marker, len(text))


def _answered(text: str, at: int, marker: str, end: int) -> tuple[str, int | None]:
    """The output before the status line that comes before the marker at `at` (`end`: the
    end of the marker's line), and that status. No status (None, the output then all there
    was before the marker) unless the frame printed a whole status line with its nonce, the
    marker's line holds the marker alone and ends (not the channel), and nothing came after
    it (a node out of step: what it prints later must not open the next answer)."""
    body = text[:at]
    if not body.endswith("\n") or end - at != len(marker) or len(text) != end + 1:
        return body, None
    out, newline, line = body[:-1].rpartition("\n")
    word, space, nonce = line.partition(" ")
    if not (newline and space and nonce == _nonce(marker) and _status_word(word)):
        return body, None
    return out, int(word)


# stderr a shell may print with no command waiting before it is let go (a node flooding it).
_IDLE_STDERR_MAX = 64 * 1024


class ShellChannel(asyncssh.SSHClientSession[str]):
    """The kept shell channel's side in asyncssh: what sh prints, fed to the answer being
    read as each packet comes (asyncssh's callbacks: no stream buffer, reader lock or read
    call between the packet and the answer), and its stderr's last few KB. Output with no
    command waiting for it puts the shell out of step (`stray`): it is not used again."""

    def __init__(self) -> None:
        self.stderr = TailTarget()
        self.stray = False
        self.ended = False
        self._reader: AnswerReader | None = None
        self._waiter: asyncio.Future[tuple[str, int | None] | None] | None = None
        self._channel: asyncssh.SSHClientChannel[str] | None = None
        self._idle_stderr = 0  # stderr characters with no command waiting, since the last

    def connection_made(self, chan: asyncssh.SSHClientChannel[str]) -> None:
        self._channel = chan

    def ask(
        self, channel: asyncssh.SSHClientChannel[str], text: str, reader: AnswerReader
    ) -> asyncio.Future[tuple[str, int | None] | None]:
        """Write a framed command; the future its answer (AnswerReader's) is set on: None
        when the channel ends before the marker; OverCap. `settled()` once it is done with
        (awaited directly: no coroutine of its own between the packet and the reading)."""
        waiter: asyncio.Future[tuple[str, int | None] | None]
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._reader, self._idle_stderr = reader, 0
        try:
            channel.write(text)
        except BaseException:
            self.settled()
            raise
        return waiter

    def settled(self) -> None:
        """The answer asked for is had, or given up: output from now on is out of step."""
        self._reader = self._waiter = None

    def data_received(self, data: str, datatype: asyncssh.DataType) -> None:
        waiter, reader = self._waiter, self._reader
        waiting = waiter is not None and reader is not None and not waiter.done()
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            self.stderr.write(data)
            if not waiting:
                self._idle_stderr += len(data)
                if self._idle_stderr > _IDLE_STDERR_MAX:
                    self._out_of_step()
            return
        if not waiting:
            self._out_of_step()
            return
        assert waiter is not None and reader is not None
        try:
            got = reader.feed(data)
        except OverCap as exc:
            waiter.set_exception(exc)
            return
        if got is not None:
            waiter.set_result(got)

    def _out_of_step(self) -> None:
        """Output no command waits for: this shell is not used again, and it is closed now
        (a callback channel takes every packet as it comes, and asyncssh opens the window
        again for each: a node printing without end between commands would otherwise cost
        the poller a core until the next command)."""
        self.stray = True
        if self._channel is not None:
            self._channel.close()

    def eof_received(self) -> bool:
        """The shell's output ended (its channel may stay open): so does the answer being
        read, as the end of a stream did. False: asyncssh closes the channel."""
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        self.ended = True
        waiter, reader = self._waiter, self._reader
        if waiter is not None and reader is not None and not waiter.done():
            waiter.set_result(reader.end())


def _status_word(word: str) -> bool:
    """An exit status as sh's `$?` prints it: 0 to 255, no sign, no leading zero."""
    return (
        0 < len(word) <= 3
        and word.isascii()
        and word.isdigit()
        and (word == "0" or word[0] != "0")
        and int(word) <= 255
    )


async def open_shell(link: Link, node: str) -> Shell:
    """A new shell channel on link, holding one of its channel slots until close_shell.
    Raises ShellUnavailable when the node will not open one."""
    await link.channels.acquire()  # held for the shell's life
    try:
        # `sh` run as a command, not a login shell: the same environment as an exec
        # (no /etc/profile resetting PATH), POSIX $? whatever the login shell is.
        channel, session = await link.conn.create_session(
            ShellChannel, "sh", encoding="utf-8", errors="replace"
        )
    except asyncssh.ChannelOpenError as exc:
        link.channels.release()
        raise ShellUnavailable(node, NodeHealth.OK, describe(exc)) from exc
    except BaseException:
        link.channels.release()
        raise
    assert isinstance(session, ShellChannel)  # what the factory made
    return Shell(link, channel, session)


def close_shell(shell: Shell) -> None:
    """Close the shell channel (stopping what runs in it) and give back its slot."""
    with contextlib.suppress(Exception):
        shell.channel.close()
    shell.link.channels.release()
