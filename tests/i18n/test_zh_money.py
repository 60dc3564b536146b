"""zuka's money in Chinese (issue 25, part D): `zuka report --format md`, `zuka cost`,
`zuka plan`, the books (bills, invoices, balances, deposits, offers) say their words in
Chinese under zh_CN, with ¥ in tables and 元 in sentences; English writes CNY; the same
figures in both; and what scripts read (`--json`, `--format json`, `--format csv`) is the
same bytes in every language."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from leases.core.i18n import EN, ZH, set_language, using
from leases.money.amounts import money, money_words, price, symbol, whole
from leases.money.words import billing_word, channel_word, deposit_word, kind_word
from tests.money.test_invoices_balances import MISTAKES
from tests.money.test_report import fleet  # noqa: F401  (the simulated fleet's month)
from tests.support.cli import Cli
from tests.support.english import stray_english
from tui.cli.main import main

# What the report's month shows that is data, not words: providers, users, the zone.
REPORT_DATA = [
    "SimCloud", "SimColo", "SimPlatform", "Asia/Shanghai", "Alice Wang", "Bob Li", "alice",
    "bob", "carol", "root", "uid", *(f"sim-00{i}" for i in range(1, 9)),
]  # fmt: skip
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def _english_after() -> Iterator[None]:
    yield
    set_language(EN)


def _run(path: Path, config: Path, *args: str) -> str:
    out = io.StringIO()
    assert main(["--ledger", str(path), "--config", str(config), *args], out=out) == 0
    return out.getvalue()


# -- amounts ------------------------------------------------------------------------------


def test_amounts_per_language() -> None:
    x = Decimal("1234.5")
    with using(EN):
        assert money(x, "CNY") == "CNY 1,234.50" == money_words(x, "CNY")
        assert money(x, "RMB") == "CNY 1,234.50"
        assert money(x, "USD") == "USD 1,234.50" == money_words(x, "USD")
        assert whole(x, "CNY") == "CNY 1,234" and price(Decimal("3.3333"), "CNY") == "CNY 3.3333"
        assert symbol("CNY") == "CNY " and money(None, "CNY") == "-"
    with using(ZH):
        assert money(x, "CNY") == "¥1,234.50"
        assert money_words(x, "CNY") == "1,234.50 元"
        assert money(x, "USD") == "USD 1,234.50" == money_words(x, "USD")  # never ¥ for JPY/USD
        assert money(x, "JPY") == "JPY 1,234.50"
        assert whole(x, "CNY") == "¥1,234" and price(Decimal("3.3333"), "CNY") == "¥3.3333"
        assert money(Decimal("-0.001"), "CNY") == "¥0.00"  # never -0.00
        assert money_words(None, "CNY") == "-"


def test_stored_values_keep_their_english_and_show_chinese_words() -> None:
    with using(EN):
        assert [billing_word(b) for b in ("monthly", "hourly", "card_hour")] == [
            "monthly", "hourly", "card_hour"
        ]  # fmt: skip
        assert channel_word("colo") == "colo" and deposit_word("pending") == "pending"
        assert kind_word("special") == "special" and billing_word("odd") == "odd"
    with using(ZH):
        assert [billing_word(b) for b in ("monthly", "hourly", "card_hour")] == [
            "包月", "按量", "按卡时"
        ]  # fmt: skip
        assert channel_word("cloud") == "公有云" and channel_word("colo") == "机房托管"
        assert deposit_word("pending") == "待退还" and deposit_word("refunded") == "已退还"
        assert kind_word("special") == "专票" and billing_word("odd") == "odd"


# -- zuka report ----------------------------------------------------------------------------


def test_report_markdown_in_chinese(fleet: tuple[Path, Path]) -> None:  # noqa: F811
    path, config = fleet
    md = _run(path, config, "report", "--month", "2025-03", "--format", "md", "--lang", "zh_CN")
    assert md.startswith("# GPU 租用报表 2025-03\n")
    for heading in ("## 租约", "## 按渠道", "## 按供应商", "## 押金（费用之外的资金）", "## 备注"):
        assert f"\n{heading}\n" in md, heading
    # Sentences say 元, table headers name the currency ¥ over bare amounts.
    assert "**合计 186,470.04 元**" in md and "**为闲置的卡支付 58,856.02 元**" in md
    assert "| 应计 ¥ |" in md and "| ¥72,000.00 |" in md
    assert "| 包月 |" in md and "| 按卡时 |" in md and "| 算力租赁平台 |" in md
    assert "72,000.00 待退还" in md and "CNY 1" not in md
    assert stray_english(md, data=REPORT_DATA) == []
    by_user = _run(path, config, "report", "--month", "2025-03", "--by", "user", "--format", "md",
                   "--lang", "zh_CN")  # fmt: skip
    assert by_user.startswith("# 按用户统计 GPU 使用 2025-03\n")
    assert stray_english(by_user, data=REPORT_DATA) == []
    by_project = _run(path, config, "report", "--month", "2025-03", "--by", "project",
                      "--format", "md", "--lang", "zh_CN")  # fmt: skip
    assert "| 未分配 |" in by_project and "| 项目 |" in by_project
    assert stray_english(by_project, data=[*REPORT_DATA, "llm", "vision"]) == []


def test_report_figures_are_the_same_in_both_languages(fleet: tuple[Path, Path]) -> None:  # noqa: F811
    """The same month's total, worked out once: CNY 186,470.04 in English, 186,470.04 元 in
    Chinese (the sum of the leases' accrued 186,279.72 and storage 190.32)."""
    path, config = fleet
    args = ("report", "--month", "2025-03", "--format", "md")
    en = _run(path, config, *args, "--lang", "en")
    zh = _run(path, config, *args, "--lang", "zh_CN")
    assert "**Total CNY 186,470.04** for 8 lease(s) (storage CNY 190.32)" in en
    assert "**合计 186,470.04 元**，共 8 个租约（存储 190.32 元）" in zh
    assert Decimal("186279.72") + Decimal("190.32") == Decimal("186470.04")
    numbers = re.compile(r"\d[\d,]*\.\d+")
    assert sorted(numbers.findall(en)) == sorted(numbers.findall(zh))  # every figure


@pytest.mark.parametrize(
    "args",
    [
        ("--json",),
        ("--format", "json"),
        ("--format", "csv"),
        ("--by", "user", "--format", "json"),
        ("--by", "project", "--format", "csv"),
    ],
)
def test_report_for_scripts_is_the_same_bytes(
    fleet: tuple[Path, Path],  # noqa: F811
    args: tuple[str, ...],
) -> None:
    path, config = fleet
    base = ("report", "--month", "2025-03", *args)
    en = _run(path, config, *base, "--lang", "en")
    assert en == _run(path, config, *base, "--lang", "zh_CN")
    assert not CJK.search(en.replace("发票", ""))


# -- zuka cost ------------------------------------------------------------------------------


def _now_lease(cli: Cli) -> None:
    """A monthly lease of 30000 started 10 days ago, ending in 10 days: one month paid."""
    r = cli("node", "add", "n1", "--ssh", "ssh lab@n1.lab.cn", "--gpus", "8")
    assert r.code == 0, r.err
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    r = cli("lease", "add", "n1", "--billing", "monthly", "--price", "30000",
            "--start", (now - timedelta(days=10)).isoformat(),
            "--end", (now + timedelta(days=10)).isoformat())  # fmt: skip
    assert r.code == 0, r.err


def test_cost_in_chinese_and_english_by_hand(cli: Cli) -> None:
    """One month of 30,000 paid at the start: to date, by the period's end and by the
    lease's end it is 30,000.00 in both languages, in their words."""
    _now_lease(cli)
    en = cli("cost", "--wide", "--lang", "en")
    zh = cli("cost", "--wide", "--lang", "zh_CN")
    assert en.code == zh.code == 0, (en.err, zh.err)
    assert "TO DATE" in en.out and "monthly" in en.out and en.out.count("CNY 30,000.00") == 3
    assert "至今" in zh.out and "包月" in zh.out and zh.out.count("¥30,000.00") == 3
    assert "记录其按量单价以便比较：zuka lease edit n1 --hourly-price P" in zh.out
    assert "最近 30 天的使用情况" in zh.out
    assert stray_english(zh.out, data=["n1"]) == []
    fitted = cli("cost", "--lang", "zh_CN").out  # 80 columns: blocks of `header: value`
    assert stray_english(fitted, data=["n1"]) == []
    empty = cli("cost", "ghost-free", "--lang", "zh_CN")
    assert empty.code == 2 or "当前没有" in empty.out


def test_cost_json_is_the_same_in_both_languages(cli: Cli) -> None:
    """`zuka cost --json` runs in English whatever the language: its words (the verdict,
    the notes) and figures are the same; only the card-hours of a window that ends now
    may move between two runs."""
    _now_lease(cli)
    moving = ("at", "window", "paid_card_hours", "unknown_card_hours", "window_cost")
    for args in (("cost", "--json"), ("cost", "n1", "--days", "7", "--json")):
        en, zh = cli(*args, "--lang", "en"), cli(*args, "--lang", "zh_CN")
        assert en.code == zh.code == 0
        assert not CJK.search(zh.out) and "CNY " not in zh.out
        docs = [json.loads(r.out) for r in (en, zh)]
        for doc in docs:
            doc.pop("at")
            for row in doc["leases"]:
                for key in moving:
                    row.pop(key, None)
        assert docs[0] == docs[1]
        assert docs[1]["leases"][0]["verdict"].startswith("record its hourly price")


def _ledger(cli: Cli) -> None:
    assert cli("provider", "add", "P", "--kind", "platform").code == 0


def test_no_lease_bills_now_in_chinese(cli: Cli) -> None:
    _ledger(cli)
    r = cli("cost", "--lang", "zh_CN")
    assert r.code == 0 and "当前没有任何节点的租约在计费" in r.out
    assert stray_english(r.out) == []


# -- zuka plan ------------------------------------------------------------------------------


def test_plan_hybrid_in_chinese(cli: Cli) -> None:
    """Too little history to plan from: said in Chinese, naming what to do."""
    _now_lease(cli)
    r = cli("plan", "hybrid", "--monthly", "3000", "--hourly", "10", "--lang", "zh_CN")
    said = r.out + r.err
    assert CJK.search(said), said
    assert "采集器" in said or "没有" in said, said
    assert stray_english(said.replace("zuka: error:", ""), data=["n1", "days", "monthly"]) == []


def test_plan_text_lines_in_chinese() -> None:
    from leases.money import plan
    from tui.cli.money import _threshold_line, _verdict

    with using(ZH):
        chart = plan.load_duration_chart([0, 1, 2, 2, 3], 2)
        assert chart[-1].strip().endswith("100% 的小时")
        assert "包月的卡在超过 50% 的小时忙碌时才划算" in _threshold_line(Decimal("0.5"))
        assert "全天按量的 1.5 倍" in _threshold_line(Decimal("1.5"))
        r = plan.buy_vs_rent(card_price=Decimal(80000), life_years=Decimal(4),
                             power_w=Decimal(450), kwh=Decimal("0.8"),
                             hosting_month=Decimal(6000), cards=8, utilisation=Decimal("0.5"),
                             renting_per_busy_hour=Decimal(20))  # fmt: skip
        said = _verdict(r, Decimal(80000 * 8), Decimal(4))
        assert said.startswith("在卡的 48 个月寿命内，租用的费用是自购的")
        assert stray_english(said) == []


# -- bad input, under zh_CN -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("report", "--month", "2025-13"), "必须为 YYYY-MM"),
        (("report", "--month", "1999-01"), "年份必须在 2000 到 2100 之间"),
        (("report", "--month", "2099-01"), "尚未开始"),
        (("cost", "--days", "0"), "必须在 1 到 366 之间"),
        (("plan", "hybrid", "--days", "400"), "必须在 1 到 366 之间"),
        (("plan", "buy", "--card-price", "100000", "--life-years", "4", "--power-w", "400",
          "--kwh", "0.8", "--hosting", "300", "--cards", "8", "--utilisation", "150"),
         "必须是 0.001 到 1 的比例"),
        (("plan", "buy", "--card-price", "100000", "--life-years", "4", "--power-w", "400",
          "--kwh", "0.8", "--hosting", "300", "--cards", "8", "--utilisation", "1.5"),
         "有歧义"),
        (("plan", "job", "--model", "", "--cards", "8", "--hours", "10"), "必填"),
        (("plan", "job", "--model", "H800", "--cards", "8", "--hours", "100", "--within", "1"),
         "短于任务时长"),
        (("invoice", "list", "--month", "2026-13"), "必须是 YYYY-MM 格式的月份"),
        (("bill", "check", "--month", "2026-05", "--tolerance", "50%"), "必须是 0 到 20 的百分比"),
        (("bill", "check", "--month", "2026-05", "--tolerance", "-1"), "不能为负"),
    ],
)  # fmt: skip
def test_money_mistakes_are_said_in_chinese(cli: Cli, args: tuple[str, ...], words: str) -> None:
    _ledger(cli)
    r = cli(*args, "--lang", "zh_CN")
    assert r.code == 2, (r.out, r.err)
    assert words in r.err, r.err
    assert stray_english(_reason(r.err)) == [], r.err


