"""Every `--help` of every command in Chinese with no English left in it but what people
type (commands, options, their values, metavariables) and product names; the English
help as it was; the parser's own errors (a mistyped command, option or value, a missing
one, the parser's tables of bad input) in Chinese with "did you mean" working; and the
language chosen by `--lang`, $ZUKA_LANG, the config's `[ui] lang`, then the locale, end
to end in a subprocess."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from leases.app.flags import describe_error
from leases.core import recordfields
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, using
from leases.core.models import Lease, Node, Provider, Resource
from tests.support.cli import Cli
from tests.support.english import stray_english
from tui.cli.helpformat import wrap
from tui.cli.main import build_parser, main

# Words allowed in a Chinese help beside tests/support/english.py's WORDS, and why:
EXTRA = {
    "textual-serve",  # the Python package `zuka web` runs on, named as it is installed
    "Unix",  # the operating system (Unix groups: 用户组)
    "shell",  # as Chinese Linux writing says it (打开 shell)
    "webhook",  # as Chinese chat platforms (飞书, 钉钉) name their robots' URLs
}


def _parsers(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, (*path, name))


def _typed(p: argparse.ArgumentParser) -> set[str]:
    """What people type in this parser's help, in its words: every choice (commands,
    `--sort node`), the values of the record fields' enums (`--billing monthly`), and the
    names of its positional arguments (`node`, listed under 位置参数)."""
    said: set[str] = set()
    for action in p._actions:
        if action.choices:
            said.update(str(c) for c in action.choices)
        if not action.option_strings:
            said.add(str(action.metavar or action.dest))
    for cls in (Provider, Node, Lease, Resource):
        for option in recordfields.options(cls):
            if option.enum is not None:
                said.update(str(m.value) for m in option.enum)
    # `early-release refund: none | prorated_days | ...`: a free value's known words.
    said.update(("prorated_days", "prorated_hours", "used_then_hourly"))
    return {w for value in said for w in re.findall(r"[A-Za-z][A-Za-z'-]*", value)}


PATHS = [path for path, _p in _parsers(build_parser())]
PARSERS = dict(_parsers(build_parser()))


def _help(*words: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    return out.getvalue()


def _stray(path: tuple[str, ...]) -> list[str]:
    text = _help("--lang", "zh_CN", *path)
    # `{add,list,...}` lists choices; a help's wrapped lines are one sentence.
    text = re.sub(r"\{[^{}\s]*\}", " ", text)
    text = re.sub(r"\s+", " ", text)
    return stray_english(text, extra=EXTRA | _typed(PARSERS[path]))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "zuka")
def test_every_help_is_chinese(path: tuple[str, ...]) -> None:
    assert _stray(path) == []


def test_the_walk_reaches_every_command() -> None:
    assert len(PATHS) > 80
    assert ("lease", "add") in PATHS and ("offboard",) in PATHS and ("plan", "job") in PATHS


def test_chinese_help_says_the_words_of_the_glossary() -> None:
    top = _help("--lang", "zh_CN")
    assert top.startswith("用法：zuka")
    for word in ("台账", "看板", "租约", "供应商", "告警", "退租", "验收", "采集器"):
        assert word in top, word
    lease = _help("lease", "add", "--lang", "zh_CN")
    assert "\n位置参数：\n" in lease and "\n选项：\n" in lease and "显示本帮助并退出" in lease
    assert "押金" in lease and "单价" in lease and "自动续费" in lease
    # A choice's note is said in Chinese beside the value typed.
    assert "storage_only（仅存储计费：租约停止计费，存储部分照常计费）" in lease.replace(
        "\n", ""
    ).replace(" ", "")


def test_chinese_help_fits_the_terminal_by_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    for path in (("collect",), ("lease", "add"), ("offboard",), ("bill", "import")):
        text = _help(*path, "--lang", "zh_CN")
        wide = [line for line in text.splitlines() if cell_len(line) > 80]
        # A line over 80 cells is one unit that cannot break (a long option's name).
        assert all(" " not in line.strip() for line in wide), wide
    # An option is never broken at its hyphens (argparse's textwrap breaks English there).
    assert "--metrics-token-file" in _help("collect", "--lang", "zh_CN")


def test_wrap_breaks_between_chinese_characters_never_in_a_word() -> None:
    assert wrap("只用这个私钥登录每个节点", 10) == ["只用这个私", "钥登录每个", "节点"]
    assert wrap("需要 --metrics-token-file 和", 12) == ["需要", "--metrics-token-file", "和"]
    # Closing punctuation stays on its line; opening punctuation with what it opens.
    assert wrap("默认五（秒）", 10) == ["默认五", "（秒）"]
    assert wrap("一二三四，五", 10) == ["一二三四，", "五"]


def test_english_help_is_as_it_was() -> None:
    top = " ".join(_help().split())
    assert top.startswith("usage: zuka")
    assert "zuka (租卡): the ledger and dashboard of a lab's rented GPU nodes" in top
    assert "positional arguments:" in top and "options:" in top
    lease = " ".join(_help("lease", "add").split())
    assert "deposit paid, in the lease's currency" in lease
    assert "storage_only (the lease stops, its storage lines do not)" in lease
    assert "show this help message and exit" in lease
    assert stray_english(lease) != []  # the checker does see English


def test_a_language_switch_is_not_kept_by_the_parser_cache() -> None:
    assert "给节点添加租约" in _help("lease", "add", "--lang", "zh_CN")
    assert "add a lease to a node" in _help("lease", "add", "--lang", "en")
    assert "给节点添加租约" in _help("lease", "add", "--lang", "zh_CN")


# -- the parser's errors ------------------------------------------------------------------


def _short(err: str) -> tuple[str, str]:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("用法：zuka"), err
    return lines[0], lines[1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("lease", "ad", "n1"), "zuka：错误：未知命令 'ad'；是不是要输入 'add'？"),
        (("nod", "list"), "zuka：错误：未知命令 'nod'；是不是要输入 'node'？"),
        (
            ("report", "--month", "2026-01", "--format", "mdd"),
            "zuka：错误：--format：无效的选择 'mdd'；是不是要输入 'md'？",
        ),
        (
            ("report", "--month", "2026-01", "--format", "qqqqq"),
            "zuka：错误：--format：无效的选择 'qqqqq'（可选：md, csv, json）",
        ),
        (
            ("lease", "add", "n1", "--prise", "3"),
            "zuka：错误：未知选项 --prise；是不是要输入 --price？",
        ),
        (("node", "list", "--al=1"), "zuka：错误：未知选项 --al；是不是要输入 --all？"),
        (
            ("node", "list", "--zzzzzzzz"),
            "zuka：错误：未知选项 --zzzzzzzz（`zuka node list --help` 会列出全部选项）",
        ),
        (("alerts", "--alll"), "zuka：错误：未知选项 --alll；是不是要输入 --all？"),
        (("lease", "add", "n1"), "zuka：错误：缺少必需的参数：--billing, --price"),
        (("node", "list", "-5"), "zuka：错误：无法识别的参数：-5"),
    ],
)
def test_the_parsers_errors_in_chinese(cli: Cli, args: tuple[str, ...], said: str) -> None:
    r = cli(*args, "--lang", "zh_CN")
    assert r.code == 2
    _usage, line = _short(r.err)
    assert line.startswith(said), line
    # A guess names a command or a choice as it is typed ('add'): quoted, it is data.
    quoted = re.findall(r"'([^']*)'", line)
    assert stray_english(line, data=[*args, *quoted, "csv", "json"]) == [], line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("kill", "n1", "abc"), "zuka：错误：参数 PID：不是整数：'abc'"),
        (("poll", "--interval", "x"), "zuka：错误：参数 --interval：不是数字：'x'"),
        (("offboard", "n1", "--execute", "--recheck"), "zuka：错误：参数 --recheck：不能与参数"),
        (("lease", "add", "n1", "--billing"), "zuka：错误：参数 --billing：需要一个值"),
        (("audit", "accept", "foo", "1"), "zuka：错误：ENTITY：无效的选择 'foo'（可选："),
    ],
)
def test_argparses_own_errors_in_chinese(cli: Cli, args: tuple[str, ...], said: str) -> None:
    r = cli(*args, "--lang", "zh_CN")
    assert r.code == 2
    _usage, line = _short(r.err)
    assert line.startswith(said), line
    choices = ("provider", "node", "lease", "resource", "stop", "deposit_refund", "invoice",
               "balance", "bill", "offer", "entity")  # fmt: skip
    assert stray_english(line, data=[*args, *choices, "pid"]) == [], line


def test_the_english_number_errors_are_as_they_were(cli: Cli) -> None:
    r = cli("poll", "--interval", "x", "--lang", "en")
    assert r.err.endswith("zuka: error: argument --interval: invalid float value: 'x'\n")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("resource", "edit", "b1", "--kind", "disk", "--id", "d1", "--deleted", "soon"),
         "--deleted"),
        (("lease", "end", "b1", "--at", "soon"), "--at"),
        (("lease", "add", "b1", "--billing", "hourly", "--price", "-3"), "--price"),
    ],
)  # fmt: skip
def test_errors_name_the_option_typed_in_chinese(
    cli: Cli, args: tuple[str, ...], flag: str
) -> None:
    """tests/cli/test_cli_ux.py's table: the option named, in Chinese punctuation (the
    reasons are the field parsers')."""
    assert cli("node", "add", "b1", "--ssh", "ssh root@10.0.0.9").code == 0
    assert cli("lease", "add", "b1", "--billing", "hourly", "--price", "3").code == 0
    assert cli("resource", "add", "b1", "--kind", "disk", "--id", "d1").code == 0
    r = cli(*args, "--lang", "zh_CN")
    assert r.code == 2
    line = r.err.strip()
    assert line.startswith("zuka：错误：") and "Traceback" not in line
    label = line.removeprefix("zuka：错误：").split("：")[0]
    assert label == flag or label.endswith(f" ({flag})"), label


