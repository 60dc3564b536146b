"""Keys: the help screen, the command palette, the user's remaps from [keys], on real
ledgers through Textual's Pilot; and the binding table they share."""

from __future__ import annotations

import sqlite3
import sys
import threading
import types
from datetime import UTC, date, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content
from textual.keys import _character_to_key
from textual.screen import Screen
from textual.widgets import DataTable, Static

from leases.config.sections import Config
from leases.core.errors import ConfigError
from leases.core.textsafe import visible
from leases.sim.demoledger import build_demo_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.dashboard.commands import bound_commands
from tui.dashboard.keymap import check_keys, key_problem, known_bindings
from tui.screens.alerts import AlertsScreen
from tui.screens.help import HelpScreen

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
KNOWN = known_bindings()


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "keys.db"
    build_demo_ledger(path, date(2026, 11, 30)).close()
    return path


def _app(path: Path, keys: dict[str, str] | None = None) -> ZukaApp:
    config = Config(keys=MappingProxyType(keys or {}))
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=config)


def notes(app: ZukaApp) -> str:
    """Every notification the app has up (Textual keeps them on the app)."""
    return "\n".join(n.message for n in app._notifications)


def _help_rows(app: ZukaApp) -> dict[str, list[str]]:
    """The help table as the user reads it: id -> [keys, does, id, why]."""
    table = app.screen.query_one("#help-keys", DataTable)
    rows = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
    return {r[2]: r for r in rows}


# -- the help screen -------------------------------------------------------------------------


async def test_help_lists_the_keys_of_the_screen_it_was_opened_on(tmp_path: Path) -> None:
    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = _help_rows(app)
        assert rows["app-help"][:2] == ["?", "Help (everywhere)"]
        assert rows["fleet-alerts"][0] == "a" and "acknowledge" in rows["fleet-alerts"][3]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        # On the alerts screen its own keys come first, then the app's.
        await pilot.press("a", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = _help_rows(app)
        title = app.screen.query_one("#help-title", Static).content
        assert str(title) == "Keys on the alerts screen · escape closes"
        order = list(rows)
        assert order.index("alerts-ack") < order.index("app-help")
        assert rows["alerts-snooze"][:2] == ["z", "Snooze 1 day"]
        assert rows["alerts-back"][0] == "esc a"
        await pilot.press("question_mark")  # ? closes help too
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)


async def test_help_and_palette_are_one_table(tmp_path: Path) -> None:
    from textual.command import CommandPalette

    from tui.dashboard.commands import ZukaCommands

    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        table = bound_commands(app.screen)
        provider = ZukaCommands(app.screen)
        await provider.startup()
        found = [hit.text async for hit in provider.discover()]
        # The palette offers what can run now (escape clears no filter yet); help lists all.
        assert found == [f"{c.title} ({'/'.join(c.keys)})" for c in table if c.enabled]
        assert [c.id for c in table if not c.enabled] == ["fleet-clear-filter"]
        await pilot.press("question_mark")
        await pilot.pause()
        assert list(_help_rows(app)) == [c.id for c in table]
        await pilot.press("escape", "ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)


# -- the command palette ---------------------------------------------------------------------


async def _choose(app: ZukaApp, pilot: Any, typed: str) -> None:
    """Open the palette, type, wait for the hit list, take the best hit."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*typed)
    hits = app.screen.query_one(CommandList)
    for _ in range(200):
        await pilot.pause(0.02)
        if hits.option_count and typed.split()[-1] in str(hits.get_option_at_index(0).prompt):
            break
    await pilot.press("enter")
    await pilot.pause()


async def test_palette_runs_a_binding(tmp_path: Path) -> None:
    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await _choose(app, pilot, "alerts")
        assert isinstance(app.screen, AlertsScreen)


async def test_palette_opens_the_selected_node_and_help_lists_enter(tmp_path: Path) -> None:
    # The table took enter before the screen's binding: it was in neither help nor palette.
    from tui.screens.node import NodeScreen

    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first refresh")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert _help_rows(app)["fleet-open"][:2] == ["⏎", "Open"]
        await pilot.press("escape")
        await pilot.pause()
        await _choose(app, pilot, "Open (")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="the node screen")


async def test_palette_goes_to_a_node_and_adds_a_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node screen and the lease form are other modules (tui/screens/node.py,
    lease_form.py): stand-ins with their constructors record what the palette asked for."""
    opened: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def stand_in(module: str, cls: str) -> None:
        class Recorded(Screen[None]):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__()
                opened.append((cls, args, kwargs))

        fake = types.ModuleType(module)
        setattr(fake, cls, Recorded)
        monkeypatch.setitem(sys.modules, module, fake)

    stand_in("tui.screens.node", "NodeScreen")
    stand_in("tui.screens.lease_form", "LeaseFormScreen")
    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await _choose(app, pilot, "Go to node h800-monthly-2")
        assert opened == [("NodeScreen", ("h800-monthly-2",), {})]
        app.pop_screen()
        await _choose(app, pilot, "Add lease to colo-njidc-4090")
        cls, args, kwargs = opened[1]
        assert cls == "LeaseFormScreen" and args == (app.ledger, "colo-njidc-4090")
        assert kwargs["mode"] == "add" and kwargs["tz"] == "Asia/Shanghai"
        assert kwargs["clock"]() == NOW


async def _prompts(app: ZukaApp, pilot: Any, typed: str, want: str) -> list[str]:
    """Open the palette, type, and read the hits as shown (plain text) once one shows
    `want` (the providers' hits arrive one by one); fails at once if the app fails."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await pilot.pause()
    await pilot.press(*typed)
    hits = app.screen.query_one(CommandList)

    def shown() -> list[str]:
        return [str(hits.get_option_at_index(i).prompt) for i in range(hits.option_count)]

    await wait_until(lambda: app._exception or any(want in p for p in shown()),
                     what=f"a hit showing {want!r}")  # fmt: skip
    assert app._exception is None, repr(app._exception)
    return shown()


def _rename(path: Path, old: str, new: str) -> None:
    """A hostile name written straight into the file, as an imported ledger may hold it."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE nodes SET name = ? WHERE name = ?", (new, old))
    conn.close()


