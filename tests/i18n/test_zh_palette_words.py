"""The palette finds the language commands by 语言, 中文, 英文 and English, in either
language, and says Textual's "No matches found" in Chinese (issue 25 review, part C)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette

from leases.config.sections import Config
from leases.core.i18n import EN, ZH, set_language
from tests.i18n import zhfleet
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp


@pytest.fixture
def zh_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return zhfleet.build(Path("zh.db"))


async def _settle(app: ZukaApp, pilot: object) -> None:
    for _i in range(2):
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.parametrize("lang", [ZH, EN])
async def test_the_palette_finds_the_language_by_its_chinese_words(
    zh_ledger: Path, lang: str
) -> None:
    set_language(lang)
    app = ZukaApp(zh_ledger, clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600,
                  config=Config())  # fmt: skip

    def shown() -> str:
        return zhfleet.svg_text(app.export_screenshot())

    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 1, what="the fleet's first read")
        for query, found in (("语言", ("Language: 简体中文", "Language: English")),
                             ("中文", ("Language: 简体中文",)), ("英文", ("Language: English",)),
                             ("English", ("Language: English",))):  # fmt: skip
            await pilot.press("ctrl+p")
            await wait_until(lambda: isinstance(app.screen, CommandPalette), what="the palette")
            await _settle(app, pilot)
            await pilot.press(*query)
            await pilot.pause(0.3)
            await _settle(app, pilot)
            text = shown().replace("\n", "")  # a match's letters are spans of their own
            for words in found:
                assert words in text, (query, text)
            while CommandPalette.is_open(app):  # escape clears the query, then closes
                await pilot.press("escape")
                await _settle(app, pilot)
        await pilot.press("ctrl+p")
        await _settle(app, pilot)
        await pilot.press(*"qqqzzz")
        await pilot.pause(1.0)
        await _settle(app, pilot)
        text = shown()
        if lang == ZH:
            assert "没有匹配的命令" in text and "No matches" not in text, text
        else:
            assert "No matches found" in text
