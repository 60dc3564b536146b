"""Alerts, notifications and telemetry words in Chinese: `zuka alerts` under zh_CN on a
ledger holding several kinds of alert says them with no English left but data; its
`--json` is the same bytes in both languages (what the ledger stores is language-neutral:
leases.alerts.said); an alert's notification is rendered in the notifier's language; the
words of a node's failed readings are Chinese."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from leases.alerts import state as alertstate
from leases.alerts.said import PREFIX, decode, encode
from leases.alerts.watch import AlertFeed, check, message_of
from leases.alerts.wording import duration, kind_word
from leases.config.sections import AlertsConfig
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, using
from leases.core.models import NodeHealth
from leases.ledger.store import Ledger
from leases.notify.message import Message, render
from leases.telemetry.nvsmi import human_reason
from leases.telemetry.procstop import check_pid, stop_command
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.words import REASONS, health_word
from tests.support.cli import Cli
from tests.support.english import stray_english

NAMES = ["m1", "d1", "f1", "u1", "a1"]
# Words that come from data, not from zuka: an SSH error's own text kept in a gap's detail.
DETAILS = ["Connection refused", "Permission denied (publickey)"]
DETAIL_WORDS = [*DETAILS, "Connection", "refused", "Permission", "denied", "publickey"]
# Values typed after an option in a command the advice gives (`--state offboarding`).
TYPED = ["refunded", "offboarding"]


def _day(offset: int) -> str:
    return (datetime.now(ZoneInfo("Asia/Shanghai")).date() + timedelta(days=offset)).isoformat()


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> datetime:
    """Every ledger the CLI opens reads one fixed "now" (so two runs store the same)."""
    now = datetime.now(UTC).replace(microsecond=0)
    opened = Ledger.open.__func__  # type: ignore[attr-defined]

    def open_fixed(cls: type[Ledger], *args: object, **kwargs: object) -> Ledger:
        ledger = opened(cls, *args, **kwargs)
        ledger.clock = lambda: now
        return ledger

    monkeypatch.setattr(Ledger, "open", classmethod(open_fixed))
    return now


def _fleet(cli: Cli, ledger_path: Path, now: datetime) -> None:
    """m1 ends in 2 days (not offboarding), d1's deposit is unrefunded 40 days after its
    end, f1's monthly lease ended 5 days ago and bills by the hour; u1 unreachable for 3
    hours, a1 refusing zuka's login for 2 hours."""
    for name in NAMES:
        assert cli("node", "add", name, "--ssh", "ssh root@10.0.0.2", "--gpus", "8").code == 0
    leases = {
        "m1": ["--start", _day(-28), "--end", _day(2)],
        "d1": ["--start", _day(-70), "--end", _day(-40), "--deposit", "5000"],
        "f1": ["--start", _day(-35), "--end", _day(-5), "--on-expiry", "hourly",
               "--hourly-price", "50"],
    }  # fmt: skip
    for name, extra in leases.items():
        made = cli("lease", "add", name, "--billing", "monthly", "--price", "30000",
                   "--cards", "8", *extra)  # fmt: skip
        assert made.code == 0, made.err
    with Ledger.open(ledger_path) as ledger:
        store = HistoryStore(ledger)
        store.open_gap("u1", now - timedelta(hours=3), NodeHealth.UNREACHABLE, DETAILS[0])
        store.open_gap("a1", now - timedelta(hours=2), NodeHealth.AUTH_FAILED, DETAILS[1])


