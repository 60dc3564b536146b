"""The kept-open shell: one `sh` channel per node that short commands are written into, each
followed by a marker line echoed with its exit status, and read back up to that marker.

One round trip a command instead of two (channel open, then exec), and no new sshd
session, login shell or ~/.bashrc per command: what all-smi does, and what measured
fastest here. A command must not read stdin.
"""

from __future__ import annotations

import contextlib
import random as _random
from collections import deque
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
    """cmd's output up to the marker line and the exit status on it (None when it is not a
    status), or None when the channel closed before the marker came. Raises OverCap."""
    out: list[str] = []
    # Read in bounded chunks, never readline: a node that prints no newline would
    # make readline hold everything it sends.
    pending: deque[str] = deque()
    while True:
        if not pending:
            chunk = await shell.process.stdout.read(CHUNK)
            pending.extend(capped.feed(chunk))
            if chunk and not pending:
                continue  # part of a line: read on
            if not chunk and (rest := capped.rest()):
                pending.append(rest)
        line = pending.popleft() if pending else ""
        if not line:
            return None
        at = line.find(marker)
        if at < 0:
            out.append(line)
            continue
        out.append(line[:at])  # output that did not end in a newline
        shell.answered = True
        word = line[at + len(marker) :].strip()
        status = int(word) if word.isdigit() and len(word) <= 3 else None
        return "".join(out), status


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
