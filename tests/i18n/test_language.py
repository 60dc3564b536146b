"""Which language zuka speaks: `--lang`, then $ZUKA_LANG, then the config's [ui] lang,
then the locale; a language asked for that zuka does not speak is refused by name; and
`--json` output is the same bytes in every language."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from leases.config.lang import config_lang
from leases.core import i18n, valuewords
from leases.core.i18n import EN, ZH, LanguageError, choose, parse_lang
from leases.core.models import BillingType
from leases.core.spoken import ends_in, nodes, span
from leases.money.amounts import money_words
from tests.support.cli import Cli


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("zh_CN.UTF-8", ZH),
        ("zh_CN.utf8", ZH),
        ("zh-CN", ZH),
        ("zh", ZH),
        ("zh_TW.UTF-8", ZH),
        ("zh_Hans_CN", ZH),
        ("en_US.UTF-8", EN),
        ("en", EN),
        ("C", EN),
        ("C.UTF-8", EN),
        ("POSIX", EN),
        ("fr_FR.UTF-8", None),
        ("", None),
        ("../../etc", None),
        ("zh/../../etc", None),
        ("zh\x1b[31mRED", None),
        ("zh_CN.UTF-8@foo/../..", None),
        ("zh_CN.UTF-8@euro", ZH),
        ("zh_Hans_CN.UTF-8", ZH),
    ],
)
def test_parse_lang(text: str, lang: str | None) -> None:
    assert parse_lang(text) == lang


def test_the_order_flag_env_config_locale() -> None:
    env = {"ZUKA_LANG": "en", "LANG": "zh_CN.UTF-8"}
    assert choose("zh_CN", env, "en") == ZH
    assert choose(None, env, "zh_CN") == EN
    assert choose(None, {"LANG": "en_US.UTF-8"}, "zh_CN") == ZH
    assert choose(None, {"LANG": "zh_CN.UTF-8"}, None) == ZH
    # LC_ALL over LC_MESSAGES over LANG, as POSIX has it; an empty one is not set.
    assert choose(None, {"LC_ALL": "", "LC_MESSAGES": "zh_CN", "LANG": "en_US"}, None) == ZH
    assert choose(None, {"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, None) == EN
    assert choose(None, {"LANG": "fr_FR.UTF-8"}, None) == EN
    assert choose(None, {}, None) == EN


def test_a_language_zuka_does_not_speak_is_refused_by_where_it_came_from() -> None:
    with pytest.raises(LanguageError, match=r"--lang: .*'fr'.*en or zh_CN"):
        choose("fr", {}, None)
    with pytest.raises(LanguageError, match=r"\$ZUKA_LANG: .*'de_DE'"):
        choose(None, {"ZUKA_LANG": "de_DE"}, None)


def test_the_config_file_sets_the_language(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\nlang = "zh_CN"\n')
    env = {"ZUKA_SYSTEM_CONFIG": ""}
    assert config_lang(str(cfg), env) == ZH
    assert config_lang(str(cfg), {**env, "ZUKA_UI_LANG": "en"}) == EN
    cfg.write_text('[ui]\nlang = "klingon"\n')
    assert config_lang(str(cfg), env) is None  # the command's own load says why
    cfg.write_text("[ui\n")
    assert config_lang(str(cfg), env) is None
    assert config_lang(str(tmp_path / "absent.toml"), env) is None


def test_spoken_spans_and_lease_ends() -> None:
    assert span(3 * 86400 + 4 * 3600 + 59) == "3 d 4 h"
    assert span(5 * 3600 + 12 * 60) == "5 h 12 min"
    assert span(42) == "42 s"
    assert span(0) == "0 s"
    assert span(86400 + 30) == "1 d"
    assert ends_in(3) == "ends in 3 d"
    assert ends_in(0) == "ends today"
    assert ends_in(-2) == "ended 2 d ago"
    assert nodes(1) == "1 node" and nodes(3) == "3 nodes"
    with i18n.using(ZH):
        assert span(3 * 86400 + 4 * 3600) == "3天4小时"
        assert ends_in(3) == "3天后到期"
        assert ends_in(0) == "今天到期"
        assert ends_in(-2) == "已到期2天"
        assert nodes(3) == "3个节点"
    assert i18n.language() == EN


def test_lang_flag_and_json_in_process(cli: Cli) -> None:
    bad = cli("node", "list", "--lang", "fr")
    assert bad.code == 2 and "--lang" in bad.err and "'fr'" in bad.err
    zh = cli("node", "add", "--lang", "zh_CN")
    assert zh.code == 2 and "缺少必需的参数" in zh.err


def _zuka(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("ZUKA_LANG", "LC_ALL", "LANG")}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_locale_chooses_chinese_for_help() -> None:
    r = _zuka("--help", LANG="zh_CN.UTF-8")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("用法：zuka")
    r = _zuka("--help", LANG="zh_CN.UTF-8", ZUKA_LANG="en")
    assert r.stdout.startswith("usage: zuka")


async def test_a_task_speaks_its_own_language_while_others_keep_theirs() -> None:
    """An acceptance run writes what it stores in English (`speaking(EN)`) while the
    dashboard's task, awaiting at the same time, draws in Chinese."""
    import asyncio

    i18n.set_language(ZH)
    seen: dict[str, str] = {}
    started = asyncio.Event()

    async def stored() -> None:
        with i18n.speaking(EN):
            started.set()
            await asyncio.sleep(0)
            seen["stored"] = ends_in(3)

    async def shown() -> None:
        await started.wait()
        seen["shown"] = ends_in(3)

    await asyncio.gather(stored(), shown())
    assert seen == {"stored": "ends in 3 d", "shown": "3天后到期"}
    assert i18n.speaking_now() == ZH
    # Not only the catalogue's words: everything said "in the language in use" (money's
    # unit, a value's word beside it) follows the task's language.
    with i18n.speaking(EN):
        assert i18n.language() == EN and not i18n.is_chinese()
        assert money_words(Decimal("50000"), "CNY") == "CNY 50,000.00"
        assert valuewords.with_word("monthly", BillingType) == "monthly"
    assert money_words(Decimal("50000"), "CNY") == "50,000.00 元"
    assert valuewords.with_word("monthly", BillingType) == "monthly（包月）"
    with pytest.raises(LanguageError), i18n.speaking("fr"):
        pass


def test_a_cut_or_tampered_catalogue_speaks_english_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A catalogue file cut short or with a charset Python does not know is no traceback:
    English, and one line on stderr naming the file."""
    folder = tmp_path / ZH / "LC_MESSAGES"
    folder.mkdir(parents=True)
    real = Path(i18n._LOCALE, ZH, "LC_MESSAGES", "zuka.mo").read_bytes()
    monkeypatch.setattr(i18n, "_LOCALE", str(tmp_path))
    for broken in (real[:20], real.replace(b"charset=utf-8", b"charset=xx-99")):
        (folder / "zuka.mo").write_bytes(broken)
        monkeypatch.setattr(i18n, "_catalogues", {})
        i18n.set_language(ZH)
        assert ends_in(3) == "ends in 3 d"
        assert "zuka.mo cannot be read" in capsys.readouterr().err