def test_zuka_alerts_in_chinese_has_no_stray_english(
    cli: Cli, ledger_path: Path, fixed_clock: datetime
) -> None:
    _fleet(cli, ledger_path, fixed_clock)
    shown = cli("alerts", "--wide", "--lang", "zh_CN")
    assert shown.code == 0, shown.err
    text = shown.out
    kinds = {a["kind"] for a in json.loads(cli("alerts", "--json").out)}
    assert {"lease_ending", "deposit_not_refunded", "hourly_after_end", "unreachable",
            "login_failed"} <= kinds, kinds  # fmt: skip
    # Times are named by their zone ("CST"); that header is the CLI part's (tui.words).
    body = "\n".join(text.splitlines()[1:])
    assert stray_english(body, data=[*NAMES, *DETAIL_WORDS, "CST"], extra=TYPED) == [], body
    for word in ("租约", "押金", "无法连接", "拒绝 zuka 登录", "按量", "退租", "级别", "处理"):
        assert word in body, (word, body)
    # Narrow: the message and action move under their row, named by the Chinese headers.
    narrow = cli("alerts", "--lang", "zh_CN").out
    assert "消息：" in narrow or "消息:" in narrow or "消息" in narrow
    assert (
        stray_english(
            "\n".join(narrow.splitlines()[1:]), data=[*NAMES, *DETAIL_WORDS, "CST"], extra=TYPED
        )
        == []
    )


def test_zuka_alerts_json_is_the_same_bytes_in_both_languages(
    cli: Cli, ledger_path: Path, fixed_clock: datetime
) -> None:
    _fleet(cli, ledger_path, fixed_clock)
    zh_first = cli("alerts", "--json", "--lang", "zh_CN")  # evaluated first under Chinese
    en = cli("alerts", "--json", "--lang", "en")
    zh = cli("alerts", "--json", "--lang", "zh_CN")
    assert zh_first.code == en.code == zh.code == 0
    assert zh_first.out == en.out == zh.out
    found = json.loads(en.out)
    assert any("the monthly lease ends" in a["message"] for a in found)
    check_en = cli("alerts", "check", "--json", "--lang", "en").out
    check_zh = cli("alerts", "check", "--json", "--lang", "zh_CN").out
    assert check_en == check_zh


def test_stored_alerts_are_language_neutral_and_said_at_display(
    cli: Cli, ledger_path: Path, fixed_clock: datetime
) -> None:
    _fleet(cli, ledger_path, fixed_clock)
    with Ledger.open(ledger_path) as ledger:
        with using(ZH):  # evaluated by a Chinese process: stored all the same
            check(ledger, AlertsConfig(), lambda: fixed_clock)
        raw = [str(r[0]) for r in ledger.conn.execute("SELECT message FROM alerts")]
        assert raw and all(m.startswith(PREFIX) for m in raw)
        assert all(not any("\u4e00" <= c <= "\u9fff" for c in m) for m in raw)
        with using(EN):
            english = [a.message for a in alertstate.alerts(ledger, fixed_clock)]
        with using(ZH):
            chinese = [a.message for a in alertstate.alerts(ledger, fixed_clock)]
    assert any("lease ends" in m for m in english)
    assert any("租约" in m for m in chinese)
    # Plain text stored by an older zuka is shown as it is.
    assert decode("plain old words") == "plain old words"
    assert encode("plain old words") == "plain old words"
    assert decode(PREFIX + "{not json") == PREFIX + "{not json"


def test_a_notification_is_rendered_in_chinese(
    cli: Cli, ledger_path: Path, fixed_clock: datetime
) -> None:
    _fleet(cli, ledger_path, fixed_clock)
    with Ledger.open(ledger_path) as ledger:
        check(ledger, AlertsConfig(), lambda: fixed_clock)
        with using(ZH):
            with ledger.transaction() as conn:
                messages = AlertFeed().take(conn, fixed_clock)
            rendered = [render(m) for m in messages]
    assert len(rendered) >= 5
    for title, body in rendered:
        assert title.startswith("[zuka] ")
        assert (
            stray_english(f"{title}\n{body}", data=[*NAMES, *DETAIL_WORDS, "CST"], extra=TYPED)
            == []
        ), (
            title,
            body,
        )
    titles = "\n".join(t for t, _b in rendered)
    assert "租约将到期" in titles and "警告" in titles
    bodies = "\n".join(b for _t, b in rendered)
    assert "→ " in bodies  # the advice, under the message


