"""The acceptance screen (c on the fleet), driven by Pilot: the level chosen before a run,
each check family and finding shown as it comes, the verdict and the return window, a
finding's evidence, the report written, escape stopping a run, hostile text shown as text.

The run here is the real engine (leases.accept.engine.run) over checks made in the test,
reading a node through a runner that answers as the test says (a gate holds a run open
while the test looks at it); the screen is given it as its `accept`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable, Static

from leases.accept import registry
from leases.accept.engine import Check, Context, Found, Started
from leases.app import acceptance, acceptreport
from leases.app.acceptance import Stored
from leases.config.sections import Config
from leases.core.acceptance import CheckResult, Level, Status
from leases.core.clock import Clock
from leases.core.models import NodeHealth
from leases.ledger.store import Ledger
from leases.sim.demoledger import demo_records
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.ssh.errors import SshError
from leases.ssh.stream import CommandResult
from tests.support.acceptchecks import ALWAYS, COUNT
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.acceptance import AcceptanceScreen
from tui.screens.node import NodeScreen

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
NODE = "colo-njidc-4090"
QUERY = "nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits"
HOSTILE = "\x1b[2J\x1b]0;pwned\x07[bold]red[/bold] [link=x]y"


# -- a node that answers as the test says, and checks of the test's own -------------------


class Node:
    """Answers each command from `answers`; holds every command until `gate` is set."""

    def __init__(self, answers: dict[str, CommandResult], *, down: bool = False) -> None:
        self.answers = answers
        self.down = down
        self.gate = threading.Event()
        self.gate.set()
        self.asked: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.asked.append(cmd)
        while not self.gate.is_set():  # cancellable: a loop of short sleeps
            await asyncio.sleep(0.01)
        if self.down:
            raise SshError(
                NODE, NodeHealth.UNREACHABLE, "connect to 10.0.0.9 port 22: No route to host"
            )
        return self.answers.get(cmd, CommandResult(127, "", f"sh: {cmd.split()[0]}: not found"))


async def _inventory(ctx: Context) -> Sequence[CheckResult]:
    ev = await ctx.probe.run("query-gpu", QUERY)
    if ev.failure:
        return [CheckResult("inventory.run", "Inventory against the lease", Status.NOT_CHECKED,
                            f"not checked: {ev.failure}", evidence=("query-gpu",))]  # fmt: skip
    out = []
    for line in ev.stdout.splitlines():
        index, name, total = (x.strip() for x in line.split(","))
        ok = int(total) >= 24_000
        out.append(
            CheckResult(
                "inventory.vram",
                f"VRAM of GPU {index}",
                Status.PASSED if ok else Status.FAILED,
                f"GPU {index} ({name}) reports {total} MiB; an RTX 4090 has 24564 MiB (±3 %)",
                expected="24564 MiB",
                found=f"{total} MiB",
                evidence=("query-gpu",),
            )
        )
    return out


async def _tools(ctx: Context) -> Sequence[CheckResult]:
    ev = await ctx.probe.run("dcgmi", "dcgmi diag -r 1")
    if ev.exit_status == 127:
        return [CheckResult("heavy.dcgmi", "DCGM diagnostic", Status.SKIPPED,
                            "skipped, because dcgmi is not on the node", evidence=("dcgmi",))]  # fmt: skip
    return [CheckResult("heavy.dcgmi", "DCGM diagnostic", Status.PASSED, "dcgmi diag passed")]


CHECKS = (
    Check("inventory", "Inventory against the lease", Level.QUICK, _inventory, cost=0),
    Check("heavy", "Short GPU work", Level.STANDARD, _tools, cost=5),
)


@dataclass
class Accept:
    """leases.app.acceptance.accept as the screen calls it, over CHECKS on `node` (the
    real use case: it stores the run on the ledger it is given)."""

    node: Node
    levels: list[Level] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)

    async def __call__(
        self,
        ledger: Ledger,
        name: str,
        config: Config,
        *,
        level: Level,
        clock: Clock,
        started: Started | None = None,
        found: Found | None = None,
    ) -> Stored:
        self.levels.append(level)
        try:
            return await acceptance.accept(ledger, name, config, level=level, clock=clock,
                                           started=started, found=found, runner=self.node,
                                           checks=CHECKS)  # fmt: skip
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def answers(
    gpu1_mib: int = 24564, name: str = "NVIDIA GeForce RTX 4090"
) -> dict[str, CommandResult]:
    out = f"0, NVIDIA GeForce RTX 4090, 24564\n1, {name}, {gpu1_mib}\n"
    return {QUERY: CommandResult(0, out, "")}


# -- driving the screen ---------------------------------------------------------------------


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=lambda: NOW, actor="tester") as ledger:
        ledger.import_records(demo_records(date(2026, 11, 30)))
    return path


def with_window(path: Path, days: int) -> None:
    """Record the node's provider as taking a node back within `days` of the lease start."""
    with Ledger.open(path, clock=lambda: NOW, actor="tester") as ledger:
        provider = ledger.node(NODE).provider
        assert provider is not None
        ledger.update_provider(provider, {"return_days": days})


