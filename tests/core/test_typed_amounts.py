"""Money typed by people, read one way everywhere: the command line, the dashboard's lease
form (Pilot) and CSV import give the same verdict for each amount of one table (the config
holds no amount). A comma only groups thousands in threes; full-width digits and
punctuation (what a Chinese input method types) read as ASCII; a currency sign, a decimal
comma, Python's digit separator or an exponent is refused, naming the field, and nothing
is written. Before, "1,98" was stored as 198: a price 100 times too high."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path

import pytest

from leases.ledger.records import node_from
from leases.ledger.store import Ledger
from tests.support.cli import Cli
from tests.tui.test_forms import FormHost, lease_form, opened, save_ok, save_refused, state

# (typed, what it is read as; None: refused)
TABLE: list[tuple[str, Decimal | None]] = [
    ("1.98", Decimal("1.98")),
    ("52000", Decimal("52000")),
    ("52,000", Decimal("52000")),
    ("52,000.50", Decimal("52000.50")),
    ("1,234,567.8", Decimal("1234567.8")),
    ("１９８", Decimal("198")),  # full-width digits
    ("５２，０００．５", Decimal("52000.5")),  # full-width comma and point
    (" 3.5 ", Decimal("3.5")),
    ("1,98", None),  # a decimal comma: was stored as 198
    ("1，98", None),  # the same, typed with a Chinese input method
    ("5,2000", None),  # a group of four
    ("1.980,5", None),  # the European way round
    ("1_98", None),  # Python's digit separator: was 198
    ("$5", None),  # a dollar sign on a CNY lease
    ("¥1,000", None),  # the currency is its own field
    ("￥1000", None),
    ("1000元", None),
    ("1e3", None),
    ("0,500", None),  # a decimal comma after a zero: was stored as 500
    ("5²", None),  # NFKC makes a superscript a digit: was stored as 52
    ("①⓪", None),  # circled digits: were stored as 10
    ("１。９８", None),  # the ideographic full stop for a point
    ("1 000", None),
    ("-2", None),
    ("", None),
]
IDS = [repr(t) for t, _ in TABLE]


@pytest.fixture
def node(cli: Cli) -> Cli:
    assert cli("node", "add", "n", "--ssh", "root@10.0.0.9", "--gpus", "8").code == 0
    return cli


@pytest.mark.parametrize(("typed", "read"), TABLE, ids=IDS)
def test_the_command_line(node: Cli, ledger_path: Path, typed: str, read: Decimal | None) -> None:
    r = node("lease", "add", "n", "--billing", "hourly", "--price", typed, "--start", "2026-11-01")
    with Ledger.open(ledger_path, create=False) as ledger:
        leases = ledger.leases("n")
    if read is None:
        assert r.code == 2 and "unit_price (--price)" in r.err, r.err
        assert leases == []
    else:
        assert r.code == 0, r.err
        assert leases[0].unit_price == read


def _csv(typed: str) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["record", "name", "ssh_host", "gpu_count", "node", "billing_type", "unit_price",
                "start"])  # fmt: skip
    w.writerow(["node", "m", "10.0.0.7", "8", "", "", "", ""])
    w.writerow(["lease", "", "", "", "m", "hourly", typed, "2026-11-01"])
    return out.getvalue()


@pytest.mark.parametrize(("typed", "read"), TABLE, ids=IDS)
def test_csv_import(
    cli: Cli, ledger_path: Path, tmp_path: Path, typed: str, read: Decimal | None
) -> None:
    assert cli("node", "add", "n", "--ssh", "root@10.0.0.9").code == 0  # the ledger exists
    file = tmp_path / "in.csv"
    file.write_text(_csv(typed), encoding="utf-8")
    r = cli("import", str(file))
    with Ledger.open(ledger_path, create=False) as ledger:
        names = {n.name for n in ledger.nodes()}
        leases = ledger.leases("m") if "m" in names else []
    if read is None:
        assert r.code == 2 and "unit_price" in r.err, r.err
        assert names == {"n"}  # all or nothing
    else:
        assert r.code == 0, r.err
        assert leases[0].unit_price == read


@pytest.mark.parametrize(("typed", "read"), TABLE, ids=IDS)
async def test_the_lease_form(ledger_path: Path, typed: str, read: Decimal | None) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.add_node(node_from({"name": "f", "ssh_host": "10.0.0.8", "gpu_count": 4}))
    before = state(ledger_path)
    app = FormHost(ledger_path, lease_form("f", "add"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        screen.field("billing_type").value = "hourly"
        screen.field("unit_price").value = typed
        if read is None:
            said = await save_refused(pilot, "unit_price")
            assert "(--price)" in said, said  # the command line's own words
        else:
            assert await save_ok(pilot) is True
    if read is None:
        assert state(ledger_path) == before
    else:
        with Ledger.open(ledger_path, create=False) as ledger:
            assert ledger.leases("f")[0].unit_price == read


@pytest.mark.parametrize(
    ("typed", "read"),
    [("4.8", Decimal("4.8")), ("4,8", None), ("1,000", Decimal("1000")), ("$4", None)],
)
def test_plan_flags_read_numbers_the_same_way(typed: str, read: Decimal | None) -> None:
    """`plan hybrid --hourly 4,8` advised 8 monthly cards: it read 48."""
    from leases.core.errors import InputError
    from tui.cli.money import _decimal

    if read is None:
        with pytest.raises(InputError, match="hourly"):
            _decimal("hourly", typed)
    else:
        assert _decimal("hourly", typed) == read


@pytest.mark.parametrize(
    "args",
    [
        ("report", "--month", "2026-11"),
        ("plan", "hybrid", "--hourly", "4.8", "--monthly", "2000"),
        (
            "plan",
            "buy",
            "--card-price",
            "80000",
            "--life-years",
            "4",
            "--power-w",
            "400",
            "--kwh",
            "0.8",
            "--hosting",
            "300",
        ),
        ("cost",),
        ("alerts",),
        ("alerts", "check"),
        ("alerts", "--json"),
    ],
)
def test_a_mistyped_ledger_path_is_refused_not_an_empty_month(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`--ledger typo.db` printed ¥0 or "no alerts" and exited 0: a cron job watching the
    alerts stayed green. Now it says no ledger is there, exits 1, and creates nothing."""
    typo = tmp_path / "lab.dbb"
    r = cli(*args, ledger=typo)
    assert r.code == 1 and "no ledger at" in r.err, (r.code, r.out, r.err)
    assert not typo.exists()