def test_message_of_says_an_alert_in_the_language_in_use(
    cli: Cli, ledger_path: Path, fixed_clock: datetime
) -> None:
    _fleet(cli, ledger_path, fixed_clock)
    with Ledger.open(ledger_path) as ledger:
        check(ledger, AlertsConfig(), lambda: fixed_clock)
        with using(ZH):
            alert = alertstate.alerts(ledger, fixed_clock)[0]
            zh = message_of(alert)
        with using(EN):
            en = message_of(alertstate.alerts(ledger, fixed_clock)[0])
    assert zh.key == en.key  # one dedupe key in every language
    assert " on " in en.title and "：" in zh.title


def test_severity_and_kind_words() -> None:
    with using(ZH):
        title, _body = render(Message("t", "b", key="k"))
        assert title == "[zuka] 警告：t"
        assert kind_word("lease_ending") == "租约将到期"
        assert kind_word("something_new") == "something_new"
        assert duration(timedelta(days=3)) == "3天"
        assert duration(timedelta(hours=1)) == "1小时"
        assert duration(timedelta(minutes=20)) == "20分钟"
    with using(EN):
        assert duration(timedelta(days=3)) == "3 days"
        assert duration(timedelta(hours=1.5)) == "1.5 hours"
        assert kind_word("lease_ending") == "lease ending"


def _every_health() -> Iterator[NodeHealth]:
    yield from NodeHealth


@pytest.mark.parametrize("health", list(_every_health()))
def test_telemetry_failure_words_in_chinese(health: NodeHealth) -> None:
    with using(ZH):
        said = f"{human_reason(health)} {health_word(health)}"
    assert said.strip() and stray_english(said, extra=["libnvidia", "so", "cgroup", "utils",
                                                         "toolkit", "container", "video", "render",
                                                         "Insufficient", "Permissions",
                                                         "NVIDIA", "config", "nvidia"]) == []  # fmt: skip
    with using(EN):
        assert human_reason(health) == REASONS[health]


@pytest.mark.parametrize(
    ("value", "words"),
    [("3", "时长"), ("0m", "大于零"), ("100d", "90 天")],
)
def test_bad_snooze_durations_in_chinese(value: str, words: str) -> None:
    with using(ZH), pytest.raises(InputError) as caught:
        alertstate.parse_duration(value)
    assert words in caught.value.reason
    assert stray_english(caught.value.reason) == []


@pytest.mark.parametrize("bad", ["x", "0", "-3", str(2**63)])
def test_bad_alert_ids_in_chinese(cli: Cli, bad: str) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh root@10.0.0.2").code == 0
    done = cli("alerts", "ack", bad, "--lang", "zh_CN")
    assert done.code != 0
    # The frame ("zuka：错误：FIELD：...（输入为 VALUE）") is the CLI's; the reason is ours.
    said = re.split(r"id[:：] ?", done.err, maxsplit=1)[1]
    said = re.split(r" \(got|（输入为", said)[0]
    assert "告警" in said, done.err
    assert stray_english(said, data=[bad]) == [], done.err


# -- notification URLs: the notify tests' tables of bad input, under zh_CN ----------------

BAD_URLS = [
    "https://example.com/hook",
    "nosuchscheme://x",
    "dingtalk+ftp://h/x",
    "",
    "wecom+http://h/x?key=k&secret=s",
    "dingtalk+http://127.0.0.1:9/robot send?access_token=x",
    "wecom+http://127.0.0.1:9/cgi-bin/webhook/send?key=k\u00e9",
    "dingtalk+file:///etc/passwd",
    "feishu+ftp://h/x",
    "dingtalk+http://169.254.169.254/latest/meta-data?access_token=x",
    "json://169.254.169.254/latest",
    "json://metadata.google.internal/computeMetadata/v1",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_bad_notification_urls_are_refused_in_chinese(url: str) -> None:
    from leases.notify.url import parse_target

    with using(ZH), pytest.raises(InputError) as caught:
        parse_target(url)
    reason = caught.value.reason
    assert any("\u4e00" <= c <= "\u9fff" for c in reason), reason
    assert stray_english(reason, data=["metadata.google.internal"]) == [], reason


def test_notify_test_without_urls_in_chinese(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "zuka.toml"
    config.write_text("")
    said = cli("notify", "test", "--config", str(config), "--lang", "zh_CN")
    assert said.code != 0
    assert "未配置通知 URL" in said.err, said.err


# -- telemetry: the process-stop table of bad values, under zh_CN ---------------------------

_BOOT = "096f545b-8e67-4809-af91-f2a8e5a8b94f"


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: check_pid(1), "进程号"),
        (lambda: check_pid(-4242), "进程号"),
        (lambda: stop_command(4242, "x:1", "python", "TERM"), "进程启动标识"),
        (lambda: stop_command(4242, f"{_BOOT}:1", "python\nrm -rf /", "TERM"), "命令行"),
        (lambda: stop_command(4242, f"{_BOOT}:1", "python", "HUP"), "以下之一"),
    ],
)
def test_process_stop_refusals_in_chinese(call: Callable[[], object], words: str) -> None:
    with using(ZH), pytest.raises(InputError) as caught:
        call()
    assert words in caught.value.reason
    assert stray_english(caught.value.reason, extra=["TERM", "KILL", "INT"]) == []


