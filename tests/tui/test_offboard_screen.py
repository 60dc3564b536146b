"""The offboarding screen (o on the fleet), driven by Pilot on a real ledger file, with the
engine's test drivers that act on REAL files (tests/support/offboard_files.py: an "ssh" driver
deletes files under a root, an "s3" one deletes directories standing for buckets); plus
the short state for the fleet column, the lease-end alert's words, and the runner's
"run the next step only".
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable, ProgressBar, Static

from leases.alerts.alert import AlertKind
from leases.alerts.facts import gather
from leases.alerts.rules import evaluate, node_alerts
from leases.config.sections import AlertsConfig, Config
from leases.core.severity import Severity
from leases.ledger.store import Ledger
from leases.offboard import evidence, runner, status, wiring
from leases.offboard.evidence import Progress, State
from leases.offboard.steps import Driver, Outcome, Step
from tests.offboard.conftest import fleet  # noqa: F401  (the offboarding tests' fixture)
from tests.offboard.test_offboard import Asks, plan_processes
from tests.support.cli import Cli
from tests.support.offboard_files import (
    PLANNERS,
    BucketDriver,
    FileDriver,
    ReleasedByHand,
    calls,
    drivers,
)
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.ask import AskScreen
from tui.screens.offboard import OffboardScreen
from tui.screens.yesno import ConsentScreen

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def app_on(path: Path) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())


def factory(root: Path, **overrides: Driver):  # type: ignore[no-untyped-def]
    def make(ctx: wiring.RunContext) -> dict[str, Driver]:
        return {**drivers(ctx.ledger, ctx.node, root), **overrides}

    return make


def rows(screen: OffboardScreen) -> list[list[str]]:
    table: DataTable[Text] = screen.query_one("#offboard-steps", DataTable)
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def states(screen: OffboardScreen) -> dict[str, str]:
    return {r[2]: r[4] for r in rows(screen)}


def said(screen: OffboardScreen) -> str:
    return str(screen.query_one("#offboard-said", Static).render())


async def opened(app: ZukaApp, screen: OffboardScreen) -> OffboardScreen:
    await app.push_screen(screen)
    await wait_until(lambda: screen.stored is not None and not screen.busy, what="the plan")
    return screen


async def idle(screen: OffboardScreen, pilot: object) -> None:
    await wait_until(lambda: not screen.busy, what="the job to end")
    await pilot.pause()  # type: ignore[attr-defined]


async def answer(pilot: object, app: ZukaApp, text: str) -> None:
    """Type into the AskScreen on top and press Enter."""
    await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
    await pilot.press(*text, "enter")  # type: ignore[attr-defined]


async def select(pilot: object, screen: OffboardScreen, key: str) -> None:
    table = screen.query_one("#offboard-steps", DataTable)
    index = [r[2] for r in rows(screen)].index(key)
    table.move_cursor(row=index)
    await pilot.pause()  # type: ignore[attr-defined]


async def test_the_plan_is_shown_and_stored_as_zuka_offboard_makes_it(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
    cli: Cli,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)):
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        with Ledger.open(ledger_path) as ledger:
            stored = evidence.latest(ledger, ledger.node("n1").id or 0)
        assert stored is not None and screen.stored is not None
        assert screen.stored.hash == stored.hash
        title = str(screen.query_one("#offboard-title", Static).render())
        assert f"hash {stored.hash[:12]}" in title and "not started" in title
        got = rows(screen)
        assert [r[2] for r in got] == [s.key for s in stored.plan.steps]
        shred = next(r for r in got if r[2] == "shred:/data/a")
        assert shred[1] == "shred" and shred[3] == "yes" and shred[4] == "pending"
        assert shred[5] == "rm -- /data/a"
        assert all(r[4] == "pending" for r in got)
        assert calls(fleet) == []


async def test_a_wrong_name_is_refused_and_nothing_runs(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
        prompt = str(app.screen.query_one("#ask-prompt", Static).render())
        assert "\u240a" not in prompt and "\nType the node's name to confirm:" in prompt
        await answer(pilot, app, "n2")
        await idle(screen, pilot)
        assert "refused, nothing was run" in said(screen) and "'n2'" in said(screen)
        # The dashboard's user types a name: no word of the CLI's flags.
        assert "--confirm" not in said(screen) and "type the node's name, n1" in said(screen)
        assert calls(fleet) == []
        assert (fleet / "node" / "data" / "a").exists() and (
            fleet / "cloud" / "111" / "bkt-1"
        ).exists()
        assert set(states(screen).values()) == {"pending"}
        # Escape in the modal: not confirmed either.
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, AskScreen))
        await pilot.press("escape")
        await wait_until(lambda: "not confirmed" in said(screen))
        assert calls(fleet) == []


async def test_the_right_name_runs_every_step_and_the_files_are_gone(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen), said(screen)
        assert set(states(screen).values()) == {"verified"}
        data = fleet / "node" / "data"
        assert not (data / "a").exists() and not (data / "b").exists() and (data / "keep").exists()
        assert not (fleet / "cloud" / "111" / "bkt-1").exists()
        assert (fleet / "cloud" / "111" / "not-ours").exists()
        bar = screen.query_one("#offboard-bar", ProgressBar)
        assert bar.total == len(rows(screen)) and bar.progress == bar.total
        assert sorted(calls(fleet)) == [
            "s3:bkt-1 acted",
            "shred:/data/a acted",
            "shred:/data/b acted",
        ]
        # A recheck reads everything back: still gone.
        await pilot.press("c")
        await idle(screen, pilot)
        assert "everything is still gone" in said(screen)
        assert "ok   shred:/data/a" in str(screen.query_one("#offboard-detail", Static).render())
    with Ledger.open(ledger_path) as ledger:
        assert evidence.progress(ledger)[ledger.node("n1").id or 0].finished


async def test_a_plan_the_ledger_no_longer_gives_is_refused_until_made_again(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
    cli: Cli,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        first = screen.stored
        assert first is not None
        # Meanwhile, in another terminal: one more scratch path for this lease.
        assert (
            cli("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/keep").code == 0
        )
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert "the ledger changed since this plan was made" in said(screen)
        assert "p makes it again here" in said(screen)
        assert calls(fleet) == []
        await pilot.press("p")
        await idle(screen, pilot)
        assert screen.stored is not None and screen.stored.hash != first.hash
        assert "shred:/data/keep" in states(screen)
        await pilot.press("a")  # a new plan: the name is asked again
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)
    assert not (fleet / "node" / "data" / "keep").exists()


class Held(FileDriver):
    """The file driver, whose shred of /data/a waits until the test lets it go."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.entered = threading.Event()
        self.go = threading.Event()

    async def run(self, step: Step) -> Outcome:
        if step.key == "shred:/data/a":
            self.entered.set()
            await asyncio.to_thread(self.go.wait, 30)
        return await super().run(step)


