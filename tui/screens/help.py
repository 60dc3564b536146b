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
from textual.widgets import DataTable, Static

from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from tui.dashboard.commands import bound_commands, screen_under
from tui.screens.fleetview import plain
from tui.widgets.footer import ZukaFooter

# The id before the longest column, so that at 80 columns the tooltip is what is cut.
COLUMNS = (N_("Key"), N_("Does"), N_("Id (remap in config [keys])"), N_("Why"))
WHY_MIN = 24  # the Why column's least width: below it the table scrolls sideways
REMAP_HINT = N_(
    'Remap a key in config.toml: [keys] <id> = "<keys>", e.g. app-help = "f1,question_mark". '
    "ctrl+p opens the command palette."
)
# Each screen as the help's title names it (a screen not here: its class name in words).
SCREEN_NAMES = {
    "FleetScreen": N_("Keys on the fleet screen · escape closes"),
    "NodeScreen": N_("Keys on the node screen · escape closes"),
    "AlertsScreen": N_("Keys on the alerts screen · escape closes"),
    "AccountsScreen": N_("Keys on the accounts screen · escape closes"),
    "OffboardScreen": N_("Keys on the offboard screen · escape closes"),
    "AcceptanceScreen": N_("Keys on the acceptance screen · escape closes"),
    "ProcessesScreen": N_("Keys on the processes screen · escape closes"),
    "NodeFormScreen": N_("Keys on the node form screen · escape closes"),
    "LeaseFormScreen": N_("Keys on the lease form screen · escape closes"),
    "ResourceFormScreen": N_("Keys on the resource form screen · escape closes"),
}


def help_title(screen: Screen[Any]) -> str:
    """The help's title for the screen it was opened over, in the language in use."""
    if screen is screen.app.screen_stack[0]:
        return _(SCREEN_NAMES["FleetScreen"])
    known = SCREEN_NAMES.get(type(screen).__name__)
    if known is not None:
        return _(known)
    return _("Keys on the {screen} screen · escape closes").format(screen=screen_name(screen))


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
            N_("Close help"),
            id="help-close",
            tooltip=N_("Back to where you were"),
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
        yield Static(plain(_(REMAP_HINT), wrap=True), id="help-hint")
        yield ZukaFooter()

    def on_mount(self) -> None:
        self.relabel()

    def relabel(self) -> None:
        """The title and the table in the language in use (the palette may switch it)."""
        self._shape = None
        self._fill(self.app.size.width)
        self.query_one("#help-title", Static).update(plain(help_title(screen_under(self))))

    def on_resize(self, event: Resize) -> None:
        self._fill(event.size.width)

    def _fill(self, width: int) -> None:
        """The table at this width: Key, Does and Id as wide as their widest cell, Why
        the room left (at least WHY_MIN), its text wrapped over as many lines as it needs
        (it was cut at 80 and 120 columns)."""
        table = self.query_one("#help-keys", DataTable)
        rows = [
            (" ".join(r.keys), _("{title} (everywhere)").format(title=r.title)
             if r.everywhere else r.title, r.id,
             r.tooltip, r.id)
            for r in bound_commands(screen_under(self))
        ]  # fmt: skip
        labels = [_(c) for c in COLUMNS]
        fixed = [max([cell_len(c), *(cell_len(visible(r[i])) for r in rows)])
                 for i, c in enumerate(labels[:3])]  # fmt: skip
        # Each cell's padding, the scroll bar, the screen's border.
        why = max(WHY_MIN, width - sum(fixed) - 2 * len(COLUMNS) - 3)
        if (why, tuple(fixed), len(rows)) == self._shape:
            return
        self._shape = (why, tuple(fixed), len(rows))
        table.clear(columns=True)
        for label, w in zip(labels, [*fixed, why], strict=True):
            table.add_column(Text(label), width=w)  # a label is markup: [keys]
        for keys, does, ident, tooltip, key in rows:
            table.add_row(plain(keys), plain(does), plain(ident), plain(tooltip, 400, wrap=True),
                          key=key, height=None)  # fmt: skip

    def action_close(self) -> None:
        self.dismiss(None)
