"""The fleet screen driven by Pilot over a real ledger file: every key path, the refresh
cycle (off the UI loop, never overlapping, failures shown), and snapshots at 120x36 and
80x24 with a frozen clock."""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.cells import cell_len
from textual.binding import Binding
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input

from leases.core.models import Node, Provider, ProviderKind, SshTarget
from leases.fleet.data import FleetReader
from leases.ledger.store import Ledger
from tests.support.fleetledger import GAP_NODE, NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.fleet import FleetScreen
from tui.screens.fleetview import COLUMNS
from tui.widgets.fleet_table import GROUP_PREFIX, FleetTable


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.db"
    frozen_ledger(path)
    return path


def app_on(path: Path, refresh_s: float = 3600) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=refresh_s)


async def settled(app: ZukaApp, pilot: Pilot[None]) -> FleetTable:
    # The first paint takes two reads; the hour, cost and alerts come with the third.
    await wait_until(lambda: app._reads >= 3, what="the third read")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return app.screen.query_one("#fleet", FleetTable)


def keys(table: FleetTable) -> list[str]:
    return [str(r.key.value) for r in table.ordered_rows]


def column(table: FleetTable, key: str) -> list[str]:
    return [table.get_cell(k, key).plain for k in keys(table)]


def told(app: ZukaApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_rows_columns_and_header(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        assert table.row_count == 12 and keys(table)[0] == "a100-monthly-1"
        # The whole line (at 120 columns the figures are cut before the path: see
        # test_fleet_fit.py for what is drawn).
        header = app.fleet._header
        assert "GPUs busy" in header and "this month" in header and "idle" in header
        assert "next end 6h colo-njidc-4090" in header
        assert header.endswith(f"/{ledger_file.parent.name}/fleet.db")
        drawn = str(app.screen.query_one("#fleet-header").render())
        assert drawn.endswith("/fleet.db") and "GPUs busy" in drawn
        gap = table.get_cell(GAP_NODE, "hour").plain
        assert gap[: len(gap) // 2].strip() == "" and gap[len(gap) // 2 :].strip()
        assert app.status_of("colo-njidc-4090") is not None
        # The month column adds up to the header's month (one computation, as zuka report).
        assert app.data is not None and app.data.money is not None
        month = [c for c in column(table, "cost") if c != "-"]
        total = sum(int(c.replace("CNY ", "").replace(",", "")) for c in month)
        assert abs(total - int(app.data.money.cost)) <= len(month)  # whole-yuan rounding
        assert f"CNY {app.data.money.cost.quantize(1):,} this month" in header


async def test_the_columns_that_matter_stay_at_80x24(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await settled(app, pilot)
        shown = [c.key for c in table.shown_columns]
        assert {"node", "state", "util", "ends", "alerts"} <= set(shown)
        assert sum(c.width + 2 for c in table.shown_columns) <= 80
        await pilot.resize_terminal(160, 30)
        await pilot.pause()
        assert len(table.shown_columns) > len(shown)  # more appear as width allows


async def test_countdown_coloured_by_urgency(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        ends = {k: table.get_cell(k, "ends") for k in keys(table)}
        assert (
            ends["colo-njidc-4090"].plain.startswith("6h")
            and ends["colo-njidc-4090"].style == "bold red"
        )
        assert (
            ends["h800-monthly-2"].plain.startswith("4d")
            and ends["h800-monthly-2"].style == "yellow"
        )
        assert ends["a100-monthly-1"].plain.startswith("14d") and ends["a100-monthly-1"].style == ""


async def test_sort_by_each_column_and_reverse(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        seen = set()
        for _ in table.shown_columns:  # s walks every column shown and comes back
            await pilot.press("s")
            seen.add(screen.sort_key)
        assert seen == {c.key for c in table.shown_columns} and screen.sort_key == "node"
        while screen.sort_key != "util":
            await pilot.press("s")
        # Unknown (a node not read) goes last both ways: the nodes read come first.
        utils = column(table, "util")
        assert utils[-1] == "-" and utils.count("-") == 1
        known = [float(u.rstrip("%")) for u in utils[:-1]]
        assert known == sorted(known)
        await pilot.press("S")
        utils = column(table, "util")
        assert utils[-1] == "-"
        known = [float(u.rstrip("%")) for u in utils[:-1]]
        assert known == sorted(known, reverse=True)
        assert "sort Util ↓" in str(screen.query_one("#fleet-status").render())


async def test_filter_terms_and_escape(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"channel:colo", "enter")
        assert keys(table) == ["colo-njidc-4090", "colo-njidc-a800"]
        assert app.focused is table
        status = str(app.screen.query_one("#fleet-status").render())
        assert "filter 'channel:colo': 2 of 12" in status
        await pilot.press("escape")
        assert table.row_count == 12
        await pilot.press("slash", *"ending:7d")
        assert set(keys(table)) == {"colo-njidc-4090", "h800-monthly-2"}
        box = app.screen.query_one("#fleet-filter", Input)
        box.value = "ending:7d ending:soon"  # refused: the last filter that parsed stays
        await pilot.pause()
        assert set(keys(table)) == {"colo-njidc-4090", "h800-monthly-2"}
        assert "a duration such as" in str(app.screen.query_one("#fleet-status").render())
        await pilot.press("escape")
        assert table.row_count == 12 and not app.screen.query_one("#fleet-filter").display


async def test_group_by_channel_then_provider(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("g")
        headings = [table.get_cell(k, "node").plain for k in keys(table) if k.startswith("\x00")]
        assert headings == ["▾ cloud (3)", "▾ colo (2)", "▾ platform (7)"]
        assert table.selected_key == "a100-monthly-1"  # the cursor follows its node
        await pilot.press("ctrl+home")
        assert table.selected_key is None  # a heading is no node
        await pilot.press("down")
        assert table.selected_key is not None
        await pilot.press("g")
        headings = [k for k in keys(table) if k.startswith("\x00")]
        assert len(headings) > 3  # one per provider
        await pilot.press("g")
        assert table.row_count == 12


async def test_cursor_and_cells_survive_a_refresh(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        widths = [c.width for c in table.columns.values()]
        await pilot.press("down", "down", "down")
        chosen = table.selected_key
        for _ in range(2):  # the second reload evaluates alerts: markers may appear
            app.refresh_view(reload=True)
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert table.selected_key == chosen
        assert table.updates == 0  # nothing changed: no cell was touched
        # The node's utilisation drops: sorted by util, it moves, and the cursor with it.
        while app.screen.sort_key != "util":  # type: ignore[attr-defined]
            await pilot.press("s")
        before = keys(table).index(chosen)  # type: ignore[arg-type]
        with Ledger.open(ledger_file) as ledger:
            ledger.conn.execute(
                "UPDATE node_latest SET gpus = replace(gpus, '\"util_gpu\": ', '\"util_gpu\": 1') "
                "WHERE node_id = (SELECT id FROM nodes WHERE name = ?)",
                [chosen],
            )
            ledger.conn.commit()
        app.refresh_view()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keys(table).index(chosen) != before  # type: ignore[arg-type]
        assert table.selected_key == chosen
        assert 0 < table.updates <= len(table.shown_columns)
        assert [c.width for c in table.columns.values()] == widths  # never re-measured


async def test_refreshes_never_overlap(ledger_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    running = 0
    most = 0
    reads = 0
    real = FleetReader.read

    def slow_read(self: FleetReader, req: Any) -> Any:
        nonlocal running, most, reads
        running += 1
        most = max(most, running)
        reads += 1
        try:
            gate.wait(20)  # held until the test has asked for more refreshes
            return real(self, req)
        finally:
            running -= 1

    monkeypatch.setattr(FleetReader, "read", slow_read)
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: running == 1, what="the first read to start")
        # The UI loop keeps answering while the read waits on its thread.
        await pilot.press("s")
        for _ in range(3):
            app.refresh_view()
        gate.set()
        await wait_until(lambda: reads == 3 and running == 0 and not app._refreshing,
                         what="the queued refresh")  # fmt: skip
        await app.workers.wait_for_complete()
        # Startup reads three times in a row (the first rows, every row, then the hour):
        # the three asks made while the first was busy ride on those, none beside them.
        assert most == 1 and reads == 3


async def test_a_failed_refresh_is_shown_and_the_next_one_runs(
    ledger_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = FleetReader.read
    calls = 0

    def flaky(self: FleetReader, req: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first refresh's (the first paint's read is the first)
            raise RuntimeError("disk on fire")
        return real(self, req)

    monkeypatch.setattr(FleetReader, "read", flaky)
    app = app_on(ledger_file, refresh_s=0.05)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="a refresh after the failure")
        await pilot.pause()
        assert any("refresh failed: RuntimeError: disk on fire" in m for m in told(app))
        assert app.screen.query_one("#fleet", FleetTable).row_count == 12


async def test_reload_alerts_and_plain_notices(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        with Ledger.open(ledger_file) as ledger:
            ledger.add_node(Node("训练节点-一号", ssh=SshTarget(host="10.0.0.9", user="root"),
                                 gpu_model="A800", gpu_count=8))  # fmt: skip
        await pilot.press("r")
        await wait_until(lambda: "训练节点-一号" in keys(table), what="the new node")
        assert "ledger re-read" in told(app)
        await pilot.press("t")
        assert any("untrusted" in m for m in told(app))
        await pilot.press("c")  # the selected node's acceptance check
        await wait_until(lambda: type(app.screen).__name__ == "AcceptanceScreen", what="accept")
        await pilot.press("escape")
        await wait_until(lambda: isinstance(app.screen, FleetScreen), what="back")
        await pilot.press("o")  # the selected node's offboarding checklist
        await wait_until(lambda: type(app.screen).__name__ == "OffboardScreen", what="offboard")
        await pilot.press("escape")
        await wait_until(lambda: isinstance(app.screen, FleetScreen), what="back")
        await pilot.press("a")
        await pilot.pause()
        assert type(app.screen).__name__ == "AlertsScreen"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


async def test_chinese_names_align(ledger_file: Path) -> None:
    name = "训练节点-一号-甲乙丙"  # 11 characters, 20 terminal cells
    with Ledger.open(ledger_file) as ledger:
        ledger.add_node(Node(name, ssh=SshTarget(host="10.0.0.9", user="root"),
                             gpu_model="A800", gpu_count=8))  # fmt: skip
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        assert table.shown_columns[0].width == cell_len(name) == 20  # measured in cells
        strips = app.screen._compositor.render_strips()
        lines = ["".join(seg.text for seg in strip) for strip in strips]
        rows = [ln for ln in lines if ln.startswith((f" {name} ", " a100-monthly-1 "))]
        assert len(rows) == 2
        # The GPUs column starts at the same terminal cell on both rows.
        assert len({cell_len(ln[: ln.index("8×")]) for ln in rows}) == 1


class Recorded:
    """Stand-in screens for the forms and the node screen, which other parts build: each
    records how the fleet screen constructed it and closes at once with `result`."""

    made: ClassVar[list[tuple[str, tuple[Any, ...], dict[str, Any]]]] = []

    @classmethod
    def module(cls, *names: str, result: object = True) -> types.ModuleType:
        mod = types.ModuleType("standin")
        for name in names:

            def init(self: Any, *args: Any, _n: str = name, **kw: Any) -> None:
                cls.made.append((_n, args, kw))
                ModalScreen.__init__(self)

            def mount(self: Any) -> None:
                self.dismiss(result)

            setattr(mod, name, type(name, (ModalScreen,), {"__init__": init, "on_mount": mount}))
        return mod


@pytest.mark.parametrize(
    ("key", "module", "name", "args", "kwargs"),
    [
        ("enter", "node", "NodeScreen", ("a100-monthly-1",), {}),
        ("n", "node_form", "NodeFormScreen", ("LEDGER",), {"paste": False}),
        ("p", "node_form", "NodeFormScreen", ("LEDGER",), {"paste": True}),
        ("e", "node_form", "NodeFormScreen", ("LEDGER",), {"name": "a100-monthly-1"}),
        ("l", "lease_form", "LeaseFormScreen", ("LEDGER", "a100-monthly-1"), {"mode": "add"}),
        ("L", "lease_form", "LeaseFormScreen", ("LEDGER", "a100-monthly-1"), {"mode": "edit"}),
        ("w", "lease_form", "LeaseFormScreen", ("LEDGER", "a100-monthly-1"), {"mode": "renew"}),
        ("E", "lease_form", "LeaseFormScreen", ("LEDGER", "a100-monthly-1"), {"mode": "end"}),
        ("x", "resource_form", "ResourceFormScreen", ("LEDGER", "a100-monthly-1"), {}),
    ],
)
async def test_keys_open_the_other_screens(
    ledger_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    module: str,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    monkeypatch.setitem(sys.modules, f"tui.screens.{module}", Recorded.module(name))
    Recorded.made.clear()
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(app, pilot)
        await pilot.press(key)
        await wait_until(lambda: Recorded.made, what=f"{key} to open {name}")
        made, got, kw = Recorded.made[0]
        assert made == name
        assert tuple(app.ledger if a == "LEDGER" else a for a in args) == got
        for k, v in kwargs.items():
            assert kw[k] == v
        if module == "lease_form":
            assert kw["clock"] is app.clock and kw["tz"] == "Asia/Shanghai"
        await wait_until(lambda: isinstance(app.screen, FleetScreen), what="back to the fleet")


def test_every_binding_has_an_id_a_description_and_a_tooltip() -> None:
    from textual.binding import Binding

    ids = []
    for b in [*FleetScreen.BINDINGS, *ZukaApp.BINDINGS]:
        assert isinstance(b, Binding)
        assert b.id and b.description and b.tooltip, b
        ids.append(b.id)
    assert len(ids) == len(set(ids))
    assert all(i.startswith(("fleet-", "app-")) for i in ids)


def run_before(*keys_: str) -> Callable[[Pilot[None]], Any]:
    async def go(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, ZukaApp)
        await wait_until(lambda: app.data is not None, what="the first refresh")
        await app.workers.wait_for_complete()
        await pilot.press(*keys_)
        await pilot.pause()

    return go


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_fleet_snapshot(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        size: tuple[int, int]) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)  # the header shows the ledger's path: the same on every run
    path = Path("snap.db")
    frozen_ledger(path)
    assert snap_compare(app_on(path), terminal_size=size, run_before=run_before())


def test_fleet_snapshot_grouped_and_filtered(snap_compare: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    path = Path("snap.db")
    frozen_ledger(path)
    keys_ = ("g", "slash", *"monthly", "enter")
    assert snap_compare(app_on(path), terminal_size=(80, 24), run_before=run_before(*keys_))


async def test_redraws_wait_while_another_screen_is_on_top(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("a")
        await wait_until(lambda: not isinstance(app.screen, FleetScreen), what="the alerts")
        with Ledger.open(ledger_file) as ledger:
            ledger.add_node(Node("added-later", ssh=SshTarget(host="10.0.0.9", user="root")))
        app.refresh_view(reload=True)
        await wait_until(lambda: "added-later" in [r.key for r in app.fleet.rows],
                         what="the refresh to read the new node")  # fmt: skip
        assert "added-later" not in keys(table)  # read, not drawn: the fleet is hidden
        await pilot.press("escape")
        await wait_until(lambda: "added-later" in keys(table), what="the redraw on return")


# -- what a new user's review found -----------------------------------------------------------


def footer_keys(app: ZukaApp) -> list[tuple[str, str]]:
    from textual.widgets._footer import FooterKey

    return [(k.key_display, k.description) for k in app.screen.query(FooterKey)]


async def test_the_footer_shows_the_keys_needed_most_whole_at_80_columns(
    ledger_file: Path,
) -> None:
    from tui.widgets.fleet_footer import label_width

    app = app_on(ledger_file)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(app, pilot)
        await pilot.pause()
        shown = footer_keys(app)
        said = {d for _, d in shown}
        # Enter was in neither footer nor help (the table took it); '? Hel' was cut.
        assert {"Open", "Filter", "Alerts", "Offboard", "Help", "Quit"} <= said, shown
        assert sum(label_width(k, d) for k, d in shown) <= 80
        await pilot.resize_terminal(160, 30)
        await wait_until(lambda: len(footer_keys(app)) > len(shown), what="more keys")
        assert {"Sort", "Group"} <= {d for _, d in footer_keys(app)}
        assert "Clear filter" not in {d for _, d in footer_keys(app)}  # nothing to clear
        # Typing a filter, the letter keys go to the box: the footer says how to leave it.
        await pilot.press("slash", *"colo", "enter")
        await wait_until(lambda: "Clear filter" in {d for _, d in footer_keys(app)},
                         what="escape in the footer")  # fmt: skip
        await pilot.press("escape")
        await wait_until(lambda: "Clear filter" not in {d for _, d in footer_keys(app)},
                         what="escape gone")  # fmt: skip


async def test_help_lists_enter_home_end_and_every_fleet_key(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        table = app.screen.query_one("#help-keys", DataTable)
        rows = {str(table.get_row_at(i)[2].plain): table.get_row_at(i)
                for i in range(table.row_count)}  # fmt: skip
        ids = {b.id for b in FleetScreen.BINDINGS if isinstance(b, Binding)}
        assert ids | {"fleet-first", "fleet-last"} <= set(rows), ids - set(rows)
        assert rows["fleet-open"][1].plain == "Open"
        assert rows["fleet-renew"][1].plain == "Renew"  # on the node screen w is 7 d


async def test_a_bad_filter_is_said_until_the_box_holds_a_good_one(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        status = app.screen.query_one("#fleet-status")
        await pilot.press("slash", *"channel:colo")
        box = app.screen.query_one("#fleet-filter", Input)
        box.value = "channel:colo foo:bar"  # pasted: the table keeps channel:colo
        await pilot.press(*"x", "backspace")  # typed quickly: said all the same
        await pilot.pause()
        said = str(status.render())
        assert said.startswith("filter: unknown term 'foo:'") and "filter filter" not in said
        # A refresh does not replace the error while the box still holds the bad term...
        app.refresh_view(reload=True)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert str(status.render()).startswith("filter: unknown term 'foo:'")
        # ...and the table keeps the last filter that parsed.
        assert keys(table) == ["colo-njidc-4090", "colo-njidc-a800"]
        await pilot.press("enter")  # not taken: the box stays, with what is to be fixed
        assert app.focused is box and box.value == "channel:colo foo:bar"
        box.value = "channel:colo zzz"
        await pilot.pause()
        assert str(status.render()).startswith("no node matches 'channel:colo zzz' (escape clears)")
        await pilot.press("escape")
        assert table.row_count == 12 and "filter" not in str(status.render())


async def test_a_resize_keeps_the_cursor_on_its_node(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("down", "down", "down", "down")
        chosen = table.selected_key
        assert chosen is not None and chosen != keys(table)[0]
        for width in (80, 200, 120):
            await pilot.resize_terminal(width, 36)
            await pilot.pause()
            assert table.selected_key == chosen, width


async def test_home_and_end_go_to_the_first_and_last_row(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0


async def test_a_group_heading_shows_its_whole_label_and_enter_folds_it(
    ledger_file: Path,
) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(80, 24)) as pilot:
        table = await settled(app, pilot)
        await pilot.press("g")  # by channel
        await pilot.press("home")
        heading = keys(table)[0]
        assert heading.startswith("\x00") and table.get_cell(heading, "node").plain == "▾ cloud (3)"
        await pilot.press("enter")  # folds: the group's nodes go, the marker says so
        assert table.get_cell(heading, "node").plain == "▸ cloud (3)"
        assert table.row_count == 15 - 3 and isinstance(app.screen, FleetScreen)
        await pilot.press("enter")
        assert table.get_cell(heading, "node").plain == "▾ cloud (3)" and table.row_count == 15
        # A long label runs on across the next cells: nothing, the count least, is cut.
        with Ledger.open(ledger_file) as ledger:
            idc = Provider(ProviderKind("colo"), "Jiangning IDC 江苏南京")
            ledger.add_node(Node("long-one", ssh=SshTarget(host="10.0.0.9", user="root"),
                                 provider=idc.name), new_provider=idc)  # fmt: skip
        app.refresh_view(reload=True)
        await app.workers.wait_for_complete()
        await pilot.press("g")  # by provider
        await pilot.pause()
        shown = [c.key for c in table.shown_columns]
        row = "".join(
            table.get_cell(GROUP_PREFIX + "Jiangning IDC 江苏南京", k).plain for k in shown
        )
        assert row.replace(" ", "") == "▾JiangningIDC江苏南京(1)"


async def test_sort_walks_the_columns_shown_and_says_which(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        shown = [c.key for c in table.shown_columns]
        assert len(shown) < len(COLUMNS)
        seen = []
        for _ in shown:
            await pilot.press("s")
            seen.append(screen.sort_key)
        assert seen == [*shown[1:], "node"]  # never a hidden column
        label = next(c.label for c in table.shown_columns if c.key == shown[1])
        await pilot.press("s")
        assert f"sort {label} ↑" in str(screen.query_one("#fleet-status").render())


async def test_the_status_line_fits_120_columns_and_says_health_as_the_table(
    ledger_file: Path,
) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        await settled(app, pilot)
        status = str(app.screen.query_one("#fleet-status").render())
        assert "1 needs reboot" in status and "driver_mismatch" not in status
        assert cell_len(status) <= 120, status
        table = app.screen.query_one("#fleet", FleetTable)
        table.move_cursor(row=table.get_row_index("colo-njidc-4090"))
        await pilot.pause()
        detail = str(app.screen.query_one("#fleet-detail").render())
        assert detail.startswith("colo-njidc-4090: needs reboot — driver/library"), detail


async def test_a_live_sort_holds_its_order_while_the_user_moves(ledger_file: Path) -> None:
    app = app_on(ledger_file)
    async with app.run_test(size=(120, 12)) as pilot:  # a few rows in view
        table = await settled(app, pilot)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        while screen.sort_key != "util":
            await pilot.press("s")
        await pilot.press("end", "home")
        chosen = table.selected_key
        order = keys(table)
        assert chosen == order[0]
        with Ledger.open(ledger_file) as ledger:  # the least busy node becomes the busiest
            ledger.conn.execute(
                "UPDATE node_latest SET gpus = replace(gpus, '\"util_gpu\": ', '\"util_gpu\": 10') "
                "WHERE node_id = (SELECT id FROM nodes WHERE name = ?)",
                [order[0]],
            )
            ledger.conn.commit()

        async def refresh() -> None:
            app.refresh_view()
            await app.workers.wait_for_complete()
            await pilot.pause()

        await refresh()
        # The rows do not reorder under a user moving through them; the cursor stays put.
        assert keys(table) == order and table.selected_key == chosen
        assert "(held while you move)" in str(screen.query_one("#fleet-status").render())
        screen.hold_s = 0  # the user stopped moving: the next refresh sorts again
        await refresh()
        assert keys(table)[-2:] == [chosen, "colo-njidc-4090"]  # unknown util last
        assert table.selected_key == chosen
        # The node stays in view wherever the sort put it.
        row = table.get_row_index(chosen)  # type: ignore[arg-type]
        assert table.scroll_y <= row < table.scroll_y + table.scrollable_content_region.height - 1


async def test_the_offboard_column_shows_while_a_plan_is_in_force(ledger_file: Path) -> None:
    from leases.config.sections import Config
    from leases.offboard import evidence, runner
    from tests.support.offboard_files import PLANNERS

    app = app_on(ledger_file)
    async with app.run_test(size=(120, 36)) as pilot:
        table = await settled(app, pilot)
        assert "offboard" not in [c.key for c in table.shown_columns]  # nothing to say
        with Ledger.open(ledger_file) as ledger:
            node = ledger.node("h800-monthly-2")
            evidence.store(ledger, runner.replan(ledger, node, Config(), PLANNERS))
        app.refresh_view(reload=True)
        await wait_until(
            lambda: "offboard" in [c.key for c in table.shown_columns], what="the column"
        )
        assert table.get_cell("h800-monthly-2", "offboard").plain not in ("", "—")
        assert {"node", "state", "util", "ends", "alerts"} <= {c.key for c in table.shown_columns}