async def test_steps_show_as_they_run_and_one_run_at_a_time(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    held = Held(fleet)
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = OffboardScreen("n1", drivers=factory(fleet, ssh=held), planners=PLANNERS)
        await opened(app, screen)
        await pilot.press("a")
        await answer(pilot, app, "n1")
        try:
            # The UI loop answers while the step runs in its thread: the row says so.
            await wait_until(lambda: states(screen).get("shred:/data/a") == "running…")
            assert states(screen)["facts:root"] == "verified"
            assert "running every step left" in said(screen)
            await pilot.press("n")
            assert "wait: running every step left is under way" in said(screen)
            await pilot.press("escape")
            assert app.screen is screen
        finally:
            held.go.set()
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)


async def test_the_next_step_only_then_the_rest(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        await pilot.press("n")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        # The preflight checks and the first step after them: nothing deleted yet.
        now = states(screen)
        assert now["facts:root"] == "verified" and now["shred:/data/a"] == "pending"
        assert "facts:root passed; next: shred:/data/a" in said(screen)
        await pilot.press("n")  # confirmed for this plan already: no question
        await idle(screen, pilot)
        assert states(screen)["shred:/data/a"] == "verified"
        assert calls(fleet) == ["shred:/data/a acted"]
        assert states(screen)["shred:/data/b"] == "pending"


async def test_skip_a_step_with_a_reason(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        await select(pilot, screen, "shred:/data/b")
        await pilot.press("s")
        await answer(pilot, app, "a colleague keeps it")
        await answer(pilot, app, "n1")  # skipping needs the name too, as --skip does
        await idle(screen, pilot)
        assert states(screen)["shred:/data/b"] == "skipped"
        assert "skipped shred:/data/b: a colleague keeps it" in said(screen)
        # A preflight check cannot be skipped: said, nothing asked.
        await select(pilot, screen, rows(screen)[0][2])
        await pilot.press("s")
        assert "cannot be skipped" in said(screen) and not isinstance(app.screen, AskScreen)
        await pilot.press("a")  # confirmed already
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)
        assert "1 skipped (with reasons)" in said(screen) and "every step" not in said(screen)
        await pilot.press("c")
        await idle(screen, pilot)
        assert "1 step(s) never verified" in said(screen), said(screen)
    assert (fleet / "node" / "data" / "b").exists()
    with Ledger.open(ledger_path) as ledger:
        skipped = [e for e in ledger.history() if e.action == "offboard.skip"]
        assert len(skipped) == 1 and "a colleague keeps it" in str(
            (skipped[0].after or {})["detail"]
        )


class FailsOnce(BucketDriver):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.refused = False

    async def run(self, step: Step) -> Outcome:
        if not self.refused:
            self.refused = True
            return Outcome(False, "AccessDenied \x1b[2J[red]x[/]", "the store said AccessDenied")
        return await super().run(step)


async def test_a_failed_step_is_shown_then_retried(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = OffboardScreen(
            "n1", drivers=factory(fleet, s3=FailsOnce(fleet)), planners=PLANNERS
        )
        await opened(app, screen)
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert states(screen)["s3:bkt-1"] == "failed"
        assert "stopped at s3:bkt-1: the store said AccessDenied" in said(screen)
        assert screen.query_one("#offboard-said").has_class("-bad")
        await select(pilot, screen, "shred:/data/a")
        await pilot.press("r")
        assert "only a failed step is retried" in said(screen)
        await select(pilot, screen, "s3:bkt-1")
        assert "the store said AccessDenied" in str(
            screen.query_one("#offboard-detail", Static).render()
        )
        await pilot.press("r")
        await idle(screen, pilot)
        assert states(screen)["s3:bkt-1"] == "verified"
        assert not (fleet / "cloud" / "111" / "bkt-1").exists()
        await pilot.press("a")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)


class Raises(FileDriver):
    async def run(self, step: Step) -> Outcome:
        if step.key == "shred:/data/a":
            raise RuntimeError("connection lost \x1b]0;pwned\x07")
        return await super().run(step)


async def test_a_killed_step_and_a_driver_that_raises_are_shown_in_words(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        stored, _ = evidence.store(ledger, runner.replan(ledger, node, Config(), PLANNERS))
        # What a run killed inside the step leaves: "started", the action maybe done.
        evidence.record(ledger, stored, stored.plan.step("shred:/data/b"), "start", State.STARTED)
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = OffboardScreen("n1", drivers=factory(fleet, ssh=Raises(fleet)), planners=PLANNERS)
        await opened(app, screen)
        assert states(screen)["shred:/data/b"] == "started (interrupted)"
        await select(pilot, screen, "shred:/data/b")
        detail = str(screen.query_one("#offboard-detail", Static).render())
        assert "reads it back before acting" in detail
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert states(screen)["shred:/data/a"] == "failed"
        assert "the ssh driver failed: RuntimeError: connection lost" in said(screen)
        assert "\x1b" not in said(screen) and "\x07" not in said(screen)
        assert "Traceback" not in said(screen)


async def test_gpu_processes_need_their_own_confirmation(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    app = app_on(ledger_path)
    planners = (*PLANNERS, plan_processes)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = OffboardScreen("n1", drivers=factory(fleet, ssh=Asks(fleet)), planners=planners)
        await opened(app, screen)
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert states(screen)["ssh:processes"] == "asks you (g)"
        assert calls(fleet) == []
        await pilot.press("a")
        await idle(screen, pilot)
        assert states(screen)["ssh:processes"] == "asks you (g)"  # asked again, not passed
        await pilot.press("g")
        await wait_until(lambda: isinstance(app.screen, ConsentScreen))
        await pilot.press("n")
        await wait_until(lambda: "not going on" in said(screen))
        assert calls(fleet) == []
        await pilot.press("g")
        await wait_until(lambda: isinstance(app.screen, ConsentScreen))
        await pilot.press("y")
        await idle(screen, pilot)
        assert states(screen)["ssh:processes"] == "consented"
        assert calls(fleet) == []  # only that step: the deletions wait for n or a
        await pilot.press("a")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)


async def test_a_manual_step_marked_done_is_verified(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    def make(ctx: wiring.RunContext) -> dict[str, Driver]:
        table = drivers(ctx.ledger, ctx.node, fleet)
        table["manual"] = ReleasedByHand(fleet, ctx.node.name, frozenset(ctx.did), ctx.ledger.actor)
        return table

    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=make, planners=PLANNERS))
        await pilot.press("a")
        await answer(pilot, app, "n1")
        await idle(screen, pilot)
        assert states(screen)["manual:release-instance"] == "waiting for you (d)"
        assert "--did manual:release-instance" in said(screen)
        await select(pilot, screen, "shred:/data/a")
        await pilot.press("d")
        assert "is not a manual step" in said(screen)
        await select(pilot, screen, "manual:release-instance")
        await pilot.press("d")
        await idle(screen, pilot)
        assert states(screen)["manual:release-instance"] == "verified"
        await pilot.press("a")
        await idle(screen, pilot)
        assert "offboarding finished" in said(screen)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
@pytest.mark.parametrize("failed", [False, True], ids=["plan", "failed"])
def test_offboard_screen_snapshot(  # type: ignore[no-untyped-def]
    snap_compare,
    fleet,  # noqa: F811
    ledger_path,
    monkeypatch,
    size,
    failed,
) -> None:
    monkeypatch.chdir(ledger_path.parent)
    app = app_on(ledger_path)
    screen = OffboardScreen("n1", drivers=factory(fleet, s3=FailsOnce(fleet)), planners=PLANNERS)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await opened(app, screen)
        if failed:
            await pilot.press("a")
            await answer(pilot, app, "n1")
            await idle(screen, pilot)
            await select(pilot, screen, "s3:bkt-1")
        await app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=size)


