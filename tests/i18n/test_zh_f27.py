"""The new-user review of the command line in Chinese (issue 27, part F): a held deposit
and an expiry action in words, lines filled when Chinese wraps, stored values named in
words in help, the offboarding plan's endpoint, the report's share and totals, `zuka ps`'s
MiB, punctuation, and the audit log's actions in words."""

from __future__ import annotations

import itertools
import json

import pytest

from leases.core import valuewords
from leases.core.i18n import EN, ZH, using
from leases.core.models import ExpiryAction
from tests.conftest import Cli
from tui.cli.output import width, wrap

ZH_ARGS = ("--lang", "zh_CN")

# -- 1. a deposit still held -------------------------------------------------------------


def test_a_held_deposit_is_said_in_chinese(z: Cli) -> None:
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "50000",
          "--start", "2026-11-01", "--end", "2026-12-01", "--deposit", "36000")  # fmt: skip
    assert r.code == 0, r.err
    zh = z("lease", "refunds", *ZH_ARGS).out
    assert "未申请退还" in zh and "held" not in zh
    assert "held" in z("lease", "refunds", "--lang", "en").out
    (row,) = json.loads(z("lease", "refunds", "--json", *ZH_ARGS).out)
    assert row["state"] == "held"


# -- 2. an expiry action ----------------------------------------------------------------


def test_an_expiry_action_is_not_a_released_node() -> None:
    with using(ZH):
        assert valuewords.word(ExpiryAction.RELEASED) == "释放"
        assert valuewords.word("released", "leases.core.models.NodeState") == "已释放"
        assert "released（释放）" in valuewords.listed(ExpiryAction)
    with using(EN):
        assert valuewords.word(ExpiryAction.RELEASED) == "released"
    assert valuewords.parse(ExpiryAction, "释放") == "released"


def test_lease_list_says_release_at_the_end(z: Cli) -> None:
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "50000",
          "--start", "2026-11-01", "--end", "2026-12-01", "--on-expiry", "释放")  # fmt: skip
    assert r.code == 0, r.err
    zh = z("lease", "list", *ZH_ARGS).out
    assert "已释放" not in zh and " 释放 " in zh
    (row,) = json.loads(z("lease", "list", "--json").out)
    assert row["on_expiry"] == "released"
    bad = z("lease", "edit", "n", "--on-expiry", "x", *ZH_ARGS).err
    assert "released（释放）" in bad and "已释放" not in bad


# -- 3. wrapping Chinese -----------------------------------------------------------------

ALERT = ("gpu-node-03：近 7 天 8 张卡的已付卡时中忙碌占 16.7%（1344 中 224 忙碌，0 未知）；"
         "已付 ¥12,133.33 中有 ¥10,111.11 花在闲置的卡上")  # fmt: skip
CLOSING = "，。、：；！？）」』》】"


def test_the_underused_alert_fills_its_lines() -> None:
    at76 = wrap(ALERT, 76, "    ")
    assert at76[0].endswith("224 忙碌，") and at76[1].startswith("    0 未知）；已付 ")
    assert "    224 忙碌，" not in wrap(ALERT, 70, "    ")


@pytest.mark.parametrize("columns", range(24, 90))
def test_chinese_lines_are_filled(columns: int) -> None:
    lines = wrap(ALERT, columns, "    ")
    assert "".join(x.strip() for x in lines).replace(" ", "") == ALERT.replace(" ", "")
    for line, after in itertools.pairwise(lines):
        assert width(line) <= columns
        # Filled: what starts the next line (up to where it may break) did not fit.
        assert width(line) >= columns - 14, lines
        assert after.strip()[0] not in CLOSING, lines


@pytest.mark.parametrize("columns", range(12, 80))
@pytest.mark.parametrize(
    "text",
    [
        "unit_price (--price)：不是数字：逗号只用于每三位分隔千位（52,000）；小数用小数点"
        "（1.98）（输入为 '1,20'）",
        "⏎ 打开 fleet-open 打开所选节点（GPU、图表、租约）；折叠或展开分组",
    ],
)
def test_a_closing_bracket_never_starts_a_line(columns: int, text: str) -> None:
    from tui.cli.helpformat import wrap as help_wrap

    for lines in (wrap(text, columns, "  "), help_wrap(text, columns)):
        for before, line in itertools.pairwise(lines):
            assert line.strip()[0] not in CLOSING, lines
            assert before.strip()[-1] not in "（「", lines


# -- 5. the offboarding plan's endpoint ------------------------------------------------------


def test_a_cloud_step_says_its_endpoint_in_chinese() -> None:
    from leases.core.retold import shown
    from leases.offboard.cloud.plan import _located

    what = "EC2 DeleteVolume VolumeId=d-123"
    both = _located(what, "cn-hangzhou", "https://ecs.example.com")
    alone = _located(what, "", "https://ecs.example.com")
    # Stored English as it always was (a plan's hash).
    assert both == f"{what} (region cn-hangzhou, endpoint https://ecs.example.com)"
    assert alone == f"{what} (endpoint https://ecs.example.com)"
    with using(ZH):
        assert shown(both) == f"{what}（地域 cn-hangzhou，端点 https://ecs.example.com）"
        assert shown(alone) == f"{what}（端点 https://ecs.example.com）"
        assert shown(_located(what, "cn-hangzhou", "")) == f"{what}（地域 cn-hangzhou）"