def app_on(path: Path | None) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())


def rows(screen: AcceptanceScreen) -> list[list[str]]:
    table: DataTable[Text] = screen.query_one("#accept-rows", DataTable)
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def text_of(screen: AcceptanceScreen, static_id: str) -> str:
    return str(screen.query_one(f"#{static_id}", Static).render())


async def opened(app: ZukaApp, accept: Accept) -> AcceptanceScreen:
    screen = AcceptanceScreen(NODE, accept=accept)
    await app.push_screen(screen)
    return screen


async def finished(screen: AcceptanceScreen, pilot: object) -> None:
    await wait_until(lambda: not screen.busy, what="the run to end")
    await pilot.pause()  # type: ignore[attr-defined]


async def test_findings_come_as_they_run_then_the_verdict(ledger_file: Path) -> None:
    node = Node(answers(gpu1_mib=16376))  # GPU 1 shows 16 GB where 24 were sold
    accept = Accept(node)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, accept)
        assert "level quick" in text_of(screen, "accept-title")
        node.gate.clear()
        await pilot.press("enter")
        # The first family is shown running while its command is held.
        await wait_until(lambda: rows(screen) == [["running…", "▸ Inventory against the lease", ""]],
                         what="the first family, running")  # fmt: skip
        assert "running the quick check" in text_of(screen, "accept-said")
        node.gate.set()
        await finished(screen, pilot)
        got = rows(screen)
        assert got[0] == ["", "▸ Inventory against the lease", ""]
        assert got[1][:2] == ["passed", "  VRAM of GPU 0"]
        assert got[2] == ["FAILED", "  VRAM of GPU 1",
                          "GPU 1 (NVIDIA GeForce RTX 4090) reports 16376 MiB;"
                          " an RTX 4090 has 24564 MiB (±3 %)"]  # fmt: skip
        assert len(got) == 3  # the standard level's family did not run at quick
        said = text_of(screen, "accept-said")
        assert "verdict: FAILED · level quick · 1 FAILED, 0 warned, 0 not checked, 1 passed," \
               " 0 skipped" in said  # fmt: skip
        # The demo's provider records no return window: said, with how to record one.
        assert "return window unknown (record it: zuka provider edit" in said
        with Ledger.open(ledger_file, readonly=True) as ledger:
            last = acceptance.last(ledger, NODE)
        assert last is not None and last.verdict.status is Status.FAILED
        assert last.verdict.results == screen.stored.verdict.results  # type: ignore[union-attr]
        # The failed finding, selected: expected, found, and the command's raw output.
        screen.query_one("#accept-rows", DataTable).move_cursor(row=2)
        await pilot.pause()
        detail = text_of(screen, "accept-detail")
        assert "expected: 24564 MiB" in detail and "found: 16376 MiB" in detail
        assert f"$ {QUERY}" in detail and "exit 0" in detail
        assert "1, NVIDIA GeForce RTX 4090, 16376" in detail  # a line of stdout, as it came
        assert accept.levels == [Level.QUICK] and node.asked == [QUERY]


async def test_the_level_is_chosen_before_the_run(ledger_file: Path) -> None:
    node = Node(answers())
    accept = Accept(node)
    with_window(ledger_file, days=100)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, accept)
        await pilot.press("3", "2")
        assert "level standard" in text_of(screen, "accept-title")
        await pilot.press("r")
        await finished(screen, pilot)
        assert accept.levels == [Level.STANDARD]
        got = rows(screen)
        assert [r[1] for r in got if r[1].startswith("▸")] == [
            "▸ Inventory against the lease",
            "▸ Short GPU work",
        ]
        assert got[-1] == [
            "skipped",
            "  DCGM diagnostic",
            "skipped, because dcgmi is not on the node",
        ]
        said = text_of(screen, "accept-said")
        assert "verdict: passed · level standard · 0 FAILED, 0 warned, 0 not checked, 2 passed," \
               " 1 skipped" in said  # fmt: skip
        # The lease began 2026-09-01 (Shanghai); the provider takes a node back in 7 days.
        assert "returnable until 2026-12-10" in said
        await pilot.press("1")
        assert "level quick" in text_of(screen, "accept-title")


