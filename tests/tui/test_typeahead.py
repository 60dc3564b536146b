"""Keys typed ahead in one burst (a slow jump host delivers them so) each go to the widget
that has the cursor when the key is handled, in the order typed: `n` then `n1<Tab>ssh
root@h` fills the name with "n1" and the login with "ssh root@h"."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from textual import events
from textual.app import App

from tests.support.fleetledger import NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.widgets.form import FormScreen


def burst(app: App[object], *keys: str) -> None:
    """Every key handed to the app at once, as a terminal hands a burst: no pause, no
    wait for the app to handle one before the next arrives."""
    driver = app._driver
    assert driver is not None
    for key in keys:
        char: str | None = key if len(key) == 1 else None
        if key == "tab":
            char = "\t"
        name = {" ": "space", "@": "at"}.get(key, key)
        if key == "@":
            char = unicodedata.lookup("COMMERCIAL AT")
        event = events.Key(name, char)
        event.set_sender(app)
        driver.send_message(event)


async def test_tab_in_a_burst_moves_on_between_the_texts(tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    frozen_ledger(path)
    app = ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        burst(app, "n", *"n1", "tab", *"ssh root@h")
        await wait_until(lambda: isinstance(app.screen, FormScreen), what="the form")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FormScreen)

        def typed() -> tuple[object, object]:
            return screen.field("name").value, screen.field("ssh").value

        # Before: ('n1ssh root@h', ''), the tab applied after the text that followed it.
        await wait_until(lambda: typed() == ("n1", "ssh root@h"), what=f"n1 / ssh: {typed()}")


async def test_a_burst_typed_into_an_open_form_keeps_its_order(tmp_path: Path) -> None:
    """The form already open: text, tab, text, shift+tab, backspace in one burst."""
    path = tmp_path / "fleet.db"
    frozen_ledger(path)
    app = ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the first read")
        await pilot.press("n")
        await wait_until(lambda: isinstance(app.screen, FormScreen), what="the form")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FormScreen)
        burst(app, *"gpu-88", "tab", *"ssh root@h", "shift+tab", "backspace")

        def typed() -> tuple[object, object]:
            return screen.field("name").value, screen.field("ssh").value

        await wait_until(lambda: typed() == ("gpu-8", "ssh root@h"), what=f"typed: {typed()}")
