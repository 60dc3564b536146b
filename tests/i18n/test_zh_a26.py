"""The new-user review of the command line in Chinese (issue 25, part A, round 26): prices
written as money (¥50,000.00 in a cell, 50,000.00 元 in a sentence, CNY 50,000.00 in
English), billing words shown, not stored, in Chinese sentences."""

from __future__ import annotations

import itertools
import re
from decimal import Decimal
from pathlib import Path

import pytest

from leases.core.i18n import EN, ZH, using
from leases.money.amounts import price, price_words
from leases.offboard.words import fact_value
from tests.conftest import Cli
from tests.support.english import stray_english
from tui.cli.main import main

ZH_ARGS = ("--lang", "zh_CN")


def _seed(cli: Cli) -> None:
    steps = [
        ("provider", "add", "阿里云", "--kind", "cloud"),
        ("node", "add", "a800-1", "--ssh", "root@10.0.0.9", "--gpus", "8",
         "--gpu-model", "A800", "--provider", "阿里云"),
        ("lease", "add", "a800-1", "--billing", "monthly", "--price", "50000",
         "--start", "2026-11-01", "--end", "2027-01-01", "--deposit", "36000"),
        ("node", "add", "v100-1", "--ssh", "root@10.0.0.8", "--gpus", "8",
         "--provider", "阿里云"),
        ("lease", "add", "v100-1", "--billing", "per_second", "--price", "0.0272",
         "--start", "2026-11-01"),
    ]  # fmt: skip
    for step in steps:
        r = cli(*step)
        assert r.code == 0, (step, r.err)


# -- 1. prices as money ----------------------------------------------------------------


def test_price_in_a_cell_and_in_a_sentence() -> None:
    with using(ZH):
        assert price(Decimal("50000"), "CNY") == "¥50,000.00"
        assert price(Decimal("0.0272"), "CNY") == "¥0.0272"
        assert price_words(Decimal("50000"), "CNY") == "50,000.00 元"
        assert price_words(Decimal("3.3333"), "CNY") == "3.3333 元"
        assert price_words(Decimal("12"), "USD") == "USD 12.00"
    with using(EN):
        assert price_words(Decimal("50000"), "CNY") == "CNY 50,000.00"
        assert price_words(Decimal("0.0272"), "CNY") == "CNY 0.0272"


@pytest.mark.parametrize(
    ("args", "zh", "en"),
    [
        (("node", "list"), ["¥50,000.00", "¥0.0272"], ["CNY 50,000.00", "CNY 0.0272"]),
        (("lease", "list"), ["¥50,000.00", "¥0.0272"], ["CNY 50,000.00", "CNY 0.0272"]),
        (
            ("node", "show", "a800-1"),
            ["当前计费：包月 50,000.00 元，", "¥50,000.00", "¥36,000.00，"],
            ["bills now: monthly CNY 50,000.00, ", "CNY 50,000.00  ", "CNY 36,000.00, refund"],
        ),
    ],
)
def test_prices_are_money_not_raw(
    cli: Cli, args: tuple[str, ...], zh: list[str], en: list[str]
) -> None:
    _seed(cli)
    said = cli(*args, *ZH_ARGS)
    assert said.code == 0, said.err
    for form in zh:
        assert form in said.out, (form, said.out)
    assert " CNY" not in said.out and "50000" not in said.out
    english = cli(*args)
    for form in en:
        assert form in english.out, (form, english.out)
    assert "50000 CNY" not in english.out


def test_json_keeps_the_stored_price(cli: Cli) -> None:
    _seed(cli)
    zh = cli("node", "list", "--json", *ZH_ARGS).out
    assert zh == cli("node", "list", "--json").out
    assert '"unit_price": "50000"' in zh


