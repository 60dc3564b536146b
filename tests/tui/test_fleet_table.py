"""The fleet table's two defences of the UI loop (tui/widgets/fleet_table.py): a big fill is
added a pass at a time, and a refresh renders only the cells that changed. And the Cell
every row is made of draws as the Text it stands for."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rich.console import Console
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from tests.support.waiting import wait_until
from tui.screens.fleetview import COLUMNS, Cell
from tui.widgets import fleet_table
from tui.widgets.fleet_table import FleetTable, TableRow

SHOWN = COLUMNS[:5]  # node, channel, gpus, state, util


def rows(n: int, util: int = 0, first: int = 0) -> list[TableRow]:
    out = []
    for i in range(first, first + n):
        cells = {
            "node": Cell(f"n{i:03d}"),
            "channel": Cell("platform/autodl"),
            "gpus": Cell("8×H100"),
            "state": Cell("ok", "green"),
            "util": Cell(f"{util + i % 7:3d}%"),
        }
        out.append(TableRow(f"n{i:03d}", cells, tuple((c.plain, c.style) for c in cells.values())))
    return out


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield FleetTable(id="t")

    def on_mount(self) -> None:
        self.query_one(FleetTable).set_columns(SHOWN)


def shown(table: FleetTable) -> list[str]:
    return [str(r.key.value) for r in table.ordered_rows]


def screen_text(app: App[None]) -> str:
    update = app.screen._compositor.render_full_update()
    return "\n".join("".join(s.text for strip in line for s in strip) for line in update.strips)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(row, column) of every body cell DataTable renders itself (not kept by the table)."""
    out: list[tuple[int, int]] = []
    real = DataTable._render_cell

    def counting(self: DataTable[object], row: int, col: int, *args: object) -> object:
        if row >= 0:
            out.append((row, col))
        return real(self, row, col, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(DataTable, "_render_cell", counting)
    return out


async def test_a_big_fill_is_added_a_pass_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_table, "ADD_PER_PASS", 40)
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(150))
        # The first pass: 40 rows, the rest owed; the first rows are those drawn first.
        assert table.row_count == 40 and table.pending == 110
        assert shown(table) == [f"n{i:03d}" for i in range(40)]
        await pilot.pause()
        assert "n000" in screen_text(app)
        await wait_until(lambda: table.pending == 0, what="every pass")
        assert shown(table) == [f"n{i:03d}" for i in range(150)]