async def test_an_unreachable_node_is_not_checked_never_passed() -> None:
    accept = Accept(Node({}, down=True))
    app = app_on(None)  # an in-memory ledger: the run in the app's own loop
    async with app.run_test(size=(120, 36)) as pilot:
        assert app.ledger is not None
        app.ledger.import_records(demo_records(date(2026, 11, 30)))
        screen = await opened(app, accept)
        await pilot.press("enter")
        await finished(screen, pilot)
        got = rows(screen)
        assert [r[0] for r in got if not r[1].startswith("▸")] == ["not checked"]
        assert "No route to host" in got[1][2]
        said = text_of(screen, "accept-said")
        assert "verdict: not checked" in said and "passed ·" not in said
        last = acceptance.last(app.ledger, NODE)
        assert last is not None and last.verdict.status is Status.NOT_CHECKED


async def test_hostile_text_from_the_node_is_shown_as_text(ledger_file: Path) -> None:
    accept = Accept(Node(answers(gpu1_mib=100, name=HOSTILE)))
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, accept)
        await pilot.press("enter")
        await finished(screen, pilot)
        words = rows(screen)[2][2]
        assert "␛[2J␛]0;pwned␇[bold]red[/bold] [link=x]y" in words
        screen.query_one("#accept-rows", DataTable).move_cursor(row=2)
        await pilot.pause()
        detail = text_of(screen, "accept-detail")
        assert "\x1b" not in detail and "␛]0;pwned␇[bold]red[/bold]" in detail


async def test_escape_stops_a_run_and_nothing_is_stored(ledger_file: Path) -> None:
    node = Node(answers())
    node.gate.clear()
    accept = Accept(node)
    app = app_on(ledger_file)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await opened(app, accept)
            await pilot.press("enter")
            await wait_until(lambda: node.asked, what="the first command")
            await pilot.press("escape")
            await wait_until(lambda: app.screen is not screen, what="the screen to close")
            await wait_until(lambda: accept.cancelled.is_set(), what="the run to be cancelled")
    finally:
        node.gate.set()
    with Ledger.open(ledger_file, readonly=True) as ledger:
        assert acceptance.last(ledger, NODE) is None


async def test_w_writes_the_report_where_it_says(
    ledger_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    accept = Accept(Node(answers()))
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, accept)
        await pilot.press("w")
        assert "no verdict yet" in text_of(screen, "accept-said")
        await pilot.press("enter")
        await finished(screen, pilot)
        await pilot.press("w")
        await pilot.pause()
        path = tmp_path / f"zuka-accept-{NODE}-20261130-093000.md"
        assert screen.stored is not None
        assert path.read_text() == acceptreport.report_md(screen.stored)
        assert NODE in path.read_text()
        assert f"report written to {path}" in text_of(screen, "accept-said")
        await pilot.press("w")  # the same run's report again: never overwritten
        await pilot.pause()
        assert "exists already" in text_of(screen, "accept-said")


async def test_c_on_the_fleet_opens_the_check_of_the_selected_node(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the fleet's first read")
        await pilot.pause()
        await pilot.press("c")
        await wait_until(lambda: isinstance(app.screen, AcceptanceScreen), what="the screen")
        screen = app.screen
        assert isinstance(screen, AcceptanceScreen)
        fleet_selected = app.screen_stack[-2].table.selected_key  # type: ignore[attr-defined]
        assert screen.node_name == fleet_selected
        await pilot.press("escape")
        await wait_until(lambda: not isinstance(app.screen, AcceptanceScreen))


def test_finished_screen_snapshot(snap_compare, ledger_file: Path) -> None:  # type: ignore[no-untyped-def]
    accept = Accept(Node(answers(gpu1_mib=16376)))
    with_window(ledger_file, days=100)
    app = app_on(ledger_file)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        screen = await opened(app, accept)
        await pilot.press("enter")
        await finished(screen, pilot)
        screen.query_one("#accept-rows", DataTable).move_cursor(row=2)
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=(120, 36))