@pytest.mark.parametrize("name", ["zz[/]", "[@click=app.quit]zz[/]", "zz[b]x", "zz\\[/]"])
async def test_palette_shows_a_stored_node_name_as_text(tmp_path: Path, name: str) -> None:
    """Textual's Matcher.highlight parses its candidate as markup: a name holding `[/]`
    raised MarkupError (the node could not be found), `[@click=...]` was a live action."""
    from textual.command import CommandList

    path = _ledger(tmp_path)
    _rename(path, "a100-monthly-1", name)
    app = _app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first fleet read")
        await _prompts(app, pilot, "zz", f"Go to node {name}")
        hits = app.screen.query_one(CommandList)
        for i in range(hits.option_count):
            prompt = hits.get_option_at_index(i).prompt
            assert isinstance(prompt, Content)
            assert not any("@click" in repr(span.style) for span in prompt.spans), prompt


async def test_a_remap_to_square_brackets_does_not_break_the_palette(tmp_path: Path) -> None:
    """`fleet-filter = "[,]"` passes check_keys; the palette showed "Filter ([/])", which
    Textual's markup parser refused: the app died on ctrl+p and typing."""
    app = _app(_ledger(tmp_path), {"fleet-filter": "[,]"})
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first fleet read")
        await _prompts(app, pilot, "filt", "([/])")


