"""Every GPU process across the fleet (`P` on the fleet): node, GPU, user, memory, share of
the GPU, elapsed time, command line. `s` sorts by the next column, `/` filters (user:,
node:, cmd: or free text), `k` stops the selected process after its pid is typed: SIGTERM,
then SIGKILL after the grace period, each only while the pid is still that process
(leases.app.processes.stop_process), in a worker; the outcome is shown and audited."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from leases.app import processes
from leases.app.processes import ProcessRow, Stopped
from leases.core.clock import Clock, utc_now
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import NodeStatus
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from tui.screens import processesview as view
from tui.screens.ask import AskScreen
from tui.screens.fleetview import plain
from tui.widgets.footer import ZukaFooter

GRACE_S = 10.0
FILTER_HINT = N_("user:NAME node:NAME cmd:TEXT or text")


class ProcessesScreen(Screen[None]):
    # Processes stopped from this screen (node, pid, start): hidden until the poller's next
    # process reading (every few polls) no longer lists them, even if the screen is
    # reopened before. The start makes each key one process: a reused pid is not hidden.
    gone: ClassVar[dict[tuple[str, int, str | None], None]] = {}
    MAX_GONE = 256

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "escape",
            N_("Back"),
            id="processes-back",
            tooltip=N_("Clear the filter; without one, back to the fleet"),
        ),
        Binding(
            "P",
            "back",
            N_("Back"),
            show=False,
            id="processes-leave",
            tooltip=N_("Back to the fleet"),
        ),
        Binding(
            "s", "sort", N_("Sort"), id="processes-sort", tooltip=N_("Sort by the next column")
        ),
        Binding(
            "slash",
            "filter",
            N_("Filter"),
            id="processes-filter",
            tooltip=N_("Filter: user:NAME node:NAME cmd:TEXT or free text"),
        ),
        Binding(
            "k",
            "stop",
            N_("Stop process"),
            id="processes-stop",
            tooltip=N_("SIGTERM, then SIGKILL after a grace period; the pid typed to confirm"),
        ),
        Binding(
            "r", "reload", N_("Reload"), id="processes-reload", tooltip=N_("Read the list again")
        ),
    ]

    DEFAULT_CSS = """
    #processes-title { background: $boost; text-style: bold; padding: 0 1; }
    #processes { height: 1fr; }
    #processes-filter { display: none; }
    #processes-filter.shown { display: block; }
    #processes-said { padding: 0 1; height: auto; }
    #processes-detail { padding: 0 1; height: auto; max-height: 4; background: $boost; }
    """

    def __init__(
        self,
        statuses: Callable[[], Iterable[NodeStatus]],
        ledger: Ledger | None,
        *,
        grace_s: float = GRACE_S,
        runner_for: Callable[[Ledger, str], processes.Runner] = processes.runner_for,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(id="processes-screen")
        self.statuses = statuses
        self.ledger = ledger
        self.grace_s = grace_s
        self.runner_for = runner_for
        self.clock = clock
        self.sort = "node"
        self.filter_text = ""
        self.all_rows: list[ProcessRow] = []
        self.shown: list[ProcessRow] = []
        self.said = ""
        self.age = ""  # how old the readings are, as of the last reload

    def compose(self) -> ComposeResult:
        yield Static("", id="processes-title", markup=False)
        yield DataTable(id="processes", cursor_type="row", zebra_stripes=True)
        yield Static("", id="processes-detail", markup=False)
        yield Input(placeholder=_(FILTER_HINT), id="processes-filter")
        yield Static("", id="processes-said", markup=False)
        yield ZukaFooter()

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#processes", DataTable)

    def on_mount(self) -> None:
        self.reload()
        self.table.focus()
        self.set_interval(max(float(getattr(self.app, "refresh_s", 5.0)), 1.0), self.reload)

    def on_resize(self) -> None:
        self.redraw()

    def relabel(self) -> None:
        """In the language in use (tui.dashboard.language)."""
        self.query_one("#processes-filter", Input).placeholder = _(FILTER_HINT)
        self.redraw()

    def reload(self) -> None:
        statuses = list(self.statuses())
        rows = processes.rows_of(statuses)
        now: Clock = getattr(self.app, "clock", utc_now)
        self.age = processes.readings_age(statuses, now())
        self.all_rows = [r for r in rows if (r.node, r.pid, r.process.start) not in self.gone]
        self.redraw()

    def redraw(self) -> None:
        # The cursor stays on its process through a refresh or a re-sort, never on
        # whichever process comes to stand at its old place.
        before = self.selected()
        try:
            shown = processes.filter_rows(self.all_rows, self.filter_text)
        except InputError:
            shown = self.all_rows
        self.shown = processes.sort_rows(shown, self.sort)
        longest = max((cell_len(r.node) for r in self.shown), default=0)
        cols = view.columns(self.size.width or 80, longest)
        table = self.table
        keys = [view.row_key(r) for r in self.shown]
        keep = keys.index(view.row_key(before)) if before and view.row_key(before) in keys else 0
        table.clear(columns=True)
        for col in cols:
            table.add_column(col.heading, width=col.width, key=col.key)
        for row in self.shown:
            table.add_row(*(plain(c) for c in view.cells(row, cols)), key=view.row_key(row))
        if self.shown:  # scrolled so the selected row is in view
            table.move_cursor(row=min(keep, len(self.shown) - 1), scroll=True)
        marked = any(not r.visible for r in self.shown)
        title = view.summary(
            len(self.shown),
            len(self.all_rows),
            self.sort,
            self.filter_text,
            self.age,
            marked=marked,
        )
        self.query_one("#processes-title", Static).update(title)
        self.query_one("#processes-said", Static).update(self.said)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self.selected()
        detail = "" if row is None else view.describe(row)
        self.query_one("#processes-detail", Static).update(plain(detail, wrap=True))

    def selected(self) -> ProcessRow | None:
        if not self.shown:
            return None
        return self.shown[min(max(self.table.cursor_row, 0), len(self.shown) - 1)]

    def action_escape(self) -> None:
        # With a filter on, escape clears it first (as on the fleet); then it leaves.
        if self.filter_text:
            self.filter_text = ""
            self.query_one("#processes-filter", Input).remove_class("shown")
            self.redraw()
            self.table.focus()
            return
        self.action_back()

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_sort(self) -> None:
        self.sort = view.SORTS[(view.SORTS.index(self.sort) + 1) % len(view.SORTS)]
        self.redraw()

    def action_reload(self) -> None:
        self.reload()

    def action_filter(self) -> None:
        box = self.query_one("#processes-filter", Input)
        box.add_class("shown")
        box.value = self.filter_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "processes-filter":
            return
        event.stop()
        self.filter_text = event.value.strip()
        event.input.remove_class("shown")
        self.redraw()
        self.table.focus()

    def action_stop(self) -> None:
        row = self.selected()
        if row is None:
            self.app.notify(_("No process selected."), markup=False, severity="warning")
            return
        if not row.visible:  # refused at once, nothing asked (audited as the app does)
            self._say(
                _("not stopped: {reason}").format(reason=_(processes.NOT_VISIBLE)), error=True
            )
            return
        prompt = Text.assemble(
            plain(view.describe(row), wrap=True),
            "\n\n",
            _(
                "Type its pid, {pid}, to stop it: SIGTERM, then SIGKILL after {grace:g} s. "
                "Its start time and command line are checked again before each signal."
            ).format(pid=row.pid, grace=self.grace_s),
        )
        self.app.push_screen(
            AskScreen(prompt, placeholder=str(row.pid)), lambda typed: self._confirmed(row, typed)
        )

    def _confirmed(self, row: ProcessRow, typed: str | None) -> None:
        if typed is None:
            return
        try:
            processes.check_confirmation(row.pid, typed)
        except InputError as exc:
            self._say(_("not stopped: {reason}").format(reason=exc.reason), error=True)
            return
        if self.ledger is None:
            self._say(_("not stopped: no ledger"), error=True)
            return
        self._say(_("stopping {node} pid {pid}...").format(node=row.node, pid=row.pid))
        # An app-level worker, one per node and pid and never exclusive: a stop once
        # confirmed runs to its end whatever the user does next (another stop, leaving
        # the screen); its outcome is notified on the app.
        self.app.run_worker(
            self.stop(row, typed),
            name=f"stop {row.node} {row.pid}",
            group=f"processes-stop {row.node} {row.pid}",
            exclusive=False,
        )

    async def stop(self, row: ProcessRow, typed: str) -> None:
        assert self.ledger is not None
        runner: processes.Runner | None = None
        try:
            runner = self.runner_for(self.ledger, row.node)
            stopped = await processes.stop_process(
                row.node, row.pid, row.process.start, row.process.cmdline, typed,
                self.grace_s, runner, self.clock, self.ledger,
                user=row.user, visible_to_login=row.visible,
            )  # fmt: skip
        except InputError as exc:
            self._say(_("not stopped: {reason}").format(reason=exc.reason), error=True)
            return
        finally:
            close = getattr(runner, "close", None)
            if close is not None:
                await close()
        self._done(row, stopped)

    def _done(self, row: ProcessRow, stopped: Stopped) -> None:
        if stopped.ok:
            gone = ProcessesScreen.gone
            gone[(row.node, row.pid, row.process.start)] = None
            while len(gone) > self.MAX_GONE:
                del gone[next(iter(gone))]
        self._say(view.outcome_words(row, stopped), error=not stopped.ok)
        if self in self.app.screen_stack:
            self.reload()

    def _say(self, words: str, *, error: bool = False) -> None:
        self.said = visible(words, 300)
        if self in self.app.screen_stack:  # the screen may be left while its stop runs on
            with contextlib.suppress(NoMatches):  # (being taken down as we speak)
                self.query_one("#processes-said", Static).update(self.said)
        self.app.notify(self.said, markup=False, severity="error" if error else "information")
