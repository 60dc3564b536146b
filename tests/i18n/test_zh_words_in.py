"""The words zuka shows for stored values are taken as input too (issue 25 review, part C):
`--kind 公有云`, `--billing 包月`, `offer add --billing 按卡时`, a form's or an import's
value; refusals and help list each value with its Chinese word; a word two values share is
taken for neither; one set of words everywhere (leases.core.valuewords); a wrong `[ui] lang`
is said once and stops nothing; `zuka ps` run times and reading ages in Chinese."""

from __future__ import annotations

import json
import threading
from enum import StrEnum
from pathlib import Path

import pytest

from leases.app.processes import elapsed_words, readings_age
from leases.core import fields, recordfields, valuewords
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, using
from leases.core.models import BillingType, NodeHealth, ProviderKind, RefundState
from tests.conftest import Cli
from tests.support.english import stray_english


@pytest.mark.parametrize("lang", [EN, ZH])
@pytest.mark.parametrize(
    ("typed", "enum", "value"),
    [
        ("公有云", ProviderKind, "cloud"),
        ("算力租赁平台", ProviderKind, "platform"),
        ("CLOUD", ProviderKind, "cloud"),
        ("包月", BillingType, "monthly"),
        ("按卡时", BillingType, "card_hour"),
        ("包天", BillingType, "daily"),
        ("Monthly", BillingType, "monthly"),
        ("已没收", RefundState, "forfeited"),
        ("auth failed", NodeHealth, "auth_failed"),  # the English word, not the value
        ("Auth Failed", NodeHealth, "auth_failed"),
        ("登录被拒", NodeHealth, "auth_failed"),
    ],
)
def test_a_choice_takes_its_words_in_either_language(
    lang: str, typed: str, enum: type[StrEnum], value: str
) -> None:
    with using(lang):
        assert fields.choice("kind", typed, enum).value == value


def test_a_refusal_lists_the_values_with_their_chinese_words() -> None:
    with pytest.raises(InputError) as refused:
        fields.choice("kind", "包年", ProviderKind)
    assert "cloud | platform | colo" in str(refused.value)
    with using(ZH), pytest.raises(InputError) as refused:
        fields.choice("kind", "包年", ProviderKind)
    said = str(refused.value)
    assert "cloud（公有云） | platform（算力租赁平台） | colo（机房托管）" in said
    assert stray_english(said, data=["cloud", "platform", "colo", "kind"]) == []


class _Twin(StrEnum):
    A = "a"
    B = "b"
    C = "c"


