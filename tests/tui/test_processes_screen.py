"""The processes screen (`P` on the fleet): the simulated fleet's GPU processes with named
users and command lines, sorted and filtered, and the stop: a wrong pid typed is refused
and nothing is signalled; the right one stops it (the simulated node answers the signal),
the outcome is said and audited, and the process leaves the list. At 80x24 and 120x36."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static

from leases.config.sections import Config
from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim.commands import answer
from leases.sim.gpu import SimNode, readings
from leases.ssh.stream import CommandResult
from leases.telemetry.owners import APPS_OWNERS_COMMAND, parse_apps_owners
from leases.telemetry.rollups import HistoryStore
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.ask import AskScreen
from tui.screens.processes import ProcessesScreen

NOW = datetime(2026, 12, 2, 13, 30, tzinfo=UTC)
NODES = [SimNode(f"sim-{i}", "A800", count=2, seed=i) for i in (0, 1, 3)]


class SimRunner:
    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.commands: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(cmd)
        out, err, status = answer(self.node, cmd, NOW)
        return CommandResult(status, out, err)


def _status(node: SimNode) -> NodeStatus:
    samples = tuple(
        GpuSample(
            node.name,
            NOW,
            r.gpu.index,
            uuid=r.gpu.uuid,
            util_gpu=float(r.util_gpu),
            mem_used_mib=float(r.mem_used_mib),
        )
        for r in readings(node, NOW)
    )
    procs = parse_apps_owners(answer(node, APPS_OWNERS_COMMAND, NOW).stdout, node.name)
    return NodeStatus(node.name, NodeHealth.OK, "", NOW, NOW, samples, procs.processes or ())


@pytest.fixture
def fleet(ledger_path: Path) -> Path:
    with Ledger.open(ledger_path, clock=lambda: NOW) as ledger:
        for node in NODES:
            ledger.add_node(records.node_from({"name": node.name, "ssh_host": "10.0.0.1"}))
        HistoryStore(ledger).write_latest([_status(n) for n in NODES])
    return ledger_path


async def _open(app: ZukaApp, pilot: object) -> ProcessesScreen:
    await wait_until(lambda: app.status_of("sim-0") is not None, what="the statuses")
    await pilot.press("P")  # type: ignore[attr-defined]
    await wait_until(lambda: isinstance(app.screen, ProcessesScreen), what="the screen")
    screen = app.screen
    assert isinstance(screen, ProcessesScreen)
    await wait_until(lambda: bool(screen.shown), what="the rows")
    return screen


def _cells(screen: ProcessesScreen) -> list[list[str]]:
    table = screen.query_one(DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_list_sort_filter(fleet: Path, size: tuple[int, int]) -> None:
    app = ZukaApp(fleet, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=size) as pilot:
        screen = await _open(app, pilot)
        rows = _cells(screen)
        assert {r[3] for r in rows} >= {"alice", "bob"}
        assert any("train.py" in r[-1] for r in rows)
        table = screen.query_one(DataTable)
        assert sum(c.width + 2 for c in table.ordered_columns) <= size[0]
        table.move_cursor(row=3)
        chosen = screen.selected()
        await pilot.press("s")  # by user
        assert screen.sort == "user"
        assert screen.selected() == chosen  # the cursor stays on its process
        assert [r.user for r in screen.shown] == sorted(r.user for r in screen.shown)
        await pilot.press("slash")
        await pilot.press(*"user:bob")
        await pilot.press("enter")
        await wait_until(lambda: screen.filter_text == "user:bob", what="the filter")
        assert screen.shown and {r.user for r in screen.shown} == {"bob"}
        await pilot.press("slash")
        screen.query_one(Input).value = "cmd:torchrun node:sim-1"
        await pilot.press("enter")
        await wait_until(lambda: screen.filter_text == "cmd:torchrun node:sim-1",
                         what="the second filter")  # fmt: skip
        assert screen.shown and all("torchrun" in r.command for r in screen.shown)


async def test_stop_confirmed_and_wrong_confirmation(fleet: Path) -> None:
    app = ZukaApp(fleet, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    runners: list[SimRunner] = []

    def runner_for(ledger: Ledger, name: str) -> SimRunner:
        runners.append(SimRunner(next(n for n in NODES if n.name == name)))
        return runners[-1]

    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        screen.runner_for = runner_for
        screen.grace_s = 0.0
        screen.filter_text = "user:alice"
        screen.redraw()
        row = screen.shown[0]
        # A wrong pid typed: refused, nothing sent.
        await pilot.press("k")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the confirmation")
        app.screen.query_one(Input).value = str(row.pid + 1)
        await pilot.press("enter")
        await wait_until(lambda: "not stopped" in screen.said, what="the refusal")
        assert "type the process's pid" in screen.said and runners == []
        # The right pid: stopped, audited, gone from the list.
        await pilot.press("k")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the confirmation")
        app.screen.query_one(Input).value = str(row.pid)
        await pilot.press("enter")
        await wait_until(lambda: "stopped after" in screen.said, what="the outcome")
        assert row.pid not in {r.pid for r in screen.shown if r.node == row.node}
        assert row.pid in NODES[0].killed
        assert app.ledger is not None
        done = [e for e in app.ledger.history() if e.entity == "process"]
        assert [e.action for e in done] == ["process.term", "process.gone"]
        # Reopened before the poller reads the processes again: still gone.
        await pilot.press("escape", "escape")  # the filter cleared, then the fleet
        await wait_until(lambda: not isinstance(app.screen, ProcessesScreen), what="the fleet")
        again = await _open(app, pilot)
        assert row.pid not in {r.pid for r in again.shown if r.node == row.node}
        assert any(r.node == row.node for r in again.shown)  # its other GPU's process


async def test_the_title_says_how_old_the_readings_are(fleet: Path) -> None:
    """A list read long ago may show a process that has ended: the title says so, from
    each node's last good reading and the app's clock."""
    clock = {"now": NOW + timedelta(seconds=20)}  # (past 30 s the stored reading is stale)
    app = ZukaApp(fleet, clock=lambda: clock["now"], poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await _open(app, pilot)
        title = str(screen.query_one("#processes-title", Static).render())
        assert title.endswith("· read 20 s ago"), title
        clock["now"] = NOW + timedelta(seconds=27)
        await pilot.press("r")
        await wait_until(
            lambda: "read 27 s ago" in str(screen.query_one("#processes-title", Static).render()),
            what="the age after a reload",
        )


async def test_stop_runs_to_its_end_after_leaving_the_screen(fleet: Path) -> None:
    """A confirmed stop of a process that ignores SIGTERM (the sim's bob) goes on after
    escape: SIGKILL is still sent, the audit has term, kill and gone, and the outcome is
    notified on the app; the entries show in the node's log (`zuka log NODE`)."""
    app = ZukaApp(fleet, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    runners: list[SimRunner] = []

    def runner_for(ledger: Ledger, name: str) -> SimRunner:
        runners.append(SimRunner(next(n for n in NODES if n.name == name)))
        return runners[-1]

    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        screen.runner_for = runner_for
        screen.grace_s = 0.3
        at = next(i for i, r in enumerate(screen.shown) if r.user == "bob")
        screen.table.move_cursor(row=at)
        row = screen.shown[at]
        node = next(n for n in NODES if n.name == row.node)
        await pilot.press("k")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the confirmation")
        app.screen.query_one(Input).value = str(row.pid)
        await pilot.press("enter", "escape")  # confirmed, then straight back to the fleet
        await wait_until(lambda: not isinstance(app.screen, ProcessesScreen), what="the fleet")
        assert app.ledger is not None
        ledger = app.ledger

        def actions() -> list[str]:
            return [e.action for e in ledger.history() if e.entity == "process"]

        await wait_until(lambda: "process.gone" in actions(), what="the stop's end", timeout=10)
        assert actions() == ["process.term", "process.kill", "process.gone"]
        assert row.pid in node.killed
        assert any(c.count("kill -s KILL") for c in runners[0].commands)
        assert "killed after" in screen.said
        # App.notify posts a message: the notification is the app's once it is handled.
        await wait_until(lambda: any("killed after" in n.message for n in app._notifications),
                         what="the outcome notified")  # fmt: skip
        logged = [e.action for e in ledger.history(row.node) if e.entity == "process"]
        assert logged == ["process.term", "process.kill", "process.gone"]


async def test_escape_clears_the_filter_first_and_legend_only_when_marked(fleet: Path) -> None:
    from dataclasses import replace

    from textual.widgets import Static

    app = ZukaApp(fleet, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        title = screen.query_one("#processes-title", Static)
        assert "not visible" not in str(title.render())  # no row marked: no legend
        await pilot.press("slash", *"user:bob", "enter")
        await wait_until(lambda: screen.filter_text == "user:bob", what="the filter")
        await pilot.press("escape")
        assert app.screen is screen and screen.filter_text == ""
        assert len(screen.shown) == len(screen.all_rows)
        # A row the login cannot see: marked, the legend shown, `k` refuses at once.
        screen.all_rows = [replace(screen.all_rows[0], visible=False), *screen.all_rows[1:]]
        screen.redraw()
        assert "* not visible to the login" in str(title.render())
        screen.table.move_cursor(row=0)
        assert not screen.selected().visible  # type: ignore[union-attr]
        await pilot.press("k")
        assert not isinstance(app.screen, AskScreen)
        assert "inside the container" in screen.said
        await pilot.press("escape")
        await pilot.pause()
        await wait_until(lambda: not isinstance(app.screen, ProcessesScreen), what="the fleet")


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_pid_column_node_names_and_sort_keeps_the_row_in_view(
    fleet: Path, size: tuple[int, int]
) -> None:
    from dataclasses import replace

    app = ZukaApp(fleet, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=size) as pilot:
        screen = await _open(app, pilot)
        table = screen.query_one(DataTable)
        headings = [str(c.label) for c in table.ordered_columns]
        assert "PID" in headings and "Command" in headings
        row = screen.shown[0]
        assert str(row.pid) in _cells(screen)[0]
        # A long node name, many rows: at 120 columns the name is whole.
        long = "gpu-node-autodl-beijing-a-17"
        many = [replace(r, node=long, pid=100 + i) for i, r in enumerate(screen.all_rows * 12)]
        screen.all_rows = many
        screen.redraw()
        if size[0] >= 120:
            assert any(r[0] == long for r in _cells(screen))
        assert sum(c.width + 2 for c in table.ordered_columns) <= size[0]
        table.move_cursor(row=len(screen.shown) - 1)
        chosen = screen.selected()
        for _ in range(2):
            await pilot.press("s")
            await pilot.pause()
            assert screen.selected() == chosen
            top, height = table.scroll_y, table.scrollable_content_region.height
            assert top <= table.cursor_row + 1 <= top + height  # the header row counted
