"""The new-user review's findings on the provider's bill: a line that starts before its
lease still matches it (by overlap), a [bills.X] mapping's date end is inclusive, `bill
list` in the billing zone with its months and payable, the import's summary as bill check
counts the bill, the tolerance as an amount per row, no empty table, and a partial header
refused naming every missing column. Every figure worked by hand beside it."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.support.cli import Cli
from tests.support.cli import ok as _ok

ALIYUN = Path(__file__).parent / "data" / "aliyun_sample.csv"


def _train(cli: Cli, start: str, end: str) -> None:
    """Provider Ali; node train (i-bp1gn7ia10train01) on an hourly lease of ¥11.64."""
    _ok(cli, "provider", "add", "Ali", "--kind", "cloud")
    _ok(cli, "node", "add", "train", "--ssh", "root@10.0.0.1", "--gpus", "1", "--provider",
        "Ali", "--instance-id", "i-bp1gn7ia10train01")  # fmt: skip
    _ok(cli, "lease", "add", "train", "--billing", "hourly", "--price", "11.64",
        "--start", start, "--end", end)  # fmt: skip


def _daily_line(tmp_path: Path) -> Path:
    """The sample's header and its first row only: train's daily line 2024-05-01 00:00 ->
    05-02 00:00, 应付金额 made 279.36 (no discount)."""
    header, row = ALIYUN.read_text(encoding="utf-8").splitlines()[:2]
    row = row.replace("0,279.36,27.94,0,251.42,251.42,", "0,279.36,0,0,279.36,279.36,")
    path = tmp_path / "daily.csv"
    path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    return path


def test_a_daily_line_from_midnight_matches_a_lease_started_that_morning(
    cli: Cli, tmp_path: Path
) -> None:
    # The lease runs 05-01 10:00 -> 05-02 10:00: 24 h x 11.64 = 279.36, all in May. The
    # bill's line 05-01 00:00 -> 05-02 00:00 overlaps it 14 h: it is that lease's.
    _train(cli, "2024-05-01T10:00", "2024-05-02T10:00")
    _ok(cli, "bill", "import", str(_daily_line(tmp_path)), "--provider", "Ali")
    r = cli("bill", "check", "--month", "2024-05", "--json")
    assert r.code == 0, r.out
    doc = json.loads(r.out)
    assert doc["unmatched"] == []
    [row] = doc["leases"]
    assert (row["zuka"], row["bill"], row["state"]) == ("279.36", "279.36", "agrees")


def test_a_line_over_two_leases_goes_to_the_one_sharing_most_of_it(
    cli: Cli, tmp_path: Path
) -> None:
    # Lease A 04-30 12:00 -> 05-01 06:00, lease B 05-01 10:00 -> 05-02 10:00 (a gap: two
    # rows). The line 05-01 00:00 -> 05-02 00:00 shares 6 h with A and 14 h with B: B's.
    _train(cli, "2024-04-30T12:00", "2024-05-01T06:00")
    _ok(cli, "lease", "add", "train", "--billing", "hourly", "--price", "11.64",
        "--start", "2024-05-01T10:00", "--end", "2024-05-02T10:00")  # fmt: skip
    _ok(cli, "bill", "import", str(_daily_line(tmp_path)), "--provider", "Ali")
    doc = json.loads(cli("bill", "check", "--month", "2024-05", "--json").out)
    rows = {r["start"][:16]: r for r in doc["leases"]}
    # B: 24 h x 11.64 = 279.36 on both sides.
    assert (rows["2024-05-01T10:00"]["bill"], rows["2024-05-01T10:00"]["state"]) == (
        "279.36",
        "agrees",
    )
    # A: May's 6 h (00:00 -> 06:00) x 11.64 = 69.84, and no line of its own.
    assert rows["2024-04-30T12:00"]["zuka"] == "69.84"
    assert rows["2024-04-30T12:00"]["state"] == "not on the bill"


def test_a_daily_line_before_every_lease_is_unmatched(cli: Cli, tmp_path: Path) -> None:
    # The lease starts 05-02 00:00, when the line (05-01 00:00 -> 05-02 00:00) ends: the
    # end is exclusive, they share nothing.
    _train(cli, "2024-05-02T00:00", "2024-05-03T00:00")
    _ok(cli, "bill", "import", str(_daily_line(tmp_path)), "--provider", "Ali")
    doc = json.loads(cli("bill", "check", "--month", "2024-05", "--json").out)
    [u] = doc["unmatched"]
    assert u["why"] == "node train has no lease then"
    assert doc["leases"][0]["state"] == "not on the bill"


def _colo(cli: Cli, tmp_path: Path, mapping: str, rows: str) -> Path:
    """Provider Colo; node c1 (asset R1) on an hourly lease of ¥10 from 2024-05-02 10:00
    to 05-03 10:00: 24 h x 10 = 240.00. The bill in the mapping given."""
    _ok(cli, "provider", "add", "Colo", "--kind", "colo")
    _ok(cli, "node", "add", "c1", "--ssh", "root@10.0.0.9", "--gpus", "8", "--provider",
        "Colo", "--instance-id", "R1")  # fmt: skip
    _ok(cli, "lease", "add", "c1", "--billing", "hourly", "--price", "10",
        "--start", "2024-05-02T10:00", "--end", "2024-05-03T10:00")  # fmt: skip
    config = tmp_path / "config.toml"
    config.write_text(f'[bills.colo]\nresource_id = "Asset"\namount = "Charge"\n{mapping}')
    bill = tmp_path / "colo.csv"
    bill.write_text(rows)
    r = cli("bill", "import", str(bill), "--provider", "Colo", "--format", "colo",
            "--config", str(config))  # fmt: skip
    assert r.code == 0, r.err
    return config


def _check(cli: Cli, config: Path) -> dict[str, object]:
    r = cli("bill", "check", "--month", "2024-05", "--json", "--config", str(config))
    assert r.code in (0, 1), r.err
    doc: dict[str, object] = json.loads(r.out)
    return doc


@pytest.mark.parametrize(
    ("mapping", "rows"),
    [
        # The month's line (05-01 -> 06-01) holds the lease from 05-02 10:00.
        ('period = "Month"\n', "Month,Asset,Charge\n2024-05,R1,240.00\n"),
        # A date end is inclusive: From 05-02 To 05-03 is 05-02 00:00 -> 05-04 00:00.
        ('period_start = "From"\nperiod_end = "To"\n',
         "From,To,Asset,Charge\n2024-05-02,2024-05-03,R1,240.00\n"),
        # From 05-02 To 05-02: the whole day 05-02, which holds the lease's first 14 h.
        ('period_start = "From"\nperiod_end = "To"\n',
         "From,To,Asset,Charge\n2024-05-02,2024-05-02,R1,240.00\n"),
        # A date and no end: that day.
        ('period_start = "From"\n', "From,Asset,Charge\n2024-05-02,R1,240.00\n"),
    ],
)  # fmt: skip
def test_a_mapped_line_starting_before_the_lease_matches_it(
    cli: Cli, tmp_path: Path, mapping: str, rows: str
) -> None:
    config = _colo(cli, tmp_path, mapping, rows)
    doc = _check(cli, config)
    assert doc["unmatched"] == [], doc
    [row] = doc["leases"]  # type: ignore[misc]
    # zuka 240.00 (24 h x 10), the bill 240.00
    assert (row["zuka"], row["bill"], row["state"]) == ("240.00", "240.00", "agrees")


@pytest.mark.parametrize(
    "rows",
    [
        # A moment end is exclusive: 05-01 10:00 -> 05-02 10:00 ends as the lease starts.
        "From,To,Asset,Charge\n2024-05-01 10:00,2024-05-02 10:00,R1,240.00\n",
        # A date end inclusive: 05-01 is 05-01 00:00 -> 05-02 00:00, before the lease.
        "From,To,Asset,Charge\n2024-05-01,2024-05-01,R1,240.00\n",
    ],
)
def test_a_mapped_line_before_the_lease_is_unmatched(cli: Cli, tmp_path: Path, rows: str) -> None:
    config = _colo(cli, tmp_path, 'period_start = "From"\nperiod_end = "To"\n', rows)
    doc = _check(cli, config)
    [u] = doc["unmatched"]  # type: ignore[misc]
    assert u["why"] == "node c1 has no lease then"


def test_a_mapped_date_end_before_its_start_is_refused(
    cli: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    _ok(cli, "provider", "add", "Colo", "--kind", "colo")
    config = tmp_path / "config.toml"
    config.write_text(
        '[bills.colo]\nresource_id = "Asset"\namount = "Charge"\nperiod_start = "From"\n'
        'period_end = "To"\n'
    )
    bill = tmp_path / "colo.csv"
    bill.write_text("From,To,Asset,Charge\n2024-05-03,2024-05-02,R1,240.00\n")
    before = ledger_path.read_bytes()
    r = cli("bill", "import", str(bill), "--provider", "Colo", "--format", "colo",
            "--config", str(config))  # fmt: skip
    assert r.code == 2 and "line 2" in r.err and "before it starts" in r.err
    assert ledger_path.read_bytes() == before


def test_import_summary_and_bill_list_count_as_bill_check(cli: Cli) -> None:
    _train(cli, "2024-05-01", "2024-05-02")
    r = cli("bill", "import", str(ALIYUN), "--provider", "Ali")
    assert r.code == 0, r.err
    # 5 rows; 2 of them carry a voucher (1000.00 and 1.59): 7 lines. Payable (应付金额,
    # before vouchers): 251.42 + 4930.00 + 24.00 + 1.59 - 10.48 = 5196.53; the vouchers
    # -1000.00 - 1.59 = -1001.59.
    assert "5 rows read, 7 lines (a voucher is a line of its own)" in r.out
    assert "payable CNY 5,196.53" in r.out and "credits and vouchers CNY -1,001.59" in r.out
    listed = json.loads(cli("bill", "list", "--json").out)[0]
    assert listed["months"] == ["2024-05"]
    assert listed["payable"] == {"CNY": "5196.53"} and listed["credits"] == {"CNY": "-1001.59"}
    # Imported now, shown in the billing zone (Asia/Shanghai, by default), not in UTC.
    at = datetime.fromisoformat(listed["imported_at"]).astimezone(ZoneInfo("Asia/Shanghai"))
    text = cli("bill", "list").out
    assert f"{at:%Y-%m-%d %H:%M}" in text and "IMPORTED (Asia/Shanghai)" in text
    assert "2024-05" in text and "CNY 5,196.53" in text


def test_bill_check_gives_the_tolerance_per_row(cli: Cli) -> None:
    _train(cli, "2024-05-01", "2024-05-02")
    _ok(cli, "bill", "import", str(ALIYUN), "--provider", "Ali")
    doc = json.loads(cli("bill", "check", "--month", "2024-05", "--json").out)
    [row] = doc["leases"]
    # zuka 24 h x 11.64 = 279.36; 1 % of it is 2.7936, over the 1.00 floor: 2.79 allowed.
    assert row["zuka"] == "279.36" and row["allowed"] == "2.79"
    text = cli("bill", "check", "--month", "2024-05").out
    assert "TOLERANCE" in text and "±CNY 2.79" in text
    doc = json.loads(cli("bill", "check", "--month", "2024-05", "--json", "--tolerance", "30").out)
    assert doc["leases"][0]["allowed"] == "30.00"


def test_bill_check_without_lease_rows_prints_no_empty_table(cli: Cli) -> None:
    # Ali's nodes have no lease: every line is unmatched, no lease row.
    _ok(cli, "provider", "add", "Ali", "--kind", "cloud")
    _ok(cli, "bill", "import", str(ALIYUN), "--provider", "Ali")
    r = cli("bill", "check", "--month", "2024-05")
    assert r.code == 1
    assert "no lease of Ali charged in 2024-05" in r.out
    assert "\n\n\n" not in r.out


def test_a_partial_aliyun_header_names_every_missing_column(
    cli: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    _ok(cli, "provider", "add", "Ali", "--kind", "cloud")
    text = ALIYUN.read_text(encoding="utf-8")
    for column in ("代金券抵扣", "账单类型"):
        text = text.replace(column, column + "x", 1)
    bill = tmp_path / "partial.csv"
    bill.write_text(text, encoding="utf-8")
    before = ledger_path.read_bytes()
    r = cli("bill", "import", str(bill), "--provider", "Ali", "--format", "aliyun")
    assert r.code == 2
    assert "lacks 2 columns: 账单类型, 代金券抵扣" in r.err
    assert ledger_path.read_bytes() == before
    assert "assets/bills/aliyun-2026-11.csv" in cli("bill", "import", "--help").out


def test_the_default_tolerance_floor_is_a_yuan() -> None:
    from leases.money.bills.reconcile import Tolerance

    # 1 % of 50.00 is 0.50, under the 1.00 floor.
    assert Tolerance().limit(Decimal("50.00")) == Decimal("1.00")


def test_a_line_in_another_currency_on_a_matched_lease_never_agrees(
    cli: Cli, tmp_path: Path
) -> None:
    """c1's 240.00 CNY is on the bill, and so is a 5,000 USD charge on the same asset: the
    row said "agrees (+USD 5000)" and bill check exited 0."""
    config = _colo(cli, tmp_path, 'period = "Month"\ncurrency = "Cur"\n',
                   "Month,Asset,Charge,Cur\n2024-05,R1,240.00,CNY\n2024-05,R1,5000,USD\n")  # fmt: skip
    r = cli("bill", "check", "--month", "2024-05", "--json", "--config", str(config))
    assert r.code == 1, r.err
    [row] = json.loads(r.out)["leases"]
    assert row["state"] == "differs" and row["difference"] == "0.00"
    assert row["other_currencies"] == ["USD 5000"]


def test_the_same_month_exported_again_by_day_is_refused(cli: Cli, tmp_path: Path) -> None:
    """R1's May in one line (240.00), then the same time again in two daily lines of 120: the
    check counted 480 where the provider charged 240."""
    config = _colo(cli, tmp_path, 'period = "Month"\n', "Month,Asset,Charge\n2024-05,R1,240.00\n")
    daily = tmp_path / "daily.csv"
    daily.write_text("From,To,Asset,Charge\n2024-05-02,2024-05-02,R1,120\n"
                     "2024-05-03,2024-05-03,R1,120\n")  # fmt: skip
    config.write_text(config.read_text() + '\n[bills.daily]\nresource_id = "Asset"\n'
                      'amount = "Charge"\nperiod_start = "From"\nperiod_end = "To"\n')  # fmt: skip
    r = cli("bill", "import", str(daily), "--provider", "Colo", "--format", "daily",
            "--config", str(config))  # fmt: skip
    assert r.code == 2 and "charges time bill 1 charges it for already" in r.err, r.err
    # June's lines of the same asset are another time: kept
    june = tmp_path / "june.csv"
    june.write_text("From,To,Asset,Charge\n2024-06-01,2024-06-01,R1,0\n")
    r = cli("bill", "import", str(june), "--provider", "Colo", "--format", "daily",
            "--config", str(config))  # fmt: skip
    assert r.code == 0, r.err


def test_bill_check_refuses_a_bill_of_its_month_changed_outside_zuka(
    cli: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    """What bill check rests on: the month's bills, checked line by line against the hash
    their import put on the chain; another month's bill is not read, nor hashed."""
    config = _colo(cli, tmp_path, 'period = "Month"\n', "Month,Asset,Charge\n2024-05,R1,240.00\n")
    june = tmp_path / "june.csv"
    june.write_text("Month,Asset,Charge\n2024-06,R1,0\n")
    assert cli("bill", "import", str(june), "--provider", "Colo", "--format", "colo",
               "--config", str(config)).code == 0  # fmt: skip
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE bill_lines SET amount = '1' WHERE bill_id = 2")
    assert _check(cli, config)["leases"][0]["state"] == "agrees"  # May's bill: as imported
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE bill_lines SET amount = '1' WHERE bill_id = 1")
    r = cli("bill", "check", "--month", "2024-05", "--config", str(config))
    assert r.code == 2 and "bill: was changed outside zuka" in r.err, r.err
    assert "zuka audit accept bill 1" in r.err


def test_an_unmatched_id_in_the_alert_s_suggested_command_is_one_quoted_word(
    cli: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    """A bill's resource id is a file's text: in the command the alert suggests it is
    quoted, never words of its own."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from leases.alerts.billfacts import bill_alerts
    from leases.ledger.store import Ledger

    _colo(cli, tmp_path, 'period = "Month"\n', "Month,Asset,Charge\n2024-05,x;touch y,5\n")
    with Ledger.open(ledger_path) as ledger:
        now = datetime(2024, 6, 10, tzinfo=ZoneInfo("Asia/Shanghai"))
        [alert] = [a for a in bill_alerts(ledger, "Asia/Shanghai", "CNY", "", now)
                   if a.kind.value == "bill_unmatched"]  # fmt: skip
    assert "--instance-id 'x;touch y'," in alert.action