def test_a_word_two_values_share_is_taken_for_neither(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"{_Twin.__module__}.{_Twin.__qualname__}"
    monkeypatch.setitem(valuewords.TABLES, name, lambda: {"a": "同词", "b": "同词", "c": "独词"})
    assert fields.choice("x", "独词", _Twin) is _Twin.C
    for lang in (EN, ZH):
        with using(lang), pytest.raises(InputError):
            fields.choice("x", "同词", _Twin)
    assert valuewords.parse(_Twin, "同词") is None


def test_one_set_of_words_for_a_stored_value() -> None:
    from leases.alerts import wording
    from leases.money import words as money
    from leases.telemetry.words import health_word
    from tui.screens.alertwords import kind_words, severity_words, state_words
    from tui.widgets.valuewords import value_words
    from tui.words import shown

    with using(ZH):
        for value in ("daily", "weekly", "monthly", "per_second"):
            said = {shown(value), value_words(value), money.billing_word(value),
                    wording.billing_word(value)}  # fmt: skip
            assert len(said) == 1, (value, said)
        assert shown("daily") == "包天" and shown("weekly") == "包周"
        assert shown("forfeited") == value_words("forfeited") == "已没收"
        assert shown("auth_failed") == health_word("auth_failed")
        assert kind_words("ram_full") == wording.kind_word("ram_full")
        assert state_words("open") == wording.state_word("open") == "未处理"
        assert severity_words("critical") == wording.severity_word("critical") == "严重"
    # English: the stored value itself, as it always was.
    assert shown("daily") == "daily" and money.channel_word("colo") == "colo"


def test_the_command_line_takes_the_words_it_shows(cli: Cli) -> None:
    zh = ("--lang", "zh_CN")
    assert cli("provider", "add", "阿里云", "--kind", "公有云", *zh).code == 0
    r = cli("provider", "add", "恒源云", "--kind", "rental", *zh)
    assert r.code != 0 and "platform（算力租赁平台）" in r.err
    r = cli("node", "add", "a1", "--ssh", "ssh root@10.0.0.9", "--provider", "阿里云",
            "--gpus", "8", "--gpu-model", "A800", *zh)  # fmt: skip
    assert r.code == 0, r.err
    r = cli("lease", "add", "a1", "--billing", "包月", "--price", "100", "--start", "2026-11-01",
            "--end", "2026-12-01", *zh)  # fmt: skip
    assert r.code == 0, r.err
    r = cli("offer", "add", "--provider", "恒源云", "--channel", "算力租赁平台", "--gpu-model",
            "H800", "--billing", "按卡时", "--price", "9", *zh)  # fmt: skip
    assert r.code == 0, r.err
    # English words and any case, whatever the language in use.
    r = cli("offer", "add", "--provider", "x", "--channel", "Cloud", "--gpu-model", "H800",
            "--billing", "hourly", "--price", "9")  # fmt: skip
    assert r.code == 0, r.err
    stored = json.loads(cli("lease", "list", "--json").out)
    assert stored[0]["billing_type"] == "monthly"
    offers = json.loads(cli("offer", "list", "--json").out)
    assert {o["billing_type"] for o in offers} == {"card_hour", "hourly"}
    assert {o["channel"] for o in offers} == {"platform", "cloud"}
    # An argparse choice refused: its values with their words.
    r = cli("offer", "add", "--provider", "x", "--channel", "cloud", "--gpu-model", "H800",
            "--billing", "包年", "--price", "9", *zh)  # fmt: skip
    assert r.code != 0 and "monthly（包月）" in r.err and "daily（包天）" in r.err


def test_help_lists_the_values_with_their_words() -> None:
    from leases.core.models import Provider

    english = recordfields.options(Provider)[0].help
    assert "cloud | platform (GPU rental) | colo (data-centre hosting)" in english
    with using(ZH):
        assert "cloud（公有云） | platform（算力租赁平台） | colo（机房托管）" in (
            recordfields.options(Provider)[0].help
        )


def test_acceptance_levels_and_invoice_kinds_are_listed_and_taken_in_chinese(cli: Cli) -> None:
    import argparse

    from tui.cli.acceptargs import accept_options

    said = cli("accept", "--help", "--lang", "zh_CN").out
    assert all(w in said for w in ("quick（快速", "standard（标准", "burn（烤机")), said
    said = cli("invoice", "add", "--help", "--lang", "zh_CN").out
    assert all(w in said for w in ("special，专票", "ordinary，普票", "其他（other）")), said
    parser = argparse.ArgumentParser()
    accept_options(parser)
    for typed, level in (("烤机", "burn"), ("Standard", "standard"), ("快速", "quick")):
        assert parser.parse_args(["n1", "--level", typed]).level == level


def test_a_wrong_config_language_is_said_once_and_stops_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "config.toml"
    # A language zuka does not speak (中文 it does: test_zh_e27).
    cfg.write_text('[ui]\nlang = "法语"\n', encoding="utf-8")
    monkeypatch.delenv("ZUKA_LANG", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    monkeypatch.setenv("ZUKA_SYSTEM_CONFIG", "")
    cli("provider", "add", "阿里云", "--kind", "cloud", "--config", str(cfg))
    r = cli("provider", "list", "--config", str(cfg))
    assert r.code == 0, r.err
    assert r.err.count("[ui] lang") == 1, r.err
    assert str(cfg) in r.err and "'法语'" in r.err and "en | zh_CN" in r.err
    assert "公有云" in r.out  # the locale's language, the next source
    monkeypatch.setenv("LANG", "C")
    r = cli("provider", "list", "--config", str(cfg))
    assert r.code == 0 and "cloud" in r.out and r.err.count("[ui] lang") == 1
    # A folder whose name would retitle the terminal, a value with an escape: shown, not
    # obeyed, and quoted once.
    odd = tmp_path / "c\x1b]0;x\x07"
    odd.mkdir()
    (odd / "x.toml").write_text('[ui]\nlang = "zh\\u001b]0;pwned"\n', encoding="utf-8")
    r = cli("provider", "list", "--config", str(odd / "x.toml"))
    assert r.code == 0 and "\x1b" not in r.err and "\x07" not in r.err, r.err
    assert "'zh␛]0;pwned'" in r.err, r.err


def test_run_times_and_reading_ages_in_chinese() -> None:
    from datetime import UTC, datetime, timedelta

    from leases.core.models import NodeStatus

    assert elapsed_words(55 * 60 + 32) == "55m32s"
    with using(ZH):
        assert elapsed_words(55 * 60 + 32) == "55分32秒"
        now = datetime(2026, 12, 3, tzinfo=UTC)
        statuses = [
            NodeStatus(node="a1", at=now - timedelta(seconds=2)),
            NodeStatus(node="b2", at=None),
        ]
        said = readings_age(statuses, now)
        assert "; " not in said and "；" in said, said


def test_the_fleet_header_and_status_line_never_cut_a_figure() -> None:
    from rich.cells import cell_len

    from tui.screens.fleetview import fit_header

    zh = "8/8 张卡忙碌（70 张未读取） · 本月 ¥274,788 · 闲置 ¥14,702 · 下个到期 6小时 a1 · zh.db"
    en = "54/70 GPUs busy (8 not read) · CNY 274,788 this month · CNY 11,702 idle · snap.db"
    for line in (zh, en):
        for width in range(20, cell_len(line) + 1):
            said = fit_header(line, width)
            assert cell_len(said) <= width, (width, said)
            assert said.endswith(line.rsplit(" · ", 1)[1]), said
            for figure in ("¥274,788", "¥14,702", "274,788", "11,702"):
                head = figure[:4]
                if head in said:
                    assert figure in said or figure not in line, (width, said)
    assert fit_header(zh, 60) == "8/8 张卡忙碌（70 张未读取） · 本月 ¥274,788 · … · zh.db"
    status = "sort 节点 ↑ · 12个节点 · 10 正常，2 无法连接 · 每 5 秒采集"
    for width in range(12, cell_len(status)):
        said = fit_header(status, width, path=False)
        assert cell_len(said) <= width and said.endswith("…"), (width, said)
        assert all(item in status.split(" · ") for item in said.split(" · ")[:-1]), said


def test_words_are_read_inside_a_task_that_speaks_english() -> None:
    """An offboarding or the poller speaks English for what it stores (speaking(EN)); a
    word typed by a person is still read there, and reading it never switches the whole
    process's language (another thread may be drawing the dashboard in Chinese)."""
    from leases.core import fields
    from leases.core.i18n import EN, ZH, language, speaking, using
    from leases.core.models import BillingType

    with using(ZH), speaking(EN):
        assert fields.choice("billing", "包月", BillingType) is BillingType.MONTHLY
        assert language() == EN  # this task's
        # Another thread (the dashboard's) still speaks the process's language.
        seen: list[str] = []
        other = threading.Thread(target=lambda: seen.append(language()))
        other.start()
        other.join()
        assert seen == [ZH]