async def test_many_changed_rows_are_updated_a_pass_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every row changed (a refresh after a flush): UPDATE_PER_PASS rows a pass, the first
    rows first, the rest in later passes; a cell is never left as it was."""
    monkeypatch.setattr(fleet_table, "ADD_PER_PASS", 200)
    monkeypatch.setattr(fleet_table, "UPDATE_PER_PASS", 40)
    app = TableApp()
    async with app.run_test(size=(100, 30)):
        table = app.query_one(FleetTable)
        table.show(rows(150))
        await wait_until(lambda: table.pending == 0, what="the fill")
        new = rows(150, util=50)
        table.show(new)
        util = [table.get_cell(f"n{i:03d}", "util").plain for i in range(150)]
        assert util[:40] == [f"{50 + i % 7:3d}%" for i in range(40)]
        assert util[40:] == [f"{i % 7:3d}%" for i in range(40, 150)]  # not yet
        assert table.updates == 40  # one changed cell a row
        await wait_until(
            lambda: all(table.get_cell(r.key, "util").plain == r.cells["util"].plain
                        for r in new),
            what="every row updated",
        )  # fmt: skip
        assert shown(table) == [r.key for r in new]


async def test_a_change_out_of_view_asks_no_redraw_and_shows_when_scrolled_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only rows far below the view changed: the table is not redrawn (nothing on screen
    changed: a redraw would send the visible table to the terminal again), and the new
    value is what shows once the row is scrolled into view."""
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(150))
        await wait_until(lambda: table.pending == 0, what="the fill")
        await pilot.pause()
        asked: list[object] = []
        real = FleetTable.refresh

        def counting(self: FleetTable, *args: object, **kwargs: object) -> FleetTable:
            asked.append(args)
            return real(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(FleetTable, "refresh", counting)
        far = rows(150)
        far[140] = rows(1, util=50, first=140)[0]
        table.show(far)
        assert table.updates == 1 and not asked
        near = list(far)
        near[2] = rows(1, util=50, first=2)[0]
        table.show(near)
        assert table.updates == 1 and asked  # in view: redrawn
        monkeypatch.setattr(FleetTable, "refresh", real)
        table.move_cursor(row=140, animate=False, scroll=True)
        await pilot.pause()
        line = next(x for x in screen_text(app).splitlines() if "n140" in x)
        assert f"{50 + 140 % 7:3d}%" in line


async def test_rows_without_a_sig_are_never_left_for_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row with no sig is compared cell by cell: not counted as changed, never put off
    (more of them than a pass updates once kept a pass scheduled for ever)."""
    monkeypatch.setattr(fleet_table, "UPDATE_PER_PASS", 40)
    app = TableApp()
    async with app.run_test(size=(100, 30)):
        table = app.query_one(FleetTable)
        table.show([TableRow(r.key, r.cells) for r in rows(150)])
        await wait_until(lambda: table.pending == 0, what="the fill")
        table.show([TableRow(r.key, r.cells) for r in rows(150, util=50)])
        assert table.get_cell("n149", "util").plain == f"{50 + 149 % 7:3d}%"
        await wait_until(lambda: table._pass is None, what="no pass left")


async def test_a_new_show_replaces_what_is_left_to_add(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fleet_table, "ADD_PER_PASS", 40)
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(150))
        await pilot.press("down", "down")  # the cursor on n002
        # Asked again, newest first and fewer, before the passes are done.
        newer = list(reversed(rows(100, util=50)))
        table.show(newer)
        await wait_until(lambda: table.pending == 0, what="every pass")
        assert shown(table) == [r.key for r in newer]
        assert table.selected_key == "n002"
        assert table.get_cell("n099", "util").plain == f"{50 + 99 % 7:3d}%"


async def test_a_refresh_renders_only_the_cells_that_changed(drawn: list[tuple[int, int]]) -> None:
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(FleetTable)
        before = rows(60)
        table.show(before)
        await pilot.pause()
        assert drawn  # the first screen is rendered
        drawn.clear()
        after = list(before)
        cells = dict(before[3].cells) | {"util": Cell(" 99%", "bold")}
        after[3] = TableRow(before[3].key, cells, ("changed",))
        table.show(after)
        await pilot.pause()
        assert table.updates == 1
        assert drawn == [(3, 4)]  # that cell, not the screen's 28 rows of 5
        assert " 99%" in screen_text(app)
        # The cursor moving renders the two rows it leaves and enters, no more.
        drawn.clear()
        await pilot.press("down")
        await pilot.pause()
        assert {r for r, _ in drawn} == {0, 1}


async def test_a_new_look_renders_every_cell_again(drawn: list[tuple[int, int]]) -> None:
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(FleetTable)
        table.show(rows(20))
        await pilot.pause()
        drawn.clear()
        # Cells kept in the old theme's colours would be wrong: every one is drawn again.
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"
        await pilot.pause()
        assert {(r, c) for r in range(20) for c in range(len(SHOWN))} <= set(drawn)


@pytest.mark.parametrize(
    ("cell", "text"),
    [
        (Cell("n001"), Text("n001", no_wrap=True, end="")),
        (Cell(" 42%", "bold red"), Text(" 42%", style="bold red", no_wrap=True, end="")),
        (Cell("¥1,234", justify="right"), Text("¥1,234", justify="right", no_wrap=True, end="")),
        (Cell("[/]节点"), Text("[/]节点", no_wrap=True, end="")),  # never markup
    ],
)
def test_a_cell_draws_as_the_text_it_stands_for(cell: Cell, text: Text) -> None:
    def draw(renderable: object) -> str:
        console = Console(width=12, record=True, color_system="truecolor", file=None)
        with console.capture():
            console.print(renderable)
        return console.export_text(styles=True)

    assert draw(cell) == draw(text)
    assert str(cell) == cell.plain and list(cell.spans) == []


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_only_the_dashboards_own_process_is_frozen() -> None:
    # In a child process: freezing this test process would keep its garbage for good.
    out = run_python(
        "import gc\n"
        "from tui.dashboard import gcpolicy\n"
        "print(gcpolicy.settle(), gc.get_freeze_count() == 0)\n"
        "gcpolicy.tune()\n"
        "print(gcpolicy.settle(), gc.get_freeze_count() > 0, gcpolicy.settle())\n"
    )
    assert out.split() == ["False", "True", "True", "True", "False"]


def test_the_dashboard_freezes_from_its_first_paint_and_after_each_refresh() -> None:
    out = run_python(
        "import asyncio, gc, tempfile\n"
        "from datetime import UTC, datetime\n"
        "from pathlib import Path\n"
        "from leases.config.sections import Config\n"
        "from leases.ledger.store import Ledger\n"
        "from leases.sim.ledger import register_sim_nodes\n"
        "from tui.dashboard import gcpolicy\n"
        "from tui.dashboard.app import ZukaApp\n"
        "path = Path(tempfile.mkdtemp()) / 'z.db'\n"
        "with Ledger.open(path) as ledger:\n"
        "    register_sim_nodes(ledger, 70, datetime.now(UTC))\n"
        "gcpolicy.tune()\n"
        "app = ZukaApp(path, poll=False, refresh_s=0.2, config=Config())\n"
        "async def main():\n"
        "    async with app.run_test(size=(120, 36)) as pilot:\n"
        "        for _ in range(600):\n"
        "            if gc.get_freeze_count():\n"
        "                break\n"
        "            await pilot.pause(0.05)\n"
        "        first = gc.get_freeze_count()\n"
        "        print(first > 0, app._reads >= 1)\n"
        "        for _ in range(600):\n"  # the later refreshes freeze what they leave too
        "            if app._reads >= 4 and gc.get_freeze_count() > first:\n"
        "                break\n"
        "            await pilot.pause(0.05)\n"
        "        print(app.fleet.table.row_count, gc.get_freeze_count() > first)\n"
        "asyncio.run(main())\n"
    )
    assert out.split() == ["True", "True", "70", "True"]


def test_keep_freezes_no_garbage_and_sweeps_the_frozen() -> None:
    """A young cycle already dead when a refresh is frozen is collected, not frozen;
    nothing is frozen while another screen is up; one that dies older or after it was
    frozen is held only until the sweep (gcpolicy.SWEEP_S)."""
    out = run_python(
        "import gc, time, weakref\n"
        "from tui.dashboard import gcpolicy\n"
        "class C: pass\n"
        "gcpolicy.tune()\n"
        "print(gcpolicy.managed(), gcpolicy.keep())\n"  # the first freeze
        "old = C(); old.me = old; o = weakref.ref(old)\n"
        "gc.collect(1); gc.collect(1)\n"  # survived young collections: the oldest now
        "del old\n"
        "young = C(); young.me = young; y = weakref.ref(young); del young\n"
        "print(gcpolicy.keep(alone=False), gc.get_freeze_count() > 0)\n"
        "later = C(); later.me = later; r = weakref.ref(later)\n"
        "print(gcpolicy.keep(), y() is None)\n"
        "del later; gc.collect()\n"
        "print(r() is not None)\n"  # frozen: a full collection does not walk it
        "gcpolicy.keep(now=time.monotonic() + gcpolicy.SWEEP_S + 1)\n"
        "print(r() is None, o() is None, gc.get_freeze_count() > 0)\n"  # swept
    )
    assert out.split() == [
        "True", "True", "False", "True", "True", "True", "True", "True", "True", "True",
    ]  # fmt: skip


async def test_the_cursor_waits_for_its_row_when_the_table_is_rebuilt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """New columns (a resize, a longer name) rebuild the table a pass at a time: the
    cursor's node, far down, gets the cursor back once its row is added (it went to the
    first row, so that a key meant for it acted on another node)."""
    monkeypatch.setattr(fleet_table, "ADD_PER_PASS", 40)
    app = TableApp()
    async with app.run_test(size=(100, 30)):
        table = app.query_one(FleetTable)
        table.show(rows(150))
        await wait_until(lambda: table.pending == 0, what="every pass")
        table.select_key("n120")
        assert table.selected_key == "n120"
        assert table.set_columns(SHOWN[:4])  # narrower: rebuilt
        table.show(rows(150))
        table.select_key("n120")
        assert table.pending and table.selected_key != "n120"  # not added yet
        await wait_until(lambda: table.pending == 0, what="every pass")
        assert table.selected_key == "n120"
        await wait_until(lambda: table.scroll_y > 0, what="its row in view")
        # A move before the row is back wins over the wish.
        assert table.set_columns(SHOWN)
        table.show(rows(150))
        table.select_key("n120")
        table.forget_wish()
        await wait_until(lambda: table.pending == 0, what="every pass")
        assert table.selected_key == "n000"
