"""The new-user review of the command line in Chinese (issue 27, part F): a held deposit
and an expiry action in words, lines filled when Chinese wraps, stored values named in
words in help, the offboarding plan's endpoint, the report's share and totals, `zuka ps`'s
MiB, punctuation, and the audit log's actions in words."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from leases.core import valuewords
from leases.core.i18n import EN, ZH, using
from leases.core.models import ExpiryAction
from tests.conftest import Cli
from tests.i18n.test_zh_money import _run
from tests.money.test_report import fleet  # noqa: F401  (the simulated fleet's month)
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
        # Inside a longer message, the place's words never swallow what follows.
        s3 = (
            "S3: delete every object version, delete marker and unfinished upload in s3://b/,"
            " then DeleteBucket b (region us-east-1, endpoint http://127.0.0.1:4000); bucket"
            " owner 123456789012 required on every call (ExpectedBucketOwner)"
        )
        said = shown(s3)
        assert "（地域 us-east-1，端点 http://127.0.0.1:4000）；每次调用都要求" in said


# -- 4. stored values named in words in help ------------------------------------------------

_BARE = re.compile(
    r"(?<![-\w（`\"'./=])(per_second|card_hour|hourly|daily|weekly|monthly|contract)(?![\w）`\"'])"
)


def test_no_chinese_message_names_a_billing_type_bare() -> None:
    """A billing type is said in words (按卡时, 包天...) in Chinese; its value stays only
    where the user types it: after its option, or beside its word (按卡时（card_hour）)."""
    from babel.messages.pofile import read_po

    with open("leases/locale/zh_CN/LC_MESSAGES/zuka.po", "rb") as f:
        catalogue = read_po(f)
    bare = []
    for m in catalogue:
        strings = m.string if isinstance(m.string, tuple) else (m.string,)
        for said in strings:
            text = re.sub(r"--[\w-]+ \S+|\{[^}]*\}", "", said or "")
            if m.id and _BARE.search(text):
                bare.append(said)
    assert bare == []


def test_lease_and_offer_help_say_billing_words(cli: Cli) -> None:
    lease = cli("lease", "add", "--help", *ZH_ARGS).out
    offer = cli("offer", "add", "--help", *ZH_ARGS).out
    flat = re.sub(r"\s+", "", lease)
    assert "计费卡数（按卡时租约）" in flat and "card_hour租约" not in flat
    assert "包天、包周、包月、合同租约必填" in flat
    assert "（默认：按量（秒）、按量和按卡时为second，即按比例；其余为whole，即整个单位）" in flat
    assert "按卡时为每卡时的" in re.sub(r"\s+", "", offer)


# -- 6. the month's report ---------------------------------------------------------------


def test_the_report_says_provider_share_and_percents_in_chinese(
    fleet: tuple[Path, Path],  # noqa: F811
) -> None:
    path, config = fleet
    args = ("report", "--month", "2025-03", "--format", "md")
    zh = _run(path, config, *args, "--lang", "zh_CN")
    en = _run(path, config, *args, "--lang", "en")
    assert "单一渠道风险" not in zh and "计费卡数" not in zh
    assert "**单一供应商风险：SimPlatform 占本月计费卡时的 " in zh
    assert re.search(r"\d %", zh) is None and re.search(r"\d%（超过 \d+%）", zh)
    deposits = zh.split("## 押金")[1]
    assert "| **合计** |" in deposits and "合计（元）" not in deposits
    assert "single-channel risk: SimPlatform holds " in en and re.search(r"\d %", en)


def test_a_percent_in_chinese_has_no_space() -> None:
    from leases.core.spoken import percent

    with using(ZH):
        assert percent("61.6") == "61.6%"
    with using(EN):
        assert percent("61.6") == "61.6 %"


# -- 8. punctuation ----------------------------------------------------------------------


def test_config_show_says_its_layers_with_full_width_marks(cli: Cli) -> None:
    zh = cli("config", "show", *ZH_ARGS).out
    heads = [x for x in zh.splitlines() if x.startswith("# ")]
    assert heads and all("：" in x and ": " not in x and " (" not in x for x in heads), heads
    assert any(x.endswith("（不存在：使用默认值）") for x in heads), heads
    settings = [x for x in zh.splitlines() if " = " in x]
    assert settings and all(x.endswith("）") and "  (" not in x for x in settings), settings
    en = cli("config", "show", "--lang", "en").out
    assert any(x.startswith("# config file: ") and x.endswith(" (absent: defaults)") for x in
               en.splitlines())  # fmt: skip
    assert "  (default)" in en


def test_the_lease_form_names_a_node_with_a_full_width_colon(z: Cli, ledger_path: Path) -> None:
    from datetime import UTC, datetime

    from leases.ledger.store import Ledger
    from tui.screens.lease_form import LeaseFormScreen

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    with Ledger.open(ledger_path) as ledger:
        form = LeaseFormScreen(ledger, "n", mode="edit", clock=lambda: now, tz="Asia/Shanghai")
        with using(ZH):
            assert form.load(ledger)[1] == "n：当前没有计费中的租约"
        with using(EN):
            assert form.load(ledger)[1] == "n: no lease bills now"


def test_the_key_removal_spaces_its_key() -> None:
    with using(ZH):
        from leases.core.i18n import _

        said = _(
            "remove the lines holding {key} from every keys file sshd reads (~/{keys_file},"
            " authorized_keys2, sshd's AuthorizedKeysFile), each rewritten by a file beside it"
            " and mv, links refused; first removes ~/.zuka-offboard (zuka's run files)"
        ).format(key="/tmp/k/id_ed25519 的公钥", keys_file="authorized_keys")
    assert "删除含该密钥的行：/tmp/k/id_ed25519 的公钥；" in said


# -- 9. the audit log's actions in words -----------------------------------------------------


def _written_actions() -> set[str]:
    """Every action id the ledger writes, read from the source: `audit(conn, "node.add"`,
    the lab's plans, acceptance, and the books' and processes' ids made from parts."""
    root = Path(__file__).resolve().parents[2] / "leases"
    text = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py"))
    found = set(re.findall(r'audit\(\s*conn,\s*"([a-z_.-]+)"', text))
    found |= set(re.findall(r'audit_action(?:=|: str = )"([a-z_.-]+)"', text))
    # What _update_lease and its kin are told to write ("lease.renew", "lease.end").
    entities = "provider|node|lease|resource|stop"
    found |= set(re.findall(rf'"((?:{entities})\.[a-z_-]+)"', text))
    found |= set(re.findall(r'^ACTION = "([a-z_.-]+)"', text, re.M))
    books = set(re.findall(r'(?:add|edit|delete)_book\(\s*"([a-z_]+)"', text))
    found |= {f"{b}.{verb}" for b in books for verb in ("add", "edit", "delete")}
    found |= {f"process.{step}" for step in ("term", "kill", "gone", "failed", "refused")}
    return found | {"import", "undo #12"}


