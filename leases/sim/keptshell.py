"""What a simulated node's `sh` channel reads: zuka's framed commands (leases.ssh.shell) and
plain lines, one command each, answered as sh answers them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import asyncssh

from leases.ssh.shell import FRAME_HEAD, FRAME_TAIL, answer_text, unframed

# The most lines a frame's command may take before the shell stops waiting for its end.
_MAX_FRAME_LINES = 64


@dataclass
class Command:
    """One command read from the channel and how to answer it as sh would."""

    text: str
    marker: str | None  # the frame's end marker; None for a plain line
    _process: asyncssh.SSHServerProcess[str]

    def reply(self, out: str, err: str, status: int) -> None:
        """Write the command's output and stderr: framed, the output, its status and the
        marker in one write, as sh's printf makes them; plain, as they are."""
        self._process.stderr.write(err)
        if self.marker is None:
            self._process.stdout.write(out)
        else:
            self._process.stdout.write(answer_text(out, status, self.marker))

    def partial(self, out: str) -> None:
        """Write part of an answer without its end (a node that stops mid-answer)."""
        self._process.stdout.write(out)


async def shell_commands(
    process: asyncssh.SSHServerProcess[str], on_junk: Callable[[str], None] | None = None
) -> AsyncIterator[Command]:
    """Each command the channel is sent, until it ends or says `exit`: a frame's lines
    gathered into its one command, a plain line as it is. A frame that does not parse is
    dropped (on_junk hears of it), as sh would refuse it."""
    pending: list[str] | None = None
    async for line in process.stdin:
        if pending is not None:
            pending.append(line)
            if line.startswith(FRAME_TAIL) or len(pending) > _MAX_FRAME_LINES:
                text, pending = "".join(pending), None
                frame = unframed(text)
                if frame is None:
                    if on_junk is not None:
                        on_junk(text)
                    continue
                yield Command(frame[0], frame[1], process)
            continue
        if line.rstrip("\n") == FRAME_HEAD:
            pending = [line]
            continue
        command = line.strip()
        if command in ("exit", "logout"):
            return
        if command:
            yield Command(command, None, process)
