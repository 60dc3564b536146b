"""Currencies (issue 17, item 6): one currency per renewal chain, every figure with its
currency, totals per currency (never added across), `[money] rates` for a total in the
lab's currency with the rate shown, alerts, plans and the dashboard in the lease's
currency. Real ledger files; the CLI in-process; figures worked out by hand in each test."""

from __future__ import annotations

import io
import json
import sqlite3
from contextlib import closing, redirect_stderr
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from textual.widgets import DataTable

from leases.alerts import state as alertstate
from leases.config.sections import Config
from leases.fleet.header import Header, header_line, month_money
from leases.ledger.store import Ledger
from leases.money.renewals import chains
from leases.money.reportcsv import CSV_HEADER
from leases.sim.ledger import register_sim_nodes
from leases.telemetry.rollups import HistoryStore
from tests.money.test_plan import _node_hours
from tests.support.cli import Cli
from tests.support.waiting import wait_until
from tui.cli.main import main
from tui.dashboard.app import ZukaApp
from tui.screens.alerts import AlertsScreen
from tui.screens.nodeview import alert_amount


def _audit_count(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM audit").fetchone()[0])


def _node(cli: Cli, name: str = "n") -> None:
    """A provider P and a node with 8 A100, as the issue's repros start."""
    if cli("provider", "list").out.find("P") < 0:
        assert cli("provider", "add", "P", "--kind", "platform").code == 0
    add = cli("node", "add", name, "--ssh", "ssh root@10.0.0.1", "--provider", "P",
              "--gpus", "8", "--gpu-model", "A100")  # fmt: skip
    assert add.code == 0, add.err


def _report(cli: Cli, month: str, *extra: str) -> dict[str, Any]:
    got = cli(*extra, "report", "--month", month, "--json")
    assert got.code == 0, got.err
    return dict(json.loads(got.out))


# -- one currency per renewal chain --------------------------------------------------------


def test_a_renewal_in_usd_after_a_cny_lease_is_refused_with_the_fix(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli)
    assert cli("lease", "add", "n", "--billing", "monthly", "--price", "30000",
               "--start", "2026-08-01", "--end", "2026-09-01").code == 0  # fmt: skip
    before = _audit_count(ledger_path)
    renew = cli("lease", "renew", "n", "--until", "2026-10-01", "--price", "4000",
                "--currency", "USD")  # fmt: skip
    assert renew.code == 2
    assert "--currency: a renewal is billed in its lease's currency (CNY)" in renew.err
    # The fix, named: a new lease from the end (its own chain), or the chain corrected.
    assert "zuka lease add n --currency USD --start '2026-09-01 00:00'" in renew.err
    assert "zuka lease edit n --currency USD --whole-chain" in renew.err
    assert _audit_count(ledger_path) == before  # nothing written
    add = cli("lease", "add", "n", "--billing", "monthly", "--price", "4000", "--currency",
              "USD", "--start", "2026-09-01", "--end", "2026-10-01")  # fmt: skip
    assert add.code == 0, add.err
    # August: the CNY lease alone, 30,000 (a whole month); September: the USD lease alone,
    # 4,000 (a whole month). No figure adds the two.
    aug, sep = _report(cli, "2026-08"), _report(cli, "2026-09")
    assert {c: t["total"] for c, t in aug["by_currency"].items()} == {"CNY": "30000.00"}  # type: ignore[attr-defined]
    assert {c: t["total"] for c, t in sep["by_currency"].items()} == {"USD": "4000.00"}  # type: ignore[attr-defined]


def test_a_chain_made_mixed_behind_zukas_back_is_never_summed(cli: Cli, ledger_path: Path) -> None:
    _node(cli)
    assert cli("lease", "add", "n", "--billing", "monthly", "--price", "30000",
               "--start", "2026-08-16", "--end", "2026-09-16").code == 0  # fmt: skip
    assert cli("lease", "renew", "n", "--until", "2026-10-16").code == 0
    with closing(sqlite3.connect(ledger_path)) as conn, conn:
        conn.execute("UPDATE leases SET currency = 'USD' WHERE start LIKE '2026-09-16%'")
    # Refused first (leases.ledger.rowaudit): nobody recorded the edit through zuka.
    refused = cli("report", "--month", "2026-09", "--format", "json")
    assert (
        refused.code == 2 and 'currency "CNY" on the audit log, "USD" in the table' in refused.err
    )
    # Taken as it is, the chain is two chains, never one sum.
    assert cli("audit", "accept", "lease", "2").code == 0
    sep = _report(cli, "2026-09")
    rows = {r["currency"]: r["cost"] for r in sep["leases"]}  # type: ignore[attr-defined]
    # CNY lease 08-16 -> 09-16 (31 days): September's 15 days, 30,000 x 15/31 = 14,516.13;
    # USD lease 09-16 -> 10-16 (30 days): September's 15 days, 30,000 x 15/30 = 15,000.00.
    # Today's main made them one chain: "USD 29,516.13".
    assert rows == {"CNY": "14516.13", "USD": "15000.00"}
    assert sep["total"] is None and sep["currency"] is None  # several: per currency only
    with Ledger.open(ledger_path) as ledger:
        assert [len(c) for c in chains(ledger.leases("n"))] == [1, 1]


def test_a_currency_edit_inside_a_chain_is_refused_unless_the_whole_chain(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli)
    assert cli("lease", "add", "n", "--billing", "monthly", "--price", "30000",
               "--start", "2026-08-01", "--end", "2026-09-01").code == 0  # fmt: skip
    assert cli("lease", "renew", "n", "--until", "2026-10-01").code == 0
    before = _audit_count(ledger_path)
    one = cli("lease", "edit", "n", "--start", "2026-09-01", "--currency", "USD")
    assert one.code == 2
    assert "one of the 2 leases of a renewal chain in CNY" in one.err
    assert "--whole-chain" in one.err and "zuka lease end n --at WHEN" in one.err
    assert _audit_count(ledger_path) == before
    bare = cli("lease", "edit", "n", "--start", "2026-09-01", "--notes", "x", "--whole-chain")
    assert bare.code == 2 and "--whole-chain: changes only the currency" in bare.err
    whole = cli("lease", "edit", "n", "--start", "2026-09-01", "--currency", "USD",
                "--whole-chain")  # fmt: skip
    assert whole.code == 0, whole.err
    with Ledger.open(ledger_path) as ledger:
        assert [le.currency for le in ledger.leases("n")] == ["USD", "USD"]
        assert [len(c) for c in chains(ledger.leases("n"))] == [2]
    assert cli("undo").code == 0  # one command, taken back whole
    with Ledger.open(ledger_path) as ledger:
        assert [le.currency for le in ledger.leases("n")] == ["CNY", "CNY"]
    # A lease alone in its chain changes currency as any field does.
    _node(cli, "solo")
    assert cli("lease", "add", "solo", "--billing", "hourly", "--price", "10",
               "--start", "2026-08-01").code == 0  # fmt: skip
    assert cli("lease", "edit", "solo", "--currency", "USD").code == 0


# -- alerts in the lease's currency ----------------------------------------------------------


def _shanghai_day(offset: int) -> str:
    return (datetime.now(ZoneInfo("Asia/Shanghai")).date() + timedelta(days=offset)).isoformat()


def test_alerts_say_the_amount_in_the_leases_currency(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "us")
    _node(cli, "cn")
    # A USD lease that renews itself in 2 days: the provider charges USD 4,000 a period.
    assert cli("lease", "add", "us", "--billing", "monthly", "--price", "4000", "--currency",
               "USD", "--start", _shanghai_day(-28), "--end", _shanghai_day(2),
               "--auto-renew").code == 0  # fmt: skip
    # A CNY lease ended 40 days ago, its deposit of 5,000 not refunded.
    assert cli("lease", "add", "cn", "--billing", "monthly", "--price", "30000",
               "--start", _shanghai_day(-70), "--end", _shanghai_day(-40),
               "--deposit", "5000").code == 0  # fmt: skip
    listed = {a["kind"]: a for a in json.loads(cli("alerts", "--json").out)}
    renew, deposit = listed["autorenew_soon"], listed["deposit_not_refunded"]
    assert "charges about USD 4,000.00 a period" in renew["message"]  # main: ¥4,000.00
    assert (renew["yuan"], renew["currency"]) == ("4000.00", "USD")
    assert "deposit CNY 5,000.00 not refunded" in deposit["message"]
    assert (deposit["yuan"], deposit["currency"]) == ("5000.00", "CNY")
    with Ledger.open(ledger_path) as ledger:
        shown = {a.kind: alert_amount(a) for a in alertstate.alerts(ledger, datetime.now(UTC))}
    assert shown == {"autorenew_soon": "USD 4,000.00", "deposit_not_refunded": "CNY 5,000.00"}


async def test_the_alerts_screen_names_each_amounts_currency_among_several(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli, "us")
    assert cli("lease", "add", "us", "--billing", "monthly", "--price", "4000", "--currency",
               "USD", "--start", _shanghai_day(-28), "--end", _shanghai_day(2),
               "--auto-renew").code == 0  # fmt: skip
    assert cli("alerts").code == 0  # evaluates and stores them
    app = ZukaApp(ledger_path, poll=False, refresh_s=3600, config=Config())
    async with app.run_test(size=(140, 36)) as pilot:
        await pilot.press("a")
        await wait_until(lambda: isinstance(app.screen, AlertsScreen))
        await pilot.pause()
        table = app.screen.query_one("#alerts", DataTable)
        labels = [c.label.plain for c in table.columns.values()]
        assert "¥" not in labels and "Amount" in labels  # main: "¥" over USD 4,000.00
        cells = [str(c) for c in table.get_row_at(0)]
        assert "USD 4,000.00" in cells


# -- [money] rates: a total in the lab's currency, the rate shown ------------------------------


def _two_currencies(cli: Cli) -> None:
    """November 2026 (whole months): ¥30,000 on cn, USD 1,234.56 on us."""
    _node(cli, "cn")
    _node(cli, "us")
    assert cli("lease", "add", "cn", "--billing", "monthly", "--price", "30000",
               "--start", "2026-11-01", "--end", "2026-12-01").code == 0  # fmt: skip
    assert cli("lease", "add", "us", "--billing", "monthly", "--price", "1,234.56",
               "--currency", "USD", "--start", "2026-11-01", "--end", "2026-12-01").code == 0  # fmt: skip


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "zuka.toml"
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_a_report_totals_in_the_labs_currency_at_the_months_rate(cli: Cli, tmp_path: Path) -> None:
    _two_currencies(cli)
    config = _config(tmp_path, '[money.rates."2026-11"]\nUSD = 7.12\nHKD = "0.91"\n')
    # USD 1,234.56 x 7.12 = 8,790.0672 -> ¥8,790.07; + ¥30,000.00 = ¥38,790.07
    doc = _report(cli, "2026-11", "--config", config)
    lab = doc["in_lab_currency"]
    assert lab == {"currency": "CNY", "month": "2026-11", "rates": {"USD": "7.12"},
                   "missing_rates": [], "total": "38790.07",
                   "charged_in_month": lab["charged_in_month"]}  # type: ignore[index]  # fmt: skip
    assert doc["total"] is None  # the per-currency totals stay apart
    md = cli("--config", config, "report", "--month", "2026-11").out
    assert (
        "**Total CNY 38,790.07** (all currencies in CNY) at the config's rates for 2026-11 (1 USD = CNY 7.12"
        in md
    )
    assert "CNY 68," not in md and "31,234.56" not in md  # never CNY + USD unconverted
    rows = cli("--config", config, "report", "--month", "2026-11", "--format", "csv").out
    last = rows.strip().splitlines()[-1].split(",")
    assert last[0] == "total_in_lab_currency" and last[5] == "CNY"
    assert "38790.07" in last and last[CSV_HEADER.index("notes")] == "rates USD 7.12"
    # A month without a USD rate: no converted total, and the rate it lacks said.
    october = _config(tmp_path, '[money.rates."2026-10"]\nUSD = 7.1\n')
    md = cli("--config", october, "report", "--month", "2026-11").out
    assert "No total in CNY: the config has no rate for USD in 2026-11" in md
    assert "Total in CNY" not in md
    lab = _report(cli, "2026-11", "--config", october)["in_lab_currency"]
    assert lab["missing_rates"] == ["USD"] and lab["total"] is None  # type: ignore[index]
    # Every lease in the lab's currency: nothing to convert, no line.
    assert "in CNY" not in cli("report", "--month", "2026-10").out


def test_bad_rates_are_refused_naming_the_key(cli: Cli, tmp_path: Path) -> None:
    _two_currencies(cli)
    config = _config(tmp_path, """\
[money.rates."2026-11"]
USD = -1
XYZ = 3
CNY = 1
EUR = "7,5"
JPY = true
[money.rates."2026-13"]
USD = 7
[money]
rate = 3
""")  # fmt: skip
    got = cli("--config", config, "report", "--month", "2026-11")
    assert got.code == 2 and got.out == ""
    for said in (
        'money.rates."2026-11".USD: must be a number above 0',
        'money.rates."2026-11".XYZ: unknown currency',
        'money.rates."2026-11".CNY: is the lab\'s own currency',
        'money.rates."2026-11".EUR: is not a number: a comma only groups thousands',
        'money.rates."2026-11".JPY: must be a number',
        'money.rates."2026-13": must be a month YYYY-MM',
        "money.rate: unknown key; did you mean money.rates?",
    ):
        assert said in got.err, said


# -- plans never mix currencies --------------------------------------------------------------


def test_plans_on_a_mixed_fleet_plan_one_currency_or_refuse(tmp_path: Path) -> None:
    """Two sim nodes, 10 days of history, one lease turned to USD: a plan prices from one
    currency's leases and prints in it, never ¥ for USD; without --currency it refuses."""
    path = tmp_path / "l.db"
    now = datetime.now(UTC)
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 2, now)
        ledger.update_lease("sim-002", {"currency": "USD"})
        top = int(now.timestamp()) // 3600
        hours = list(range(top - 10 * 24, top))
        HistoryStore(ledger).write_hours(
            _node_hours("sim-001", 8, 8, hours) + _node_hours("sim-002", 8, 2, hours)
        )

    def run(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stderr(err):
            code = main(["--ledger", str(path), *args], out=out)
        return code, out.getvalue(), err.getvalue()

    code, _, err = run("plan", "hybrid")
    assert code == 2 and "the leases planned from are in CNY and USD" in err and "--currency" in err
    code, out, _ = run("plan", "hybrid", "--currency", "USD", "--monthly", "3000", "--hourly", "10")
    assert code == 0 and "Prices a card: USD 3,000.00 a month (given), USD 10.00 an hour" in out
    assert "¥" not in out and "CNY" not in out  # main printed these USD as ¥
    buy = ["plan", "buy", "--card-price", "80000", "--life-years", "4", "--power-w", "450",
           "--kwh", "0.8", "--hosting", "6000", "--days", "9"]  # fmt: skip
    code, _, err = run(*buy)
    assert code == 2 and "--currency" in err
    code, out, _ = run(*buy, "--currency", "USD", "--json")
    assert code == 0, out
    doc = json.loads(out)
    # sim-002 alone (USD): 2 of its 8 cards busy every hour: utilisation 2/8 = 0.25.
    assert doc["currency"] == "USD" and Decimal(doc["measured_utilisation"]) == Decimal("0.25")
    code, out, _ = run(*buy, "--currency", "CNY")
    # sim-001 alone (CNY): 8 of 8 busy: 100.00 %; owning and renting in ¥ only.
    assert code == 0 and "(given" not in out and "measured 100.00 % busy" in out
    assert "Owning:  CNY " in out and "USD" not in out


# -- the dashboard: the header and the month column per currency ----------------------------


def test_the_dashboards_month_money_is_per_currency(cli: Cli, ledger_path: Path) -> None:
    _two_currencies(cli)  # November: ¥30,000 on cn, USD 1,234.56 on us
    _node(cli, "both")
    # both: CNY from 11-01 to 11-16 (15 days of 15: 1,500), USD from 11-16 to 12-16 (30 days,
    # 15 of them in November: 300 x 15/30 = 150.00).
    assert cli("lease", "add", "both", "--billing", "monthly", "--price", "1500",
               "--start", "2026-11-01", "--end", "2026-11-16").code == 0  # fmt: skip
    assert cli("lease", "add", "both", "--billing", "monthly", "--price", "300", "--currency",
               "USD", "--start", "2026-11-16", "--end", "2026-12-16").code == 0  # fmt: skip
    end = datetime(2026, 11, 30, 16, tzinfo=UTC)  # 12-01 00:00 in Shanghai: November is over
    with Ledger.open(ledger_path) as ledger:
        m = month_money(ledger, end - timedelta(seconds=1), "Asia/Shanghai", "CNY")
        ids = {name: ledger.node(name).id for name in ("us", "both")}
    # CNY: 30,000 + 1,500 = 31,500 (to the last second: a hair under); USD: 1,234.56 + 150.
    assert m.currency == "CNY" and round(m.cost) == 31500
    assert set(m.others) == {"USD"} and round(m.others["USD"][0], 2) == Decimal("1384.56")
    # By node id (names are reused); main left us and both out.
    assert m.node_currency == {ids["us"]: "USD", ids["both"]: ""}
    h = Header(0, 0, 0, m, None, "l.db")
    line = header_line(h, end)
    assert "CNY 31,500 + USD 1,385 this month" in line  # never ¥32,885 nor ¥31,500 alone
    assert "CNY 0 + USD 0 idle" in line
