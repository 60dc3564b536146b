"""The dashboard under zh_CN: every screen it opens (the fleet's keys, the registries of
tui/dashboard/lazy.py, the palette, help over each) exported and checked for English that
does not come from data; the palette's language switch, English → Chinese → English."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.command import CommandPalette

from leases.config.sections import Config
from leases.core.i18n import EN, ZH, language, set_language
from leases.core.models import BillingType
from leases.core.retold import shown as shown_step
from leases.ledger.store import Ledger
from tests.i18n import zhfleet
from tests.support.english import WORDS, stray_english
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.dashboard.keymap import known_bindings
from tui.screens.help import HelpScreen

# Keys as Textual names them in the help's Key column.
KEY_NAMES = ("home", "end", "escape", "enter", "question_mark", "dollar_sign", "slash")

# Every key of the fleet that opens a screen, with the screen it opens.
SCREEN_KEYS = (
    ("a", "alerts"),
    ("enter", "node"),
    ("dollar_sign", "accounts"),
    ("P", "processes"),
    ("c", "acceptance"),
    ("o", "offboard"),
    ("n", "node form"),
    ("p", "paste form"),
    ("e", "edit node form"),
    ("l", "add lease form"),
    ("L", "edit lease form"),
    ("w", "renew form"),
    ("E", "end lease form"),
    ("z", "stop form"),
    ("Z", "resume form"),
    ("x", "resource form"),
)

# The node screen's tabs, and the History tab's every range: (name, keys to show it).
NODE_TABS = (
    ("history, 1 h", ("2",)),
    ("history, 24 h", ("d",)),
    ("history, 7 d", ("w",)),
    ("history, the lease's life", ("f",)),
    ("lease", ("3",)),
    ("checks and alerts", ("4",)),
    ("audit log", ("5",)),
    ("gpus, processes and host", ("1",)),
)


def data_of(path: Path) -> list[str]:
    """What the screens show that is data, not zuka's words: names, providers, models,
    tags, notes, resources, regions, the ledger's path; longest first."""
    out: set[str] = {str(path)}
    with Ledger.open(path, readonly=True) as ledger:
        for n in ledger.nodes():
            out |= {n.name, n.gpu_model, n.notes, *n.tags, n.provider or ""}
            out |= {n.ssh.host, n.ssh.user}
            for le in ledger.leases(n.name):
                out |= {le.contract_no, le.notes}
        for p in ledger.providers():
            out |= {p.name, p.region, p.account_alias, *p.name.split()}
        for _node, _start, r in ledger.resources():
            out |= {r.native_id, r.region, r.notes}
    # The demo's one process and the ledger's actor (tests.i18n.zhfleet), and every
    # binding's id: what a user remaps in the config's [keys] (a config key, never
    # translated).
    out |= {"alice", "python train.py", "tester", *known_bindings()}
    return sorted((v for v in out if v), key=len, reverse=True)


def plan_data(app: ZukaApp) -> list[str]:
    """An offboarding plan's own data on its screen: each step's key (typed to --skip
    it) and target, the plan's hash, and a step's command where its line is the command
    sent to the node (it is not zuka's words: `shown` leaves it as it is)."""
    stored = getattr(app.screen, "stored", None)
    if stored is None:
        return []
    out = {stored.hash[:12]}
    for step in stored.plan.steps:
        # A key cut by its column ("clear:~/.ipython/profile_default/histor…"): its action.
        out |= {step.key, step.target, step.driver, step.action, step.key.split(":")[0]}
        said = shown_step(step.describe)
        if said == step.describe:  # the command, cut by its column
            out |= {step.describe, *re.split(r"[\s,=_]+", step.describe)}
        elif re.search(r"[\u4e00-\u9fff]", said):  # translated: what stays ASCII is data
            for run in re.findall(r"[!-~][ -~]*", said):  # (a command put in the sentence)
                out |= {run.strip(), *re.split(r"[\s,=_]+", run)}
    # The last column runs past the screen's edge, cut wherever the columns' widths put
    # it (the phase words' width moves it): a command word cut there ("shre" of the
    # shred a Chinese line names, "proc" of a command's field) is data too.
    words = {w for v in out for w in re.split(r"[\s,=_:/.~-]+", v)} | set(WORDS)
    described = {w for st in stored.plan.steps for w in re.split(r"[\s,=_:/.~()-]+", st.describe)}
    out |= {w[:i] for w in words & described if w.isascii() for i in range(3, len(w))}
    return sorted((v for v in out if v), key=len, reverse=True)


def app_on(path: Path) -> ZukaApp:
    return ZukaApp(path, clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600, config=Config())


async def settle(app: ZukaApp, pilot: object) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


def shown(app: ZukaApp) -> str:
    return zhfleet.svg_text(app.export_screenshot())