async def test_the_node_screen_shows_the_last_verdict(ledger_file: Path) -> None:
    with_window(ledger_file, days=100)
    node = Node(answers(gpu1_mib=16376))
    with Ledger.open(ledger_file, clock=lambda: NOW, actor="tester") as ledger:
        await Accept(node)(ledger, NODE, Config(), level=Level.STANDARD, clock=lambda: NOW)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        screen = NodeScreen(NODE)
        await app.push_screen(screen)
        await wait_until(lambda: screen.accepted is not None, what="the node's read")
        await pilot.press("4")
        await pilot.pause()
        text = str(screen.query_one("#node-acceptance", Static).render())
        # Finished at 09:30 UTC: 17:30 in Shanghai, the billing zone.
        assert text.splitlines() == [
            "acceptance: FAILED · level standard · 2026-11-30 17:30 · 1 FAILED, 0 warned,"
            " 0 not checked, 1 passed, 1 skipped",
            "returnable until 2026-12-10",
            "  FAILED: VRAM of GPU 1: GPU 1 (NVIDIA GeForce RTX 4090) reports 16376 MiB;"
            " an RTX 4090 has 24564 MiB (±3 %)",
        ]


@pytest.fixture
def sim_ledger(ledger_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two simulated nodes over SSH, in the ledger; runs take the tests' own checks."""
    monkeypatch.setattr(registry, "checks", lambda: (COUNT, ALWAYS))
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 2, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    yield ledger_path
    runner.stop()


async def test_c_runs_the_check_on_a_simulated_node_over_ssh(sim_ledger: Path) -> None:
    """The screen's own wiring: leases.app.acceptance.accept over SSH to the node."""
    with Ledger.open(sim_ledger) as ledger:
        ledger.update_node("sim-001", {"gpu_count": 9})  # sold as 9; the node has 8
    app = app_on(sim_ledger)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = AcceptanceScreen("sim-001")
        await app.push_screen(screen)
        await pilot.press("enter")
        await finished(screen, pilot)
        got = rows(screen)
        assert got[:2] == [
            ["", "▸ GPU count against the lease", ""],
            ["FAILED", "  GPU count", "nvidia-smi -L lists 8 GPUs; the lease says 9"],
        ]
        assert got[2:] == [["", "▸ Always passes", ""], ["passed", "  Always", "fine"]]
        said = text_of(screen, "accept-said")
        assert "verdict: FAILED · level quick · 1 FAILED" in said, said
        screen.query_one("#accept-rows", DataTable).move_cursor(row=1)
        await pilot.pause()
        detail = text_of(screen, "accept-detail")
        assert "expected: 9" in detail and "found: 8" in detail
        assert "$ nvidia-smi -L" in detail and "GPU 0:" in detail  # the node's own output
    with Ledger.open(sim_ledger, readonly=True) as ledger:
        last = acceptance.last(ledger, "sim-001")
    assert last is not None and last.verdict.status is Status.FAILED


async def test_a_simulated_node_that_cannot_be_reached_is_not_checked(sim_ledger: Path) -> None:
    with Ledger.open(sim_ledger) as ledger:
        ledger.update_node("sim-002", {"ssh_port": 1})  # nothing listens there
    app = app_on(sim_ledger)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = AcceptanceScreen("sim-002")
        await app.push_screen(screen)
        await pilot.press("enter")
        await finished(screen, pilot)
        statuses = [r[0] for r in rows(screen) if not r[1].startswith("▸")]
        assert statuses == ["not checked", "not checked"]
        said = text_of(screen, "accept-said")
        assert said.startswith("verdict: not checked") and "passed ·" not in said


async def test_quitting_during_a_run_stops_it(ledger_file: Path) -> None:
    node = Node(answers())
    node.gate.clear()
    accept = Accept(node)
    app = app_on(ledger_file)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await opened(app, accept)
            await pilot.press("enter")
            await wait_until(lambda: node.asked, what="the first command")
            await pilot.press("q")
        await wait_until(lambda: accept.cancelled.is_set(), what="the run to be cancelled")
    finally:
        node.gate.set()
    with Ledger.open(ledger_file, readonly=True) as ledger:
        assert acceptance.last(ledger, NODE) is None
