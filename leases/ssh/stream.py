"""Reading a channel's output within bounds: output and line caps, the tail of stderr, and
the result a command comes to."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass

import asyncssh

from leases.ssh.speech import _

# The most text one read of a chunked stream takes.
CHUNK = 65536
# How much of stderr to keep for the error a command ends with.
_STDERR_KEEP = 8192


@dataclass(frozen=True)
class CommandResult:
    exit_status: int | None  # None: the channel closed without reporting one
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class OverCap(Exception):
    """Output passed a cap; the message says which."""


class Capped:
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
        """The lines (with their newline) that chunk completes; raises OverCap once a
        cap is passed."""
        self.total += len(chunk)
        if self.max_output is not None and self.total > self.max_output:
            raise over_output(self.max_output)
        lines: list[str] = []
        start = 0
        while (end := chunk.find("\n", start)) >= 0:
            piece = chunk[start : end + 1]
            if self._partial:
                piece = "".join(self._partial) + piece
                self._partial, self._partial_len = [], 0
            if len(piece) > self.max_line + 1:
                raise OverCap(_("a line over {size}").format(size=_size(self.max_line)))
            lines.append(piece)
            start = end + 1
        rest = chunk[start:]
        if rest:
            self._partial_len += len(rest)
            if self._partial_len > self.max_line:
                raise OverCap(_("a line over {size}").format(size=_size(self.max_line)))
            self._partial.append(rest)
        return lines

    def check(self, chunk: str) -> None:
        """Count chunk against the caps as feed does, without splitting it into lines or
        keeping it (a reader that keeps the text itself calls this instead of feed, never
        both); raises OverCap once a cap is passed."""
        self.total += len(chunk)
        if self.max_output is not None and self.total > self.max_output:
            raise over_output(self.max_output)
        first = chunk.find("\n")
        if first < 0:
            longest = self._partial_len = self._partial_len + len(chunk)
        else:
            last = chunk.rfind("\n")
            longest = max(self._partial_len + first, len(chunk) - last - 1)
            if last - first - 1 > self.max_line:  # a whole line in between may be longer
                longest = max(longest, *map(len, chunk[first + 1 : last].split("\n")))
            self._partial_len = len(chunk) - last - 1
        if longest > self.max_line:
            raise OverCap(_("a line over {size}").format(size=_size(self.max_line)))

    def rest(self) -> str:
        """What came after the last newline."""
        rest = "".join(self._partial)
        self._partial, self._partial_len = [], 0
        return rest


def over_output(max_output: int) -> OverCap:
    """The refusal of an output longer than max_output characters."""
    return OverCap(_("output over {size}").format(size=_size(max_output)))


def _size(chars: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if chars >= scale and chars % scale == 0:
            return f"{chars // scale} {unit}"
    return _("{count} characters").format(count=chars)


class TailTarget:
    """A stream's last few KB (a node may print stderr without end; the end of it says why
    a command failed), written to as its text comes: by asyncssh's callbacks as packets
    arrive (leases.ssh.shell.ShellChannel: all the stderr that came before a kept shell's
    answer, in the same read as it too, is here when the answer is read), or by Tail."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, data: str) -> None:
        self.text = (self.text + data[-_STDERR_KEEP:])[-_STDERR_KEEP:]

    def clear(self) -> None:
        self.text = ""


class Tail(TailTarget):
    """Reads a stream to its end in the background into its last few KB (TailTarget)."""

    def __init__(self, reader: asyncssh.SSHReader[str]) -> None:
        super().__init__()
        self._task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncssh.SSHReader[str]) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            while chunk := await reader.read(CHUNK):
                self.write(chunk)

    async def done(self) -> None:
        await self._task

    def cancel(self) -> None:
        self._task.cancel()


class KeptEnd:
    """The end of what a long-running command printed, for the error it may end with: the
    last `keep` characters or a little more, whatever it printed. A collector holds one per
    node for hours (it held 50 whole rounds, about 100 KB a node, before)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._parts: deque[str] = deque()
        self._size = 0

    def add(self, text: str) -> None:
        text = text[-self.keep :]
        self._parts.append(text)
        self._size += len(text)
        # Drop the oldest while what is left still holds `keep` characters.
        while self._size - len(self._parts[0]) >= self.keep:
            self._size -= len(self._parts.popleft())

    @property
    def text(self) -> str:
        return "".join(self._parts)[-self.keep :]