def test_offboarding_lease_facts_are_shown_as_money() -> None:
    # Stored as the preflight wrote them (the evidence keeps them): shown as money.
    with using(ZH):
        assert fact_value("billing", "monthly 50000 CNY") == "包月 ¥50,000.00"
        assert fact_value("deposit", "36000 CNY") == "¥36,000.00"
        assert fact_value("deposit_refund", "pending") == "待退还"
        assert fact_value("start", "2026-11-01T00:00:00+08:00") == "2026-11-01T00:00:00+08:00"
    with using(EN):
        assert fact_value("billing", "monthly 50000 CNY") == "monthly CNY 50,000.00"
        assert fact_value("billing", "odd") == "odd"


# -- 2. plan hybrid: a missing price said with the display word --------------------------


def test_plan_hybrid_says_which_price_is_missing_in_chinese(cli: Cli) -> None:
    _seed(cli)  # a800-1: A800, monthly only; v100-1: no model recorded, per-second only
    steps = [
        ("node", "add", "h20-1", "--ssh", "root@10.0.0.7", "--gpus", "8",
         "--gpu-model", "H20", "--provider", "阿里云"),
        ("lease", "add", "h20-1", "--billing", "hourly", "--price", "20",
         "--start", "2026-11-01"),
    ]  # fmt: skip
    for step in steps:
        assert cli(*step).code == 0
    zh = cli("plan", "hybrid", *ZH_ARGS)
    text = zh.out + zh.err
    assert "缺少按量价格：" in text and "缺少包月价格：" in text, text
    assert "monthly：" not in text and "hourly：" not in text, text
    assert stray_english(text, data=["a800-1", "A800", "H20", "PRICE"]) == [], text
    en = cli("plan", "hybrid")
    assert "monthly: no monthly lease of GPU model H20 in CNY" in en.out, en.out
    assert "with --gpu-model 'H20' (plans this model alone)" in en.out


# -- 3. stored values said with their display words in Chinese sentences -----------------


@pytest.mark.parametrize(
    ("args", "said", "raw"),
    [
        (("lease", "add", "a800-1", "--billing", "monthly", "--price", "100",
          "--start", "2027-02-01"), "包月租约是预付的", "monthly"),
        (("lease", "add", "a800-1", "--billing", "hourly", "--price", "1.23456",
          "--start", "2027-02-01"), "按量单价", "hourly"),
        (("node", "edit", "a800-1", "--provider", "阿里云", "--channel", "platform"),
         "阿里云 的渠道是公有云", "cloud"),
        (("resource", "edit", "a800-1", "--kind", "disk", "--id", "d-1", "--notes", "x"),
         "没有记录云盘 d-1", "disk"),
    ],
)  # fmt: skip
def test_values_in_chinese_sentences_are_display_words(
    cli: Cli, args: tuple[str, ...], said: str, raw: str
) -> None:
    _seed(cli)
    r = cli(*args, *ZH_ARGS)
    assert r.code == 2 and said in r.err, r.err
    message = r.err.split("：", 2)[-1]
    assert raw not in message.split("（输入为")[0], r.err


# -- 4. argparse names every positional in Chinese --------------------------------------


def _needing_words() -> list[tuple[str, ...]]:
    """Every command (and group of subcommands) that refuses to run without words."""
    import argparse

    from tui.cli.main import build_parser

    found: list[tuple[str, ...]] = []

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        needs = False
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                needs = needs or bool(a.required)
                seen: set[int] = set()
                for name, sub in a.choices.items():
                    if id(sub) not in seen:
                        seen.add(id(sub))
                        walk(sub, (*path, name))
            elif a.nargs not in ("*", "?", argparse.REMAINDER) and (
                a.required or not a.option_strings
            ):
                needs = True
        if needs:
            found.append(path)

    walk(build_parser(), ())
    return found


NEEDING = _needing_words()


def test_the_sweep_finds_the_commands() -> None:
    assert ("offboard",) in NEEDING and ("plan",) in NEEDING and ("node", "show") in NEEDING
    assert len(NEEDING) > 40


