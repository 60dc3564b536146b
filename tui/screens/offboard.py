"""Offboarding one node (o on the fleet): its plan and hash, the checklist with each step's
state, a progress bar; run the next step or all of them, skip one with a reason, retry a
failed one, say a manual one is done, go on past GPU processes still running, recheck,
inspect (every thing the plan deletes, looked at, nothing changed).

The plan is made and stored as `zuka offboard NODE` makes it. Carrying it out (and
skipping, as `--skip` does) needs the typed confirmation: the node's name (and, when the
provider records one, its account's alias after a space), checked by the
use cases of leases.app.offboarding (`zuka offboard` calls the same), once per plan hash
while the screen is open; what it shows is computed in tui.screens.offboardview. All engine
work runs in a thread on a ledger connection of its own and its own event loop (the
drivers are async; the ledger is SQLite), one job at a time; the screen is told of each
step as it begins, and of the result or the failure, in words.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, ProgressBar, Static
from textual.worker import Worker, WorkerState

from leases.app import offboarding
from leases.app.offboarding import Done, DriversFactory
from leases.config.sections import Config
from leases.core.errors import InputError, no_ledger
from leases.core.i18n import N_, _
from leases.core.retold import shown
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.offboard import evidence, runner, wiring
from leases.offboard.evidence import PASSED, State, StoredPlan
from leases.offboard.steps import Phase, Planner, Step
from tui.screens.ask import AskScreen
from tui.screens.fleetview import plain
from tui.screens.offboardview import (
    COLUMNS,
    RECHECKED,
    checklist_rows,
    confirm_lines,
    hint,
    not_next_words,
    state_words,
    step_detail,
)
from tui.screens.yesno import ConsentScreen
from tui.widgets.footer import ZukaFooter

if TYPE_CHECKING:
    from tui.dashboard.host import ZukaHost

GROUP = "offboard-job"


# -- engine jobs (leases.app.offboarding's use cases), run in a worker thread on the ledger
# connection they are given; what the worker tells the screen -----------------------------


class StepBegins(Message):
    """Posted from the worker as a step's driver is called (its states up to date)."""

    def __init__(self, stored: StoredPlan, key: str) -> None:
        super().__init__()
        self.stored = stored
        self.key = key


class PlanRead(Message):
    """Posted from a worker: the plan's states as the ledger has them now."""

    def __init__(self, stored: StoredPlan) -> None:
        super().__init__()
        self.stored = stored


Job = Callable[[Ledger], Coroutine[Any, Any, Done]]


# -- the screen ----------------------------------------------------------------------------------


def _key(key: str, action: str, title: str, verb: str, tooltip: str, show: bool = True) -> Binding:
    return Binding(key, action, title, id=f"offboard-{verb}", tooltip=tooltip, show=show)


