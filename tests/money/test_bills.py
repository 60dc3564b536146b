"""`zuka bill import / check / list / delete` on the published formats' exact header rows
(tests/money/data: Aliyun's Chinese bill detail header, AWS CUR's 131 columns; the data
rows are invented), every yuan worked out by hand beside it; and the mistakes people make,
each refused naming what was wrong, exit 2, the ledger file unchanged byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from leases.alerts.watch import check
from leases.config.sections import AlertsConfig
from leases.ledger.store import Ledger
from tests.support.cli import Cli

DATA = Path(__file__).parent / "data"
ALIYUN = DATA / "aliyun_sample.csv"
AWS = DATA / "aws_cur_sample.csv"


def _aliyun_fleet(cli: Cli) -> None:
    assert cli("provider", "add", "AWS", "--kind", "cloud").code == 0
    """Provider Ali; node train (i-bp1gn7ia10train01) on an hourly lease of ¥11.64 for the
    day 2024-05-01 with its data disk d-bp1essddata01 at ¥24 a month (kept all May); node infer
    (i-bp1gn7iinfer02) on a monthly lease of ¥4,930 from 2024-05-03 10:12:45."""
    for args in (
        ("provider", "add", "Ali", "--kind", "cloud"),
        ("node", "add", "train", "--ssh", "root@10.0.0.1", "--gpus", "1", "--provider", "Ali",
         "--instance-id", "i-bp1gn7ia10train01"),
        ("node", "add", "infer", "--ssh", "root@10.0.0.2", "--gpus", "1", "--provider", "Ali",
         "--instance-id", "i-bp1gn7iinfer02"),
        ("lease", "add", "train", "--billing", "hourly", "--price", "11.64",
         "--start", "2024-05-01", "--end", "2024-05-02"),
        ("resource", "add", "train", "--kind", "disk", "--id", "d-bp1essddata01",
         "--price", "24", "--price-per", "month", "--created", "2024-05-01"),
        ("lease", "add", "infer", "--billing", "monthly", "--price", "4930",
         "--start", "2024-05-03T10:12:45", "--end", "2024-06-03T10:12:45"),
    ):  # fmt: skip
        r = cli(*args)
        assert r.code == 0, (args, r.err)


def test_aliyun_bill_detail_one_differs_one_unmatched(cli: Cli) -> None:
    _aliyun_fleet(cli)
    r = cli("bill", "import", str(ALIYUN), "--provider", "Ali")
    assert r.code == 0, r.err
    # 5 rows + 2 voucher lines (row 2: 1000.00, row 4: 1.59) = 7 lines; payable (before
    # vouchers) 251.42 + 4930.00 + 24.00 + 1.59 - 10.48 = 5196.53, vouchers -1001.59
    assert "7 lines" in r.out and "payable CNY 5,196.53" in r.out
    r = cli("bill", "check", "--month", "2024-05", "--json")
    assert r.code == 1, r.err  # something differs
    doc = json.loads(r.out)
    rows = {x["node"]: x for x in doc["leases"]}
    # train: zuka 24 h x 11.64 = 279.36 + the disk's whole month 24.00 -> 303.36;
    # the bill: 251.42 (应付金额 after its 27.94 discount) + 24.00 = 275.42; -27.94 is
    # beyond max(1.00, 1 % of 303.36 = 3.03).
    assert (rows["train"]["zuka"], rows["train"]["bill"]) == ("303.36", "275.42")
    assert rows["train"]["difference"] == "-27.94" and rows["train"]["state"] == "differs"
    # infer: zuka charges the month's 4930 upfront on 05-03; the bill's 应付金额 is 4930.00
    # (5800 - 870); its 1000.00 voucher is shown apart, not in the difference.
    assert Decimal(rows["infer"]["bill"]) == 4930 and rows["infer"]["state"] == "agrees"
    assert Decimal(rows["infer"]["credits_discounts"]) == -1000
    unmatched = {u["resource_id"]: u for u in doc["unmatched"]}
    # The snapshot nobody recorded (1.59, paid by a 1.59 voucher), and train's 调账 of
    # -10.48 on 05-20, after its lease ended.
    assert set(unmatched) == {"cn-hangzhou;snapshot", "i-bp1gn7ia10train01"}
    assert Decimal(unmatched["cn-hangzhou;snapshot"]["amount"]) == Decimal("1.59")
    assert "no lease then" in unmatched["i-bp1gn7ia10train01"]["why"]
    text = cli("bill", "check", "--month", "2024-05")
    assert text.code == 1
    assert "train" in text.out and "differs" in text.out and "cn-hangzhou;snapshot" in text.out
    assert "1 lease(s) differ, 2 resource id(s) unmatched" in text.out


def test_aws_cur_one_differs_one_unmatched(cli: Cli) -> None:
    for args in (
        ("provider", "add", "AWS", "--kind", "cloud"),
        ("node", "add", "p4d", "--ssh", "root@10.0.0.1", "--gpus", "8", "--provider", "AWS",
         "--instance-id", "i-0a1b2c3d4e5f60718"),
        ("node", "add", "p4dsp", "--ssh", "root@10.0.0.2", "--gpus", "8", "--provider", "AWS",
         "--instance-id", "i-0f9e8d7c6b5a40312"),
        ("lease", "add", "p4d", "--billing", "hourly", "--price", "32.7726", "--currency",
         "USD", "--start", "2024-05-01T00:00+00:00", "--end", "2024-05-02T00:00+00:00"),
        ("lease", "add", "p4dsp", "--billing", "hourly", "--price", "30", "--currency",
         "USD", "--start", "2024-05-01T00:00+00:00", "--end", "2024-05-02T00:00+00:00"),
    ):  # fmt: skip
        assert cli(*args).code == 0
    assert cli("bill", "import", str(AWS), "--provider", "AWS", "--month", "2024-05").code == 0
    r = cli("bill", "check", "--month", "2024-05", "--json")
    assert r.code == 1
    doc = json.loads(r.out)
    rows = {x["node"]: x for x in doc["leases"]}
    # p4d: 24 h x 32.7726 = 786.5424 on both sides: agrees.
    assert rows["p4d"]["state"] == "agrees" and Decimal(rows["p4d"]["difference"]) == 0
    # p4dsp: zuka 24 h x 30 = 720; the bill's covered usage 786.5424 -> +66.5424 differs;
    # its SavingsPlanNegation -786.5424 is shown apart.
    # shown to the fen, as every money figure of --json: 66.5424 -> 66.54
    assert rows["p4dsp"]["difference"] == "66.54" and rows["p4dsp"]["state"] == "differs"
    assert rows["p4dsp"]["credits_discounts"] == "-786.54"
    # The gp3 volume and the snapshot nobody recorded; 10 decimals stored to 8
    # (5.16129032), shown to the fen.
    got = {u["resource_id"]: u["amount"] for u in doc["unmatched"]}
    assert got["vol-0123456789abcdef0"] == "5.16"
    assert len(got) == 2
    # The account's credit and tax, apart.
    account = {a["kind"]: a["amount"] for a in doc["account"]}
    assert account == {"credit": "-500.00", "tax": "18.72"}


def _same_file(ledger_path: Path, before: bytes) -> None:
    assert ledger_path.read_bytes() == before


@pytest.fixture
def ali(cli: Cli, ledger_path: Path) -> bytes:
    _aliyun_fleet(cli)
    return ledger_path.read_bytes()


@pytest.mark.parametrize(
    ("make", "args", "said"),
    [
        (None, ("--provider", "Aliyun"), "provider"),  # a typo: no such provider
        (None, ("--provider", "AWS"), "they are Ali's: is --provider right?"),  # another's
        ("aws", ("--provider", "Ali", "--format", "aliyun"), "实例ID"),  # another format
        ("cut", ("--provider", "Ali"), "line 6"),  # truncated mid-row
        ("cut_bytes", ("--provider", "Ali"), "cut short"),  # inside a UTF-8 character
        ("comma", ("--provider", "Ali"), "line 2, column 应付金额"),  # a decimal comma
        ("order", ("--provider", "Ali"), "line 2"),  # ends before it starts
        # its 账期 is 2024-05
        (None, ("--provider", "Ali", "--month", "2024-06"), "column 账期: names another month"),
        (None, ("--provider", "Ali", "--format", "acme"), "format"),
        ("empty", ("--provider", "Ali"), "no bill lines"),
    ],
)
def test_mistakes_are_refused_and_change_nothing(
    cli: Cli, ledger_path: Path, ali: bytes, tmp_path: Path, make: str | None,
    args: tuple[str, ...], said: str,
) -> None:  # fmt: skip
    text = ALIYUN.read_text(encoding="utf-8")
    rows = text.splitlines()
    made = {
        "aws": AWS.read_text(),
        "cut": text[: text.rindex(",0,0,0") - 30],
        "comma": text.replace("251.42,251.42", "251,42,251.42").replace(
            "6,251", "6,251"),
        "order": text.replace("2024-05-01 00:00:00,2024-05-02 00:00:00,24,2405010000000001",
                              "2024-05-02 00:00:00,2024-05-01 00:00:00,24,2405010000000001"),
        "empty": rows[0] + "\n",
    }  # fmt: skip
    path = ALIYUN
    if make == "cut_bytes":  # 1,500 bytes end inside 云 (3 bytes in UTF-8) of row 2
        path = tmp_path / "bill.csv"
        path.write_bytes(ALIYUN.read_bytes()[:1500])
        assert path.read_bytes().decode("utf-8", "replace").endswith("\ufffd")
    elif make is not None:
        path = tmp_path / "bill.csv"
        path.write_text(made[make], encoding="utf-8")
        if make == "comma":  # one cell more: write the amount quoted, as a spreadsheet would
            path.write_text(text.replace("251.42,251.42", '"251,42",251.42'), encoding="utf-8")
    r = cli("bill", "import", str(path), *args)
    assert r.code == 2, r.out
    assert said in r.err
    _same_file(ledger_path, ali)


def test_the_same_file_twice_names_the_earlier_import(
    cli: Cli, ledger_path: Path, ali: bytes
) -> None:
    assert cli("bill", "import", str(ALIYUN), "--provider", "Ali").code == 0
    before = ledger_path.read_bytes()
    r = cli("bill", "import", str(ALIYUN), "--provider", "Ali")
    assert r.code == 2 and "imported already for Ali: bill 1" in r.err
    _same_file(ledger_path, before)


def test_gbk_with_bom_reads_and_a_month_without_bill_is_refused(
    cli: Cli, ledger_path: Path, ali: bytes, tmp_path: Path
) -> None:
    gbk = tmp_path / "gbk.csv"
    gbk.write_bytes(ALIYUN.read_text(encoding="utf-8").encode("gb18030"))
    assert cli("bill", "import", str(gbk), "--provider", "Ali").code == 0
    # The same lines again would count twice (refused): the GBK bill goes first.
    assert cli("bill", "delete", "1").code == 0
    bom = tmp_path / "bom.csv"  # another file (its bytes differ): a BOM before the header
    bom.write_bytes(
        b"\xef\xbb\xbf" + ALIYUN.read_bytes().replace(b"2024-05-20 15", b"2024-05-21 15")
    )
    assert cli("bill", "import", str(bom), "--provider", "Ali").code == 0
    before = ledger_path.read_bytes()
    r = cli("bill", "check", "--month", "2024-06")
    assert r.code == 2 and "no bill imported for 2024-06" in r.err
    _same_file(ledger_path, before)


def test_list_delete_and_undo(cli: Cli, ali: bytes) -> None:
    assert cli("bill", "import", str(ALIYUN), "--provider", "Ali").code == 0
    assert "aliyun_sample.csv" in cli("bill", "list").out
    r = cli("bill", "delete", "1")
    assert r.code == 0 and "7 lines" in r.out
    assert cli("bill", "check", "--month", "2024-05").code == 2
    assert cli("undo").code == 0
    assert cli("bill", "check", "--month", "2024-05").code == 1
    assert json.loads(cli("bill", "list", "--json").out)[0]["lines"] == 7


def test_a_column_mapping_in_the_config(cli: Cli, tmp_path: Path, ali: bytes) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[bills.acme]\nresource_id = "Res"\namount = "Cost"\nperiod_start = "Day"\n'
        'kind = "Type"\n[bills]\ntolerance = "30"\n'
    )
    bill = tmp_path / "acme.csv"
    # train: 260 + 24 (its disk) = 284 against zuka's 303.36: -19.36, within the 30 given.
    bill.write_text(
        "Day,Res,Cost,Type\n2024-05-01,i-bp1gn7ia10train01,260,usage\n"
        "2024-05-01,d-bp1essddata01,24,\n2024-05-04,i-bp1gn7iinfer02,4930,"
        "subscription\n"
    )
    r = cli(
        "bill",
        "import",
        str(bill),
        "--provider",
        "Ali",
        "--format",
        "acme",
        "--config",
        str(config),
    )
    assert r.code == 0, r.err
    r = cli("bill", "check", "--month", "2024-05", "--config", str(config))
    assert r.code == 0, r.out  # 0: it all agrees
    assert "it all agrees" in r.out
    bad = tmp_path / "bad.toml"
    bad.write_text('[bills.acme]\nresource_idd = "Res"\namount = "Cost"\nperiod = "M"\n')
    r = cli("bill", "check", "--month", "2024-05", "--config", str(bad))
    assert r.code == 2 and "bills.acme.resource_idd: unknown key" in r.err


def test_bill_alerts_for_the_last_complete_month(cli: Cli, ledger_path: Path, ali: bytes) -> None:
    assert cli("bill", "import", str(ALIYUN), "--provider", "Ali").code == 0
    at = datetime(2024, 6, 5, tzinfo=UTC)  # the last complete month: 2024-05
    with Ledger.open(ledger_path) as ledger:
        check(ledger, AlertsConfig(), lambda: at)
        kinds = sorted(
            (k, key)
            for k, key in ledger.conn.execute(
                "SELECT kind, key FROM alerts WHERE cleared_at IS NULL AND kind LIKE 'bill_%'"
            )
        )
    assert kinds == [
        ("bill_mismatch", "2024-05:2024-05-01T00:00:00+08:00"),
        ("bill_unmatched", "2024-05:Ali:cn-hangzhou;snapshot"),
        ("bill_unmatched", "2024-05:Ali:i-bp1gn7ia10train01"),
    ]


def test_hostile_cells_and_sizes(
    cli: Cli, ledger_path: Path, ali: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leases.money.bills import table

    bill = tmp_path / "acme.csv"
    # A terminal escape in the resource id is stored shown, never obeyed.
    text = ALIYUN.read_text(encoding="utf-8").replace("d-bp1essddata01", "d-\x1b[31mred")
    bill.write_text(text, encoding="utf-8")
    assert cli("bill", "import", str(bill), "--provider", "Ali").code == 0
    r = cli("bill", "check", "--month", "2024-05", "--json")
    ids = [u["resource_id"] for u in json.loads(r.out)["unmatched"]]
    assert "d-␛[31mred" in ids and not any("\x1b" in i for i in ids)
    before = ledger_path.read_bytes()
    monkeypatch.setattr(table, "MAX_LINES", 4)  # 5 data lines: one too many
    other = tmp_path / "other.csv"
    other.write_text(text.replace("2405010000000001", "2405010000000011"), encoding="utf-8")
    r = cli("bill", "import", str(other), "--provider", "Ali")
    assert r.code == 2 and "more than 4 lines" in r.err
    monkeypatch.setattr(table, "MAX_BYTES", 100)
    r = cli("bill", "import", str(other), "--provider", "Ali")
    assert r.code == 2 and "larger than" in r.err
    _same_file(ledger_path, before)


def test_the_dashboard_header_says_the_last_months_bill(ledger_path: Path, cli: Cli) -> None:
    from leases.fleet.header import Header, MonthMoney, bill_state, header_line

    with Ledger.open(ledger_path, create=True) as ledger:
        assert bill_state(ledger, datetime(2024, 6, 5, tzinfo=UTC), "Asia/Shanghai", "CNY") == ""
    _aliyun_fleet(cli)
    assert cli("bill", "import", str(ALIYUN), "--provider", "Ali").code == 0
    with Ledger.open(ledger_path) as ledger:
        june = datetime(2024, 6, 5, tzinfo=UTC)  # the last complete month: 2024-05
        said = bill_state(ledger, june, "Asia/Shanghai", "CNY")
        assert said == "bill 2024-05: 1 differ, 2 unmatched"
        # July: June's bill is due and none was imported.
        july = datetime(2024, 7, 5, tzinfo=UTC)
        assert bill_state(ledger, july, "Asia/Shanghai", "CNY") == "no bill imported for 2024-06"
    money = MonthMoney("2024-06", "CNY", Decimal(0), Decimal(0), bill=said)
    line = header_line(Header(0, 0, 0, money, None, "ledger.db"), june)
    assert "bill 2024-05: 1 differ, 2 unmatched" in line
