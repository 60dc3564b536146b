"""Getting onto a node (`zuka ssh NODE`, the dashboard's i and I): an interactive session
through exactly what polling uses (the ledger's ssh_options: zuka's known_hosts first, the
node's route, jump hosts and keys; NodeSession.terminal), so a host key that changed is
refused here with the words and health polling gives it, and no shell is opened.

The front ends hand a Terminal (leases.ssh.interactive_tty.TtyTerminal) and say the
ShellEnd; they hold no part of the rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Node, NodeHealth
from leases.core.textsafe import visible
from leases.ssh.errors import SshError
from leases.ssh.interactive import Terminal, ended_words, pump, remote_command
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.wiring import ssh_options

# The exit code of `zuka ssh` when no session could be had (ssh's own).
NO_SESSION = 255
MESSAGE_MAX = 400


@dataclass(frozen=True)
class ShellEnd:
    """How a session went: opened (and how it ended) or not (and why: health, words)."""

    node: str
    opened: bool
    words: str
    status: int | None = None
    health: NodeHealth | None = None

    @property
    def exit_code(self) -> int:
        """What `zuka ssh` exits with: the remote status, else NO_SESSION."""
        if self.opened and self.status is not None:
            return self.status
        return NO_SESSION

    @property
    def said(self) -> str:
        """One line for a toast or stderr."""
        return f"{self.node}: {self.words}"


def check_node(node: Node) -> None:
    """Refuse a node no session can be opened to, before anything connects."""
    if node.local:
        raise InputError(
            "node",
            node.name,
            _("is this machine (read with NVML, no SSH login): open a shell here instead"),
        )
    if node.problem:
        raise InputError("node", node.name, _("not polled: {problem}").format(problem=node.problem))


def refused_words(node: Node, exc: SshError) -> str:
    """Why no session was opened, in polling's words; an unknown key says what to do."""
    words = visible(exc.message, MESSAGE_MAX)
    if exc.health is NodeHealth.UNTRUSTED:
        words += " " + _("(press t on the fleet, or run `zuka node trust {node}`)").format(
            node=node.name
        )
    return words


async def open_session(
    ledger_path: Path,
    node: Node,
    terminal: Terminal,
    *,
    tmux: str | None = None,
    command: list[str] | None = None,
    options: SshOptions | None = None,
    opened: Callable[[], None] | None = None,
) -> ShellEnd:
    """Open the node's login shell, its tmux session `tmux`, or the user's command, on a
    PTY when the terminal is one; pump keys and output until it ends. Raises InputError
    for a node that cannot have a session or a bad tmux name (nothing connects then).
    options: polling's for this ledger unless given (tests). opened: called once the
    channel is open, before keys are pumped (the dashboard stops watching for a cancel)."""
    check_node(node)
    remote = remote_command(tmux, command)
    pool = SshPool(options or ssh_options(ledger_path))
    session = pool.add(node)
    try:
        kind = terminal.term_type
        async with session.terminal(remote, kind, terminal.size()) as process:
            if opened is not None:
                opened()
            with terminal.raw():
                ended = await pump(process, terminal, lambda: not session.connected)
    except SshError as exc:
        return ShellEnd(node.name, False, refused_words(node, exc), health=exc.health)
    finally:
        await pool.close()
    words = _("session {ended}").format(ended=ended_words(ended, tmux=tmux is not None))
    return ShellEnd(node.name, True, words, ended.status)