@pytest.fixture
def zh_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the header shows the ledger's path: a short one
    return zhfleet.build(Path("zh.db"))


# What each screen showed, walked once for the two tests below: {screen: stray words}.
_WALKED: dict[str, list[str]] = {}
# The screens whose every word is the dashboard's own (tui/): no stray English at all.
OWN = ("acceptance", "edit node form", "stop form", "resume form", "palette")


async def walk(path: Path) -> dict[str, list[str]]:
    """Every screen the dashboard opens, under zh_CN: its stray English words."""
    if _WALKED:
        return _WALKED
    set_language(ZH)
    # A form's billing field takes the values typed on the command line (`--billing`).
    typed = [b.value for b in BillingType]
    # The host's file system types are the node's words (tests.i18n.zhfleet.HOST).
    fs_types = [m.fs_type for m in zhfleet.HOST.mounts]
    data = [*data_of(path), "Asia/Shanghai", "python", *typed, *fs_types]
    found: dict[str, list[str]] = {}
    app = app_on(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        await settle(app, pilot)
        app.fleet.go_to(zhfleet.NODE)
        await settle(app, pilot)

        async def look(name: str, *, keys: bool = True) -> None:
            await settle(app, pilot)
            # Longest first: "python" (a process) taken out first would cut the plan's path
            # "~/.python_history" into "~/._history", leaving "history" as a word.
            every = sorted({*data, *plan_data(app)}, key=len, reverse=True)
            found[name] = stray_english(shown(app), data=every, extra=KEY_NAMES)
            if not keys:
                return
            # And its keys, as help lists them over it (`?` would be a form's text).
            app.action_help()
            await settle(app, pilot)
            assert isinstance(app.screen, HelpScreen), name
            found[f"help over {name}"] = stray_english(shown(app), data=data, extra=KEY_NAMES)
            app.pop_screen()
            await settle(app, pilot)

        await look("fleet")
        # The fleet under a modal (a form, the palette) shows at its sides, its words cut
        # by the modal's edge: hidden from here on, each modal is read alone.
        for widget in app.fleet.children:
            widget.display = False
        for key, name in SCREEN_KEYS:
            await pilot.press(key)
            await settle(app, pilot)
            assert app.screen is not app.fleet, name
            await look(name)
            if name == "node":  # every tab (the host, processes, charts of each range)
                for tab, keys in NODE_TABS:
                    await pilot.press(*keys)
                    await look(f"node: {tab}", keys=False)
            elif name == "processes":  # the run times
                found[name] += [w for w in ("55m32s",) if w in shown(app)]
            while app.screen is not app.fleet:
                app.pop_screen()
                await settle(app, pilot)
        await pilot.press("ctrl+p")
        await settle(app, pilot)
        assert isinstance(app.screen, CommandPalette)
        # The language commands name each language in its own words: the one English
        # word a Chinese reader finds "English" by.
        found["palette"] = stray_english(
            shown(app), data=data, extra=[*KEY_NAMES, "Language", "English"]
        )
    _WALKED.update(found)
    return found


async def test_every_screen_speaks_chinese(zh_ledger: Path) -> None:
    """The dashboard's own words: the help over every screen, and the screens that show
    nothing but them, have no English left that is not data."""
    found = await walk(zh_ledger)
    assert set(found) >= {name for _key, name in SCREEN_KEYS}
    mine = {k: v for k, v in found.items() if v and (k.startswith("help over") or k in OWN)}
    assert mine == {}


async def test_every_screen_speaks_chinese_with_every_part(zh_ledger: Path) -> None:
    found = await walk(zh_ledger)
    assert {k: v for k, v in found.items() if v} == {}


async def test_the_palette_switches_the_language(zh_ledger: Path) -> None:
    """English → Chinese → English from the palette: the fleet's columns, footer, status
    line follow at once, without a restart."""
    app = app_on(zh_ledger)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        await settle(app, pilot)
        before = shown(app)
        assert "Lease end" in before and "Filter" in before and "节点" not in before

        async def choose(words: str) -> None:
            await pilot.press("ctrl+p")
            await settle(app, pilot)
            await pilot.press(*words)
            await settle(app, pilot)
            await pilot.press("enter")
            await settle(app, pilot)

        await choose("Language: 简体中文")
        await wait_until(lambda: language() == ZH, what="the switch to Chinese")
        await wait_until(lambda: "租约到期" in shown(app), what="the Chinese columns")
        chinese = shown(app)
        assert "节点" in chinese and "筛选" in chinese  # columns, and the footer
        assert "Lease end" not in chinese and "Filter" not in chinese
        await choose("Language: English")
        await wait_until(lambda: language() == EN, what="the switch back")
        await wait_until(lambda: "Lease end" in shown(app), what="the English columns")
        assert "租约到期" not in shown(app) and "Filter" in shown(app)
