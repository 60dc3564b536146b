"""The dashboard's language switched at runtime, from the command palette ("Language:
简体中文" / "Language: English"): every screen shows its words anew without a restart.

What is drawn once (a footer's keys, a table's column labels, a screen's title) is drawn
again here; the fleet's rows, header and status line are rebuilt by a refresh (the app's
`relabel`), their kept rows forgotten. The choice lasts for the session (the process):
the next `zuka dashboard` chooses again from --lang, $ZUKA_LANG, the config, the locale.
"""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widgets import Footer

from leases.core.i18n import NAMES, _, language, set_language
from tui.dashboard.host import ZukaHost


def switch_language(app: App[Any], lang: str) -> None:
    """Speak lang from now on, and redraw every screen of app in it."""
    if lang == language():
        app.notify(_("The dashboard already speaks {name}.").format(name=NAMES[lang]))
        return
    set_language(lang)
    relabel_all(app)
    app.notify(_("The dashboard now speaks {name}.").format(name=NAMES[lang]), markup=False)


def relabel_all(app: App[Any]) -> None:
    """Each screen on the stack (and the app's own words) in the language in use."""
    if isinstance(app, ZukaHost):
        app.relabel()
    for screen in app.screen_stack:
        relabel = getattr(screen, "relabel", None)
        if callable(relabel):
            relabel()
        for footer in screen.query(Footer):
            footer.refresh(recompose=True)
        screen.refresh_bindings()
