"""A Chinese new user's review of the dashboard (review 27): the fleet's columns at 120x36
the same as English's, key descriptions that say actions, the offboard screen's driver
in words, the form's refusal without a line that starts with a closing bracket."""

from __future__ import annotations

from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.i18n import EN, ZH, set_language, using
from tests.i18n import zhfleet
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens import fleetview
from tui.widgets.fleet_table import FleetTable


@pytest.mark.parametrize("name_width", [8, 14, 18, 24])
def test_chinese_columns_fit_as_english_ones_at_every_width(name_width: int) -> None:
    """利用率 (6 cells) over 'Util' (4) made Chinese drop a column English showed (Temp at
    120, Alert at 80) and give the room left to the GPU column ('8×A100 80GB SXM')."""
    for width in range(20, 260):
        english = fleetview.visible_columns(width, name_width)
        with using(ZH):
            chinese = fleetview.visible_columns(width, name_width)
        assert [(c.key, c.width) for c in chinese] == [(c.key, c.width) for c in english], width


async def _fleet(path: Path, lang: str, size: tuple[int, int]) -> tuple[list[str], str, str]:
    """The fleet at `size` in `lang`: its columns, its header line and NODE's GPU cell."""
    set_language(lang)
    app = ZukaApp(path, clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=size) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#fleet", FleetTable)
        header = table.render_line(0).text
        gpus = table.get_cell(zhfleet.NODE, "gpus").plain
        return [c.key for c in table.shown_columns], header, gpus


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
async def test_the_chinese_fleet_shows_english_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = zhfleet.build(Path("zh.db"))
    keys_en, header_en, gpus_en = await _fleet(path, EN, size)
    keys_zh, header_zh, gpus_zh = await _fleet(path, ZH, size)
    assert keys_zh == keys_en and "alerts" in keys_en
    assert gpus_zh == gpus_en == "8×A100 80GB"
    with using(ZH):
        labels = [fleetview._(c.label) for c in fleetview.COLUMNS if c.key in keys_zh]
    # Every label whole, each apart from the next (利用率 drawn over its padding).
    assert header_zh.split() == labels, header_zh
    assert "Util" in header_en.split()