@pytest.mark.parametrize("path", NEEDING, ids=[" ".join(p) for p in NEEDING])
def test_a_missing_argument_is_named_in_chinese(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused by the parser before any ledger is opened (a group takes no --ledger).
    with pytest.raises(SystemExit) as exc:
        main([*ZH_ARGS, *path])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert err.startswith("用法：zuka") and "zuka：错误：" in err, err
    # Choices are typed words ({add,list}); option names and metavariables (NODE) pass.
    text = re.sub(r"\{[^}]*\}", " ", err)
    assert stray_english(text, data=list(path)) == [], err


@pytest.mark.parametrize(
    ("args", "zh", "en"),
    [
        (("offboard",), "缺少必需的参数：NODE", "the following arguments are required: node"),
        (("plan",), "缺少必需的参数：{hybrid,buy,job}",
         "the following arguments are required: action"),
        (("kill",), "缺少必需的参数：NODE, PID", "the following arguments are required: node, pid"),
    ],
)  # fmt: skip
def test_positionals_by_name(
    args: tuple[str, ...], zh: str, en: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for words, said in (((*ZH_ARGS, *args), zh), (args, en)):
        with pytest.raises(SystemExit):
            main(list(words))
        assert said in capsys.readouterr().err


def test_an_unknown_subcommand_is_still_a_command_in_chinese(cli: Cli) -> None:
    assert "未知命令 'xx'（可选：hybrid, buy, job）" in cli("plan", "xx", *ZH_ARGS).err
    assert "是不是要输入 'show'" in cli("node", "shw", *ZH_ARGS).err
    assert "unknown command 'xx' (choose from hybrid, buy, job)" in cli("plan", "xx").err


# -- 5. Chinese punctuation after Chinese words -------------------------------------------

# A Chinese character (or Chinese punctuation) then an ASCII colon, comma or semicolon that
# ends a clause (a space or the end after it): Chinese writes ：，； there. An ASCII word
# before it is allowed (`SHA256:`, `unix:` as typed), and so is a placeholder (its value
# may be ASCII data: a node's name, a path).
_ASCII_AFTER_CHINESE = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef][:,;](?=\s|$)")


def test_no_msgstr_puts_ascii_punctuation_after_chinese() -> None:
    from babel.messages.pofile import read_po

    po = Path(__file__).parents[2] / "leases/locale/zh_CN/LC_MESSAGES/zuka.po"
    with po.open("rb") as f:
        cat = read_po(f)
    bad = []
    for m in cat:
        strings = [m.string] if isinstance(m.string, str) else list(m.string)
        bad += [s for s in strings if s and _ASCII_AFTER_CHINESE.search(s)]
    assert bad == []


def test_the_checker_sees_ascii_punctuation_after_chinese() -> None:
    assert _ASCII_AFTER_CHINESE.search("节点: a")
    assert _ASCII_AFTER_CHINESE.search("节点,")
    assert not _ASCII_AFTER_CHINESE.search("节点：a，b")
    assert not _ASCII_AFTER_CHINESE.search("SHA256: 加")


def test_a_rows_block_says_its_cells_with_chinese_colons(cli: Cli) -> None:
    # `cost` at 80 columns (not a terminal): each row a block of `header：value` pairs.
    _seed(cli)
    zh = cli("cost", *ZH_ARGS)
    assert "至今：" in zh.out and not _ASCII_AFTER_CHINESE.search(zh.out), zh.out
    en = cli("cost")
    assert "to date: CNY" in en.out, en.out


def test_doctor_headings_end_with_a_chinese_colon(cli: Cli) -> None:
    zh = cli("doctor", *ZH_ARGS).out
    assert "路径：\n" in zh and not _ASCII_AFTER_CHINESE.search(zh), zh
    assert "paths:\n" in cli("doctor").out.lower()


# -- 6. one term for one thing ------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["per_second", "hourly", "card_hour", "daily", "weekly", "monthly", "contract"]
)
def test_a_billing_type_has_one_chinese_word(value: str) -> None:
    from leases.alerts.wording import billing_word as alert_billing_word
    from leases.core import valuewords
    from leases.core.models import BillingType
    from leases.money.words import billing_word
    from tui.words import shown

    with using(ZH):
        words = {
            shown(value),
            billing_word(value),
            alert_billing_word(value),
            valuewords.word(value, BillingType),
        }
    assert len(words) == 1 and value not in words, words


