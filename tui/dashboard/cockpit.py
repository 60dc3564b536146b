"""The dashboard's way onto a node (fleet keys i and I): suspend the app, run the session
of leases.app.shell on a fresh event loop in a thread (App.suspend is a sync context
manager: the app's own loop waits inside it), resume on the same screen and row, and say
how the session ended. A browser tab (`zuka web`) cannot be suspended: refused there."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from rich.text import Text
from textual.app import App, SuspendNotSupported
from textual.notifications import SeverityLevel

from leases.app.shell import ShellEnd, check_node, open_session
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Node
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.ssh.interactive import TMUX_DEFAULT, tmux_name, write_all
from leases.ssh.interactive_tty import TtyTerminal, flush_input
from leases.ssh.options import SshOptions

WEB_REFUSED = N_(
    "A shell needs the terminal zuka runs in: the browser dashboard (zuka web) cannot "
    "hand it over. Run `zuka ssh {node}` on the jump host instead."
)
MESSAGE_MAX = 400
CLEAR = b"\x1b[H\x1b[2J"


# Keys that give up a connection still being made (escape, Ctrl-C).
CANCEL_KEYS = (b"\x1b", b"\x03")
CONNECTING = N_("connecting to {node}... (escape: give up)")


async def connect_then_pump(
    ledger_path: Path,
    node: Node,
    tmux: str | None,
    terminal: TtyTerminal,
    options: SshOptions | None = None,
) -> ShellEnd:
    """The session, with the terminal raw from the start: keys typed while the connection
    is made are neither dashboard commands nor signals (Ctrl-C does not quit zuka); escape
    or Ctrl-C then gives up; what else was typed is dropped, not sent to the shell."""
    loop = asyncio.get_running_loop()
    watching = [False]
    cancelled = [False]
    tasks: list[asyncio.Task[ShellEnd]] = []

    def stop_watching() -> None:
        if watching[0]:
            watching[0] = False
            loop.remove_reader(terminal.stdin)
            flush_input(terminal.stdin)

    def typed() -> None:
        try:
            data = os.read(terminal.stdin, 1024)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data or any(key in data for key in CANCEL_KEYS):
            stop_watching()
            cancelled[0] = True
            for task in tasks:
                task.cancel()

    with terminal.raw():
        if terminal.term_type is not None:
            with contextlib.suppress(OSError):
                said = _(CONNECTING).format(node=visible(node.name, 60)) + "\r\n"
                write_all(terminal.stdout, said.encode())
        tasks.append(
            asyncio.create_task(
                open_session(
                    ledger_path, node, terminal, tmux=tmux, options=options, opened=stop_watching
                )
            )
        )
        with contextlib.suppress(OSError, ValueError):
            loop.add_reader(terminal.stdin, typed)
            watching[0] = True
        try:
            return await tasks[0]
        except asyncio.CancelledError:
            if not cancelled[0]:
                raise
            return ShellEnd(node.name, False, _("connecting given up (escape)"))
        finally:
            stop_watching()


def _run(ledger_path: Path, node: Node, tmux: str | None) -> ShellEnd | BaseException:
    found: list[ShellEnd | BaseException] = []

    def work() -> None:
        terminal = TtyTerminal()
        if terminal.term_type is not None:  # the session starts on a clear screen
            with contextlib.suppress(OSError):
                write_all(terminal.stdout, CLEAR)
        try:
            found.append(asyncio.run(connect_then_pump(ledger_path, node, tmux, terminal)))
        except BaseException as exc:  # said to the user once the app is back
            found.append(exc)

    thread = threading.Thread(target=work, name="zuka-shell", daemon=True)
    thread.start()
    thread.join()
    return found[0] if found else RuntimeError("the session thread ended without a result")


@contextlib.contextmanager
def suspended(app: App[object]) -> Iterator[None]:
    """app.suspend() that resumes the app even when the body raises (Textual's own has no
    try/finally around its yield)."""
    manager = app.suspend()
    manager.__enter__()
    try:
        yield
    finally:
        manager.__exit__(None, None, None)


def _say(app: App[object], message: str, severity: SeverityLevel) -> None:
    app.notify(visible(message, MESSAGE_MAX), markup=False, severity=severity)


def shell(app: App[object], ledger_path: Path, node: Node, tmux: str | None = None) -> None:
    """Open a session on node (its tmux session `tmux` when given) with the app suspended;
    the app shows how it ended once it is back."""
    if app.is_web:
        _say(app, _(WEB_REFUSED).format(node=node.name), "error")
        return
    try:
        check_node(node)
    except InputError as exc:
        _say(app, f"{exc.value}: {exc.reason}", "warning")
        return
    try:
        with suspended(app):
            result = _run(ledger_path, node, tmux)
    except SuspendNotSupported:
        _say(app, _("{node}: this terminal cannot be handed over to a shell").format(
            node=node.name), "error")  # fmt: skip
        return
    app.refresh()
    if isinstance(result, InputError):
        _say(app, f"{result.field}: {result.reason}", "error")
    elif isinstance(result, BaseException):
        _say(app, _("{node}: the session failed: {error}").format(
            node=node.name, error=repr(result)), "error")  # fmt: skip
    elif not result.opened:
        _say(app, _("no session: {reason}").format(reason=result.said), "error")
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
        _("Attach or create a tmux session on {node}.").format(node=visible(name, 60)) + "\n",
        _("Session name (Enter: {default}; letters, digits, _ . -):").format(default=TMUX_DEFAULT),
    )
    app.push_screen(AskScreen(prompt, placeholder=TMUX_DEFAULT), answered)
