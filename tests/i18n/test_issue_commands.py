"""What the issue asks to see, end to end: `LANG=zh_CN.UTF-8 zuka --help`, an error
message, `zuka alerts` and `zuka report` (Markdown) in Chinese with no English left but
data; and the same commands with `--json` the same bytes in both languages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tests.alerts.test_alerts import _three_alerts
from tests.i18n.test_zh_help import EXTRA, PARSERS, _typed
from tests.support.cli import Cli
from tests.support.english import stray_english

NODES = ["m1", "d1", "f1"]
# When an alert was last evaluated moves between two runs (each run evaluates now): the
# instants written to the microsecond are set aside; every other byte must be equal.
INSTANT_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d")


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


def _last_month() -> str:
    first = datetime.now(ZoneInfo("Asia/Shanghai")).date().replace(day=1)
    return (first - timedelta(days=1)).strftime("%Y-%m")


def test_help_and_an_error_in_chinese_from_the_locale() -> None:
    shown = _zuka("--help", LANG="zh_CN.UTF-8")
    assert shown.returncode == 0, shown.stderr
    assert "用法" in shown.stdout
    # The commands' names are typed as they are (tests/i18n/test_zh_help.py walks every help).
    assert stray_english(shown.stdout, extra={*EXTRA, *_typed(PARSERS[()])}) == [], shown.stdout
    bad = _zuka("lease", "add", "x", "--billing", "monthly", "--price", "1,20", LANG="zh_CN.UTF-8")
    assert bad.returncode == 2
    assert stray_english(bad.stderr, data=["1,20"]) == [], bad.stderr
    assert "price" in bad.stderr  # the field as it is typed


def test_alerts_and_the_report_in_chinese(cli: Cli) -> None:
    _three_alerts(cli)
    alerts = cli("alerts", "--lang", "zh_CN")
    assert alerts.code == 0, alerts.err
    assert stray_english(alerts.out, data=NODES) == [], alerts.out
    assert "到期" in alerts.out and "押金" in alerts.out
    report = cli("report", "--month", _last_month(), "--format", "md", "--lang", "zh_CN")
    assert report.code == 0, report.err
    assert stray_english(report.out, data=NODES) == [], report.out
    assert "¥" in report.out or "元" in report.out


def test_json_is_the_same_bytes_in_both_languages(cli: Cli) -> None:
    _three_alerts(cli)
    month = _last_month()
    for args in (("alerts",), ("report", "--month", month), ("node", "list"), ("lease", "list")):
        en = cli(*args, "--json", "--lang", "en")
        zh = cli(*args, "--json", "--lang", "zh_CN")
        assert en.code == zh.code == 0, (args, en.err, zh.err)
        assert INSTANT_RE.sub("T", en.out) == INSTANT_RE.sub("T", zh.out), args
        assert en.out.isascii() or "m1" in en.out, args
