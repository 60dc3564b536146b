"""Chinese words as input (review 27, part E): the fleet filter takes `channel:`/`state:`
by value, word or part of one, Chinese keys (a full-width colon too) and 闲置/忙碌/告警,
and refuses as 筛选/筛选到期; the row keeps the stored state. Durations in Chinese units
and in parts. Every choice of the command line takes its words and Chinese help lists
them. valuewords.parse folds full-width brackets. --lang, $ZUKA_LANG and [ui] lang take
a language's name in words."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from leases.alerts import state as alertstate
from leases.alerts.alert import Alert, AlertKind
from leases.config.lang import config_lang
from leases.core import valuewords
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, parse_lang, using
from leases.core.models import BillingType, Node, NodeHealth, NodeStatus, SshTarget
from leases.core.severity import Severity
from leases.fleet.filter import RowFacts, matches, parse
from leases.fleet.nodestatus import unless_stale
from leases.ledger.store import Ledger
from tests.support.cli import Cli, json_of, ok
from tui.cli.main import build_parser
from tui.screens.fleetview import fleet_row

NOW = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)

# -- 1. the fleet filter ----------------------------------------------------------------------

PLATFORM = RowFacts("a100-1", "platform", "AutoDL", "A100", ("train",), "", "ok", idle=True,
                    ends_in_s=3 * 86400)  # fmt: skip
COLO = RowFacts("h800-2", "colo", "njidc", "H800", (), "", "timeout", busy=True,
                ends_in_s=20 * 86400, alerts=2)  # fmt: skip
CLOUD = RowFacts("a10-3", "cloud", "aliyun", "A10", ("infer",), "", "driver_mismatch")
ROWS = (PLATFORM, COLO, CLOUD)


def kept(text: str) -> list[str]:
    f = parse(text)
    return [r.name for r in ROWS if matches(f, r)]


@pytest.mark.parametrize("lang", [EN, ZH])
@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("channel:platform", ["a100-1"]),
        ("channel:算力租赁平台", ["a100-1"]),  # the Chinese word
        ("channel:平台", ["a100-1"]),  # a part of it
        ("channel:机房", ["h800-2"]),
        ("channel:公有云", ["a10-3"]),
        ("channel:plat", ["a100-1"]),  # a part of the value
        ("state:ok", ["a100-1"]),
        ("state:正常", ["a100-1"]),
        ("state:超时", ["h800-2"]),
        ("state:timeout", ["h800-2"]),
        ("state:needs", ["a10-3"]),  # a part of the table's own label, "needs reboot"
        ("state:驱动版本", ["a10-3"]),
        ("渠道:平台", ["a100-1"]),
        ("渠道：平台", ["a100-1"]),  # a full-width colon
        ("channel：colo", ["h800-2"]),
        ("供应商:ali", ["a10-3"]),
        ("状态:正常", ["a100-1"]),
        ("状态：ok", ["a100-1"]),
        ("型号:h800", ["h800-2"]),
        ("标签:infer", ["a10-3"]),
        ("到期:7天", ["a100-1"]),
        ("到期：30天", ["a100-1", "h800-2"]),
        ("ending:1周", ["a100-1"]),
        ("闲置", ["a100-1"]),
        ("忙碌", ["h800-2"]),
        ("告警", ["h800-2"]),
        ("渠道:平台 闲置", ["a100-1"]),
        ("状态:正常 忙碌", []),
    ],
)
def test_the_filter_takes_chinese_terms_in_either_language(
    lang: str, text: str, names: list[str]
) -> None:
    with using(lang):
        assert kept(text) == names


def test_free_text_finds_a_channel_by_its_word_in_the_language_in_use() -> None:
    with using(ZH):
        assert kept("平台") == ["a100-1"]
        assert kept("公有云") == ["a10-3"]
        assert kept("platform") == ["a100-1"]  # the stored value, as before
    with using(EN):
        assert kept("平台") == []  # not the language in use: no row says it
        assert kept("colo") == ["h800-2"]


@pytest.mark.parametrize(
    ("text", "en_field", "zh_field", "zh_said"),
    [
        ("ending:soon", "filter ending", "筛选到期", "30分钟、2小时、1天 或 1周"),
        ("到期:很快", "filter ending", "筛选到期", "30分钟、2小时、1天 或 1周"),
        ("ending:1h2h", "filter ending", "筛选到期", "30分钟、2小时、1天 或 1周"),
        ("颜色:红", "filter", "筛选", "渠道"),
        ("渠道:", "filter", "筛选", "channel:"),
        ("x" * 201, "filter", "筛选", "200"),
    ],
)
def test_refusals_name_the_filter_in_the_language_in_use(
    text: str, en_field: str, zh_field: str, zh_said: str
) -> None:
    with using(EN), pytest.raises(InputError) as refused:
        parse(text)
    assert refused.value.field == en_field
    with using(ZH), pytest.raises(InputError) as refused:
        parse(text)
    assert refused.value.field == zh_field
    assert str(refused.value).startswith(zh_field + "：")
    assert zh_said in refused.value.reason


NODE = Node("box", SshTarget("gw.example.cn", 6666, "root"))


@pytest.mark.parametrize("lang", [EN, ZH])
@pytest.mark.parametrize(
    ("health", "stored", "typed"),
    [
        (NodeHealth.OK, "ok", "state:正常"),
        (NodeHealth.OK, "ok", "状态:ok"),
        (NodeHealth.DRIVER_MISMATCH, "driver_mismatch", "state:needs"),
        (NodeHealth.TIMEOUT, "timeout", "state:超时"),
    ],
)
def test_the_row_keeps_the_stored_state(
    lang: str, health: NodeHealth, stored: str, typed: str
) -> None:
    with using(lang):
        row = fleet_row(NODE, NodeStatus("box", health, "x", checked=NOW), None, [], NOW,
                        channel="platform")  # fmt: skip
        assert row.facts.state == stored and row.facts.channel == "platform"
        assert matches(parse(typed), row.facts)
        assert matches(parse("渠道:平台"), row.facts)
        assert not matches(parse("state:unreachable"), row.facts)


@pytest.mark.parametrize("lang", [EN, ZH])
def test_a_stale_row_is_stale_in_either_language(lang: str) -> None:
    with using(lang):
        old = unless_stale(
            NodeStatus("box", NodeHealth.OK, "x", checked=NOW - timedelta(hours=1)),
            NOW - timedelta(minutes=5),
        )
        row = fleet_row(NODE, old, None, [], NOW)
        assert row.facts.state == "stale"
        assert matches(parse("state:stale"), row.facts)
        assert not matches(parse("state:正常"), row.facts)


# -- 2. durations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "span"),
    [
        ("10秒", timedelta(seconds=10)),
        ("30分", timedelta(minutes=30)),
        ("30分钟", timedelta(minutes=30)),
        ("2时", timedelta(hours=2)),
        ("2小时", timedelta(hours=2)),
        ("2个小时", timedelta(hours=2)),
        ("1天", timedelta(days=1)),
        ("1日", timedelta(days=1)),
        ("1周", timedelta(weeks=1)),
        ("1星期", timedelta(weeks=1)),
        ("1.5天", timedelta(hours=36)),
        ("6小时30分钟", timedelta(hours=6, minutes=30)),
        ("1天1小时", timedelta(hours=25)),
        ("1d12h", timedelta(hours=36)),
        ("2h", timedelta(hours=2)),  # as before
    ],
)
def test_durations_in_chinese_units_and_parts(typed: str, span: timedelta) -> None:
    assert alertstate.parse_duration(typed) == span


@pytest.mark.parametrize("typed", ["1h2h", "1小时2时", "1天1日", "3", "2年", "小时"])
def test_a_repeated_or_unknown_unit_is_refused(typed: str) -> None:
    with pytest.raises(InputError) as refused:
        alertstate.parse_duration(typed)
    assert "30m, 2h, 1d or 1w" in refused.value.reason
    with using(ZH), pytest.raises(InputError) as refused:
        alertstate.parse_duration(typed)
    assert "30分钟、2小时、1天 或 1周" in refused.value.reason


def _fixed_clock(monkeypatch: pytest.MonkeyPatch, now: datetime) -> None:
    """Every ledger the command line opens reads `now` (as test_zh_alerts's fixed_clock)."""
    opened = Ledger.open.__func__  # type: ignore[attr-defined]

    def open_fixed(cls: type[Ledger], /, *args: object, **kwargs: object) -> Ledger:
        ledger: Ledger = opened(cls, *args, **kwargs)
        ledger.clock = lambda: now
        return ledger

    monkeypatch.setattr(Ledger, "open", classmethod(open_fixed))


def _an_open_alert(path: Path, now: datetime) -> int:
    with Ledger.open(path) as ledger:
        alert = Alert(AlertKind.TEMPERATURE, Severity.WARNING, "n1", None, None, None, "gpu0",
                      "86 °C", "look")  # fmt: skip
        [changed] = alertstate.reconcile(ledger, [alert], now)
        return changed.alert.id


def test_snooze_for_a_chinese_duration(
    cli: Cli, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fixed_clock(monkeypatch, NOW)
    alert_id = _an_open_alert(ledger_path, NOW)
    done = json_of(cli, "alerts", "snooze", str(alert_id), "--for", "1天")
    assert datetime.fromisoformat(done["snoozed_until"]) == NOW + timedelta(days=1)
    assert done["state"] == "snoozed"
    again = json_of(cli, "alerts", "snooze", str(alert_id), "--for", "6小时30分钟")
    assert datetime.fromisoformat(again["snoozed_until"]) == NOW + timedelta(hours=6.5)
    bad = cli("alerts", "snooze", str(alert_id), "--for", "1h2h", "--lang", "zh_CN")
    assert bad.code == 2 and "30分钟、2小时、1天 或 1周" in bad.err, bad.err


# -- 3. choices with words --------------------------------------------------------------------


def _lease_ledger(cli: Cli) -> None:
    ok(cli, "provider", "add", "P", "--kind", "platform")
    ok(cli, "node", "add", "n1", "--ssh", "root@10.0.0.9", "--gpus", "8", "--provider", "P")


@pytest.mark.parametrize("lang", [EN, ZH])
def test_lease_add_takes_the_words_of_its_choices(cli: Cli, lang: str) -> None:
    _lease_ledger(cli)
    r = cli("lease", "add", "n1", "--billing", "包天", "--price", "100", "--start", "2026-11-01",
            "--end", "2026-11-11", "--partial-unit", "小时", "--rounding", "账单",
            "--month-count", "自然月", "--lang", lang)  # fmt: skip
    assert r.code == 0, r.err
    r = cli("lease", "add", "n1", "--billing", "monthly", "--price", "100", "--start",
            "2026-12-01", "--end", "2027-01-01", "--partial-unit", "分钟", "--rounding",
            "每笔扣费", "--month-count", "30天", "--lang", lang)  # fmt: skip
    assert r.code == 0, r.err
    stored = json_of(cli, "lease", "list")
    got = sorted((s["start"][:10], s["partial_unit"], s["rounding"], s["month_count"])
                 for s in stored)  # fmt: skip
    assert got == [
        ("2026-11-01", "hour", "bill", "calendar"),
        ("2026-12-01", "minute", "charge", "30_days"),
    ]


def test_a_wrong_word_is_refused_with_the_words(cli: Cli) -> None:
    _lease_ledger(cli)
    r = cli("lease", "add", "n1", "--billing", "daily", "--price", "100", "--start",
            "2026-11-01", "--end", "2026-11-11", "--partial-unit", "年", "--lang", "zh_CN")  # fmt: skip
    assert r.code != 0 and "hour（小时）" in r.err, r.err


def _help(cli: Cli, *args: str) -> str:
    """`zuka ARGS... --help` under zh_CN, its wrapping undone (no spaces or line ends)."""
    r = cli(*args, "--help", "--lang", "zh_CN")
    assert r.code == 0, r.err
    return "".join(r.out.split())


def test_chinese_help_lists_each_value_with_its_word(cli: Cli) -> None:
    said = _help(cli, "lease", "add")
    for shown in ("second（秒）", "hour（小时）", "whole（整个计费单位）", "bill（账单）",
                  "charge（每笔扣费）", "calendar（自然月）", "30_days（30天）"):  # fmt: skip
        assert shown in said, (shown, said)
    said = _help(cli, "report")
    assert "lease（租约）|user（用户）|project（项目）" in said, said
    said = _help(cli, "ps")
    assert "memory（显存）" in said and "elapsed（运行时长）" in said, said
    said = _help(cli, "collect")
    assert "stream（常驻读取）|exec（逐次查询）" in said, said
    said = _help(cli, "audit", "accept")
    assert "provider（供应商）" in said and "deposit_refund（押金退还）" in said, said
    said = _help(cli, "lab", "add-user")
    assert "view（只读成员）|edit（编辑成员）|offboard（退租成员）" in said, said
    said = _help(cli, "lab", "remove-user")
    assert "view（只读成员）" in said, said
    english = cli("report", "--help", "--lang", "en").out
    assert "用户" not in english


def test_report_by_a_word(cli: Cli) -> None:
    _lease_ledger(cli)
    for by in ("用户", "user", "项目", "租约"):
        r = cli("report", "--month", "2026-11", "--by", by, "--format", "json")
        assert r.code == 0, (by, r.err)
    # The grouping is the one named: by 用户 is byte for byte by user.
    assert ok(cli, "report", "--month", "2026-11", "--by", "用户", "--format", "json") == ok(
        cli, "report", "--month", "2026-11", "--by", "user", "--format", "json"
    )
    bad = cli("report", "--month", "2026-11", "--by", "部门")
    assert bad.code == 2


def test_ps_sort_and_audit_accept_take_words(cli: Cli) -> None:
    _lease_ledger(cli)
    assert cli("ps", "--sort", "显存").code == cli("ps", "--sort", "memory").code
    assert cli("ps", "--sort", "显存").err == cli("ps", "--sort", "memory").err
    assert cli("ps", "--sort", "大小").code == 2
    # An untouched provider: accepted or not, past argparse, as the value is.
    word = cli("audit", "accept", "供应商", "1")
    value = cli("audit", "accept", "provider", "1")
    assert word.code == value.code and word.err == value.err, word.err
    assert "invalid choice" not in word.err and "无效的选择" not in word.err
    assert cli("audit", "accept", "供货商", "1").code == 2


def test_lab_roles_and_collect_modes_parse_from_words() -> None:
    p = build_parser()
    for word, role in (("只读成员", "view"), ("编辑成员", "edit"), ("退租成员", "offboard"),
                       ("Edit", "edit")):  # fmt: skip
        assert p.parse_args(["lab", "add-user", "bob", "--role", word]).role == role
        assert p.parse_args(["lab", "remove-user", "bob", "--role", word]).role == role
    assert p.parse_args(["collect", "--mode", "逐次查询"]).mode == "exec"
    assert p.parse_args(["collect", "--mode", "常驻读取"]).mode == "stream"
    assert p.parse_args(["ps", "--sort", "运行时长"]).sort == "elapsed"
    assert p.parse_args(["audit", "accept", "押金退还", "3"]).entity == "deposit_refund"
    assert p.parse_args(["report", "--month", "2026-11", "--by", "项目"]).by == "project"


def _choices(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[
    tuple[tuple[str, ...], argparse.Action]
]:  # fmt: skip
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _choices(sub, (*path, name))
        elif action.choices:
            yield path, action


# Choices that are file formats: no value with a word.
FORMATS = {"md", "csv", "json"}


@pytest.mark.parametrize("lang", [EN, ZH])
def test_every_choice_of_the_parser_takes_its_words(lang: str) -> None:
    with using(lang):
        found = list(_choices(build_parser()))
    assert len(found) >= 15  # the walk reached the subcommands
    worded = 0
    for path, action in found:
        values = [str(v) for v in action.choices or ()]
        name = " ".join([*path, *action.option_strings]) or action.dest
        enum = valuewords.enum_of(values)
        if enum is None:
            assert set(values) <= FORMATS, (name, values)
            continue
        worded += 1
        assert callable(action.type), name
        for value in values:
            for said in (ZH, EN):
                with using(said):
                    word = valuewords.words(enum)[value]
                # Read as argparse reads it: the type, then the choices.
                assert action.type(word) == value, (name, word, value)
                assert action.type(value) == value, (name, value)
    assert worded >= 12


# -- 4. full-width brackets -------------------------------------------------------------------


def test_brackets_full_width_or_not_are_one() -> None:
    assert valuewords.parse(BillingType, "按量（秒）") == "per_second"
    assert valuewords.parse(BillingType, "按量(秒)") == "per_second"
    assert valuewords.parse(BillingType, " 按量（秒）\u3000") == "per_second"


@pytest.mark.parametrize("typed", ["按量（秒）", "按量(秒)"])
def test_billing_per_second_in_either_brackets(cli: Cli, typed: str) -> None:
    _lease_ledger(cli)
    r = cli("lease", "add", "n1", "--billing", typed, "--price", "0.01", "--start",
            "2026-11-01", "--end", "2026-11-02")  # fmt: skip
    assert r.code == 0, r.err
    [lease] = json_of(cli, "lease", "list")
    assert lease["billing_type"] == "per_second"
    assert Decimal(str(lease["unit_price"])) == Decimal("0.01")


# -- 5. a language named in words -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("中文", ZH),
        ("简体中文", ZH),
        ("汉语", ZH),
        ("Chinese", ZH),
        ("chinese", ZH),
        (" 中文 ", ZH),
        ("英文", EN),
        ("英语", EN),
        ("English", EN),
        ("ENGLISH", EN),
        ("法语", None),
        ("French", None),
        ("中", None),
        ("klingon", None),
    ],
)
def test_parse_lang_takes_a_language_in_words(text: str, lang: str | None) -> None:
    assert parse_lang(text) == lang


@pytest.mark.parametrize(("name", "lang"), [("中文", ZH), ("简体中文", ZH), ("汉语", ZH),
                                            ("Chinese", ZH), ("英文", EN), ("英语", EN),
                                            ("English", EN)])  # fmt: skip
def test_lang_flag_env_and_config_take_words(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, lang: str
) -> None:
    for var in ("ZUKA_LANG", "ZUKA_UI_LANG", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", "")
    monkeypatch.setenv("LANG", "C")
    ok(cli, "provider", "add", "A", "--kind", "cloud")
    word = "公有云" if lang == ZH else "cloud"
    other = "cloud" if lang == ZH else "公有云"

    def said(*args: str) -> str:
        r = cli("provider", "list", *args)
        assert r.code == 0, r.err
        assert "[ui] lang" not in r.err, r.err
        return r.out

    assert word in said("--lang", name) and other not in said("--lang", name)
    monkeypatch.setenv("ZUKA_LANG", name)
    assert word in said() and other not in said()
    monkeypatch.delenv("ZUKA_LANG")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[ui]\nlang = "{name}"\n', encoding="utf-8")
    assert config_lang(str(cfg), {"ZUKA_SYSTEM_CONFIG": ""}) == lang
    assert word in said("--config", str(cfg)) and other not in said("--config", str(cfg))


def test_other_words_are_refused_as_before(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ZUKA_LANG", raising=False)
    bad = cli("node", "list", "--lang", "法语")
    assert bad.code == 2 and "--lang" in bad.err and "'法语'" in bad.err
    monkeypatch.setenv("ZUKA_LANG", "德语")
    bad = cli("node", "list")
    assert bad.code == 2 and "ZUKA_LANG" in bad.err and "'德语'" in bad.err
