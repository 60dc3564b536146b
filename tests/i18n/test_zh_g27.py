"""A Chinese new user's review of the dashboard (review 27): the fleet's columns at 120x36
the same as English's, key descriptions that say actions, the offboard screen's driver
in words, the form's refusal without a line that starts with a closing bracket."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.i18n import EN, ZH, _, set_language, using
from leases.offboard.evidence import StoredPlan
from leases.offboard.plan import Plan
from leases.offboard.steps import Phase, Step
from tests.i18n import zhfleet
from tests.support.english import stray_english
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.dashboard.keymap import known_bindings
from tui.screens import fleetview
from tui.screens.offboardview import step_detail
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


# Keys whose Chinese said a state (运行中, 已完成), or read as one or as doing what the key
# only records (关机: z records a stop, it shuts nothing down; 倒序; 不信任).
ACTIONS = {
    "fleet-resume": "记录恢复运行",
    "fleet-stop": "记录关机",
    "offboard-did": "标记完成",
    "fleet-reverse": "反转排序",
    "trust-no": "暂不信任",
}


def test_every_key_says_an_action_in_chinese() -> None:
    """A key's description (the footer's and the help's) is what pressing it does."""
    with using(ZH):
        said = {bid: _(site.binding.description) for bid, site in known_bindings().items()}
    assert {bid: said[bid] for bid in ACTIONS} == ACTIONS
    for bid, words in said.items():
        assert not words.endswith("中") and not words.startswith("已"), (bid, words)


async def test_the_chinese_help_says_what_z_and_shift_z_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = zhfleet.build(Path("zh.db"))
    set_language(ZH)
    app = ZukaApp(path, clock=lambda: zhfleet.NOW, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the fleet's first reads")
        await pilot.press("question_mark")
        await app.workers.wait_for_complete()
        await pilot.pause()
        rows = [" ".join(line.split()) for line in zhfleet.svg_rows(app.export_screenshot())]
    assert "z 记录关机 fleet-stop 记录所选节点已关机" in rows
    assert "Z 记录恢复运行 fleet-resume 记录已关机的节点恢复运行" in rows
    assert not [r for r in rows if "运行中" in r]


STEPS = (
    Step("preflight:lease", Phase.PREFLIGHT, "preflight", "check-lease", "lease", False,
         "the lease is in the ledger"),
    Step("clear:~/.bash_history", Phase.CLEAR, "ssh", "clear", "~/.bash_history", True,
         "shred -u ~/.bash_history"),
    Step("manual:console", Phase.MANUAL, "manual", "console", "console", False, "by hand"),
    Step("buckets:b1", Phase.BUCKETS, "s3", "delete-bucket", "b1", True, "S3 b1"),
    Step("disks:d-1", Phase.DISKS, "cmd", "delete-disk", "d-1", True, "aliyun ecs"),
    Step("snapshots:s-1", Phase.SNAPSHOTS, "ec2", "delete-snapshot", "s-1", True, "EC2 s-1"),
    Step("release:lease", Phase.RELEASE, "ledger", "release", "lease", False, "lease ends"),
)  # fmt: skip


def test_the_offboard_detail_says_how_a_step_is_done_in_words() -> None:
    """The detail line said the driver's value: `preflight:lease · 预检 · preflight`,
    `clear:~/.bash_history · 清除 · ssh · 删除`."""
    stored = StoredPlan(1, Plan(1, "n1", None, STEPS), "0" * 64, datetime(2026, 11, 30, tzinfo=UTC),
                        None, {})  # fmt: skip
    with using(ZH):
        first = {s.key: step_detail(stored, s, "UTC")[0] for s in STEPS}
    assert first["preflight:lease"] == "preflight:lease · 预检"  # the phase says it
    assert first["clear:~/.bash_history"] == "clear:~/.bash_history · 清除 · 经 SSH 在节点上 · 删除"
    assert first["manual:console"] == "manual:console · 手动"
    assert first["release:lease"] == "release:lease · 释放 · 在台账中"
    for step in STEPS:
        # The step's key is data (its target as the ledger names it); the rest is words.
        rest = first[step.key].removeprefix(step.key)
        assert stray_english(rest, extra=("S3", "EC2", "API")) == [], first[step.key]
    english = step_detail(stored, STEPS[1], "UTC")[0]
    assert english == "clear:~/.bash_history · clear · on the node over SSH · deletes"


async def test_a_form_refusal_never_starts_a_line_with_a_closing_mark(tmp_path: Path) -> None:
    """单价 / (--price)：不是数字：…小数用小数点（1.98 / ）（输入为 '1,20'）: Rich folded the
    long Chinese run anywhere; the refusal now breaks as the command line's wrap does."""
    from datetime import date

    from leases.sim.demoledger import build_demo_ledger
    from tests.tui.test_forms import FormHost, fill, lease_form, opened
    from tui.widgets.form import Refusal

    path = tmp_path / "demo.db"
    build_demo_ledger(path, date(2026, 11, 30)).close()
    set_language(ZH)
    app = FormHost(path, lease_form("aliyun-a10-burst", "edit"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, unit_price="1,20")
        await pilot.press("ctrl+s")
        refusal = screen.field("unit_price").query_one(".form-message", Refusal)
        await wait_until(lambda: bool(refusal.said), what="the refusal")
        await pilot.pause()
        lines = refusal.render().plain.split("\n")
        assert refusal.size.height == len(lines) > 1, lines
        width = refusal.content_size.width
    assert "".join(lines).replace(" ", "") == refusal.said.replace(" ", "")
    assert "（1.98）" in "".join(lines)
    assert not [line for line in lines if line[:1] in "）」』》】〉”’，。、：；！？)]}"], lines
    assert all(fleetview.cell_len(line) <= width for line in lines), (width, lines)


def test_the_chinese_readme_shows_chinese_screenshots() -> None:
    """README.zh-CN.md embedded assets/fleet.svg, an English screenshot (¥274,788 where
    English writes CNY): its screenshots are scripts/screenshots.py --lang zh_CN's."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.zh-CN.md").read_text(encoding="utf-8")
    shots = re.findall(r"!\[[^\]]*\]\((assets/[^)]+\.svg)\)", readme)
    assert shots and all(s.startswith("assets/zh-CN/") for s in shots), shots
    for shot in shots:
        text = zhfleet.svg_text((root / shot).read_text(encoding="utf-8"))
        assert "租卡" in text, shot
    fleet = "\n".join(zhfleet.svg_rows((root / "assets/zh-CN/fleet.svg").read_text("utf-8")))
    assert "利用率" in fleet and "¥274,788" in fleet and "CNY" not in fleet