def test_every_audit_action_has_chinese_words() -> None:
    actions = _written_actions()
    assert {"provider.add", "node.add", "lease.add", "node.edit", "lab.init"} <= actions
    with using(ZH):
        said = {a: valuewords.action_word(a) for a in actions}
    untold = {a: w for a, w in said.items() if re.search(r"[a-z]{2,}", w)}
    assert untold == {}
    assert said["node.add"] == "添加节点" and said["undo #12"] == "撤销 #12"
    with using(EN):
        assert all(valuewords.action_word(a) == a for a in actions)


def test_zuka_log_says_actions_in_words_and_json_keeps_ids(z: Cli) -> None:
    zh = z("log", *ZH_ARGS).out
    assert "添加供应商" in zh and "添加节点" in zh and "provider.add" not in zh
    assert "provider.add" in z("log", "--lang", "en").out
    rows = json.loads(z("log", "--json", *ZH_ARGS).out)
    assert {r["action"] for r in rows} >= {"provider.add", "node.add"}


def test_the_node_screen_audit_tab_says_actions_in_words(z: Cli, ledger_path: Path) -> None:
    from datetime import UTC, datetime

    from leases.fleet import nodefacts
    from leases.ledger.store import Ledger
    from leases.telemetry.series import Span
    from tui.screens.nodeview import log_rows

    assert z("node", "edit", "n", "--notes", "x").code == 0
    with Ledger.open(ledger_path) as ledger:
        facts = nodefacts.read(ledger, "n", datetime.now(UTC), Span.HOUR)
    with using(ZH):
        zh = [row[3] for row in log_rows(facts, "Asia/Shanghai")]
    with using(EN):
        en = [row[3] for row in log_rows(facts, "Asia/Shanghai")]
    assert "修改节点" in zh and "添加节点" in zh and "node.edit" not in zh
    assert "node.edit" in en