def test_an_empty_ledger_says_what_to_do_in_chinese(cli: Cli) -> None:
    _ledger(cli)
    said = {
        ("bill", "list"): "没有导入账单",
        ("provider", "balance", "P"): "没有记录余额",
    }
    for args, words in said.items():
        r = cli(*args, "--lang", "zh_CN")
        assert r.code == 0, (args, r.err)
        assert words in r.out, (args, r.out)
        assert stray_english(r.out, data=["P"]) == [], (args, r.out)


# The books' refusals of tests/money/test_invoices_balances.py's MISTAKES whose words are
# money's (the others are the ledger's books and typed fields, checked with those parts).
_OURS = (
    "issued in the future",
    "the period in the wrong order",
    "a month that is not one",
    "an invoice of the wrong provider's node",
    "a top-up in the future",
)


def _reason(err: str) -> str:
    """The refusal's reason in the CLI's Chinese frame: after `zuka：错误：FIELD：`, before
    `（输入为 ...）`."""
    m = re.search(r"^zuka：错误：[^：]+：(.*?)(?:（输入为 .*）)?$", err.strip())
    assert m is not None, err
    return m.group(1)


@pytest.mark.parametrize(
    ("what", "typed", "said"), [m for m in MISTAKES if m[0] in _OURS], ids=list(_OURS)
)
def test_book_mistakes_are_refused_in_chinese(
    z: Cli, ledger_path: Path, what: str, typed: tuple[str, ...], said: str
) -> None:
    assert z("provider", "add", "Q", "--kind", "cloud").code == 0
    lease = ("lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    assert z(*lease).code == 0
    before = ledger_path.read_bytes()
    r = z(*typed, "--lang", "zh_CN")
    assert r.code == 2, (what, r.out, r.err)
    reason = _reason(r.err)
    assert CJK.search(reason), r.err
    assert stray_english(reason, data=["Asia/Shanghai"]) == [], r.err
    assert ledger_path.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--amount", "100", "--on", "2099-01-01"), "在未来"),
        (("--amount", "100", "--on", "2026-07-10", "--lease-start", "2026-05-01"), ""),
    ],
)
def test_deposit_refund_mistakes_in_chinese(z: Cli, args: tuple[str, ...], words: str) -> None:
    added = z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
              "2026-05-01", "--end", "2026-07-01", "--deposit", "72000")  # fmt: skip
    assert added.code == 0, added.err
    r = z("lease", "refund", "n", *args, "--lang", "zh_CN")
    if r.code == 0:  # the lease named is the one with the deposit: recorded, in Chinese
        assert "已记录 n 的押金于 2026-07-10 退还 ¥100.00" in r.out.replace("100.00 元", "¥100.00")
        assert stray_english(r.out, data=["2026-07-10"]) == []
        return
    assert r.code == 2 and words in r.err, r.err
    assert stray_english(_reason(r.err)) == [], r.err


