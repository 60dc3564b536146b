"""The last English and odd Chinese of reports, alerts, cost and offboarding (issue 25,
fixes part D): the deposit table's total in 元, the month said once, the provider share
of billed card-hours; alert spans in hours and minutes, disk labels in Chinese; the
part-month note's price as money, a number never wrapped from its unit, the period end
never after the lease's end; offboarding's unknown key, garbled sentences and stored
facts; the log's money, the interconnect's and robots' display words; --lang quoted once."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from leases.alerts import said
from leases.core import spoken
from leases.core.host import Mount, MountKind
from leases.core.i18n import EN, ZH, LanguageError, checked_lang, using
from leases.core.retold import shown
from leases.ledger.books import describe
from leases.offboard.words import fact_word
from tests.i18n.test_zh_money import REPORT_DATA, _run
from tests.money.test_report import fleet  # noqa: F401  (the simulated fleet's month)
from tests.support.cli import Cli
from tests.support.english import stray_english
from tui.cli.output import wrap

# -- 1. the report ------------------------------------------------------------------------


def test_report_totals_month_and_share_in_chinese(fleet: tuple[Path, Path]) -> None:  # noqa: F811
    path, config = fleet
    args = ("report", "--month", "2025-03", "--format", "md")
    zh = _run(path, config, *args, "--lang", "zh_CN")
    en = _run(path, config, *args, "--lang", "en")
    # The cells say ¥: the total row says 合计 (review 27 F), never the code.
    assert "**合计 CNY**" not in zh and "| **合计** |" in zh
    assert "2025-03 月" not in zh and "2025-03，Asia/Shanghai 时区" in zh
    assert "## 各供应商卡数占比" not in zh and "## 各供应商计费卡时占比" in zh
    assert stray_english(zh, data=REPORT_DATA) == []
    assert "| **Total** |" in en and "month 2025-03 in the Asia/Shanghai time zone" in en


def test_a_currency_named_alone() -> None:
    from leases.money.amounts import unit

    with using(ZH):
        assert unit("CNY") == "元" and unit("USD") == "USD"
    with using(EN):
        assert unit("CNY") == "CNY"


# -- 2. alerts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "zh", "en"),
    [
        (5760, "1小时36分钟", "1.6 hours"),
        (3600, "1小时", "1 hour"),
        (1200, "20分钟", "20 minutes"),
        (20, "0分钟", "0 minutes"),
        (36 * 3600, "1天12小时", "36 hours"),
        (62.6 * 86400, "62天", "62 days"),
    ],
)
def test_alert_spans_in_hours_and_minutes(seconds: float, zh: str, en: str) -> None:
    form = said.call("duration", seconds)
    with using(ZH):
        assert form.again() == zh and "." not in said.decode(said.encode(form))
    with using(EN):
        assert form.again() == en


def test_balance_days_in_chinese() -> None:
    form = said.say(
        "has {money} left, burning {per_day}/day: it runs out in {days} days, at {at} ({tz})",
        money="1", per_day="2", days=said.call("days", "1.37"), at="x", tz="Asia/Shanghai",
    )  # fmt: skip
    with using(ZH):
        assert "1天8小时后用完" in form.again() and "1.37" not in form.again()
    with using(EN):
        assert "runs out in 1.37 days" in form.again()


def test_disk_label_said_in_the_language_in_use() -> None:
    from leases.alerts.hostrules import _mount

    m = Mount("/root/autodl-tmp", "overlay", 100, 95, 5, "AutoDL data disk", MountKind.DATA)
    with using(EN):
        form = _mount(m)
        assert form == "AutoDL data disk /root/autodl-tmp" == m.name
    stored = said.encode(form)
    with using(ZH):
        again = said.decode(stored)
        assert again.endswith(" /root/autodl-tmp") and "disk" not in again
        assert stray_english(again, data=["/root/autodl-tmp", "AutoDL"]) == []


# -- 3. cost ------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", range(16, 80))
def test_a_number_is_never_wrapped_from_its_unit(columns: int) -> None:
    text = ("结论：它的租期 30.06 天，不是整月，且未记录不足一月如何计费（1 × 50,000 元）；"
            "到期（还有 56分钟），已付 1.5小时")  # fmt: skip
    lines = wrap(text, columns)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    for before, after in itertools.pairwise(lines):
        assert not (before[-1:].isdigit() and after[:1] in "天元分小")
        assert not after.startswith(("钟", "时", "天", "元"))


def test_english_wrapping_is_unchanged() -> None:
    assert wrap("hello world 30 days and more", 12) == ["hello world", "30 days and", "more"]


def _short_monthly(cli: Cli) -> tuple[str, str]:
    assert cli("node", "add", "n1", "--local", "--gpus", "1", "--gpu-model", "A10").code == 0
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(days=1, minutes=33)
    end = start + timedelta(days=20, hours=1)
    r = cli("lease", "add", "n1", "--billing", "monthly", "--price", "50000",
            "--start", start.isoformat(), "--end", end.isoformat())  # fmt: skip
    assert r.code == 0, r.err
    return start.isoformat(), end.isoformat()


def test_cost_in_chinese_says_money_once_and_no_period_past_the_end(cli: Cli) -> None:
    _short_monthly(cli)
    zh = cli("cost", "--lang", "zh_CN").out.replace("\n", " ")
    assert "（1 × 50,000 元）" in zh and " x " not in zh
    assert "：至 " not in zh and "至本期结束：¥50,000.00（" in zh
    en = cli("cost", "--lang", "en").out
    assert "(1 x 50000)" in en
    doc = json.loads(cli("cost", "--json").out)
    (row,) = doc["leases"]
    # The period shown never runs past the lease's end (a started month is charged whole,
    # but the lease ends first): in every language, JSON too.
    assert datetime.fromisoformat(row["period_end"]) == datetime.fromisoformat(row["lease_end"])
    assert row["by_period_end"] == row["by_lease_end"] == "50000.00"
    show = cli("node", "show", "n1", "--lang", "en").out
    line = next(x for x in show.splitlines() if x.startswith("cost:"))
    period_end = line.split(" by ")[2].split(" (period end)")[0]
    lease_end = line.rsplit(" by ", 1)[1]
    assert period_end == lease_end


def test_plan_without_a_price_has_no_stray_space(cli: Cli) -> None:
    assert cli("node", "add", "n1", "--local", "--gpus", "1", "--gpu-model", "A10").code == 0
    r = cli("plan", "hybrid", "--gpu-model", "A10", "--lang", "zh_CN")
    text = r.out + r.err
    assert "） 的" not in text and "型号 A10（CNY）的" in text


# -- 4. offboarding -----------------------------------------------------------------------


def test_offboarding_sentences_read_in_chinese() -> None:
    with using(ZH):
        facts = shown(
            "findmnt -T /hy-nas; lsblk -s (file system, mount options, disk); outlives the"
            " instance: hy-nas is shared storage that outlives the instance"
        )
        assert stray_english(facts, data=["findmnt", "lsblk", "/hy-nas", "hy-nas"]) == []
        assert "实例释放后仍保留" in facts
        login = shown("a fresh login offering only unknown: must be refused")
        assert "unknown" not in login and "实验室密钥" in login
        revoke = shown(
            "remove the lines holding the lab's key: none recorded (the step says so when it"
            " runs) from every keys file sshd reads (~/.ssh/authorized_keys, authorized_keys2,"
            " sshd's AuthorizedKeysFile), each rewritten by a file beside it and mv, links"
            " refused; first removes ~/.zuka-offboard (zuka's run files)"
        )
        assert "删除含该密钥的行：实验室密钥（未记录，此步骤运行时会说明）；" in revoke
        assert fact_word("endpoint") == "访问地址"


def test_stored_preflight_output_said_as_facts() -> None:
    from leases.offboard.report import _output_line

    e = {"step": "preflight:lease", "facts": {"billing": "monthly 50000 CNY", "lease_id": "3"}}
    stored = "billing: monthly 50000 CNY"
    with using(ZH):
        assert _output_line(e, stored) == "计费: 包月 ¥50,000.00"
        assert _output_line(e, "other: monthly") == "other: monthly"
        assert _output_line({**e, "step": "gpu-processes"}, stored) == stored
    with using(EN):
        assert _output_line(e, stored) == stored


# -- 5. words -----------------------------------------------------------------------------


def test_the_log_says_money() -> None:
    invoice = {"number": "INV-1", "amount": "52000", "currency": "CNY"}
    topup = {"kind": "topup", "amount": "1000.5", "currency": "CNY"}
    reading = {"kind": "reading", "amount": "-3", "currency": "USD"}
    refund = {"amount": "36000", "refunded_on": "2026-12-01", "currency": "CNY"}
    with using(ZH):
        assert describe("invoice", invoice) == "发票 INV-1 52,000.00 元"
        assert describe("balance", topup) == "充值 1,000.50 元"
        assert describe("balance", reading) == "余额读数 USD -3.00"
        assert describe("deposit_refund", refund) == "押金退还 36,000.00 元，2026-12-01"
        assert describe("invoice", {**invoice, "amount": "lots"}) == "发票 INV-1 lots CNY"
    with using(EN):
        assert describe("invoice", invoice) == "invoice INV-1 52000 CNY"
        assert describe("balance", topup) == "top-up 1000.5 CNY"
        assert describe("balance", reading) == "balance read -3 USD"
        assert describe("deposit_refund", refund) == "deposit refund 36000 on 2026-12-01"


def test_nvlinks_error_says_the_interconnect_in_chinese(cli: Cli) -> None:
    r = cli("node", "add", "n1", "--local", "--interconnect", "pcie", "--nvlinks", "4",
            "--lang", "zh_CN")  # fmt: skip
    assert r.code != 0
    assert "pcie" not in r.err and "PCIe" in r.err


def test_robot_kinds_in_chinese() -> None:
    from leases.notify.url import TargetKind, kind_word

    with using(ZH):
        assert [kind_word(k) for k in TargetKind][:3] == ["钉钉", "飞书", "企业微信"]
    with using(EN):
        assert kind_word(TargetKind.DINGTALK) == "dingtalk"


# -- 6. --lang ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "said_as"),
    [("zh\x1b[31m", "'zh\\x1b[31m'"), ("fr", "'fr'"), ("x" * 50, repr("x" * 40))],
)
def test_an_unknown_language_is_quoted_once(given: str, said_as: str) -> None:
    with pytest.raises(LanguageError) as caught:
        checked_lang(given, "--lang")
    assert f"speak {said_as};" in str(caught.value)
    assert '"' not in str(caught.value)


def test_spoken_about_is_whole_days_from_two() -> None:
    with using(ZH):
        assert spoken.about(2 * 86400 + 5000) == "2天"
        assert spoken.about(-5760) == "1小时36分钟"
        # From one day to two, in whole hours, never more than there is.
        assert spoken.about(86400 + 3540) == "1天"
        assert spoken.about(86400 + 3 * 3600 + 3540) == "1天3小时"
    assert spoken.about(86400 + 5 * 3600 + 1700) == "1 d 5 h"
    assert spoken.about(23 * 3600 + 59 * 60) == "23 h 59 min"
    assert Decimal("1.37") * 86400 == Decimal("118368.00")
