"""The fleet screen: one row per node, what it does now and over the last hour, its lease.

It draws what the app's refresh hands it (ZukaApp.refresh_view reads the ledger off the UI
loop); sorting, the `/` filter and grouping are applied here, to rows already built.
Screens it opens are imported inside the action, each from its own module.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from time import monotonic
from typing import ClassVar, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Key, Resize
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import NodeHealth, NodeStatus
from leases.core.textsafe import visible
from leases.fleet import filter as fleetfilter
from leases.fleet.filter import Filter
from leases.fleet.nodestatus import health_label
from leases.lab.roles import Role, me, refusal
from leases.telemetry.words import detail_said
from tui.dashboard import lazy
from tui.dashboard.host import ZukaHost
from tui.screens.fleetview import (
    CELL_MAX,
    COLUMNS,
    Column,
    FleetRow,
    fit_header,
    node_width,
    plain,
    visible_columns,
)
from tui.widgets.fleet_footer import PriorityFooter
from tui.widgets.fleet_table import GROUP_PREFIX, FleetTable, TableRow, same_rows
from tui.widgets.valuewords import value_words

GROUPS = ("none", "channel", "provider")
# The status line's words for a grouping (GROUPS stays English: it is compared).
GROUP_WORDS = {"channel": N_("by channel"), "provider": N_("by provider")}
# Longest detail line (an SSH error, a node's stderr) shown under the table.
DETAIL_MAX = 400
LeaseMode = Literal["add", "edit", "renew", "end", "stop", "resume"]
# The footer's keys, the most needed first: at 80 columns the first six fit; every key is
# in `?` help. Actions as bound (enter is bound on the table, which runs the screen's).
FOOTER_ORDER = ("screen.open_node", "filter", "alerts", "offboard", "help", "quit",
                "clear_filter", "sort", "group", "add_node", "lease('add')", "reload")  # fmt: skip
FOLDED, UNFOLDED = "▸", "▾"
FILTER_HINT = N_("filter: text, channel:, provider:, ending:7d, idle, alert")
# Columns whose values change with every reading: sorted by one, a refresh would reorder
# the rows under a user moving through them. The order is held while they move.
LIVE_COLUMNS = frozenset({"util", "hour", "mem", "temp", "power"})
HOLD_S = 5.0  # after the last cursor move, a refresh may re-sort again
MOVES = frozenset({"up", "down", "pageup", "pagedown", "home", "end", "ctrl+home", "ctrl+end"})


def _b(key: str, action: str, description: str, verb: str, tooltip: str, *,
       show: bool = True) -> Binding:  # fmt: skip
    return Binding(key, action, description, show=show, id=f"fleet-{verb}", tooltip=tooltip)


class FleetScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        # The table binds enter too (it would take it first): the same id, the same action.
        _b("enter", "open_node", N_("Open"), "open",
           N_("Open the selected node (GPUs, charts, lease); fold or unfold a group")),
        _b("slash", "filter", N_("Filter"), "filter",
           N_("Filter: text, channel:X provider:X state:X model:X tag:X ending:7d idle busy "
              "alert")),
        # In the footer only while there is a filter to clear (check_action).
        _b("escape", "clear_filter", N_("Clear filter"), "clear-filter",
           N_("Show every node again")),
        _b("s", "sort", N_("Sort"), "sort", N_("Sort by the next column")),
        _b("S", "reverse", N_("Reverse"), "reverse", N_("Reverse the sort order"), show=False),
        _b("g", "group", N_("Group"), "group", N_("Group by nothing, channel or provider")),
        _b("a", "alerts", N_("Alerts"), "alerts", N_("Open alerts: acknowledge, snooze")),
        _b("n", "add_node", N_("Add node"), "add-node", N_("Add a node with a form")),
        _b("p", "paste_node", N_("Paste login"), "paste",
           N_("Add a node from a platform's login command"), show=False),
        _b("e", "edit_node", N_("Edit node"), "edit-node", N_("Edit the selected node"),
           show=False),
        _b("l", "lease('add')", N_("Add lease"), "add-lease",
           N_("Add a lease to the selected node")),
        _b("L", "lease('edit')", N_("Edit lease"), "edit-lease",
           N_("Edit the selected node's lease"), show=False),
        _b("w", "lease('renew')", N_("Renew"), "renew", N_("Renew the selected node's lease"),
           show=False),
        _b("E", "lease('end')", N_("End lease"), "end-lease", N_("End the selected node's lease"),
           show=False),
        _b("z", "lease('stop')", N_("Stopped"), "stop", N_("Record the selected node stopped"),
           show=False),
        _b("Z", "lease('resume')", N_("Running"), "resume",
           N_("Record the stopped node running again"), show=False),
        _b("x", "add_resource", N_("Add resource"), "add-resource",
           N_("Record a disk, snapshot or bucket of the selected node's lease"), show=False),
        _b("o", "offboard", N_("Offboard"), "offboard",
           N_("Plan and run the secure offboarding of the selected node")),
        _b("c", "check", N_("Check"), "check",
           N_("Run the acceptance check on the selected node"), show=False),
        _b("t", "trust", N_("Trust key"), "trust",
           N_("Check and accept the selected node's new SSH host key"), show=False),
        _b("i", "shell", N_("Shell"), "shell",
           N_("Open a shell on the selected node, the way zuka polls it"), show=False),
        _b("I", "tmux", N_("tmux"), "tmux",
           N_("Attach or create tmux session zuka (or one named) on the node"), show=False),
        _b("r", "reload", N_("Reload"), "reload",
           N_("Re-read nodes, leases and the month's cost")),
        _b("P", "processes", N_("Processes"), "processes",
           N_("Every GPU process across the fleet: user, memory, command; stop one"), show=False),
        _b("dollar_sign", "accounts", N_("Accounts"), "accounts",
           N_("Balances, deposits, invoicing, the last bill and offers of this month"),
           show=False),
    ]  # fmt: skip

    def __init__(self) -> None:
        super().__init__(id="fleet-screen")
        self.rows: list[FleetRow] = []
        self.sort_key = "node"
        self.reverse = False
        self.group = "none"
        self.filter = Filter()
        self.filter_error = ""  # what is wrong with the filter typed (the last good one holds)
        self.folded: set[str] = set()  # group labels whose nodes are hidden
        self.hold_s = HOLD_S
        self.moved_at: float | None = None  # monotonic time of the user's last cursor move
        self.resumed_at = 0.0  # monotonic time it was last back on top (0: never covered)
        self._typed: deque[Key] = deque(maxlen=32)  # the last keys that reached this screen
        self._held = False  # the last redraw kept the table's order (a live sort, moving)
        self._filtering = False  # the filter box is open or a filter is in force
        self._status = self._header = ""  # the app's status line (nodes, health, who polls), header
        self._lines: dict[str, str] = {}  # selector -> the text its Static shows

    @property
    def zuka(self) -> ZukaHost:
        app = self.app
        assert isinstance(app, ZukaHost)
        return app

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-header")
        yield FleetTable(id="fleet")
        yield Static(id="fleet-detail")
        yield Input(placeholder=_(FILTER_HINT), id="fleet-filter")
        yield Static(id="fleet-status")
        yield PriorityFooter(FOOTER_ORDER)

    def on_mount(self) -> None:
        self.query_one("#fleet-filter", Input).display = False
        self._show_header()
        if not self._fit_columns():
            self.redraw()

    # -- drawing -------------------------------------------------------------------------

    @property
    def table(self) -> FleetTable:
        return self.query_one("#fleet", FleetTable)

    def show(self, rows: Sequence[FleetRow], header: str, status: str) -> None:
        """The app's refresh: rows, header, status line (drawn once mounted: may come first)."""
        same = not self._held and status == self._status and same_rows(rows, self.rows)
        self.rows, self._header, self._status = list(rows), header, status
        if not self.is_mounted:
            return
        self._show_header()
        if same:  # the rows drawn and the words of the last refresh: nothing to draw
            self.table.updates = 0
        # Only while on top (not under a form or another screen): redrawn on return.
        elif self.app.screen is self and not self._fit_columns():
            self.redraw(refresh=True)

    def _line(self, selector: str, text: str, *, bold: bool = False) -> None:
        """One of the screen's one-line Statics: redrawn only when its text changed, and
        without a layout (each is one line high): every 2 s, most lines are unchanged."""
        if self._lines.get(selector) == text:
            return
        self._lines[selector] = text
        line = Text(text, no_wrap=True, end="") if bold else plain(text)
        self.query_one(selector, Static).update(line, layout=False)

    def relabel(self) -> None:
        """The screen's words in the language in use (tui.dashboard.language): the
        column labels, the filter's hint, the lines; the rows follow with the refresh."""
        if not self.is_mounted:
            return
        self._lines.clear()
        self.query_one("#fleet-filter", Input).placeholder = _(FILTER_HINT)
        self._fit_columns()
        self._show_header()
        self.redraw()

    def on_screen_suspend(self) -> None:  # covered: tui.dashboard.gcpolicy freezes nothing
        self.resumed_at = float("inf")

    def on_screen_resume(self) -> None:
        self.resumed_at = min(self.resumed_at, monotonic())  # 0 at its first showing
        self._fit_columns()
        self.redraw()

    def _columns(self, width: int) -> tuple[Column, ...]:
        names = [r.key for r in self.rows]
        offboarding = any(r.sort["offboard"] is not None for r in self.rows)
        return visible_columns(width - 2, node_width(names), offboarding=offboarding)

    def _fit_columns(self, width: int | None = None) -> bool:
        """Show the columns that fit; a new column set rebuilds the table (True: redrawn),
        so the cursor is put back on the row it was on (else it jumps to the first)."""
        keep = self.table.cursor_target
        if self.table.set_columns(self._columns(width or self.size.width or self.app.size.width)):
            self.redraw()
            self._select(keep)
            return True
        return False

    def on_resize(self, event: Resize) -> None:
        self._fit_columns(event.size.width)
        self._show_header(event.size.width)

    def _show_header(self, width: int | None = None) -> None:
        """The header, its ledger path whole at its end (the figures cut before it)."""
        width = (width or self.size.width or self.app.size.width) - 2
        self._line("#fleet-header", fit_header(self._header, width), bold=True)

    def _cursor_key(self) -> str | None:
        """The row key under the cursor: a node's name or a group heading's."""
        table = self.table
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate)[0].value

    def _select(self, key: str | None) -> None:
        """Put the cursor on this row, in view, as soon as it is shown (nothing when it
        is not to be shown)."""
        self.table.select_key(key)

    def visible_rows(self, *, hold: bool = False) -> list[FleetRow]:
        """The rows the filter keeps, sorted (grouping happens in redraw). hold: keep the
        order the table shows (rows it does not show yet go last)."""
        rows = [r for r in self.rows if fleetfilter.matches(self.filter, r.facts)]
        if hold:
            table = self.table
            at = {str(r.key.value): i for i, r in enumerate(table.ordered_rows)}
            return sorted(rows, key=lambda r: at.get(r.key, len(at)))
        # Unknown values go last either way: a sort on util shows the nodes read first.
        known = [r for r in rows if r.sort[self.sort_key] is not None]
        known.sort(key=lambda r: r.sort[self.sort_key], reverse=self.reverse)
        return known + [r for r in rows if r.sort[self.sort_key] is None]

    def on_key(self, event: Key) -> None:
        self._typed.append(event)
        if event.key in MOVES:
            self.moved_at = monotonic()
            self.table.forget_wish()

    def typed_before_filter(self, event: Key) -> bool:
        """A printable key typed in one burst with `/` (a slow link delivers keys so), queued
        for the table before the filter box had the cursor, is the box's text, typed again
        there (the box takes each printable key it gets), never a fleet key: `/idle` must
        not add a lease, `/qwen` must not quit."""
        if not (self.is_active and event.is_printable):
            return False
        # A key can reach the app before this screen has composed its children.
        box = next(iter(self.query("#fleet-filter").results(Input)), None)
        if box is None or self.focused is not box or not self._typed_here(event):
            return False
        box.post_message(Key(event.key, event.character))
        return True

    def _typed_here(self, event: Key) -> bool:
        """The key came through this screen (keys bubble from the focused widget)."""
        return any(e is event for e in self._typed)

    def typed_before_covered(self, event: Key) -> bool:
        """Typed at this screen in one burst with the key that opened another over it (`n`
        then a name): its bindings are checked once it reaches the app, after that opened."""
        return not self.is_active and self._typed_here(event)

    def _holding(self) -> bool:
        """Sorted by a live column and the user moved the cursor a moment ago."""
        return (
            self.sort_key in LIVE_COLUMNS
            and self.moved_at is not None
            and monotonic() - self.moved_at < self.hold_s
        )

    def redraw(self, *, refresh: bool = False) -> None:
        """Show the rows; refresh: new readings (a live sort's order may be held)."""
        self._held = refresh and self._holding()
        rows = self.visible_rows(hold=self._held)
        out: list[TableRow] = []
        if self.group == "none":
            out = [TableRow(r.key, r.cells, r.sig) for r in rows]
        else:
            groups: dict[str, list[FleetRow]] = {}
            for r in rows:
                label = getattr(r.facts, self.group) or "-"
                groups.setdefault(label, []).append(r)
            for label in sorted(groups):
                out.append(self._group_row(label, len(groups[label])))
                if label not in self.folded:
                    out += [TableRow(r.key, r.cells, r.sig) for r in groups[label]]
        # Rows reordered: the cursor stays on its node, which the table keeps in view.
        self.table.show(out)
        self._show_status(len(rows))
        self._show_detail()

    def _group_row(self, label: str, count: int) -> TableRow:
        """A group heading: its whole label and count in the first cell, which the table
        draws across the row (FleetTable._heading_cell), marked folded or not."""
        mark = FOLDED if label in self.folded else UNFOLDED
        shown = value_words(label) if self.group == "channel" else label
        text = f"{mark} {visible(shown, 60)} ({count})"
        cells = {self.table.shown_columns[0].key: Text(text, style="bold", no_wrap=True, end="")}
        return TableRow(GROUP_PREFIX + label, cells, (text,))

    def go_to(self, name: str) -> None:
        """Put the cursor on this node, in view: a filter that hides it is cleared (and
        said so), a folded group that holds it unfolded."""
        row = next((r for r in self.rows if r.key == name), None)
        if row is None:
            return
        if self.filter and not fleetfilter.matches(self.filter, row.facts):
            self.action_clear_filter()
            self.app.notify(
                _("Filter cleared to show {name}.").format(name=visible(name, 60)), markup=False
            )
        if self.group != "none":
            self.folded.discard(getattr(row.facts, self.group) or "-")
        self.redraw()
        self._select(name)

    def _show_status(self, shown: int) -> None:
        # What the user chose first: at 80 columns the end of the line is cut. A filter
        # that does not parse is said for as long as the box holds it.
        col = _(next(c.label for c in COLUMNS if c.key == self.sort_key))
        parts = [self.filter_error]
        text = visible(self.filter.text, 40)
        if self.filter and not shown:
            parts.append(_("no node matches '{text}' (escape clears)").format(text=text))
        elif self.filter:
            parts.append(
                _("filter '{text}': {shown} of {count}").format(
                    text=text, shown=shown, count=len(self.rows)
                )
            )
        if self.group != "none":
            parts.append(_(GROUP_WORDS[self.group]))
        said = _("sort {column} {arrow} (held while you move)") if self._held else _(
            "sort {column} {arrow}")  # fmt: skip
        parts.append(said.format(column=col, arrow="↓" if self.reverse else "↑"))
        parts.append(self._status)
        line, width = " · ".join(p for p in parts if p), self.size.width or self.app.size.width
        self._line("#fleet-status", fit_header(line, width - 2, path=False))  # no item cut

    def _show_detail(self) -> None:
        name = self.table.selected_key
        status = self.zuka.status_of(name) if name else None
        if name is None:
            self._line("#fleet-detail", "")
            return
        state = health_label(status.health) if status else _("connecting")
        text = f"{visible(name)}: {state}"
        if status and status.detail:
            text += f" — {visible(detail_said(status.detail), DETAIL_MAX)}"
        if status and status.fingerprint:
            text += " " + _("(key {fingerprint})").format(fingerprint=visible(status.fingerprint))
        # What the node reports it holds (a card sold as one model may report another),
        # else what the ledger says.
        reported = Counter(visible(s.name, CELL_MAX) for s in status.samples) if status else {}
        if reported:
            text += " · " + ", ".join(f"{n}× {model}" for model, n in reported.items())
        else:
            row = next((r for r in self.rows if r.key == name), None)
            if row is not None:
                text += " · " + _("{gpus} (ledger)").format(gpus=row.cells["gpus"].plain)
        self._line("#fleet-detail", text)

    @on(DataTable.RowHighlighted, "#fleet")
    def _highlighted(self) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#fleet")
    def _selected_row(self) -> None:  # a click on the highlighted row
        self.action_open_node()

    # -- sort, filter, group -------------------------------------------------------------

    def action_sort(self) -> None:
        """The next column shown (a hidden one would sort by what the user cannot see)."""
        self.moved_at = None  # sorted on demand: re-sort now
        keys = [c.key for c in self.table.shown_columns] or [c.key for c in COLUMNS]
        at = keys.index(self.sort_key) if self.sort_key in keys else -1
        self.sort_key = keys[(at + 1) % len(keys)]
        self.redraw()

    def action_reverse(self) -> None:
        self.moved_at = None
        self.reverse = not self.reverse
        self.redraw()

    def action_group(self) -> None:
        self.group = GROUPS[(GROUPS.index(self.group) + 1) % len(GROUPS)]
        self.redraw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":  # nothing to clear: disabled, so off the footer
            return True if self._filtering else None
        return True

    def action_filter(self) -> None:
        self._filtering = True
        box = self.query_one("#fleet-filter", Input)
        box.display = True
        # At once, not as focus() does (after the keys already queued): `/idle` typed in
        # one burst is the filter's text, not fleet keys (`l` adds a lease, `q` quits).
        self.set_focus(box)
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.display = False
        self.filter = Filter()
        self.filter_error = ""
        self._filtering = False
        self.refresh_bindings()
        self.table.focus()
        self.redraw()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        try:
            self.filter = fleetfilter.parse(event.value)
            self.filter_error = ""
        except InputError as exc:
            # Keep the last filter that parsed; say what is wrong with this one (every
            # redraw says it again until the box holds a filter that parses).
            self.filter_error = _("{field}: {reason} (got '{value}')").format(
                field=exc.field, reason=exc.reason, value=visible(exc.value, 40)
            )
        self.redraw()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_submitted(self) -> None:
        if self.filter_error:  # stay in the box: the status line says what to fix
            return
        if not self.filter:
            self.action_clear_filter()
            return
        self.table.focus()

    # -- actions that open other screens ---------------------------------------------------

    def _node(self) -> str | None:
        name = self.table.selected_key
        if name is None:
            self.app.notify(_("Select a node first."), markup=False, severity="warning")
        return name

    def _after_write(self, wrote: object) -> None:
        if wrote:
            self.zuka.refresh_view(reload=True)

    def action_open_node(self) -> None:
        """Open the node under the cursor; on a group heading, fold or unfold the group."""
        key = self._cursor_key()
        if key is not None and key.startswith(GROUP_PREFIX):
            label = key.removeprefix(GROUP_PREFIX)
            self.folded ^= {label}
            self.redraw()
            return
        name = self._node()
        if name is not None:
            self.app.push_screen(lazy.node_screen(name))

    def _refused(self, what: str, role: Role = Role.EDIT) -> bool:
        """True, and said with the group it needs, when this user may only read the
        ledger (a lab's viewer): before a form is opened, not when it is saved."""
        if not self.zuka.readonly:
            return False
        lab = self.zuka.lab
        said = (
            refusal(lab, role, _("{what} from the dashboard").format(what=_(what)), me())
            if lab is not None
            else _("{what}: this ledger is read-only for you").format(what=_(what))
        )
        self.app.notify(said, severity="error", markup=False, timeout=10)
        return True

    def action_add_node(self, paste: bool = False) -> None:
        if self._refused(N_("adding a node")):
            return
        if self.zuka.ledger is not None:
            form = lazy.node_form(self.zuka.ledger, paste=paste)
            self.app.push_screen(form, self._after_write)

    def action_paste_node(self) -> None:
        self.action_add_node(paste=True)

    def action_edit_node(self) -> None:
        if self._refused(N_("editing a node")):
            return
        name = self._node()
        if name is not None and self.zuka.ledger is not None:
            form = lazy.node_form(self.zuka.ledger, name=name)
            self.app.push_screen(form, self._after_write)

    def action_lease(self, mode: LeaseMode) -> None:
        if self._refused(N_("changing a lease")):
            return
        name = self._node()
        if name is not None and self.zuka.ledger is not None:
            screen = lazy.lease_form(self.zuka.ledger, name, mode=mode, clock=self.zuka.clock,
                                     tz=self.zuka.billing_tz)  # fmt: skip
            self.app.push_screen(screen, self._after_write)

    def action_add_resource(self) -> None:
        if self._refused(N_("recording a resource")):
            return
        name = self._node()
        if name is not None and self.zuka.ledger is not None:
            self.app.push_screen(lazy.resource_form(self.zuka.ledger, name), self._after_write)

    def action_alerts(self) -> None:
        self.zuka.action_alerts()

    def action_offboard(self) -> None:
        if self._refused(N_("offboarding"), Role.OFFBOARD):
            return
        name = self._node()
        if name is not None:
            from tui.screens.offboard import OffboardScreen

            self.app.push_screen(
                OffboardScreen(name), lambda _: self.zuka.refresh_view(reload=True)
            )

    def action_check(self) -> None:
        if self._refused(N_("an acceptance check")):
            return
        name = self._node()
        if name is not None:
            self.app.push_screen(
                lazy.acceptance_screen(name), lambda _: self.zuka.refresh_view(reload=True)
            )

    def action_trust(self) -> None:
        if self._refused(N_("trusting a host key")):
            return
        name = self.table.selected_key
        status = self.zuka.status_of(name) if name else None
        if name is None or status is None or status.health is not NodeHealth.UNTRUSTED:
            self.app.notify(
                _(
                    "Only a node whose host key is new (untrusted) can be trusted here; "
                    "a changed key is never replaced."
                ),
                markup=False,
                severity="warning",
            )
            return
        self.zuka.trust_node(name)

    def action_shell(self) -> None:
        name = self._node()
        if name is not None:
            from tui.dashboard.cockpit import shell_on

            shell_on(self.app, self.zuka.ledger, name, ask_tmux=False)

    def action_tmux(self) -> None:
        name = self._node()
        if name is not None:
            from tui.dashboard.cockpit import shell_on

            shell_on(self.app, self.zuka.ledger, name, ask_tmux=True)

    def action_accounts(self) -> None:
        self.app.push_screen(lazy.accounts_screen())

    def action_processes(self) -> None:
        def statuses() -> list[NodeStatus]:
            found = (self.zuka.status_of(r.key) for r in self.rows)
            return [s for s in found if s is not None]

        self.app.push_screen(lazy.processes_screen(statuses, self.zuka.ledger))

    def action_reload(self) -> None:
        self.zuka.refresh_view(reload=True)
        self.app.notify(_("ledger re-read"), markup=False)
