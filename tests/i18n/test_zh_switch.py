"""The palette's language switch redraws every screen on the stack at once: the fleet's
rows (billing words, states, money, ends-in spans), the node screen under another, the
alerts. English → Chinese → English, each screen exported after each switch: no Chinese
left in English that is not data, no English left in Chinese that is not data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.i18n import EN, ZH, language
from leases.core.models import BillingType
from tests.i18n import zhfleet
from tests.i18n.test_zh_dashboard import KEY_NAMES, data_of
from tests.support.english import stray_english
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.node import NodeScreen

_HAN = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]+")


def stray_chinese(text: str, data: list[str]) -> list[str]:
    """The Chinese words of text that are not data (a provider's or a note's), nor the
    name in the title (zuka 租卡)."""
    for value in (*data, "zuka 租卡"):
        text = text.replace(value, " ")
    return _HAN.findall(text)


@pytest.fixture
def zh_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return zhfleet.build(Path("zh.db"))


async def settle(app: ZukaApp, pilot: object) -> None:
    for _i in range(2):
        await app.workers.wait_for_complete()
        await pilot.pause()  # type: ignore[attr-defined]


async def test_the_switch_redraws_every_screen_on_the_stack(
    zh_ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = ZukaApp(zh_ledger, clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600,
                  config=Config())  # fmt: skip
    fs_types = [m.fs_type for m in zhfleet.HOST.mounts]  # the node's words
    data = [*data_of(zh_ledger), "Asia/Shanghai", "python", *(b.value for b in BillingType),
            *fs_types]  # fmt: skip

    def shown() -> str:
        return zhfleet.svg_text(app.export_screenshot())

    async with app.run_test(size=(120, 36)) as pilot:

        async def choose(lang: str) -> None:
            words = "Language: 简体中文" if lang == ZH else "Language: English"
            await pilot.press("ctrl+p")
            await settle(app, pilot)
            await pilot.press(*words)
            await settle(app, pilot)
            await pilot.press("enter")
            await wait_until(lambda: language() == lang, what=f"the switch to {lang}")
            await settle(app, pilot)

        def check(where: str, lang: str) -> None:
            text = shown()
            if lang == ZH:
                # The toast names English in its own word; the palette's too.
                stray = stray_english(text, data=data, extra=[*KEY_NAMES, "English"])
            else:
                stray = stray_chinese(text, data)
            assert stray == [], f"{where} in {lang}"

        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        await settle(app, pilot)
        app.fleet.go_to(zhfleet.NODE)
        await settle(app, pilot)
        # At once: each screen redraws from what it last read, not on its next read
        # (none comes from here on).
        monkeypatch.setattr(app, "refresh_view", lambda reload=False: None)
        check("fleet", EN)
        # The fleet: its rows (billing, states, money, ends-in) follow the switch.
        for lang in (ZH, EN, ZH):
            await choose(lang)
            check("fleet", lang)
        # The node screen over the fleet, switched: then the fleet under it, shown again.
        screen = NodeScreen(zhfleet.NODE)
        await app.push_screen(screen)
        await wait_until(lambda: screen.facts is not None, what="the node's first read")
        await settle(app, pilot)
        monkeypatch.setattr(screen, "read_ledger", lambda: None)
        check("node", ZH)
        await choose(EN)
        check("node", EN)
        # The alerts over the node over the fleet: each below redrawn when shown again.
        app.action_alerts()
        await settle(app, pilot)
        check("alerts", EN)
        await choose(ZH)
        check("alerts", ZH)
        app.pop_screen()
        await settle(app, pilot)
        check("node under the alerts", ZH)
        await choose(EN)
        app.pop_screen()
        await settle(app, pilot)
        check("fleet under the node", EN)
