"""`?`: every key of the screen the user was on and of the app, from the same binding table
as the command palette (tui.dashboard.commands), with the id a user remaps in the config."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static

from leases.core.textsafe import visible
from tui.dashboard.commands import bound_commands, screen_under
from tui.screens.fleetview import plain

# The id before the longest column, so that at 80 columns the tooltip is what is cut.
COLUMNS = ("Key", "Does", "Id (remap in config [keys])", "Why")
WHY_MIN = 24  # the Why column's least width: below it the table scrolls sideways
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

    def __init__(self) -> None:
        super().__init__()
        self._shape: tuple[int, tuple[int, ...], int] | None = None  # what the table is filled for

    def compose(self) -> ComposeResult:
        yield Static(id="help-title")
        yield DataTable(id="help-keys", cursor_type="row", zebra_stripes=True)
        yield Static(plain(REMAP_HINT, wrap=True), id="help-hint")
        yield Footer()

    def on_mount(self) -> None:
        under = screen_under(self)
        self._fill(self.app.size.width)
        title = f"Keys on the {screen_name(under)} screen · escape closes"
        self.query_one("#help-title", Static).update(plain(title))

    def on_resize(self, event: Resize) -> None:
        self._fill(event.size.width)

    def _fill(self, width: int) -> None:
        """The table at this width: Key, Does and Id as wide as their widest cell, Why
        the room left (at least WHY_MIN), its text wrapped over as many lines as it needs
        (it was cut at 80 and 120 columns)."""
        table = self.query_one("#help-keys", DataTable)
        rows = [
            (" ".join(r.keys), r.title + (" (everywhere)" if r.everywhere else ""), r.id,
             r.tooltip, r.id)
            for r in bound_commands(screen_under(self))
        ]  # fmt: skip
        fixed = [max([cell_len(c), *(cell_len(visible(r[i])) for r in rows)])
                 for i, c in enumerate(COLUMNS[:3])]  # fmt: skip
        # Each cell's padding, the scroll bar, the screen's border.
        why = max(WHY_MIN, width - sum(fixed) - 2 * len(COLUMNS) - 3)
        if (why, tuple(fixed), len(rows)) == self._shape:
            return
        self._shape = (why, tuple(fixed), len(rows))
        table.clear(columns=True)
        for label, w in zip(COLUMNS, [*fixed, why], strict=True):
            table.add_column(Text(label), width=w)  # a label is markup: [keys]
        for keys, does, ident, tooltip, key in rows:
            table.add_row(plain(keys), plain(does), plain(ident), plain(tooltip, 400, wrap=True),
                          key=key, height=None)  # fmt: skip

    def action_close(self) -> None:
        self.dismiss(None)