class OffboardScreen(Screen[None]):
    DEFAULT_CSS = """
    OffboardScreen #offboard-title { text-style: bold; }
    OffboardScreen #offboard-bar { margin: 0 0 0 0; }
    OffboardScreen #offboard-steps { height: 1fr; }
    OffboardScreen #offboard-detail { height: auto; max-height: 8; border-top: solid $primary; }
    OffboardScreen #offboard-said.-bad { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        _key("escape", "back", N_("Back"), "back", N_("Back to the fleet")),
        _key(
            "n",
            "run_next",
            N_("Run next"),
            "next",
            N_("Carry out the next step (asks the name once)"),
        ),
        _key("a", "run_all", N_("Run all"), "all", N_("Carry out every step left, in order")),
        _key("s", "skip", N_("Skip"), "skip", N_("Skip the selected step, with a reason")),
        _key("r", "retry", N_("Retry"), "retry", N_("Run the selected failed step again")),
        _key(
            "d",
            "did",
            N_("Did it"),
            "did",
            N_("Say the selected manual step is done, then verify it"),
        ),
        _key("g", "go_on", N_("Go on"), "go-on", N_("Go on past GPU processes still running")),
        _key("c", "recheck", N_("Recheck"), "recheck", N_("Read back every verified step again")),
        _key(
            "i", "inspect", N_("Inspect"), "inspect", N_("Look at all it deletes, changing nothing")
        ),
        _key(
            "p",
            "replan",
            N_("Re-plan"),
            "plan",
            N_("Make the plan again from the ledger"),
            show=False,
        ),
    ]

    def __init__(
        self,
        name: str,
        *,
        drivers: DriversFactory | None = None,
        planners: Sequence[Planner] | None = None,
    ) -> None:
        """drivers / planners: the engine's defaults (leases.offboard.wiring) unless a test
        gives its own."""
        super().__init__()
        self.node_name = name
        self.drivers: DriversFactory = drivers or wiring.drivers
        self.planners: Sequence[Planner] = planners or wiring.PLANNERS
        self.stored: StoredPlan | None = None
        self.running: str | None = None  # the step whose driver is at work
        self.busy = ""  # what the job under way does; "" when none
        self.said = ""  # the last result or failure, in words
        self.bad = False
        self.confirmed_hash = ""  # the plan the user typed the node's name for
        self.confirmed_as = ""  # what they typed then (the name, and the account's alias)
        self.alias = ""  # the provider's account alias, as the last plan read found it
        self.did: set[str] = set()
        self.lines: tuple[tuple[str, bool | None, str], ...] = ()
        self._shown: list[tuple[str, ...]] = []

    @property
    def zuka(self) -> ZukaHost:
        return cast("ZukaHost", self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="offboard-title")
        yield Static(id="offboard-said")
        yield ProgressBar(total=None, show_eta=False, id="offboard-bar")
        yield DataTable(id="offboard-steps", cursor_type="row", zebra_stripes=True)
        yield Static(id="offboard-detail")
        yield ZukaFooter()

    def on_mount(self) -> None:
        self.query_one("#offboard-steps", DataTable).add_columns(*(_(c) for c in COLUMNS))
        self._show()
        self.action_replan()

    def relabel(self) -> None:
        """In the language in use (tui.dashboard.language)."""
        table = self.query_one("#offboard-steps", DataTable)
        table.clear(columns=True)
        table.add_columns(*(_(c) for c in COLUMNS))
        self._shown = []
        self._show()

    # -- showing ---------------------------------------------------------------------------------

    def _config(self) -> Config:
        return self.zuka.config or Config()

    def _show(self) -> None:
        stored = self.stored
        name = visible(self.node_name, 60)
        title = self.query_one("#offboard-title", Static)
        bar = self.query_one("#offboard-bar", ProgressBar)
        if stored is None:
            title.update(plain(_("offboarding {name} · no plan read yet").format(name=name)))
        else:
            done = offboarding.passed(stored)
            total = len(stored.plan.steps)
            deletes = sum(s.destructive for s in stored.plan.steps)
            where = (
                _("finished") if stored.finished_at is not None
                else _("not started") if all(stored.state(s.key).state is State.PENDING
                                             for s in stored.plan.steps)
                else _("{done}/{total} steps passed").format(done=done, total=total)
            )  # fmt: skip
            title.update(plain(_(
                "offboarding {name} · plan {id} · hash {hash} · {total} steps, {deletes} delete"
                " · {where}").format(name=name, id=stored.id, hash=stored.hash[:12], total=total,
                                     deletes=deletes, where=where)))  # fmt: skip
            bar.update(total=total, progress=done)
        said = self.said
        if self.busy:
            now = f"{self.busy}…" + (f" ({visible(self.running, 60)})" if self.running else "")
            said = f"{now} · {said}" if said else now
        said_widget = self.query_one("#offboard-said", Static)
        said_widget.update(plain(said or hint(self.stored), wrap=True))
        said_widget.set_class(self.bad and not self.busy, "-bad")
        self._fill()
        self._show_detail()

    def _fill(self) -> None:
        table = self.query_one("#offboard-steps", DataTable)
        rows = [] if self.stored is None else checklist_rows(self.stored, self.running)
        if rows == self._shown:
            return
        cursor = table.cursor_row
        if len(rows) == len(self._shown):
            # The same steps: only the changed cells (the cursor and scroll stay put).
            for i, (old, new) in enumerate(zip(self._shown, rows, strict=True)):
                for c, (a, b) in enumerate(zip(old, new, strict=True)):
                    if a != b:
                        table.update_cell_at(Coordinate(i, c), plain(b), update_width=True)
        else:
            table.clear()
            for row in rows:
                table.add_row(*(plain(v) for v in row))
            if rows:
                table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)
        self._shown = rows

    def _selected(self) -> Step | None:
        if self.stored is None or not self.stored.plan.steps:
            return None
        row = self.query_one("#offboard-steps", DataTable).cursor_row
        return self.stored.plan.steps[min(max(row, 0), len(self.stored.plan.steps) - 1)]

    def _show_detail(self) -> None:
        detail = self.query_one("#offboard-detail", Static)
        step = self._selected()
        tz = self._config().billing.tz
        lines: list[str] = []
        if self.lines:
            # First, and what failed first of all: the box shows its first lines only.
            order = sorted(self.lines, key=lambda x: {False: 0, None: 1, True: 2}[x[1]])
            lines.append(f"{self.heading}:")
            lines += [f"{RECHECKED[ok]} {visible(k, 60)}  {visible(s, 120)}" for k, ok, s in order]
        if step is not None and self.stored is not None:
            lines += step_detail(self.stored, step, tz)
        if self.stored is not None:
            lines += [_("NOT deleted: {what}").format(what=line)
                      for line in self.stored.plan.not_deleted()]  # fmt: skip
        # Line by line: visible() turns a newline inside any one of them into an escape.
        detail.update(Text("\n").join(plain(line, wrap=True) for line in lines))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    # -- jobs --------------------------------------------------------------------------------

    def _start(self, what: str, job: Job) -> bool:
        """Start one engine job; refused while one is under way (one run at a time)."""
        if self.busy:
            self._say(_("wait: {busy} is under way").format(busy=self.busy), bad=True)
            return False
        ledger = self.zuka.ledger
        if ledger is None:
            self._say(_("no ledger open"), bad=True)
            return False
        self.busy = what
        self.said = ""
        self.lines = ()
        self._show()
        if ledger.path is None:
            # An in-memory ledger exists on its one connection only (tests, the demo).
            self._job_here(ledger, job)
        else:
            self._job_thread(ledger, job)
        return True

    @work(thread=True, exit_on_error=False, group=GROUP)
    def _job_thread(self, ledger: Ledger, job: Job) -> Done:
        path = ledger.path
        assert path is not None
        if not path.exists():
            raise no_ledger(path)
        with Ledger.open(
            path, create=False, clock=ledger.clock, actor=ledger.actor, origin=ledger.origin
        ) as own:
            return asyncio.run(job(own))

    @work(exit_on_error=False, group=GROUP)
    async def _job_here(self, ledger: Ledger, job: Job) -> Done:
        return await job(ledger)

    def _tell(self, stored: StoredPlan, key: str) -> None:
        """From the worker: a step begins (thread-safe: a message)."""
        self.post_message(StepBegins(stored, key))

    def on_step_begins(self, message: StepBegins) -> None:
        if self.busy:
            self.stored = message.stored
            self.running = message.key
            self._show()

    def on_plan_read(self, message: PlanRead) -> None:
        if not self.busy and self.stored is not None and message.stored.id == self.stored.id:
            self.stored = message.stored
            self._show()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != GROUP:
            return
        if event.state is WorkerState.SUCCESS and isinstance(event.worker.result, Done):
            done = event.worker.result
            if done.stored is not None:
                self.stored = done.stored
            if done.confirmed and self.stored is not None:
                self.confirmed_hash = self.stored.hash
            if done.alias is not None:
                self.alias = done.alias
            self.lines = done.lines
            self.heading = done.heading
            self._finish(done.said, bad=not done.ok)
        elif event.state is WorkerState.ERROR:
            exc = event.worker.error
            if isinstance(exc, InputError):
                said = _("refused: {reason}").format(reason=exc.reason)
                if exc.field == "plan":
                    said = _("refused: {reason} (p makes it again here)").format(reason=exc.reason)
                if exc.field == "account":
                    said = _("refused, nothing was run: {reason}").format(reason=exc.reason)
                if exc.field == "confirm":
                    said = _("refused, nothing was run: you typed '{typed}', not the node's name:"
                             " type the node's name, {name}").format(
                        typed=visible(exc.value, 60), name=visible(self.node_name, 60))  # fmt: skip
            else:
                said = _("failed: {kind}: {error}").format(kind=type(exc).__name__, error=exc)
            self._finish(visible(said, 600), bad=True)
            self._reread()
        elif event.state is WorkerState.CANCELLED:
            self._finish("stopped", bad=True)

    def _finish(self, said: str, *, bad: bool) -> None:
        self.busy = ""
        self.running = None
        self._say(said, bad=bad)

    def _say(self, said: str, *, bad: bool = False) -> None:
        self.said = said
        self.bad = bad
        self._show()

    def _reread(self) -> None:
        """After a failed job: what the ledger says now (quietly, on the thread)."""
        if self.stored is None or self.zuka.ledger is None:
            return
        self._reread_thread(self.zuka.ledger, self.stored.id)

    @work(thread=True, exit_on_error=False, group="offboard-reread")
    def _reread_thread(self, ledger: Ledger, plan_id: int) -> None:
        if ledger.path is None:
            return
        with Ledger.open(ledger.path, readonly=True, clock=ledger.clock) as own:
            stored = evidence.load(own, plan_id)
        self.post_message(PlanRead(stored))

    # -- keys ----------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self.busy:
            self._say(_("wait: {busy} is under way (the run stops at the first failure)").format(
                busy=self.busy),
                      bad=True)  # fmt: skip
            return
        self.dismiss(None)

    def action_replan(self) -> None:
        name, config, planners = self.node_name, self._config(), self.planners

        async def job(ledger: Ledger) -> Done:
            return offboarding.plan(ledger, name, config, planners)

        self._start(_("making the plan"), job)

    def _confirmed(self, then: Callable[[str], None]) -> None:
        """then(the name typed), asking for it unless typed for this very plan already."""
        stored = self.stored
        if stored is None:
            self._say(_("no plan read yet"), bad=True)
            return
        if self.busy:
            self._say(_("wait: {busy} is under way").format(busy=self.busy), bad=True)
            return
        if self.confirmed_hash == stored.hash:
            then(self.confirmed_as)
            return
        left = [s for s in stored.plan.steps if stored.state(s.key).state not in PASSED]
        deletes = sum(s.destructive for s in left)
        done = len(stored.plan.steps) - len(left)
        # Line by line: plain() shows a newline inside one string as an escape.
        lines = confirm_lines(stored, self.node_name, self.alias, len(left), deletes, done)
        prompt = Text("\n").join(plain(line, wrap=True) for line in lines)

        def answered(typed: str | None) -> None:
            if typed is None:
                self._say(_("not confirmed: nothing was run"))
                return
            self.confirmed_as = typed
            then(typed)

        self.app.push_screen(AskScreen(prompt, placeholder=self.node_name), answered)

    def _run(self, choices: runner.Choices, what: str) -> None:
        def go(typed: str) -> None:
            name, config, planners, did = (
                self.node_name,
                self._config(),
                self.planners,
                frozenset(self.did),
            )

            async def job(ledger: Ledger) -> Done:
                as_typed = offboarding.typed_confirmation(typed)
                stored = offboarding.confirm(ledger, name, config, planners, *as_typed)
                return await offboarding.run(
                    ledger, stored, config, self.drivers, choices, did, self._tell
                )

            self._start(what, job)

        self._confirmed(go)

    def action_run_all(self) -> None:
        self._run(runner.Choices(), _("running every step left"))

    def action_run_next(self) -> None:
        nxt = None if self.stored is None else offboarding.next_step(self.stored)
        if self.stored is not None and nxt is None:
            self._say(_("every step passed already: nothing to run"))
            return
        if nxt is not None and self._asks(nxt):
            self._say(_("{step} asks you first: g to go on anyway").format(
                step=visible(nxt.key, 60)), bad=True)  # fmt: skip
            return
        self._run(
            runner.Choices(stop_after=None if nxt is None else nxt.key), _("running the next step")
        )

    def _asks(self, step: Step) -> bool:
        return self.stored is not None and self.stored.state(step.key).state is State.CONSENT

    def _selected_next(self, retry: bool) -> Step | None:
        """The selected step, when it is the one a run starts at; else said why not."""
        step = self._selected()
        if step is None or self.stored is None:
            self._say(_("no plan read yet"), bad=True)
            return None
        nxt = offboarding.next_step(self.stored)
        if nxt is None or nxt.key != step.key:
            self._say(not_next_words(step, nxt, retry=retry), bad=True)
            return None
        return step

    def action_retry(self) -> None:
        step = self._selected()
        if step is None or self.stored is None:
            return
        state = self.stored.state(step.key).state
        if state not in (State.FAILED, State.STARTED, State.DONE):
            self._say(_("only a failed step is retried: {step} is {state}").format(
                step=visible(step.key, 60), state=state_words(state)), bad=True)  # fmt: skip
            return
        if self._selected_next(retry=True) is not None:
            self._run(runner.Choices(stop_after=step.key),
                      _("retrying {step}").format(step=visible(step.key, 60)))  # fmt: skip

    def action_did(self) -> None:
        step = self._selected()
        if step is None:
            return
        if step.driver != "manual":
            self._say(_("{step} is not a manual step: d says one done by hand").format(
                step=visible(step.key, 60)), bad=True)  # fmt: skip
            return
        if self._selected_next(retry=False) is None:
            return
        self.did.add(step.key)
        self._run(runner.Choices(stop_after=step.key),
                  _("verifying {step}").format(step=visible(step.key, 60)))  # fmt: skip

    def action_go_on(self) -> None:
        nxt = None if self.stored is None else offboarding.next_step(self.stored)
        if nxt is None or self.stored is None or not self._asks(nxt):
            self._say(_("no step asks to go on now (g answers a step that stopped to ask)"),
                      bad=True)  # fmt: skip
            return
        detail = self.stored.state(nxt.key).detail
        question = plain(
            _("{step} on {node}: {detail}").format(
                step=visible(nxt.key, 60),
                node=visible(self.node_name, 60),
                detail=visible(shown(detail), 300),
            )
            + "\n\n"
            + _("Go on with the offboarding anyway? Their data will be deleted under them."),
            wrap=True,
        )

        def answered(yes: bool | None) -> None:
            if not yes:
                self._say(_("not going on: nothing was run"))
                return
            self._run(runner.Choices(go_on=True, stop_after=nxt.key), _("going on"))

        self.app.push_screen(ConsentScreen(question), answered)

    def action_skip(self) -> None:
        step = self._selected()
        if step is None or self.stored is None:
            return
        if step.phase is Phase.PREFLIGHT:
            self._say(_("a preflight check cannot be skipped: fix what it found"), bad=True)
            return
        if self.stored.state(step.key).state in PASSED:
            self._say(_("{step} has passed already: nothing to skip").format(
                step=visible(step.key, 60)))  # fmt: skip
            return
        prompt = plain(_("Skip {step}: why? (kept in the evidence)").format(
            step=visible(step.key, 80)), wrap=True)  # fmt: skip

        def reason(text: str | None) -> None:
            if text is None:
                self._say(_("not skipped"))
                return

            def go(typed: str) -> None:
                name, config, planners = self.node_name, self._config(), self.planners

                async def job(ledger: Ledger) -> Done:
                    as_typed = offboarding.typed_confirmation(typed)
                    stored = offboarding.confirm(ledger, name, config, planners, *as_typed)
                    return offboarding.skip(ledger, stored, step.key, text)

                self._start(_("skipping {step}").format(step=visible(step.key, 60)), job)

            self._confirmed(go)

        self.app.push_screen(AskScreen(prompt, placeholder=_("the reason")), reason)

    def action_inspect(self) -> None:
        job = partial(
            offboarding.inspect,
            name=self.node_name,
            config=self._config(),
            planners=self.planners,
            factory=self.drivers,
        )
        self._start(_("inspecting"), job)

    def action_recheck(self) -> None:
        if self.stored is None or self.stored.finished_at is None:
            self._say(_("recheck reads back a finished offboarding: run it first"), bad=True)
            return
        job = partial(
            offboarding.recheck, name=self.node_name, config=self._config(), factory=self.drivers
        )
        self._start(_("rechecking"), job)
