"""`?`: every key of the screen the user was on and of the app, from the same binding table
as the command palette (tui.dashboard.commands), with the id a user remaps in the config."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static

from tui.dashboard.commands import bound_commands, screen_under
from tui.screens.fleetview import plain

# The id before the longest column, so that at 80 columns the tooltip is what is cut.
COLUMNS = ("Key", "Does", "Id (remap in config [keys])", "Why")
REMAP_HINT = (
    'Remap a key in config.toml: [keys] <id> = "<keys>", e.g. app-help = "f1,question_mark". '
    "ctrl+p opens the command palette."
)


def screen_name(screen: Screen[Any]) -> str:
    """ "node form" for NodeFormScreen; the app's default screen is the fleet."""
    if screen is screen.app.screen_stack[0]:
        return "fleet"
    name = type(screen).__name__.removesuffix("Screen")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape,q,question_mark",
            "close",
            "Close help",
            id="help-close",
            tooltip="Back to where you were",
        ),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help-box { width: 100%; height: 100%; background: $surface; }
    #help-title, #help-hint { height: auto; padding: 0 1; }
    #help-title { background: $boost; text-style: bold; }
    #help-keys { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="help-title")
        yield DataTable(id="help-keys", cursor_type="row", zebra_stripes=True)
        yield Static(plain(REMAP_HINT, wrap=True), id="help-hint")
        yield Footer()

    def on_mount(self) -> None:
        under = screen_under(self)
        table = self.query_one("#help-keys", DataTable)
        table.add_columns(*(Text(c) for c in COLUMNS))  # a label is markup: [keys]
        rows = bound_commands(under)
        for row in rows:
            where = "" if not row.everywhere else " (everywhere)"
            table.add_row(
                plain(" ".join(row.keys)),
                plain(row.title + where),
                plain(row.id),
                plain(row.tooltip, 120),
                key=row.id,
            )
        title = f"Keys on the {screen_name(under)} screen · escape closes"
        self.query_one("#help-title", Static).update(plain(title))

    def action_close(self) -> None:
        self.dismiss(None)