def test_the_demo_fleet_alerts_in_chinese(ledger_path: Path, cli: Cli) -> None:
    """The demo fleet: an underused monthly lease (with its renewal advice) and leases
    ending, said in Chinese; its node names and providers are data."""
    from tests.alerts.test_alerts import _demo

    _demo(ledger_path, datetime.now(UTC))
    shown = cli("alerts", "--wide", "--lang", "zh_CN")
    assert shown.code == 0, shown.err
    listed = json.loads(cli("node", "list", "--json").out)
    data = [n["name"] for n in listed] + [n["provider"] for n in listed if n.get("provider")]
    body = "\n".join(shown.out.splitlines()[1:])
    assert "利用不足" in body and "续费时：" in body and "闲置" in body, body
    assert stray_english(body, data=[*data, "CST"], extra=TYPED) == [], body


def test_a_row_edited_outside_zuka_is_said_in_chinese(cli: Cli, ledger_path: Path) -> None:
    """A lease row spoilt in SQLite: an alert that it changed behind zuka's back, and the
    rules that cannot run on it. The field and the value are data; "is not a number" is
    the ledger's own reason (another part's message, said through the catalogue once it
    is marked there)."""
    import sqlite3

    assert cli("node", "add", "b", "--ssh", "ssh root@10.0.0.2", "--gpus", "8").code == 0
    made = cli("lease", "add", "b", "--billing", "monthly", "--price", "30000", "--cards", "8",
               "--start", _day(-10), "--end", _day(20))  # fmt: skip
    assert made.code == 0, made.err
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE leases SET unit_price = 'lots'")
    shown = cli("alerts", "--wide", "--lang", "zh_CN")
    assert shown.code == 0, shown.err
    body = "\n".join(shown.out.splitlines()[1:])
    assert "在 zuka 之外被修改" in body and "无法评估" in body and "所有规则" in body, body
    theirs = ["unit_price", "is not a number", "(got 'lots')"]
    assert stray_english(body, data=[*theirs, "CST", "b"]) == [], body
    with using(EN):
        english = cli("alerts", "--json").out
    assert "was edited outside zuka and does not read: unit_price: is not a number" in english


def test_a_low_balance_is_said_in_chinese(z: Cli, ledger_path: Path) -> None:
    """A provider's prepaid balance running out (tests/alerts/test_balance_low.py's case),
    read back in Chinese and in English from the same stored row."""
    from tests.alerts.test_balance_low import SH, _open_alerts, _platform

    _platform(z, "1000")
    at = datetime(2026, 8, 2, 10, tzinfo=SH)
    [alert] = _open_alerts(ledger_path, at)
    assert "prepaid balance of P has CNY 619.84 left" in alert.message
    with Ledger.open(ledger_path, clock=lambda: at) as ledger, using(ZH):
        [said] = [a for a in alertstate.alerts(ledger, at) if a.kind == "balance_low"]
    assert "预付余额" in said.message and "之后将停止：n" in said.message, said.message
    assert "充值" in said.action
    words = f"{said.message}\n{said.action}"
    assert stray_english(words, data=["Asia/Shanghai", "P", "n"], extra=["X", "AMOUNT"]) == []