def test_json_and_its_errors_are_english_in_every_language(cli: Cli) -> None:
    assert cli("node", "add", "b1", "--ssh", "ssh root@10.0.0.9").code == 0
    assert cli("lease", "add", "b1", "--billing", "monthly", "--price", "3000",
               "--start", "2026-01-01", "--end", "2026-02-01").code == 0  # fmt: skip
    for args in (("lease", "list"), ("node", "list"), ("node", "show", "b1")):
        zh = cli(*args, "--json", "--lang", "zh_CN")
        en = cli(*args, "--json", "--lang", "en")
        assert zh.code == en.code == 0 and zh.out == en.out and zh.out.strip(), args
    r = cli("dashboard", "--json", "--lang", "zh_CN")
    assert r.code == 2 and "zuka: error: --json: the dashboard is a screen" in r.err


def test_the_short_usage_in_chinese(cli: Cli) -> None:
    r = cli("lease", "add", "n1", "--lang", "zh_CN")
    usage, _line = _short(r.err)
    assert usage == "用法：zuka lease add [选项] --billing BILLING --price PRICE NODE"


def test_the_english_errors_are_as_they_were(cli: Cli) -> None:
    r = cli("lease", "ad", "n1", "--lang", "en")
    assert r.err.endswith("zuka: error: unknown command 'ad'; did you mean 'add'?\n")
    r = cli("lease", "add", "n1", "--lang", "en")
    assert r.err.startswith("usage: zuka lease add [options] --billing BILLING")