def test_a_deposit_refunded_before_it_was_paid_is_refused(node: Cli, ledger_path: Path) -> None:
    """Issue 17, item 10: accepted without a word before."""
    base = ("lease", "add", "n", "--billing", "monthly", "--price", "30,000", "--start",
            "2026-06-01", "--end", "2026-07-01", "--deposit", "60,000", "--deposit-paid-on",
            "2026-05-20", "--deposit-refund", "refunded")  # fmt: skip
    r = node(*base, "--deposit-refunded-on", "2026-05-01")
    assert r.code == 2 and "--deposit-refunded-on: is before the deposit was paid" in r.err
    with Ledger.open(ledger_path, create=False) as ledger:
        assert ledger.leases("n") == []
    ok = node(*base, "--deposit-refunded-on", "2026-07-10")
    assert ok.code == 0, ok.err


def test_a_writing_command_does_not_create_the_folders_of_a_mistyped_ledger(
    cli: Cli, tmp_path: Path
) -> None:
    """Issue 17, item 8: `--ledger /nonexistent/dir/l.db` created the folders and a second,
    empty ledger. A named path in an existing folder is still created (and said)."""
    typo = tmp_path / "nonexistent" / "dir" / "l.db"
    r = cli("node", "add", "x", "--ssh", "root@10.0.0.9", ledger=typo)
    assert r.code == 1 and f"no folder {typo.parent} for a ledger at {typo}" in r.err, r.err
    assert not (tmp_path / "nonexistent").exists()
    fresh = tmp_path / "lab.db"
    r = cli("node", "add", "x", "--ssh", "root@10.0.0.9", ledger=fresh)
    assert r.code == 0 and "created a new ledger" in r.err and fresh.exists()


def test_the_dashboard_refuses_a_mistyped_ledger(cli: Cli, tmp_path: Path) -> None:
    """`zuka --ledger lab.dbb` opened an empty ledger, said only in the header."""
    typo = tmp_path / "lab.dbb"
    r = cli(ledger=typo)
    assert r.code == 1 and f"no ledger at {typo}: a typo?" in r.err, r.err
    assert not typo.exists()