# -- the runner: the next step only ---------------------------------------------------------


async def test_stop_after_runs_one_step_and_a_rerun_goes_on(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        stored, _ = evidence.store(ledger, runner.replan(ledger, node, Config(), PLANNERS))
        table = drivers(ledger, node, fleet)
        one = await runner.execute(
            ledger, stored, table, runner.Choices(stop_after="shred:/data/a")
        )
        assert not one.finished and one.stopped_at == "shred:/data/b"
        assert calls(fleet) == ["shred:/data/a acted"]
        assert one.stored.state("shred:/data/b").state is State.PENDING
        rest = await runner.execute(ledger, one.stored, table)
        assert rest.finished and len(calls(fleet)) == 3
        # The last step asked: the run finishes (and is recorded finished).
        assert evidence.load(ledger, stored.id).finished_at is not None


# -- the fleet column and the lease-end alert ------------------------------------------------


def test_short_state_for_the_fleet_column() -> None:
    assert status.short(None) == "—"
    assert status.short(Progress(1, 12, 0, False)) == "planned"
    assert status.short(Progress(1, 12, 3, False)) == "3/12"
    assert status.short(Progress(1, 12, 3, False, "gpu-processes")) == "stopped: gpu-processes"
    assert status.short(Progress(1, 12, 12, True)) == "done"
    hostile = status.short(Progress(1, 12, 3, False, "shred:/x\x1b[2J" + "y" * 80))
    assert "\x1b" not in hostile and len(hostile) <= len("stopped: ") + status.KEY_MAX


def test_the_alert_phrase_of_each_state() -> None:
    assert status.phrase(None) == ""
    assert (
        status.phrase(Progress(1, 12, 0, False)) == "offboarding planned, not started (0/12 steps)"
    )
    assert status.phrase(Progress(1, 12, 5, False)) == "offboarding in progress (5/12 steps)"
    assert (
        status.phrase(Progress(1, 12, 5, False, "s3:b"))
        == "offboarding stopped at s3:b (5/12 steps)"
    )
    assert status.phrase(Progress(1, 12, 12, True)) == "offboarded"


def _lease_end_alert(ledger: Ledger, now: datetime) -> tuple[str, str, Severity]:
    found = [
        a for a in evaluate(gather(ledger, AlertsConfig(), now), AlertsConfig(), now)
        if a.kind is AlertKind.LEASE_ENDING
    ]  # fmt: skip
    assert len(found) == 1, found
    return found[0].message, found[0].action, found[0].severity


async def test_the_lease_end_alert_names_the_offboarding_state(
    fleet: Path,  # noqa: F811
    ledger_path: Path,
    cli: Cli,
) -> None:
    # The fleet's lease ends 2030-01-01 00:00 in Shanghai (16:00 UTC): 3 days before it.
    now = datetime(2029, 12, 28, 14, tzinfo=UTC)
    with Ledger.open(ledger_path, clock=lambda: now) as ledger:
        message, action, _ = _lease_end_alert(ledger, now)
        assert "(in 3 days); offboarding has NOT started" in message
        assert "zuka offboard n1" in action
        node = ledger.node("n1")
        stored, _ = evidence.store(ledger, runner.replan(ledger, node, Config(), PLANNERS))
        assert "offboarding planned, not started" in _lease_end_alert(ledger, now)[0]
        table = drivers(ledger, node, fleet)
        first = await runner.execute(
            ledger, stored, table, runner.Choices(stop_after="shred:/data/a")
        )
        total = len(stored.plan.steps)
        message, action, _ = _lease_end_alert(ledger, now)
        assert f"offboarding in progress (4/{total} steps)" in message, message
        assert "finish offboarding" in action
        table = {**table, "s3": FailsOnce(fleet)}
        await runner.execute(ledger, first.stored, table)
        message, _, _ = _lease_end_alert(ledger, now)
        assert f"offboarding stopped at s3:bkt-1 (5/{total} steps)" in message, message
        # Finished (the release ends the lease: so the facts as they would read before it).
        (facts,) = [f for f in gather(ledger, AlertsConfig(), now) if f.node.name == "n1"]
        done = replace(facts, offboard=Progress(stored.id, total, total, True))
        (alert,) = [a for a in node_alerts(done, AlertsConfig(), now)
                    if a.kind is AlertKind.LEASE_ENDING]  # fmt: skip
        assert "(in 3 days); offboarded" in alert.message and alert.severity is Severity.INFO
        assert "zuka offboard n1 --recheck" in alert.action