def test_a_record_fields_error_names_the_flag_in_chinese() -> None:
    with using(ZH):
        said = describe_error(InputError("unit_price", "abc", "不是金额"))
        assert said == "unit_price (--price)：不是金额（输入为 'abc'）"
        assert describe_error(InputError("undo", 7, "不能撤销")).endswith(
            "（审计条目 7；见 `zuka log`）"
        )
    with using(EN):
        assert describe_error(InputError("unit_price", "abc", "bad")) == (
            "unit_price (--price): bad (got 'abc')"
        )


def test_typos_tables_under_chinese(cli: Cli) -> None:
    """tests/cli/test_cli_typos.py's table of mistyped commands and choices, again in
    Chinese: each message Chinese, with the guess."""
    from tests.cli import test_cli_typos

    marks = [
        m for m in test_cli_typos.test_a_mistyped_command_or_choice_says_what_was_meant.pytestmark
    ]
    table = next(m.args[1] for m in marks if m.name == "parametrize")
    for args, _english in table:
        r = cli(*args, "--lang", "zh_CN")
        assert r.code == 2
        _usage, line = _short(r.err)
        quoted = re.findall(r"'([^']*)'", line)
        assert "是不是要输入" in line and stray_english(line, data=[*args, *quoted]) == [], line


# -- the language, end to end -------------------------------------------------------------