def test_bill_import_mistakes_in_chinese(z: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    nul = tmp_path / "nul.csv"
    nul.write_bytes(b"a,b\x00\n1,2\n")
    cases = [
        ((str(tmp_path / "missing.csv"), "--provider", "P"), "文件不存在"),
        ((str(empty), "--provider", "P"), "没有表头行"),
        ((str(nul), "--provider", "P"), "NUL 字节"),
        ((str(nul), "--provider", "P", "--format", "acme"), "不是 zuka 认识的账单格式"),
    ]
    for args, words in cases:
        r = z("bill", "import", *args, "--lang", "zh_CN")
        assert r.code == 2 and words in r.err, (args, r.err)
        assert (
            stray_english(_reason(r.err), data=["aliyun", "aws_cur", "acme", "[bills.NAME]"]) == []
        ), r.err


def test_plan_job_and_offers_in_chinese(cli: Cli) -> None:
    """Three offers for 8 H800 for 720 hours, worked out by hand: the hourly one at 72 a
    machine-hour costs 720 x 72 = 51,840.00, the monthly one 80,000.00 (one month), the
    card-hour one 5,760 x 15.80 = 91,008.00; the cheapest saves 80,000 - 51,840 = 28,160.00
    (35.2 % of 80,000)."""
    common = ("--gpu-model", "H800", "--gpus", "8", "--region", "cn-beijing", "--quoted",
              "2026-11-01")  # fmt: skip
    offers = [
        ("--provider", "AutoDL", "--channel", "platform", "--billing", "card_hour", "--price",
         "15.8"),
        ("--provider", "IDC", "--channel", "colo", "--billing", "monthly", "--price", "80000"),
        ("--provider", "Cloud", "--channel", "cloud", "--billing", "hourly", "--price", "72"),
    ]  # fmt: skip
    for offer in offers:
        assert cli("offer", "add", *offer, *common).code == 0
    job = ("plan", "job", "--model", "H800", "--cards", "8", "--hours", "720", "--on",
           "2026-11-15")  # fmt: skip
    en, zh = cli(*job, "--lang", "en"), cli(*job, "--lang", "zh_CN")
    assert en.code == zh.code == 0, (en.err, zh.err)
    assert "cheapest: offer 3 (Cloud hourly) CNY 51,840.00, CNY 28,160.00 (35.2 %) less than" \
        " offer 2 (IDC monthly) CNY 80,000.00" in en.out  # fmt: skip
    # A sentence says its amounts in 元 (the table's cells keep ¥), its aside in （）.
    assert "最便宜：报价 3（Cloud 按量）51,840.00 元，比 报价 2（IDC 包月）80,000.00 元 少" \
        " 28,160.00 元（35.2%）" in zh.out  # fmt: skip
    assert "¥91,008.00" in zh.out and "| 算力租赁平台" not in zh.out and "算力租赁平台" in zh.out
    data = ["AutoDL", "IDC", "Cloud", "cn-beijing", "H800"]
    assert stray_english(zh.out, data=data) == []
    listed = cli("offer", "list", "--lang", "zh_CN", "--on", "2026-11-15")
    assert "包月" in listed.out and "按卡时" in listed.out and "有效期至" in listed.out
    assert stray_english(listed.out, data=data) == []
    j_en = cli(*job, "--json", "--lang", "en")
    assert j_en.out == cli(*job, "--json", "--lang", "zh_CN").out


def test_bills_in_chinese(cli: Cli) -> None:
    from tests.money.test_bills import ALIYUN, _aliyun_fleet

    _aliyun_fleet(cli)
    # Longest first: a resource id holds a node's name.
    data = ["i-bp1gn7ia10train01", "cn-hangzhou", "Asia/Shanghai", "snapshot", "aliyun", "infer",
            "train", "Ali"]  # fmt: skip
    done = cli("bill", "import", str(ALIYUN), "--provider", "Ali", "--lang", "zh_CN")
    assert done.code == 0 and "应付 5,196.53 元，抵扣和代金券 -1,001.59 元" in done.out
    check = cli("bill", "check", "--month", "2024-05", "--lang", "zh_CN")
    assert check.code == 1 and "1 个租约不一致，2 个资源 ID 未匹配" in check.out
    assert "±¥49.30" in check.out and "节点 train 当时没有租约" in check.out
    for r in (done, check, cli("bill", "list", "--lang", "zh_CN")):
        assert stray_english(r.out, data=data) == [], r.out
    args = ("bill", "check", "--month", "2024-05", "--json")
    assert cli(*args, "--lang", "en").out == cli(*args, "--lang", "zh_CN").out


@pytest.fixture(scope="module")
def recent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The simulated fleet with the last 31 days of history (tests/money/test_plan.py's)."""
    from leases.ledger.store import Ledger
    from leases.sim.ledger import backfill, register_sim_nodes, sim_nodes_of
    from leases.telemetry.rollups import HistoryStore

    path = tmp_path_factory.mktemp("plan") / "ledger.db"
    now = datetime.now(UTC)
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 8, now)
        store = HistoryStore(ledger)
        for s in sim_nodes_of(nodes):
            backfill(store, s, now - timedelta(days=31), now, minute_span=timedelta(0),
                     coarse_step=timedelta(minutes=10))  # fmt: skip
    yield path


def _plan(path: Path, *args: str) -> str:
    out = io.StringIO()
    assert main(["--ledger", str(path), *args], out=out) == 0
    return out.getvalue()


def test_plan_hybrid_and_buy_in_chinese(recent: Path) -> None:
    hybrid = ("plan", "hybrid", "--monthly", "3000", "--hourly", "10")
    en, zh = _plan(recent, *hybrid, "--lang", "en"), _plan(recent, *hybrid, "--lang", "zh_CN")
    assert "CNY 3,000.00 a month (given), CNY 10.00 an hour (given)." in en
    assert "单卡价格：包月每月 3,000.00 元（给定），按量每小时 10.00 元（给定）。" in zh
    assert "100% 的小时" in zh and "每月按 730 小时计" in zh
    assert stray_english(zh) == [], zh
    numbers = re.compile(r"\d[\d,]*\.\d\d")
    assert sorted(numbers.findall(en)) == sorted(numbers.findall(zh))
    assert _plan(recent, *hybrid, "--json", "--lang", "en") == _plan(
        recent, *hybrid, "--json", "--lang", "zh_CN"
    )
    buy = ("plan", "buy", "--card-price", "80000", "--life-years", "4", "--power-w", "450",
           "--kwh", "0.8", "--hosting", "6000", "--currency", "CNY")  # fmt: skip
    zh = _plan(recent, *buy, "--lang", "zh_CN")
    assert re.search(r"自购：每忙碌卡时 [\d,.]+ 元", zh) and "张卡，利用率" in zh
    assert re.search(r"租用：每忙碌卡时 [\d,.]+ 元", zh)
    assert stray_english(zh) == [], zh
