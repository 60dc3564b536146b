"""The dashboard's way onto a node (fleet keys i and I): suspend the app, run the session
of leases.app.shell on a fresh event loop in a thread (App.suspend is a sync context
manager: the app's own loop waits inside it), resume on the same screen and row, and say
how the session ended. A browser tab (`zuka web`) cannot be suspended: refused there."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

from rich.text import Text
from textual.app import App, SuspendNotSupported
from textual.notifications import SeverityLevel

from leases.app.shell import ShellEnd, check_node, open_session
from leases.core.errors import InputError
from leases.core.models import Node
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.ssh.interactive import TMUX_DEFAULT, tmux_name, write_all
from leases.ssh.interactive_tty import TtyTerminal

WEB_REFUSED = (
    "A shell needs the terminal zuka runs in: the browser dashboard (zuka web) cannot "
    "hand it over. Run `zuka ssh {node}` on the jump host instead."
)
MESSAGE_MAX = 400
CLEAR = b"\x1b[H\x1b[2J"


def _run(ledger_path: Path, node: Node, tmux: str | None) -> ShellEnd | BaseException:
    found: list[ShellEnd | BaseException] = []

    def work() -> None:
        terminal = TtyTerminal()
        if terminal.term_type is not None:  # the session starts on a clear screen
            with contextlib.suppress(OSError):
                write_all(terminal.stdout, CLEAR)
        try:
            found.append(asyncio.run(open_session(ledger_path, node, terminal, tmux=tmux)))
        except BaseException as exc:  # said to the user once the app is back
            found.append(exc)

    thread = threading.Thread(target=work, name="zuka-shell", daemon=True)
    thread.start()
    thread.join()
    return found[0] if found else RuntimeError("the session thread ended without a result")


def _say(app: App[object], message: str, severity: SeverityLevel) -> None:
    app.notify(visible(message, MESSAGE_MAX), markup=False, severity=severity)


def shell(app: App[object], ledger_path: Path, node: Node, tmux: str | None = None) -> None:
    """Open a session on node (its tmux session `tmux` when given) with the app suspended;
    the app shows how it ended once it is back."""
    if app.is_web:
        _say(app, WEB_REFUSED.format(node=node.name), "error")
        return
    try:
        check_node(node)
    except InputError as exc:
        _say(app, f"{exc.value}: {exc.reason}", "warning")
        return
    try:
        with app.suspend():
            result = _run(ledger_path, node, tmux)
    except SuspendNotSupported:
        _say(app, f"{node.name}: this terminal cannot be handed over to a shell", "error")
        return
    app.refresh()
    if isinstance(result, InputError):
        _say(app, f"{result.field}: {result.reason}", "error")
    elif isinstance(result, BaseException):
        _say(app, f"{node.name}: the session failed: {result!r}", "error")
    elif not result.opened:
        _say(app, f"no session: {result.said}", "error")
    else:
        _say(app, result.said, "information" if result.status == 0 else "warning")


def shell_on(app: App[object], ledger: Ledger | None, name: str, *, ask_tmux: bool) -> None:
    """The keys' action: i opens the login shell; I asks for a tmux session name first
    (Enter: TMUX_DEFAULT; a bad name is refused and nothing opens)."""
    path = None if ledger is None else ledger.path
    if ledger is None or path is None:
        return
    try:
        node = ledger.node(name)
    except InputError as exc:
        _say(app, f"{exc.field}: {exc.reason}", "warning")
        return
    if not ask_tmux:
        shell(app, path, node)
        return
    from tui.screens.ask import AskScreen

    def answered(typed: str | None) -> None:
        if typed is None:
            return
        try:
            session = tmux_name(typed.strip() or None)
        except InputError as exc:
            _say(app, f"{exc.field} '{exc.value}': {exc.reason}", "error")
            return
        shell(app, path, node, session)

    prompt = Text.assemble(
        f"Attach or create a tmux session on {visible(name, 60)}.\n",
        f"Session name (Enter: {TMUX_DEFAULT}; letters, digits, _ . -):",
    )
    app.push_screen(AskScreen(prompt, placeholder=TMUX_DEFAULT), answered)