def test_settled_terms() -> None:
    from leases.money.words import deposit_word
    from leases.offboard.words import fact_word
    from tui.words import shown

    with using(ZH):
        assert shown("per_second") == "按量（秒）"  # full-width, as Chinese text writes it
        assert shown("daily") == "包天" and shown("weekly") == "包周"
        assert shown("forfeited") == deposit_word("forfeited") == "已没收"
        assert fact_word("end") == "结束"
        from leases.core.i18n import _

        assert _("open-ended") == _("open end") == "不定期"


# -- 7. the offboarding plan wrapped by cells ---------------------------------------------


def _old_wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """output.wrap as it was before Chinese was filled: English must read the same."""
    from tui.cli.output import width

    room = max(10, columns - width(indent))
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if width(candidate) <= room:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        for char in word:
            if width(line + char) > room:
                lines.append(line)
                line = ""
            line += char
    if line or not lines:
        lines.append(line)
    return [indent + x for x in lines]


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    from datetime import date

    from leases.sim.demoledger import build_demo_ledger

    path = tmp_path / "demo.db"
    build_demo_ledger(path, date(2026, 12, 3))
    return path


def _plan_at_80(demo: Path, monkeypatch: pytest.MonkeyPatch, *lang: str) -> str:
    import io

    from tui.cli import output

    monkeypatch.setattr(output, "terminal_columns", lambda out, default=100: 80)
    buf = io.StringIO()
    assert main([*lang, "offboard", "colo-njidc-4090", "--ledger", str(demo)], out=buf) == 0
    return buf.getvalue()


def test_the_chinese_plan_fits_80_cells(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.cells import cell_len

    text = _plan_at_80(demo, monkeypatch, *ZH_ARGS)
    wide = [line for line in text.splitlines() if cell_len(line) > 80]
    assert wide == []
    # Chinese filled to the edge: no line of a step's description ends far short of it
    # when the next one begins with a Chinese character.
    lines = text.splitlines()
    for a, b in itertools.pairwise(lines):
        steps = a.startswith("       ") and b.startswith("       ") and b.strip()
        if steps and "\u4e00" <= b.strip()[0] <= "\u9fff":
            assert cell_len(a) >= 70, (a, b)
    # Names and paths are never cut: each path of the plan is whole on its line.
    assert "~/.local/share/fish/fish_history" in text
    assert "--confirm colo-njidc-4090 --hash" in text


def test_the_english_plan_is_unchanged(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.cli import output

    _plan_at_80(demo, monkeypatch)  # stored: the runs below both say "unchanged"
    new = _plan_at_80(demo, monkeypatch)
    assert "to carry it out: zuka offboard colo-njidc-4090 --execute --confirm" in new
    monkeypatch.setattr(output, "wrap", _old_wrap)
    assert new == _plan_at_80(demo, monkeypatch)


@pytest.mark.parametrize("columns", [20, 33, 40, 61, 80])
def test_wrap_breaks_chinese_between_characters_only(columns: int) -> None:
    from rich.cells import cell_len

    from tui.cli.output import wrap

    text = (
        "对 ~/.local/share/fish/fish_history（其中每个普通文件）执行 shred -n 1 -z 并解除链接，"
        "由 zuka 的遍历程序执行（节点上的 python3）：不跟随链接；节点 colo-njidc-4090 已释放。"
    )
    lines = wrap(text, columns, indent="  ")
    assert all(cell_len(x) <= columns for x in lines), lines
    assert "".join(x.strip() for x in lines).replace(" ", "") == text.replace(" ", "")
    for line in lines:
        assert line.strip()[0] not in "，。：；）", lines
    # ASCII words stay whole when they fit a line.
    for word in ("~/.local/share/fish/fish_history", "colo-njidc-4090", "python3", "shred"):
        if cell_len(word) + 2 <= columns:
            assert any(word in x for x in lines), (word, lines)