async def test_palette_reads_node_names_from_the_last_fleet_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ledger query on the UI loop when the palette opens (0.7 s with 5,000 nodes)."""
    from leases.ledger.store import Ledger

    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first fleet read")
        await app.workers.wait_for_complete()
        asked: list[object] = []
        real = Ledger.nodes

        def counted(self: Ledger, *args: Any, **kwargs: Any) -> Any:
            # The UI loop's thread only: the fleet's own reads go on, on their thread.
            if threading.current_thread() is threading.main_thread():
                asked.append(args)
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Ledger, "nodes", counted)
        await _prompts(app, pilot, "h800-monthly-2", "Go to node h800-monthly-2")
        assert asked == []


async def test_the_palette_lists_zukas_commands_first(tmp_path: Path) -> None:
    from textual.command import CommandList

    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        ours = {f"{c.title} ({'/'.join(c.keys)})" for c in bound_commands(app.screen) if c.enabled}
        await pilot.press("ctrl+p")
        hits = app.screen.query_one(CommandList)

        def listed() -> list[str]:
            prompts = (hits.get_option_at_index(i).prompt for i in range(hits.option_count))
            return [str(p).split("\n")[0] for p in prompts]  # the title, not its help

        await wait_until(lambda: len(listed()) > len(ours), what="every command listed")
        names = listed()
        assert set(names[: len(ours)]) == ours, names  # Textual's own (Keys...) after
        await pilot.press(*"lease")
        await wait_until(lambda: any("Add lease to" in n for n in listed()), what="hits")
        assert not any(n.startswith(("add lease", "go to node")) for n in listed())


# -- remaps ----------------------------------------------------------------------------------


async def test_a_remapped_key_works_and_the_old_one_does_not(tmp_path: Path) -> None:
    app = _app(_ledger(tmp_path), {"app-help": "f1", "alerts-ack": "x"})
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert _help_rows(app)["app-help"][0] == "f1"
        await pilot.press("escape", "a")
        await pilot.pause()
        table = app.screen.query_one("#alerts", DataTable)
        first = str(table.get_row_at(0)[0])
        await pilot.press("k")  # no longer acknowledges
        await pilot.pause()
        assert str(table.get_row_at(0)[2]) == "open"
        await pilot.press("x")
        await pilot.pause()
        states = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[2]) for i in range(2)}
        assert states[first] == "acked"


async def test_a_bad_remap_is_refused_by_name_and_remaps_nothing(tmp_path: Path) -> None:
    bad = {"app-help": "f1", "app-hlep": "f2", "alerts-ack": "ctlr+k", "alerts-snooze": "k"}
    app = _app(_ledger(tmp_path), bad)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        said = notes(app)
        assert "keys.app-hlep: no binding has this id (did you mean app-help?)" in said
        assert "keys.alerts-ack: 'ctlr+k' is unknown modifier 'ctlr' (did you mean ctrl?)" in said
        assert "keys.alerts-snooze: k is already alerts-ack's key on AlertsScreen" in said
        assert "no key remapped" in said
        await pilot.press("f1")  # the good line was not applied either
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


def test_config_check_names_bad_keys(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[keys]\napp-help = "f1"\nalerts-bak = "b"\n', encoding="utf-8")
    r = cli("config", "check", "--config", str(path))
    assert r.code == 2
    assert "keys.alerts-bak: no binding has this id (did you mean alerts-back?)" in r.err
    path.write_text('[keys]\napp-help = "f1,question_mark"\n', encoding="utf-8")
    assert cli("config", "check", "--config", str(path)).code == 0


# -- the table and the checks, without an app ------------------------------------------------


def test_every_binding_has_an_id_a_description_and_a_tooltip() -> None:
    """The help screen, the palette and the remaps are all built from these."""
    import inspect

    from textual.binding import Binding

    from tui.dashboard import keymap

    known = known_bindings()
    assert {"app-help", "alerts-ack", "help-close", "trust-yes"} <= set(known)
    for name in keymap._modules():
        module = sys.modules[name]
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name:
                continue
            for b in cls.__dict__.get("BINDINGS", ()):
                assert isinstance(b, Binding), f"{cls.__name__}: {b!r} is a tuple, no id"
                assert b.id and b.description and b.tooltip, f"{cls.__name__}: {b}"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("f1", None), ("ctrl+f", None), ("ctrl+shift+up", None), ("?", None),
        ("question_mark", None), ("slash", None), ("full_stop", None), ("é", None),
        ("escape", None), ("pagedown", None), ("space", None), ("alt+enter", None),
        ("", "an empty key"), (" ", "not a printable key"), ("\x1b", "not a printable key"),
        ("ctlr+f", "unknown modifier 'ctlr' (did you mean ctrl?)"),
        ("slsh", "unknown key 'slsh' (did you mean"),
        ("f99", "unknown key 'f99'"), ("ctrl+", "unknown key ''"),
    ],
)  # fmt: skip
def test_key_problem(key: str, problem: str | None) -> None:
    got = key_problem(key)
    assert got == problem or (problem is not None and got is not None and got.startswith(problem))


@given(st.text(max_size=80))
def test_any_remap_is_applied_normalised_or_refused_by_name(value: str) -> None:
    """Whatever the config holds, the answer is a keymap Textual can use or one line per
    bad key naming the binding, with no control character let through."""
    try:
        keymap = check_keys({"alerts-ack": value}, KNOWN)
    except ConfigError as err:
        assert err.problems
        for line in err.problems:
            assert line.startswith("keys.alerts-ack: ") and line == visible(line)
        return
    # Accepted: every word is a key (a single printable character becomes Textual's name
    # for it, e.g. "?" -> question_mark, which is what its key events carry).
    words = [w.strip() for w in value.split(",")]
    assert all(w and key_problem(w) is None for w in words)
    assert keymap == {"alerts-ack": ",".join(_character_to_key(w) if len(w) == 1 else w
                                             for w in words)}  # fmt: skip


def test_check_keys_normalises_and_refuses_all_or_nothing() -> None:
    assert check_keys({"app-help": "f1, ?", "alerts-ack": "K"}) == {
        "app-help": "f1,question_mark",
        "alerts-ack": "K",
    }
    assert check_keys({}) == {}
    with pytest.raises(ConfigError) as err:
        check_keys({"app-help": "f1", "nope": "x", "alerts-ack": "k,bogus"})
    assert err.value.problems == (
        "keys.nope: no binding has this id",
        "keys.alerts-ack: 'bogus' is unknown key 'bogus'",
    )
    # Two remapped bindings of one screen onto one key: one would silently stop working.
    with pytest.raises(ConfigError, match="alerts-ack: x is already alerts-snooze's key"):
        check_keys({"alerts-ack": "x", "alerts-snooze": "x"})
    # A screen's key over the app's is Textual's ordinary precedence: allowed.
    assert check_keys({"alerts-ack": "r"}) == {"alerts-ack": "r"}


# -- snapshots -------------------------------------------------------------------------------


def _snap_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ZukaApp:
    monkeypatch.chdir(tmp_path)  # the header shows the ledger's path: the same on every run
    build_demo_ledger(Path("snap.db"), date(2026, 11, 30)).close()
    return _app(Path("snap.db"))


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_help_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_snap_app(tmp_path, monkeypatch), press=["question_mark"],
                        terminal_size=size)  # fmt: skip


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_alerts_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_snap_app(tmp_path, monkeypatch), press=["a"], terminal_size=size)


# -- the README's screenshots ----------------------------------------------------------------


def test_screenshots_script_writes_each_shot(tmp_path: Path) -> None:
    import importlib.util

    script = Path(__file__).parent.parent.parent / "scripts" / "screenshots.py"
    spec = importlib.util.spec_from_file_location("screenshots", script)
    assert spec is not None and spec.loader is not None
    shots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shots)
    assert shots.main(["--out", str(tmp_path), "--size", "100x30", "--only", "help", "alerts"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alerts.svg", "help.svg"]
    helped = (tmp_path / "help.svg").read_text()
    assert "app-help" in helped and "zuka-demo.db" in helped  # the header: no temporary path
    assert "Alerts:" in (tmp_path / "alerts.svg").read_text()
    with pytest.raises(SystemExit):
        shots.main(["--out", str(tmp_path), "--only", "nope"])


@pytest.mark.parametrize("hide", ["", "filter", "fold"])
async def test_palette_go_to_node_moves_the_fleet_cursor_so_o_offboards_it(
    tmp_path: Path, hide: str
) -> None:
    """Go to node X, back, `o`: the offboarding plan is X's (it was the node the cursor
    had been on), also when a filter hid X (cleared, said) or its group was folded."""
    from tui.screens.node import NodeScreen
    from tui.screens.offboard import OffboardScreen

    app = _app(_ledger(tmp_path))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first refresh")
        await pilot.pause()
        table = app.fleet.table
        await wait_until(lambda: table.row_count > 3, what="the rows")
        names = [r.key for r in app.fleet.rows]
        target = names[-1]
        assert app.fleet.table.selected_key != target
        # Every notice said, kept: a toast expires on its own timer, which a loaded machine
        # can pass before the assertion below.
        said: list[str] = []
        notify = app.notify

        def kept(message: str, *args: Any, **kwargs: Any) -> None:
            said.append(str(message))
            notify(message, *args, **kwargs)

        app.notify = kept  # type: ignore[method-assign]
        if hide == "filter":
            await pilot.press("slash", *names[0], "enter")
            await wait_until(lambda: target not in table.rows, what="the filter")
        elif hide == "fold":
            await pilot.press("g")  # by channel, every group folded
            app.fleet.folded |= {r.facts.channel or "-" for r in app.fleet.rows}
            app.fleet.redraw()
            await wait_until(lambda: target not in table.rows, what="the fold")
        await _choose(app, pilot, f"Go to node {target}")
        await wait_until(lambda: isinstance(app.screen, NodeScreen), what="the node screen")
        await pilot.press("escape")
        await wait_until(lambda: app.screen is app.fleet, what="back on the fleet")
        assert table.selected_key == target
        if hide == "filter":
            assert any("Filter cleared" in m for m in said)
        await pilot.press("o")
        await wait_until(lambda: isinstance(app.screen, OffboardScreen), what="the plan")
        screen = app.screen
        assert isinstance(screen, OffboardScreen) and screen.node_name == target