def _zuka(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    drop = ("ZUKA_LANG", "LC_ALL", "LC_MESSAGES", "LANG", "ZUKA_CONFIG")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_locale_gives_a_chinese_error_in_a_subprocess() -> None:
    r = _zuka("lease", "ad", LANG="zh_CN.UTF-8")
    assert r.returncode == 2
    assert r.stderr.startswith("用法：zuka lease")
    assert "zuka：错误：未知命令 'ad'；是不是要输入 'add'？" in r.stderr
    r = _zuka("--help", LC_ALL="zh_CN.UTF-8", LANG="en_US.UTF-8")
    assert r.stdout.startswith("用法：zuka") and "显示本帮助并退出" in r.stdout


def test_the_order_flag_env_config_locale_end_to_end(tmp_path: Path) -> None:
    zh_cfg = tmp_path / "zh.toml"
    zh_cfg.write_text('[ui]\nlang = "zh_CN"\n')
    en_cfg = tmp_path / "en.toml"
    en_cfg.write_text('[ui]\nlang = "en"\n')
    zh, en = "用法：zuka", "usage: zuka"
    cases = [
        # (args, env, expected start): --lang over $ZUKA_LANG over the config over LANG.
        (("--lang", "zh_CN"), {"ZUKA_LANG": "en", "LANG": "en_US.UTF-8"}, zh),
        (("--lang", "en"), {"ZUKA_LANG": "zh_CN"}, en),
        ((), {"ZUKA_LANG": "zh_CN", "ZUKA_CONFIG": str(en_cfg)}, zh),
        ((), {"ZUKA_LANG": "en", "ZUKA_CONFIG": str(zh_cfg), "LANG": "zh_CN.UTF-8"}, en),
        ((), {"ZUKA_CONFIG": str(zh_cfg), "LANG": "en_US.UTF-8"}, zh),
        (("--config", str(zh_cfg)), {"LANG": "en_US.UTF-8"}, zh),
        ((), {"ZUKA_CONFIG": str(en_cfg), "LANG": "zh_CN.UTF-8"}, en),
        ((), {"LANG": "zh_CN.UTF-8"}, zh),
        ((), {"LANG": "fr_FR.UTF-8"}, en),
    ]
    for args, env, start in cases:
        r = _zuka(*args, "--help", ZUKA_SYSTEM_CONFIG="", **env)
        assert r.returncode == 0, (args, env, r.stderr)
        assert r.stdout.startswith(start), (args, env, r.stdout[:80])


def test_a_language_zuka_does_not_speak_is_refused_in_the_locales() -> None:
    r = _zuka("node", "list", "--lang", "klingon", LANG="zh_CN.UTF-8")
    assert r.returncode == 2 and r.stderr.startswith("zuka：错误：--lang：")
    assert "'klingon'" in r.stderr and stray_english(r.stderr, data=["klingon"]) == []
    r = _zuka("node", "list", "--lang", "klingon", LANG="en_US.UTF-8")
    assert r.returncode == 2 and r.stderr.startswith("zuka: error: --lang: ")


def test_the_record_fields_help_is_said_when_read() -> None:
    """The flag tables are built at import, in English; their help is said in the
    language in use when read (the dashboard's forms switch at run time)."""
    from leases.app.flags import HELP, NODE_HELP

    assert NODE_HELP["gpu_count"] == "number of GPUs"
    with using(ZH):
        assert NODE_HELP["gpu_count"] == "GPU 数量"
        assert HELP["kind"].startswith("资源：")  # a key of two records: the resource's
        assert "platform（算力租赁平台）" in recordfields.options(Provider)[0].help
    assert dict(NODE_HELP)["gpu_count"] == "number of GPUs"


def test_a_lang_before_the_command_keeps_polls_own_parser() -> None:
    from tui.cli.pollargs import narrow

    assert narrow(["--lang", "zh_CN", "poll", "--once"]) == "poll"
    assert narrow(["--lang", "zh_CN", "-h", "poll"]) is None
