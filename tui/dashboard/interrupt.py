"""ctrl+c in the dashboard: leave, as a user expects (not Textual's "press ctrl+q").

While an offboarding step or an acceptance check runs, quitting would stop it half way,
and a form with typing not saved would lose it: the user is asked first. Text selected in
a field or on the screen is copied instead (Textual's copy bindings run first and pass
ctrl+c on when nothing is selected).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App

from leases.core.i18n import _
from leases.core.textsafe import visible
from tui.screens.ask import AskScreen


def busy_with(app: App[Any]) -> str:
    """What a screen is doing that quitting would stop ("" when nothing): a screen
    says so with a truthy `busy` (the offboarding screen's step, the check's flag)."""
    for screen in app.screen_stack:
        busy = getattr(screen, "busy", "")
        if busy:
            return busy if isinstance(busy, str) else _("an acceptance check")
    return ""


def interrupt(app: App[Any]) -> None:
    """Quit; while something runs, only once the user types y."""
    busy = busy_with(app)
    if not busy:
        app.exit()
        return

    def answered(answer: str | None) -> None:
        if answer is not None and answer.strip().lower() in ("y", "yes"):
            app.exit()

    prompt = Text(
        _(
            "Quit zuka? Still under way: {busy}, which quitting stops or loses. Type y"
            " and Enter to quit, Escape to stay."
        ).format(busy=visible(busy, 80))
    )
    app.push_screen(AskScreen(prompt, placeholder="y"), answered)
