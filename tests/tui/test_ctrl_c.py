"""ctrl+c in the dashboard leaves it (it only said "press ctrl+q"); while an offboarding
step runs it asks first; with text selected in a field it copies, as Textual's binding."""

from __future__ import annotations

from pathlib import Path

from textual.screen import Screen
from textual.widgets import Input

from tests.support.fleetledger import NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.ask import AskScreen
from tui.widgets.form import FormScreen


def dashboard(tmp_path: Path) -> ZukaApp:
    path = tmp_path / "fleet.db"
    frozen_ledger(path)
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600)


class Offboarding(Screen[None]):
    """A screen with a step under way, as the offboarding screen says it (`busy`)."""

    busy = "running step 'wipe /data'"


async def test_ctrl_c_quits_the_fleet(tmp_path: Path) -> None:
    app = dashboard(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await pilot.press("ctrl+c")
        await wait_until(lambda: app.return_code is not None, what="the app to exit")
        assert not any("ctrl+q" in n.message for n in app._notifications)


async def test_ctrl_c_asks_while_an_offboarding_step_runs(tmp_path: Path) -> None:
    app = dashboard(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await app.push_screen(Offboarding())
        await pilot.press("ctrl+c")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
        assert "wipe /data" in str(app.screen.query_one("Static").render())
        await pilot.press("escape")  # stay: the step goes on
        await wait_until(lambda: isinstance(app.screen, Offboarding), what="back")
        assert app.return_code is None
        await pilot.press("ctrl+c")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
        await pilot.press("y", "enter")
        await wait_until(lambda: app.return_code is not None, what="the app to exit")


async def test_ctrl_c_copies_text_selected_in_a_field(tmp_path: Path) -> None:
    app = dashboard(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, FormScreen), what="the form")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press(*"gpu-7")
        field = app.screen.focused
        assert isinstance(field, Input) and field.value == "gpu-7"
        field.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.clipboard == "gpu-7" and app.return_code is None
        assert isinstance(app.screen, FormScreen)


async def test_ctrl_c_in_a_form_asks_when_something_was_typed(tmp_path: Path) -> None:
    app = dashboard(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, FormScreen), what="the form")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press(*"gpu-7", "ctrl+c")  # nothing selected: leave, but typing is lost
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the question")
        await pilot.press("escape")
        await wait_until(lambda: isinstance(app.screen, FormScreen), what="back in the form")
        form = app.screen
        assert isinstance(form, FormScreen) and form.field("name").value == "gpu-7"
        form.field("name").value = ""  # nothing typed any more: no question
        await pilot.press("ctrl+c")
        await wait_until(lambda: app.return_code is not None, what="the app to exit")
