"""The fleet, node, alerts and help screens in Chinese at 120x36 and 80x24: Chinese words
and values (two cells a character) aligned, nothing overlapped or cut mid-character."""

from __future__ import annotations

from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.i18n import ZH, set_language
from tests.i18n import zhfleet
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.node import NodeScreen

SIZES = [(120, 36), (80, 24)]


def _app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ZukaApp:
    monkeypatch.chdir(tmp_path)  # the header shows the ledger's path: the same on every run
    zhfleet.build(Path("zh.db"))
    set_language(ZH)
    return ZukaApp(Path("zh.db"), clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600,
                   config=Config())  # fmt: skip


async def _read(app: ZukaApp, pilot: object) -> None:
    # The fleet's reads run off the UI loop: the alerts come with the third.
    await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


def _run(app: ZukaApp, keys: tuple[str, ...] = (), node: bool = False):  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _read(app, pilot)
        if node:
            app.fleet.go_to(zhfleet.NODE)
            screen = NodeScreen(zhfleet.NODE)
            await app.push_screen(screen)
            await wait_until(lambda: screen.facts is not None, what="the node's first read")
        if keys:
            await pilot.press(*keys)
        await app.workers.wait_for_complete()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=["120x36", "80x24"])
def test_zh_fleet_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    app = _app(tmp_path, monkeypatch)
    assert snap_compare(app, run_before=_run(app), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["120x36", "80x24"])
def test_zh_node_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    app = _app(tmp_path, monkeypatch)
    assert snap_compare(app, run_before=_run(app, node=True), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["120x36", "80x24"])
def test_zh_alerts_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    app = _app(tmp_path, monkeypatch)
    assert snap_compare(app, run_before=_run(app, ("a",)), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=["120x36", "80x24"])
def test_zh_help_snapshot(snap_compare, tmp_path: Path, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    app = _app(tmp_path, monkeypatch)
    assert snap_compare(app, run_before=_run(app, ("question_mark",)), terminal_size=size)
