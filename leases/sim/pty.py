"""A simulated node's interactive shell, for a client that asked for a PTY (the dashboard's
i and I, `zuka ssh`): a prompt, a line typed with echo and backspace, the line answered by
the node's commands (leases.sim.commands.answer); `exit [N]`, `logout` or Ctrl-D to leave;
clear, pwd, whoami and help built in. The client's terminal is raw, so this side echoes
and ends lines with CR LF, as a tty would."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime

import asyncssh

from leases.core.textsafe import visible
from leases.sim.commands import answer
from leases.sim.gpu import SimNode

LINE_MAX = 4096  # the most of one typed line kept
# tmux new-session -A -s NAME (what zuka's I sends), or its short form `tmux new -A -s NAME`.
_TMUX = re.compile(r"tmux new(?:-session)? -A -s (\S+)")
_ERASE = ("\x7f", "\x08")


def tmux_stand_in(command: str) -> str | None:
    """The session name when command attaches or creates a tmux session, else None."""
    found = _TMUX.fullmatch(command.strip())
    if found is None:
        return None
    try:
        [name] = shlex.split(found.group(1))
    except ValueError:
        return None
    return name


_CLEAR = "\x1b[H\x1b[2J"
HELP = (
    "simulated node: a stand-in shell, not bash.\n"
    "  built in: exit [N], logout, clear, pwd, whoami, help\n"
    "  answered: nvidia-smi, ps, ls, cat, head, echo, env, printenv, hostname, uptime,\n"
    "            true, false, test, rm, shred, and ;, &&, ||, | between them\n"
    "  Ctrl-C drops the line, Ctrl-D on an empty line leaves.\n"
)


def exit_status(command: str, last: int) -> int | None:
    """The status `exit [N]` or `logout` leaves with (N modulo 256, as sh), else None.
    A bad N is refused as sh refuses it: status 2."""
    words = command.split()
    if not words or words[0] not in ("exit", "logout"):
        return None
    if len(words) == 1:
        return last
    arg = words[1]
    if len(words) > 2 or not arg.isascii() or not arg.lstrip("-").isdigit() or len(arg) > 12:
        return 2
    return int(arg) % 256


def builtin(command: str) -> str | None:
    """What a shell built-in the simulator knows prints, else None (then answered)."""
    if command == "clear":
        return _CLEAR
    if command == "pwd":
        return "/root\n"
    if command == "whoami":
        return "root\n"
    if command == "help":
        return HELP
    return None


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


async def pty_shell(
    node: SimNode,
    process: asyncssh.SSHServerProcess[str],
    now: Callable[[], datetime],
    *,
    tmux: str | None = None,
) -> int:
    """Serve the interactive shell until `exit` or end of input; its last status."""
    prompt = f"root@{visible(node.name, 40)}:~# "
    if tmux is not None:
        process.stdout.write(
            f"[simulated node: no tmux here; a plain shell stands in for session "
            f"'{visible(tmux, 64)}']\r\n"
        )
    process.stdout.write(prompt)
    line: list[str] = []
    status = 0
    while True:
        chunk = await process.stdin.read(1024)
        if not chunk:
            return status
        for char in chunk:
            if char in ("\r", "\n"):
                process.stdout.write("\r\n")
                command = "".join(line).strip()
                line.clear()
                if (leave := exit_status(command, status)) is not None:
                    return leave
                if (said := builtin(command)) is not None:
                    process.stdout.write(_crlf(said))
                    status = 0
                elif command:
                    out, err, status = answer(node, command, now(), status)
                    process.stdout.write(_crlf(out + err))
                process.stdout.write(prompt)
            elif char in _ERASE:
                if line:
                    line.pop()
                    process.stdout.write("\b \b")
            elif char == "\x03":  # Ctrl-C: drop the line
                line.clear()
                process.stdout.write("^C\r\n" + prompt)
            elif char == "\x04" and not line:  # Ctrl-D on an empty line
                process.stdout.write("\r\n")
                return status
            elif char.isprintable() and len(line) < LINE_MAX:
                line.append(char)
                process.stdout.write(char)
