"""The hand-over acceptance check of one node (c on the fleet): choose the level (quick by
default; 2 standard, 3 burn), run it (enter or r), and watch each check family begin and
each finding come; then the verdict, its counts and the return window. A selected finding
shows what was expected and found and the raw output of each command it rests on. w writes
the markdown report to a file in the current directory; escape goes back, cancelling a run
in flight (leases.app.acceptance stores a run only once it has finished: nothing half
stored).

The run is leases.app.acceptance.accept, the one `zuka accept` calls. On a ledger file it
runs in a thread on a ledger connection of its own and its own event loop (the checks are
async; the ledger is SQLite); on an in-memory one in the app's loop. The worker tells the
screen of each family and finding by messages. What it shows is tui.screens.acceptview's.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from leases.accept.engine import Check, Found, Started
from leases.app import acceptance, acceptreport
from leases.app.acceptance import Stored, told
from leases.config.sections import Config
from leases.core.acceptance import CheckResult, Level, Status
from leases.core.clock import Clock
from leases.core.errors import InputError, no_ledger
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from tui.screens import acceptview
from tui.screens.acceptview import COLUMNS, LEVEL_WORDS, WIDTHS, Family, Line
from tui.screens.fleetview import plain
from tui.widgets.footer import ZukaFooter

if TYPE_CHECKING:
    from tui.dashboard.host import ZukaHost

GROUP = "accept-run"


class Accept(Protocol):
    """leases.app.acceptance.accept, as the screen calls it (tests give their own)."""

    def __call__(
        self,
        ledger: Ledger,
        name: str,
        config: Config,
        *,
        level: Level,
        clock: Clock,
        started: Started | None = None,
        found: Found | None = None,
    ) -> Awaitable[Stored]: ...


Report = Callable[[Stored], str]


class FamilyBegins(Message):
    def __init__(self, family: Family) -> None:
        super().__init__()
        self.family = family


class FindingCame(Message):
    def __init__(self, result: CheckResult) -> None:
        super().__init__()
        self.result = result


def _key(key: str, action: str, title: str, verb: str, tooltip: str, *,
         show: bool = True, priority: bool = False) -> Binding:  # fmt: skip
    return Binding(key, action, title, id=f"accept-{verb}", tooltip=tooltip, show=show,
                   priority=priority)  # fmt: skip


class AcceptanceScreen(Screen[None]):
    DEFAULT_CSS = """
    AcceptanceScreen #accept-title { text-style: bold; }
    AcceptanceScreen #accept-said.-bad { color: $error; }
    AcceptanceScreen #accept-rows { height: 1fr; }
    AcceptanceScreen #accept-detail-box { height: 1fr; border-top: solid $primary; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        _key(
            "escape",
            "back",
            N_("Back"),
            "back",
            N_("Back to the fleet (a run under way is stopped)"),
        ),
        _key(
            "enter", "run", N_("Run"), "run", N_("Run the check at the level shown"), priority=True
        ),
        _key("r", "run", N_("Run"), "rerun", N_("Run the check at the level shown"), show=False),
        _key("1", "level('quick')", N_("Quick"), "quick", N_("Level quick: read-only, seconds")),
        _key(
            "2",
            "level('standard')",
            N_("Standard"),
            "standard",
            N_("Level standard: + short GPU work (torch, dcgmi, nvbandwidth, nccl-tests)"),
        ),
        _key("3", "level('burn')", N_("Burn"), "burn", N_("Level burn: + a bounded burn-in")),
        _key(
            "w",
            "write",
            N_("Write report"),
            "write",
            N_("Write the markdown report to a file in the current directory"),
        ),
    ]

    def __init__(
        self, name: str, *, accept: Accept | None = None, report: Report | None = None
    ) -> None:
        """accept / report: leases.app.acceptance's unless a test gives its own."""
        super().__init__()
        self.node_name = name
        self.accept: Accept = accept or acceptance.accept
        self.report: Report = report or acceptreport.report_md
        self.level = Level.QUICK
        self.lines: list[Line] = []
        self.running: str | None = None  # the family at work
        self.busy = False
        self.stored: Stored | None = None
        self.said = ""
        self.bad = False
        self._shown: list[tuple[str, ...]] = []
        # The thread run's loop and task, to cancel it from the UI (escape).
        self._run_loop: asyncio.AbstractEventLoop | None = None
        self._run_task: asyncio.Task[Stored] | None = None
        self._lock = threading.Lock()

    @property
    def zuka(self) -> ZukaHost:
        return cast("ZukaHost", self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="accept-title")
        yield Static(id="accept-said")
        yield DataTable(id="accept-rows", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="accept-detail-box"):
            yield Static(id="accept-detail")
        yield ZukaFooter()

    def on_mount(self) -> None:
        self._columns()
        self._show()

    def _columns(self) -> None:
        table = self.query_one("#accept-rows", DataTable)
        table.clear(columns=True)
        for label, width in zip(COLUMNS, WIDTHS, strict=True):
            table.add_column(_(label), width=width)

    def relabel(self) -> None:
        """In the language in use (tui.dashboard.language)."""
        self._columns()
        self._shown = []
        self._show()

    # -- showing ---------------------------------------------------------------------------

    def _show(self) -> None:
        name = visible(self.node_name, 60)
        self.query_one("#accept-title", Static).update(
            plain(
                _("acceptance check of {name} · level {level}").format(
                    name=name, level=_(LEVEL_WORDS[self.level])
                )
            )
        )
        if self.busy:
            said = _("running the {level} check… (escape stops it)").format(
                level=acceptview.level_word(self.level))  # fmt: skip
        elif self.stored is not None:
            said = "\n".join(acceptview.verdict_lines(self.stored))
            if self.said:
                said += "\n" + self.said
        else:
            said = self.said or _("1 quick, 2 standard, 3 burn; enter runs the check")
        widget = self.query_one("#accept-said", Static)
        widget.update(Text("\n").join(plain(line, wrap=True) for line in said.split("\n")))
        failed = self.stored is not None and self.stored.verdict.status is not Status.PASSED
        widget.set_class((self.bad or failed) and not self.busy, "-bad")
        self._fill()
        self._show_detail()

    def _fill(self) -> None:
        table = self.query_one("#accept-rows", DataTable)
        rows = acceptview.rows(self.lines, self.running if self.busy else None)
        if rows == self._shown:
            return
        follow = table.cursor_row >= len(self._shown) - 1  # at the last row: follow the run
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            table.add_row(*(plain(v) for v in row))
        if rows:
            at = len(rows) - 1 if follow else min(cursor, len(rows) - 1)
            table.move_cursor(row=at, animate=False)
        self._shown = rows

    def selected(self) -> Line | None:
        if not self.lines:
            return None
        row = self.query_one("#accept-rows", DataTable).cursor_row
        return self.lines[min(max(row, 0), len(self.lines) - 1)]

    def _show_detail(self) -> None:
        line = self.selected()
        detail = self.query_one("#accept-detail", Static)
        if isinstance(line, CheckResult):
            evidence = self.stored.verdict.evidence if self.stored is not None else ()
            lines = acceptview.detail_lines(line, evidence)
            if self.stored is None:
                lines.append("(the raw output is shown once the run has finished)")
        elif isinstance(line, Family):
            lines = [f"{visible(line.title, 60)} ({visible(line.id, 40)})"]
        else:
            lines = []
        # One Text per line: keep_newlines lets a command's own lines through, as text.
        detail.update(Text("\n").join(Text(x, no_wrap=False, end="") for x in lines))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # -- the run ---------------------------------------------------------------------------

    def action_level(self, value: str) -> None:
        if self.busy:
            self._say(_("wait: a run is under way"), bad=True)
            return
        self.level = Level(value)
        self._show()

    def action_run(self) -> None:
        if self.busy:
            self._say(_("wait: a run is under way"), bad=True)
            return
        ledger = self.zuka.ledger
        if ledger is None:
            self._say(_("no ledger open"), bad=True)
            return
        self.busy, self.stored, self.lines, self.said, self.bad = True, None, [], "", False
        self._show()
        args = (self.accept, self.node_name, self.zuka.config or Config(), self.level)
        if ledger.path is None:
            # An in-memory ledger exists on its one connection only (tests, the demo).
            self._run_here(ledger, *args)
        else:
            self._run_thread(ledger, *args)

    def _started(self, check: Check) -> None:
        self.post_message(FamilyBegins(Family(check.id, check.title)))

    def _found(self, result: CheckResult) -> None:
        self.post_message(FindingCame(result))

    @work(thread=True, exit_on_error=False, group=GROUP)
    def _run_thread(
        self, ledger: Ledger, accept: Accept, name: str, config: Config, level: Level
    ) -> Stored:
        path = ledger.path
        assert path is not None
        if not path.exists():
            raise no_ledger(path)

        async def go(own: Ledger) -> Stored:
            with self._lock:
                self._run_loop = asyncio.get_running_loop()
                self._run_task = cast("asyncio.Task[Stored]", asyncio.current_task())
            return await accept(own, name, config, level=level, clock=self.zuka.clock,
                                started=self._started, found=self._found)  # fmt: skip

        with Ledger.open(
            path, create=False, clock=ledger.clock, actor=ledger.actor, origin=ledger.origin
        ) as own:
            return asyncio.run(go(own))

    @work(exit_on_error=False, group=GROUP)
    async def _run_here(
        self, ledger: Ledger, accept: Accept, name: str, config: Config, level: Level
    ) -> Stored:
        return await accept(ledger, name, config, level=level, clock=self.zuka.clock,
                            started=self._started, found=self._found)  # fmt: skip

    def on_family_begins(self, message: FamilyBegins) -> None:
        if self.busy:
            self.running = message.family.id
            self.lines.append(message.family)
            self._show()

    def on_finding_came(self, message: FindingCame) -> None:
        if self.busy:
            self.lines.append(message.result)
            self._show()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != GROUP:
            return
        if event.state is WorkerState.SUCCESS:
            stored = cast(Stored, event.worker.result)
            self.stored = stored
            # The stored run is the truth: its findings, in its order.
            self.lines = _lines_of(self.lines, stored)
            self._finish("")
        elif event.state is WorkerState.ERROR:
            exc = event.worker.error
            if isinstance(exc, InputError):
                said = _("refused: {reason}").format(reason=exc.reason)
            elif isinstance(exc, asyncio.CancelledError):
                said = _("stopped: nothing was stored")
            else:
                said = _("failed, nothing was stored: {kind}: {error}").format(
                    kind=type(exc).__name__, error=exc)  # fmt: skip
            self._finish(visible(said, 600), bad=True)
        elif event.state is WorkerState.CANCELLED:
            self._stop_thread_task()
            self._finish(_("stopped: nothing was stored"), bad=True)

    def _finish(self, said: str, *, bad: bool = False) -> None:
        self.busy = False
        self.running = None
        self._say(said, bad=bad)

    def _say(self, said: str, *, bad: bool = False) -> None:
        self.said = said
        self.bad = bad
        self._show()

    def _cancel(self) -> None:
        """Stop a run in flight: its worker, and its task in the thread's own loop."""
        for worker in self.workers:
            if worker.group == GROUP:
                worker.cancel()
        self._stop_thread_task()

    def _stop_thread_task(self) -> None:
        """A thread worker cancelled (by escape, or by the app quitting) leaves its thread
        running: cancel the run's task in that thread's loop, if it still runs."""
        with self._lock:
            loop, task = self._run_loop, self._run_task
        if loop is not None and task is not None and not task.done():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: it ended
                loop.call_soon_threadsafe(task.cancel)

    def on_unmount(self) -> None:
        """The app quitting (q) with a run under way stops it too."""
        self._cancel()

    # -- keys ------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self.busy:
            self._cancel()
        self.dismiss(None)

    def action_write(self) -> None:
        if self.stored is None:
            self._say(_("no verdict yet: run the check first (enter)"), bad=True)
            return
        v = self.stored.verdict
        path = Path.cwd() / acceptview.report_name(v.node, v.finished)
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(self.report(self.stored))
        except FileExistsError:
            self._say(_("not written: {path} exists already").format(path=visible(path, 300)),
                      bad=True)  # fmt: skip
            return
        except OSError as exc:
            self._say(_("not written: {reason}").format(reason=visible(exc, 300)), bad=True)
            return
        self._say(_("report written to {path}").format(path=visible(path, 300)))


def _lines_of(lines: list[Line], stored: Stored) -> list[Line]:
    """The lines as told (families and findings in the order they came), or, where a
    finding was not told (a run that tells nothing), the stored findings after them, in
    the language in use (leases.app.acceptance.told: the verdict's own are English)."""
    said = [x for x in lines if isinstance(x, CheckResult)]
    if said == list(stored.verdict.results) or (stored.shown and said == list(stored.shown)):
        return lines
    return [x for x in lines if isinstance(x, Family)] + list(told(stored))
