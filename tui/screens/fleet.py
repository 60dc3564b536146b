"""The fleet screen: one row per node, what it does now and over the last hour, its lease.

It draws what the app's refresh hands it (ZukaApp.refresh_view reads the ledger off the UI
loop); sorting, the `/` filter and grouping are applied here, to rows already built.
Screens it opens are imported inside the action, each from its own module.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from leases import fleetfilter
from leases.errors import InputError
from leases.fleetfilter import Filter
from leases.models import NodeHealth
from leases.textsafe import visible
from tui.fleetview import CELL_MAX, COLUMNS, FleetRow, node_width, plain, visible_columns
from tui.widgets.fleet_table import FleetTable, TableRow, group_row

if TYPE_CHECKING:
    from tui.app import ZukaApp

GROUPS = ("none", "channel", "provider")
# Longest detail line (an SSH error, a node's stderr) shown under the table.
DETAIL_MAX = 400
LeaseMode = Literal["add", "edit", "renew", "end"]


def _b(key: str, action: str, description: str, verb: str, tooltip: str, *,
       show: bool = True) -> Binding:  # fmt: skip
    return Binding(key, action, description, show=show, id=f"fleet-{verb}", tooltip=tooltip)


class FleetScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        _b("enter", "open_node", "Open", "open", "Open the selected node: GPUs, charts, lease"),
        _b("slash", "filter", "Filter", "filter",
           "Filter: text, channel:X provider:X state:X model:X tag:X ending:7d idle busy alert"),
        _b("escape", "clear_filter", "Clear filter", "clear-filter", "Show every node again",
           show=False),
        _b("s", "sort", "Sort", "sort", "Sort by the next column"),
        _b("S", "reverse", "Reverse", "reverse", "Reverse the sort order", show=False),
        _b("g", "group", "Group", "group", "Group by nothing, channel or provider"),
        # Off the footer (80 columns): the status line says "N alerts (a)" when there are.
        _b("a", "alerts", "Alerts", "alerts", "Open alerts: acknowledge, snooze", show=False),
        _b("n", "add_node", "Add node", "add-node", "Add a node with a form"),
        _b("p", "paste_node", "Paste login", "paste",
           "Add a node from a platform's login command", show=False),
        _b("e", "edit_node", "Edit node", "edit-node", "Edit the selected node", show=False),
        _b("l", "lease('add')", "Add lease", "add-lease", "Add a lease to the selected node"),
        _b("L", "lease('edit')", "Edit lease", "edit-lease", "Edit the selected node's lease",
           show=False),
        _b("w", "lease('renew')", "Renew", "renew", "Renew the selected node's lease",
           show=False),
        _b("E", "lease('end')", "End lease", "end-lease", "End the selected node's lease",
           show=False),
        _b("x", "add_resource", "Add resource", "add-resource",
           "Record a disk, snapshot or bucket of the selected node's lease", show=False),
        _b("o", "offboard", "Offboard", "offboard",
           "Plan and run the secure offboarding of the selected node", show=False),
        _b("c", "check", "Check", "check", "Run the acceptance check on the selected node",
           show=False),
        _b("t", "trust", "Trust key", "trust",
           "Check and accept the selected node's new SSH host key", show=False),
        _b("r", "reload", "Reload", "reload", "Re-read nodes, leases and the month's cost"),
    ]  # fmt: skip

    def __init__(self) -> None:
        super().__init__(id="fleet-screen")
        self.rows: list[FleetRow] = []
        self.sort_key = "node"
        self.reverse = False
        self.group = "none"
        self.filter = Filter()
        self._status = ""  # the app's: nodes, health, who polls
        self._lines: dict[str, str] = {}  # selector -> the text its Static shows

    @property
    def zuka(self) -> ZukaApp:
        from tui.app import ZukaApp

        app = self.app
        assert isinstance(app, ZukaApp)
        return app

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-header")
        yield FleetTable(id="fleet")
        yield Static(id="fleet-detail")
        yield Input(placeholder="filter: text, channel:, provider:, ending:7d, idle, alert",
                    id="fleet-filter")  # fmt: skip
        yield Static(id="fleet-status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#fleet-filter", Input).display = False
        self._fit_columns()

    # -- drawing -------------------------------------------------------------------------

    @property
    def table(self) -> FleetTable:
        return self.query_one("#fleet", FleetTable)

    def show(self, rows: Sequence[FleetRow], header: str, status: str) -> None:
        """The app's refresh: new rows, header and status line."""
        self.rows = list(rows)
        self._line("#fleet-header", header, bold=True)
        self._status = status
        # Only while on top (not under a form or another screen): redrawn on return.
        if self.app.screen is self:
            self._fit_columns()
            self.redraw()

    def _line(self, selector: str, text: str, *, bold: bool = False) -> None:
        """One of the screen's one-line Statics: redrawn only when its text changed, and
        without a layout (each is one line high): every 2 s, most lines are unchanged."""
        if self._lines.get(selector) == text:
            return
        self._lines[selector] = text
        line = Text(text, no_wrap=True, end="") if bold else plain(text)
        self.query_one(selector, Static).update(line, layout=False)

    def on_screen_resume(self) -> None:
        self._fit_columns()
        self.redraw()

    def _fit_columns(self) -> None:
        width = self.size.width or self.app.size.width
        names = [r.key for r in self.rows]
        self.table.set_columns(visible_columns(width - 2, node_width(names)))

    def on_resize(self, event: Resize) -> None:
        if self.table.set_columns(visible_columns(event.size.width - 2, node_width(
                [r.key for r in self.rows]))):  # fmt: skip
            self.redraw()

    def visible_rows(self) -> list[FleetRow]:
        """The rows the filter keeps, sorted (grouping happens in redraw)."""
        rows = [r for r in self.rows if fleetfilter.matches(self.filter, r.facts)]
        # Unknown values go last either way: a sort on util shows the nodes read first.
        known = [r for r in rows if r.sort[self.sort_key] is not None]
        known.sort(key=lambda r: r.sort[self.sort_key], reverse=self.reverse)
        return known + [r for r in rows if r.sort[self.sort_key] is None]

    def redraw(self) -> None:
        rows = self.visible_rows()
        out: list[TableRow] = []
        if self.group == "none":
            out = [TableRow(r.key, r.cells, r.sig) for r in rows]
        else:
            groups: dict[str, list[FleetRow]] = {}
            for r in rows:
                label = getattr(r.facts, self.group) or "-"
                groups.setdefault(label, []).append(r)
            for label in sorted(groups):
                out.append(group_row(visible(label, 40), len(groups[label])))
                out += [TableRow(r.key, r.cells, r.sig) for r in groups[label]]
        self.table.show(out)
        self._show_status(len(rows))
        self._show_detail()

    def _show_status(self, shown: int) -> None:
        # What the user chose first: at 80 columns the end of the line is cut.
        col = next(c.label for c in COLUMNS if c.key == self.sort_key)
        parts = []
        if self.filter:
            parts.append(f"filter '{visible(self.filter.text, 40)}': {shown} of {len(self.rows)}")
        if self.group != "none":
            parts.append(f"by {self.group}")
        parts.append(f"sort {col} {'↓' if self.reverse else '↑'}")
        parts.append(self._status)
        self._line("#fleet-status", " · ".join(p for p in parts if p))

    def _show_detail(self) -> None:
        name = self.table.selected_key
        status = self.zuka.status_of(name) if name else None
        if name is None:
            self._line("#fleet-detail", "")
            return
        text = f"{visible(name)}: {status.health.value if status else 'connecting'}"
        if status and status.detail:
            text += f" — {visible(status.detail, DETAIL_MAX)}"
        if status and status.fingerprint:
            text += f" (key {visible(status.fingerprint)})"
        # What the node reports it holds (a card sold as one model may report another),
        # else what the ledger says.
        reported = Counter(visible(s.name, CELL_MAX) for s in status.samples) if status else {}
        if reported:
            text += " · " + ", ".join(f"{n}× {model}" for model, n in reported.items())
        else:
            row = next((r for r in self.rows if r.key == name), None)
            if row is not None:
                text += f" · {row.cells['gpus'].plain} (ledger)"
        self._line("#fleet-detail", text)

    @on(DataTable.RowHighlighted, "#fleet")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#fleet")
    def _selected_row(self) -> None:
        self.action_open_node()

    # -- sort, filter, group -------------------------------------------------------------

    def action_sort(self) -> None:
        keys = [c.key for c in COLUMNS]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.redraw()

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self.redraw()

    def action_group(self) -> None:
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        self.redraw()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.display = False
        self.filter = Filter()
        self.table.focus()
        self.redraw()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        try:
            self.filter = fleetfilter.parse(event.value)
        except InputError as exc:
            # Keep the last filter that parsed; say what is wrong with this one.
            self._line("#fleet-status", f"filter {exc.field}: {exc.reason} (got '{exc.value}')")
            return
        self.redraw()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_submitted(self) -> None:
        if not self.filter:
            self.action_clear_filter()
            return
        self.table.focus()

    # -- actions that open other screens ---------------------------------------------------

    def _screen(self, module: str, name: str, what: str) -> Any:
        """The screen class `name` of tui.screens.<module>, imported when first used;
        None (and said) where this build has no such screen."""
        path = f"tui.screens.{module}"
        try:
            return getattr(importlib.import_module(path), name)
        except ModuleNotFoundError as exc:
            if exc.name != path:
                raise
            self.app.notify(f"The {what} is not in this build yet.", markup=False,
                            severity="warning")  # fmt: skip
            return None

    def _node(self) -> str | None:
        name = self.table.selected_key
        if name is None:
            self.app.notify("Select a node first.", markup=False, severity="warning")
        return name

    def _after_write(self, wrote: object) -> None:
        if wrote:
            self.zuka.refresh_view(reload=True)

    def action_open_node(self) -> None:
        name = self._node()
        screen = self._screen("node", "NodeScreen", "node screen") if name else None
        if screen is not None:
            self.app.push_screen(screen(name))

    def action_add_node(self, paste: bool = False) -> None:
        form = self._screen("node_form", "NodeFormScreen", "node form")
        if form is not None and self.zuka.ledger is not None:
            self.app.push_screen(form(self.zuka.ledger, paste=paste), self._after_write)

    def action_paste_node(self) -> None:
        self.action_add_node(paste=True)

    def action_edit_node(self) -> None:
        name = self._node()
        form = self._screen("node_form", "NodeFormScreen", "node form") if name else None
        if form is not None and self.zuka.ledger is not None:
            self.app.push_screen(form(self.zuka.ledger, name=name), self._after_write)

    def action_lease(self, mode: LeaseMode) -> None:
        name = self._node()
        form = self._screen("lease_form", "LeaseFormScreen", "lease form") if name else None
        if form is not None and self.zuka.ledger is not None and name is not None:
            screen = form(self.zuka.ledger, name, mode=mode, clock=self.zuka.clock,
                          tz=self.zuka.billing_tz)  # fmt: skip
            self.app.push_screen(screen, self._after_write)

    def action_add_resource(self) -> None:
        name = self._node()
        form = None
        if name is not None:
            form = self._screen("resource_form", "ResourceFormScreen", "resource form")
        if form is not None and self.zuka.ledger is not None:
            self.app.push_screen(form(self.zuka.ledger, name), self._after_write)

    def action_alerts(self) -> None:
        self.zuka.action_alerts()

    def action_offboard(self) -> None:
        name = self._node()
        if name is not None:
            from tui.screens.offboard import OffboardScreen

            self.app.push_screen(
                OffboardScreen(name), lambda _: self.zuka.refresh_view(reload=True)
            )

    def action_check(self) -> None:
        self.app.notify("The acceptance check is not built yet: there is no screen for it.",
                        markup=False, severity="warning")  # fmt: skip

    def action_trust(self) -> None:
        name = self.table.selected_key
        status = self.zuka.status_of(name) if name else None
        if name is None or status is None or status.health is not NodeHealth.UNTRUSTED:
            self.app.notify(
                "Only a node whose host key is new (untrusted) can be trusted here; "
                "a changed key is never replaced.",
                markup=False,
                severity="warning",
            )
            return
        self.zuka.trust_node(name)

    def action_reload(self) -> None:
        self.zuka.refresh_view(reload=True)
        self.app.notify("ledger re-read", markup=False)
