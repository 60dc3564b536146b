"""The kept-open shell: one `sh` channel per node that short commands are written into, each
followed by a marker line echoed with its exit status, and read back up to that marker.

One round trip a command instead of two (channel open, then exec), and no new sshd
session, login shell or ~/.bashrc per command: what all-smi does, and what measured
fastest here. A command must not read stdin.
"""

from __future__ import annotations

import contextlib
import random as _random
from dataclasses import dataclass

import asyncssh

from leases.core.models import NodeHealth
from leases.ssh.errors import ShellUnavailable
from leases.ssh.faults import describe
from leases.ssh.link import Link
from leases.ssh.stream import CHUNK, Capped, Tail


@dataclass(eq=False)
class Shell:
    """A shell channel kept open on a node for short commands, and its stderr so far."""

    link: Link
    process: asyncssh.SSHClientProcess[str]
    stderr: Tail  # cleared before each command
    answered: bool = False  # has it ever run a command to its end marker?


def new_marker() -> str:
    """The end-of-answer marker for one command: not guessable by what the command prints."""
    return f"__zuka_done_{_random.getrandbits(48):012x}__"


def framed(cmd: str, marker: str) -> str:
    """What is written into the shell for cmd: cmd, then the marker echoed with its $?."""
    return f"{cmd}\necho {marker} $?\n"


async def read_answer(shell: Shell, marker: str, capped: Capped) -> tuple[str, int | None] | None:
    """cmd's output up to the marker and the exit status after it on its line (None when
    it is not a status), or None when the channel closed before the marker came. Raises
    OverCap.

    Read in bounded chunks, never readline (a node that prints no newline would make
    readline hold everything it sends); the marker is looked for in each chunk with the
    end of the one before (it may be split between two), not line by line."""
    parts: list[str] = []
    size = 0  # characters in parts
    at = -1  # where the marker starts in the output, once seen
    carry = ""  # the end of the output, where a marker cut between two chunks begins
    while chunk := await shell.process.stdout.read(CHUNK):
        capped.check(chunk)
        if at < 0:
            window = carry + chunk
            found = window.find(marker)
            if found >= 0:
                at = size - len(carry) + found
            else:
                carry = window[max(0, len(window) - len(marker) + 1) :]
        parts.append(chunk)
        size += len(chunk)
        if at >= 0 and "\n" in chunk:
            text = "".join(parts)
            end = text.find("\n", at + len(marker))
            if end >= 0:
                return _answered(shell, text, at, marker, end)
    if at < 0:
        return None
    text = "".join(parts)  # the marker line without its newline: the channel ended
    return _answered(shell, text, at, marker, len(text))


def _answered(shell: Shell, text: str, at: int, marker: str, end: int) -> tuple[str, int | None]:
    """The output before the marker at `at`, and the status word between it and `end`."""
    shell.answered = True
    word = text[at + len(marker) : end].strip()
    return text[:at], int(word) if word.isascii() and word.isdigit() and len(word) <= 3 else None


async def open_shell(link: Link, node: str) -> Shell:
    """A new shell channel on link, holding one of its channel slots until close_shell.
    Raises ShellUnavailable when the node will not open one."""
    await link.channels.acquire()  # held for the shell's life
    try:
        # `sh` run as a command, not a login shell: the same environment as an exec
        # (no /etc/profile resetting PATH), POSIX $? whatever the login shell is.
        process = await link.conn.create_process("sh", encoding="utf-8", errors="replace")
    except asyncssh.ChannelOpenError as exc:
        link.channels.release()
        raise ShellUnavailable(node, NodeHealth.OK, describe(exc)) from exc
    except BaseException:
        link.channels.release()
        raise
    return Shell(link, process, Tail(process.stderr))


def close_shell(shell: Shell) -> None:
    """Close the shell channel (stopping what runs in it) and give back its slot."""
    shell.stderr.cancel()
    with contextlib.suppress(Exception):
        shell.process.close()
    shell.link.channels.release()
