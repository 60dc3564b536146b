"""Money scenarios worked out by hand (issue 17): every billing type, renewals, early ends,
the hourly fallback, a minimum commitment, deposits, storage, February, calendar and 30-day
months, time zones, currencies, per-charge rounding, and stops. Each row is typed as a lab
types it (`zuka ...`), then read back from `zuka report --format json` for one month: the
accrual (`cost`, storage apart), the cash (`charged_in_month`, storage in) and the storage
of the node's row. The hand
arithmetic is beside each row; no figure is computed by zuka's own functions. Stops are
priced through leases.money.billing directly (their commands are tested in their own module).
Issue 20 adds payment schedules, deposits and their refunds, an invoice, a prepaid
balance and a quote, each worked by hand beside its figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal as D
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from leases.ledger import records
from leases.money import billing
from leases.money.amounts import fen
from tests.support.cli import Cli

SH = ZoneInfo("Asia/Shanghai")


@dataclass(frozen=True)
class Case:
    name: str
    typed: Sequence[tuple[str, ...]]  # zuka commands, after node n (8 GPUs, provider P)
    month: str
    cost: str  # accrual in the month, to the fen
    charged: str  # cash in the month
    storage: str = "0.00"
    notes: Sequence[str] = field(default_factory=tuple)  # words a note must hold


def add(*terms: str) -> tuple[str, ...]:
    return ("lease", "add", "n", *terms)


CASES = [
    # 2026-03-01 08:00 -> 03-03 20:30 = 60.5 h x 12.50 = 756.25
    Case("hourly, pro rata", [add("--billing", "hourly", "--price", "12.50", "--start",
         "2026-03-01T08:00"), ("lease", "end", "n", "--at", "2026-03-03T20:30")],
         "2026-03", "756.25", "756.25"),
    # 20 min 34 s = 1,234 s x 0.0012 = 1.4808 -> 1.48
    Case("per second", [add("--billing", "per_second", "--price", "0.0012", "--start",
         "2026-03-10T10:00"), ("lease", "end", "n", "--at", "2026-03-10T10:20:34")],
         "2026-03", "1.48", "1.48"),
    # 8 cards x 36 h x 1.98 = 570.24
    Case("card-hour", [add("--billing", "card_hour", "--price", "1.98", "--cards", "8",
         "--start", "2026-03-01"), ("lease", "end", "n", "--at", "2026-03-02T12:00")],
         "2026-03", "570.24", "570.24"),
    # 10:00 -> 12:10, a started hour in full: 3 h x 3 cards x 2.98 = 26.82
    Case("card-hour, started hour in full", [add("--billing", "card_hour", "--price", "2.98",
         "--cards", "3", "--start", "2026-03-01T10:00", "--partial-unit", "hour"),
         ("lease", "end", "n", "--at", "2026-03-01T12:10")], "2026-03", "26.82", "26.82"),
    # 3 days x 240 = 720
    Case("daily", [add("--billing", "daily", "--price", "240", "--start", "2026-03-05",
         "--end", "2026-03-08")], "2026-03", "720.00", "720.00"),
    # 2 weeks x 1,500 = 3,000
    Case("weekly", [add("--billing", "weekly", "--price", "1500", "--start", "2026-03-02",
         "--end", "2026-03-16")], "2026-03", "3000.00", "3000.00"),
    # 2 months from 01-15, 60,000 charged on 01-15. January: 17 of the first month's 31
    # days: 30,000 x 17/31 = 16,451.61
    Case("monthly, January", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-01-15", "--end", "2026-03-15")], "2026-01", "16451.61", "60000.00"),
    # February: 14/31 of the first month + 14/28 of the second = 13,548.39 + 15,000
    Case("monthly, February", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-01-15", "--end", "2026-03-15")], "2026-02", "28548.39", "0.00"),
    # 30-day months: 01-15 -> 02-14 is one; January holds 17 of its 30 days = 17,000
    Case("30-day month", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-01-15", "--end", "2026-02-14", "--month-count", "30_days")],
         "2026-01", "17000.00", "30000.00"),
    # Charged at 00:00 on 1 February: February's, all of it
    Case("February from the 1st", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-02-01", "--end", "2026-03-01")], "2026-02", "30000.00", "30000.00"),
    # Renewed at 28,000 from 02-01: February holds the renewal alone
    Case("renewal at a new price", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-01-01", "--end", "2026-02-01"), ("lease", "renew", "n", "--until", "2026-03-01",
         "--price", "28000")], "2026-02", "28000.00", "28000.00"),
    # Ended after 10.5 days, whole days refunded: 11 of 31 days kept = 30,000 x 11/31
    Case("early end, prorated days", [add("--billing", "monthly", "--price", "30000",
         "--start", "2026-03-01", "--end", "2026-04-01", "--refund-rule", "prorated_days"),
         ("lease", "end", "n", "--at", "2026-03-11T12:00")], "2026-03", "10645.16", "10645.16"),
    # The same, the refund rule unknown: no refund assumed, and said
    Case("early end, rule unknown", [add("--billing", "monthly", "--price", "30000",
         "--start", "2026-03-01", "--end", "2026-04-01"),
         ("lease", "end", "n", "--at", "2026-03-11T12:00")], "2026-03", "30000.00",
         "30000.00", notes=["refund rule is unknown"]),
    # 2 months 60,000, charged whole on 03-01; ended 04-11: March used at the price
    # (30,000) + 10 days x 24 h x 60 = 14,400 by the hour: 44,400 kept, 60,000 - 44,400 =
    # 15,600 refunded on 04-11 (cash in April); the 44,400 spread over the time it paid
    # for, 1 + 10/30 months: March 44,400 x 1 / (4/3) = 33,300, April 11,100
    Case("early end, used then hourly", [add("--billing", "monthly", "--price", "30000",
         "--start", "2026-03-01", "--end", "2026-05-01", "--refund-rule", "used_then_hourly",
         "--hourly-price", "60"), ("lease", "end", "n", "--at", "2026-04-11")],
         "2026-03", "33300.00", "60000.00"),
    Case("early end, its refund in April", [add("--billing", "monthly", "--price", "30000",
         "--start", "2026-03-01", "--end", "2026-05-01", "--refund-rule", "used_then_hourly",
         "--hourly-price", "60"), ("lease", "end", "n", "--at", "2026-04-11")],
         "2026-04", "11100.00", "-15600.00"),
    # Past its end by the hour: 04-01 -> 04-03 = 48 h x 50 = 2,400 in April
    Case("hourly after the end", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-03-01", "--end", "2026-04-01", "--on-expiry", "hourly", "--hourly-price", "50"),
         ("lease", "end", "n", "--at", "2026-04-03")], "2026-04", "2400.00", "2400.00"),
    # Auto-renewed twice, ended mid-renewal (no refund rule): October holds half a day of
    # the second month (30,000 x 0.5/30 = 500) and the third, all of it: 30,500; cash 30,000
    Case("auto-renew, ended", [add("--billing", "monthly", "--price", "30000", "--start",
         "2026-08-01T12:00", "--end", "2026-09-01T12:00", "--auto-renew"),
         ("lease", "end", "n", "--at", "2026-10-15T12:00")], "2026-10", "30500.00", "30000.00"),
    # 40 h of a 100-hour minimum at 10: 400 run + 600 owed at the end = 1,000
    Case("minimum commitment", [add("--billing", "hourly", "--price", "10", "--start",
         "2026-03-01", "--min-commitment", "100"), ("lease", "end", "n", "--at",
         "2026-03-02T16:00")], "2026-03", "1000.00", "1000.00"),
    # A deposit is not a cost: 30,000 only
    Case("deposit", [add("--billing", "monthly", "--price", "30000", "--start", "2026-03-01",
         "--end", "2026-04-01", "--deposit", "60,000", "--deposit-paid-on", "2026-02-25")],
         "2026-03", "30000.00", "30000.00"),
    # 10 days x 24 h x 20 = 4,800; a disk at 300 a month, 03-01 -> 03-16, outlives the lease:
    # 300 x 15/31 = 145.16, in the cash too (billed as it runs): 4,945.16
    Case("storage", [add("--billing", "hourly", "--price", "20", "--start", "2026-03-01"),
         ("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--created", "2026-03-01",
          "--price", "300", "--price-per", "month"),
         ("lease", "end", "n", "--at", "2026-03-11"),
         ("resource", "edit", "n", "--kind", "disk", "--id", "d-1", "--deleted",
          "2026-03-16")], "2026-03", "4800.00", "4945.16", storage="145.16"),
    # Billed in UTC, reported in Shanghai: 20:00 UTC on 31 March is 04:00 on 1 April in
    # Shanghai, so all 8 h x 10 = 80 are April's
    Case("time zones", [add("--billing", "hourly", "--price", "10", "--tz", "UTC", "--start",
         "2026-03-31T20:00"), ("lease", "end", "n", "--at", "2026-04-01T04:00")],
         "2026-04", "80.00", "80.00"),
    # AutoDL's booking (BILLING-FACTS.md): a charge at each Beijing clock hour and at
    # shutdown, each rounded up to the fen. 0.000551 a second from 10:20 to 12:30:
    # 10:20-11:00 2,400 s = 1.3224 -> 1.33; 11:00-12:00 1.9836 -> 1.99; 12:00-12:30
    # 0.9918 -> 1.00: 4.32 (on the bill: 7,800 s x 0.000551 = 4.2978 -> 4.30)
    Case("per second, booked by the clock hour", [add("--billing", "per_second", "--price",
         "0.000551", "--start", "2026-03-10T10:20", "--rounding", "charge"),
         ("lease", "end", "n", "--at", "2026-03-10T12:30")], "2026-03", "4.32", "4.32"),
    Case("per second, on the bill", [add("--billing", "per_second", "--price", "0.000551",
         "--start", "2026-03-10T10:20"), ("lease", "end", "n", "--at", "2026-03-10T12:30")],
         "2026-03", "4.30", "4.30"),
    # Each clock hour charged, up to the fen: 3 x 1.9855 = 5.9565 -> 5.96 an hour; 2 h =
    # 11.92 and the last half hour 2.97825 -> 2.98: 14.90 (on the bill: 14.89125 -> 14.89)
    Case("rounded per charge", [add("--billing", "card_hour", "--price", "1.9855", "--cards",
         "3", "--start", "2026-03-01", "--rounding", "charge"),
         ("lease", "end", "n", "--at", "2026-03-01T02:30")], "2026-03", "14.90", "14.90"),
    Case("rounded on the bill", [add("--billing", "card_hour", "--price", "1.9855", "--cards",
         "3", "--start", "2026-03-01"), ("lease", "end", "n", "--at", "2026-03-01T02:30")],
         "2026-03", "14.89", "14.89"),
    # -- payment schedules (issue 20) --
    # 12 months at 1,000 from 03-17, paid monthly; March holds two weeks of it, 03-17 ->
    # 04-01 = 15 of the first month's 31 days: 1,000 x 15/31 = 483.87 accrued; cash: the
    # first instalment, 1,000 (upfront it would be 12 x 1,000 = 12,000)
    Case("a year at 1,000 paid monthly, two weeks in", [add("--billing", "monthly", "--price",
         "1000", "--start", "2026-03-17", "--end", "2027-03-17", "--payment-schedule",
         "monthly")], "2026-03", "483.87", "1000.00"),
    # colo at 36,000 a month for a year from 04-01, paid quarterly: 3 x 36,000 = 108,000 on
    # 04-01; accrued a month, 36,000
    Case("colo paid quarterly, the quarter's first month", [add("--billing", "contract",
         "--price", "36000", "--start", "2026-04-01", "--end", "2027-04-01",
         "--payment-schedule", "quarterly")], "2026-04", "36000.00", "108000.00"),
    # the next month: nothing charged, 36,000 accrued
    Case("colo paid quarterly, the next month", [add("--billing", "contract", "--price",
         "36000", "--start", "2026-04-01", "--end", "2027-04-01", "--payment-schedule",
         "quarterly")], "2026-05", "36000.00", "0.00"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hand_worked_month(cli: Cli, case: Case) -> None:
    assert cli("provider", "add", "P", "--kind", "platform").code == 0
    assert (
        cli("node", "add", "n", "--ssh", "root@10.0.0.9", "--gpus", "8", "--provider", "P").code
        == 0
    )
    for args in case.typed:
        r = cli(*args)
        assert r.code == 0, (args, r.err)
    r = cli("report", "--month", case.month, "--format", "json")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["leases"]
    assert (row["cost"], row["charged_in_month"], row["storage"]) == (
        case.cost,
        case.charged,
        case.storage,
    )
    for words in case.notes:
        assert any(words in n for n in row["notes"]), row["notes"]


def test_two_currencies_are_never_added(cli: Cli) -> None:
    """48 h at USD 2.50 = USD 120 beside 48 h at CNY 10 = CNY 480: two totals, no sum."""
    assert cli("provider", "add", "P", "--kind", "platform").code == 0
    for name, price, cur in (("u", "2.50", "USD"), ("c", "10", "CNY")):
        assert cli("node", "add", name, "--ssh", "root@10.0.0.9", "--provider", "P").code == 0
        assert cli("lease", "add", name, "--billing", "hourly", "--price", price, "--currency",
                   cur, "--start", "2026-03-01").code == 0  # fmt: skip
        assert cli("lease", "end", name, "--at", "2026-03-03").code == 0
    doc = json.loads(cli("report", "--month", "2026-03", "--format", "json").out)
    got = {k: v["cost"] for k, v in doc["by_currency"].items()}
    assert got == {"USD": "120.00", "CNY": "480.00"}


def _lease(**rec: str) -> records.Lease:
    return records.lease_from({"node": "n", "billing_tz": "Asia/Shanghai", **rec})


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=SH)


def test_a_stop_of_an_hourly_lease_bills_nothing_while_stopped() -> None:
    """240 h at 20 from 03-01, stopped 03-03 -> 03-08 (120 h), billing nothing stopped:
    120 h x 20 = 2,400 (in full, 4,800)."""
    le = _lease(billing_type="hourly", unit_price="20", start="2026-03-01T00:00:00",
                ended_at="2026-03-11T00:00:00", stopped_billing="none")  # fmt: skip
    stops = [(_t("2026-03-03T00:00"), _t("2026-03-08T00:00"))]
    assert billing.cost_to_date(le, _t("2026-04-01"), stops=stops) == D(2400)
    assert billing.cost_to_date(le, _t("2026-04-01")) == D(4800)


def test_a_card_hour_node_stopped_13_days_bills_its_storage_only() -> None:
    """8 cards at 2 a card-hour, 03-01 -> 03-21 (480 h), stopped 13 days (312 h) with
    storage only while stopped: 168 h x 16 = 2,688 running; its disk at 500 a month bills
    all 20 days: 500 x 20/31 = 322.58."""
    le = _lease(billing_type="card_hour", unit_price="2", cards_billed="8",
                start="2026-03-01T00:00:00", ended_at="2026-03-21T00:00:00",
                stopped_billing="storage_only")  # fmt: skip
    stops = [(_t("2026-03-05T00:00"), _t("2026-03-18T00:00"))]
    assert billing.cost_to_date(le, _t("2026-04-01"), stops=stops) == D(2688)
    disk = records.resource_from(
        {"kind": "disk", "native_id": "d-1", "price": "500", "price_per": "month",
         "deleted_at": "2026-03-21T00:00:00"}, 1, "Asia/Shanghai")  # fmt: skip
    got = billing.storage_cost(disk, le, _t("2026-04-01"), stops=stops)
    assert fen(got) == D("322.58")


# -- quotes for planned work (`zuka plan job`) and the providers' share of the cards ------

_OFFERS = [
    # offer 1: 15.8 a card-hour, at a platform in Beijing
    ("--provider", "AutoDL", "--channel", "platform", "--gpu-model", "h800", "--gpus", "8",
     "--billing", "card_hour", "--price", "15.8", "--region", "cn-beijing"),
    # offer 2: 80,000 a month an 8-card machine, 3 months at least, 160,000 deposit
    ("--provider", "IDC", "--channel", "colo", "--gpu-model", "H800 80GB", "--gpus", "8",
     "--billing", "monthly", "--price", "80,000", "--min-term", "3", "--deposit", "160000",
     "--region", "cn-beijing"),
    # offer 3: 130 an hour an 8-card machine, in Shanghai
    ("--provider", "Aliyun", "--channel", "cloud", "--gpu-model", "H800-SXM5", "--gpus", "8",
     "--billing", "hourly", "--price", "130", "--region", "cn-shanghai"),
    # offer 4: 100 an hour, but it expired on 2026-10-01
    ("--provider", "Old", "--channel", "cloud", "--gpu-model", "H800", "--gpus", "8",
     "--billing", "hourly", "--price", "100", "--region", "cn-beijing", "--quoted",
     "2026-09-01", "--valid-until", "2026-10-01"),
    # offer 5: 90 an hour, the cheapest, but its data would sit in us-west
    ("--provider", "Far", "--channel", "cloud", "--gpu-model", "H800", "--gpus", "8",
     "--billing", "hourly", "--price", "90", "--region", "us-west"),
]  # fmt: skip


def test_a_hand_worked_quote(cli: Cli, tmp_path: Path) -> None:
    """8 x H800 for 720 h (5,760 card-hours) on 2026-11-15, for project llm (Beijing and
    Shanghai only)."""
    config = tmp_path / "lab.toml"
    config.write_text('[projects]\nalice = "llm"\n[projects.llm]\nregions = ["cn-beijing",'
                      ' "cn-shanghai"]\n')  # fmt: skip
    config.chmod(0o600)
    for typed in _OFFERS:
        quoted = () if "--quoted" in typed else ("--quoted", "2026-11-01")
        assert cli("offer", "add", *typed, *quoted).code == 0
    r = cli("plan", "job", "--model", "H800", "--cards", "8", "--hours", "720", "--project",
            "llm", "--on", "2026-11-15", "--config", str(config), "--json")  # fmt: skip
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    got = [(o["option"], o["cost"], o["up_front"], o["allowed"]) for o in doc["options"]]
    assert got == [
        # 5,760 card-hours x 15.8 = 91,008.00
        ("offer 1", "91008.00", "0.00", True),
        # 1 machine x 720 h x 130 = 93,600.00
        ("offer 3", "93600.00", "0.00", True),
        # 720 h is one 30-day month, the minimum term 3 binds: 3 x 80,000 = 240,000.00;
        # up front the first month and the deposit: 80,000 + 160,000 = 240,000.00
        ("offer 2", "240000.00", "240000.00", True),
        # 720 h x 90 = 64,800.00: cheaper, but not allowed, so never the cheapest
        ("offer 5", "64800.00", "0.00", False),
    ]  # offer 4 expired: not listed
    assert doc["options"][2]["min_term_binds"] is True
    assert doc["options"][3]["note"] == "not allowed for project llm (region us-west)"
    # cheapest offer 1, by 93,600 - 91,008 = 2,592.00
    assert (doc["cheapest"], doc["saves"]) == ("offer 1", "2592.00")
    # 80,000 a month against 130 an hour for the same 8 cards: 80,000 / 130 = 615.38 h;
    # against 15.8 x 8 = 126.4 an hour: 632.91 h
    evens = {(b["monthly"], b["hourly"]): b["hours_a_month"] for b in doc["break_even"]}
    assert evens[("offer 2", "offer 3")] == "615.38"
    assert evens[("offer 2", "offer 1")] == "632.91"
    text = cli("plan", "job", "--model", "h800", "--cards", "8", "--hours", "720", "--project",
               "llm", "--on", "2026-11-15", "--config", str(config)).out  # fmt: skip
    assert (
        "cheapest: offer 1 (AutoDL card_hour) CNY 91,008.00, CNY 2,592.00 (2.8 %) less than" in text
    )
    assert "615.38 h" in text


def test_each_provider_s_share_of_the_cards(cli: Cli) -> None:
    """September 2026 (30 days): P's 8 cards all month = 8 x 720 = 5,760 card-hours; Q's 8
    cards 09-01 -> 09-16, half of it = 8 x 360 = 2,880: 5,760 / 8,640 = 66.7 % and 33.3 %;
    P over 50 %: the single-channel risk."""
    for name, kind, node, ip in (("P", "platform", "n", "9"), ("Q", "cloud", "m", "8")):
        assert cli("provider", "add", name, "--kind", kind).code == 0
        assert cli("node", "add", node, "--ssh", f"root@10.0.0.{ip}", "--gpus", "8",
                   "--provider", name).code == 0  # fmt: skip
    assert cli("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
               "2026-09-01", "--end", "2026-10-01").code == 0  # fmt: skip
    assert cli("lease", "add", "m", "--billing", "hourly", "--price", "100", "--start",
               "2026-09-01").code == 0  # fmt: skip
    assert cli("lease", "end", "m", "--at", "2026-09-16").code == 0
    doc = json.loads(cli("report", "--month", "2026-09", "--json").out)
    assert [(s["provider"], s["card_hours"], s["percent"]) for s in doc["provider_shares"]] == [
        ("P", "5760.00", "66.7"), ("Q", "2880.00", "33.3")]  # fmt: skip
    assert doc["single_channel_risk"].startswith("single-channel risk: P holds 66.7 %")
    md = cli("report", "--month", "2026-09").out
    assert "| P | 5,760.0 | 66.7 % |" in md and "| Q | 2,880.0 | 33.3 % |" in md
    assert "single-channel risk: P holds 66.7 %" in md
    csv_text = cli("report", "--month", "2026-09", "--format", "csv").out
    assert "provider_share,,,P,," in csv_text and "share 66.7 %; single-channel risk" in csv_text


# -- deposits (issue 20): paid 72,000 in May, 30,000 back in July, 42,000 in August --------


def test_a_deposit_back_in_two_parts(z: Cli) -> None:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-05-01", "--end", "2026-07-01", "--deposit", "72000", "--deposit-paid-on",
             "2026-05-20").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-15").code == 0
    assert z("lease", "refund", "n", "--amount", "42000", "--on", "2026-08-05").code == 0

    def cash(month: str) -> dict[str, str] | None:
        doc = json.loads(z("report", "--month", month, "--format", "json").out)["deposits"]
        return doc["by_currency"].get("CNY")

    # May: 72,000 out; all of it outstanding at the month's end
    assert cash("2026-05") == {"paid_in_month": "72000.00", "refunded_in_month": "0.00",
                               "outstanding": "72000.00", "forfeited": "0.00"}  # fmt: skip
    # July: 30,000 in; 72,000 - 30,000 = 42,000 outstanding
    assert cash("2026-07") == {"paid_in_month": "0.00", "refunded_in_month": "30000.00",
                               "outstanding": "42000.00", "forfeited": "0.00"}  # fmt: skip
    # August: 42,000 in; 42,000 - 42,000 = 0 outstanding
    assert cash("2026-08") == {"paid_in_month": "0.00", "refunded_in_month": "42000.00",
                               "outstanding": "0.00", "forfeited": "0.00"}  # fmt: skip
    assert cash("2026-09") is None  # back in full: gone from September's report


@pytest.mark.parametrize(
    ("typed", "field"),
    [
        # a refund dated before the deposit was paid (05-20)
        (("lease", "refund", "n", "--amount", "100", "--on", "2026-05-19"), "on"),
        # a refund over the deposit: 72,000.01 > 72,000
        (("lease", "refund", "n", "--amount", "72000.01", "--on", "2026-07-15"), "amount"),
        # a comma for the decimal point
        (("lease", "refund", "n", "--amount", "1,5", "--on", "2026-07-15"), "amount"),
        # a payment schedule on an hourly lease
        (("lease", "add", "n", "--billing", "hourly", "--price", "12", "--start", "2026-08-01",
          "--payment-schedule", "monthly"), "payment-schedule"),
    ],
)  # fmt: skip
def test_deposit_and_schedule_mistakes_change_nothing(
    z: Cli, ledger_path: Path, typed: tuple[str, ...], field: str
) -> None:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-05-01", "--end", "2026-07-01", "--deposit", "72000", "--deposit-paid-on",
             "2026-05-20").code == 0  # fmt: skip
    before = ledger_path.read_bytes()
    r = z(*typed)
    assert r.code == 2
    named = r.err.split("error: ", 1)[1].split(":")[0]  # "zuka: error: FIELD: why"
    assert named.removeprefix("--") == field, r.err
    assert ledger_path.read_bytes() == before


# -- invoices and prepaid balances (issue 20) ----------------------------------------------


def test_an_august_invoiced_but_for_its_storage(z: Cli) -> None:
    """August 2026: a month of 30,000 on n and a disk at 1,200 a month (from 08-01, still
    there); one fapiao of 30,000 at 6 %, tax included."""
    for typed in (
        ("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
         "2026-08-01", "--end", "2026-09-01"),
        ("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--price", "1200",
         "--created", "2026-08-01"),
        ("invoice", "add", "--provider", "P", "--number", "0012", "--issued", "2026-09-03",
         "--period", "2026-08", "--amount", "30000", "--vat", "6%"),
    ):  # fmt: skip
        r = z(*typed)
        assert r.code == 0, (typed, r.err)
    doc = json.loads(z("report", "--month", "2026-08", "--json").out)
    [row] = [c for c in doc["invoicing"] if c["node"] is None]
    # charged 30,000 + 1,200 (storage is charged as it runs: a whole month of it) = 31,200;
    # invoiced 30,000; uninvoiced 31,200 - 30,000 = 1,200
    assert (row["charged_in_month"], row["invoiced"], row["uninvoiced"]) == (
        "31200.00", "30000.00", "1200.00")  # fmt: skip
    inv = json.loads(z("invoice", "list", "--json").out)[0]
    # tax in 30,000 at 6 %: 30,000 x 0.06 / 1.06 = 1,698.113... -> 1,698.11; net 28,301.89
    assert (inv["tax"], inv["net"]) == ("1698.11", "28301.89")


def test_a_prepaid_balance_burnt_by_a_card_hour_machine(z: Cli) -> None:
    """A top-up of 5,000 on 08-01 09:00; n's 8 cards at 1.98 a card-hour from 10:00."""
    for typed in (
        ("provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T09:00"),
        ("lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
         "--start", "2026-08-01T10:00"),
    ):  # fmt: skip
        r = z(*typed)
        assert r.code == 0, (typed, r.err)
    doc = json.loads(z("provider", "balance", "P", "--at", "2026-08-02T10:00", "--json").out)
    # 24 h x 8 x 1.98 = 380.16 charged: 5,000 - 380.16 = 4,619.84; burn 380.16 a day;
    # 4,619.84 / 380.16 = 12.152357 days = 12 d 3 h 39 min 23.6 s: spent by 08-14 13:39:24
    assert (doc["balance"], doc["burn_per_day"], doc["days_left"]) == (
        "4619.84", "380.16", "12.15")  # fmt: skip
    assert doc["runs_out"] == "2026-08-14 13:39:24" and doc["stops_then"] == ["n"]
