"""`zuka cost` and leases.money.leasecost on a real SQLite ledger, against figures computed here
by hand from the leases' prices and the history written."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from leases.core import fields
from leases.ledger.store import Ledger
from leases.money import leasecost
from leases.telemetry.rollups import HistoryStore
from tests.support.cli import Cli
from tests.support.hours import whole_hours

AT = fields.moment("at", "2026-03-11T00:00")  # Shanghai time


def t(text: str) -> datetime:
    return fields.moment("at", text)


def _node(cli: Cli, name: str, gpus: int) -> None:
    r = cli("node", "add", name, "--ssh", f"ssh lab@{name}.lab.cn", "--gpus", str(gpus))
    assert r.code == 0, r.err


def _cost(path: Path, node: str, at: datetime = AT, days: int = 30) -> leasecost.LeaseCost:
    with Ledger.open(path, readonly=True) as ledger:
        store = HistoryStore(ledger)
        c = leasecost.node_cost(
            ledger.node(node),
            ledger.leases(node),
            ledger.resources(node),
            lambda le, a, b, cards: store.lease_usage(le, a, b, cards=cards),
            at,
            days,
        )
    assert c is not None
    return c


def _monthly(cli: Cli, ledger_path: Path, hourly: str) -> None:
    _node(cli, "m1", 8)
    r = cli("lease", "add", "m1", "--billing", "monthly", "--price", "30000",
            "--hourly-price", hourly, "--start", "2026-03-01T00:00", "--end", "2026-05-01")  # fmt: skip
    assert r.code == 0, r.err
    whole_hours(ledger_path, "m1", t("2026-03-02T00:00"), 10, busy=True)
    whole_hours(ledger_path, "m1", t("2026-03-03T00:00"), 10, busy=False)


# March's share of the two months paid up front: 10 of its 31 days.
WINDOW_COST = Decimal(30000) * 10 / 31
PAID = Decimal(10 * 24 * 8)  # card-hours from the lease's start (inside --days 30)


def test_monthly_lease_hand_computed(cli: Cli, ledger_path: Path) -> None:
    _monthly(cli, ledger_path, "64")  # 8 a card-hour
    c = _cost(ledger_path, "m1")
    e = c.estimate
    assert e is not None
    # Prepaid: both months charged at the start; nothing more by either end.
    assert (e.to_date, e.by_period_end, e.by_lease_end) == (60000, 60000, 60000)
    assert e.period == (t("2026-03-01T00:00"), t("2026-04-01T00:00"))
    assert e.lease_end == t("2026-05-01T00:00")
    assert c.since == t("2026-03-01T00:00")  # clipped to the lease's start
    u = c.usage
    assert u is not None
    assert (u.paid, u.busy, u.idle, u.unknown) == (PAID, 80, 80, PAID - 160)
    assert abs(u.cost - WINDOW_COST) < Decimal("1e-9")
    assert abs(u.idle_yuan - WINDOW_COST * 80 / PAID) < Decimal("1e-9")
    assert c.break_even == Decimal("468.75")  # 30000 / 64
    # Hourly would rent the busy and unknown card-hours: (80 + 1760) x 8 = 14720.
    assert c.verdict is not None
    assert abs(c.verdict.monthly_saves - (14720 - WINDOW_COST)) < Decimal("1e-9")
    assert c.verdict_text is not None and c.verdict_text.startswith("monthly saves CNY 5,042.58")


def test_verdict_the_other_way_and_missing_price(cli: Cli, ledger_path: Path) -> None:
    _monthly(cli, ledger_path, "8")  # 1 a card-hour: 1840 by the hour
    c = _cost(ledger_path, "m1")
    assert c.verdict_text is not None
    assert c.verdict_text.startswith("hourly would have cost CNY 7,837.42 less")
    with Ledger.open(ledger_path) as ledger:
        ledger.update_lease("m1", {"hourly_price": None})
    c = _cost(ledger_path, "m1")
    assert c.verdict is None and c.break_even is None
    assert c.verdict_text == (
        "record its hourly price to compare: zuka lease edit m1 --hourly-price P"
    )


def test_card_hour_lease_has_no_verdict(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "c1", 4)
    r = cli("lease", "add", "c1", "--billing", "card_hour", "--price", "2",
            "--start", "2026-03-01T00:00")  # fmt: skip
    assert r.code == 0, r.err
    c = _cost(ledger_path, "c1")
    e = c.estimate
    assert e is not None
    assert e.to_date == 2 * 4 * 240  # 10 days
    assert e.by_period_end == 2 * 4 * 31 * 24  # the calendar month
    assert e.lease_end is None and leasecost.by_lease_end(c) == "open-ended"
    assert c.verdict is None and c.verdict_text is None and c.break_even is None


def test_renewed_chain(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "r1", 8)
    r = cli("lease", "add", "r1", "--billing", "monthly", "--price", "1000",
            "--start", "2026-01-01T00:00", "--end", "2026-02-01")  # fmt: skip
    assert r.code == 0, r.err
    with Ledger.open(ledger_path) as ledger:
        ledger.renew_lease("r1", t("2026-03-01T00:00"))
        ledger.renew_lease("r1", t("2026-04-01T00:00"))
        ledger.renew_lease("r1", t("2026-05-01T00:00"))  # not started at AT
    c = _cost(ledger_path, "r1")
    e = c.estimate
    assert e is not None and len(c.chain) == 4
    assert e.to_date == 3000  # Jan, Feb, Mar paid
    assert e.by_period_end == 3000  # April's renewal is charged when April starts
    assert (e.lease_end, e.by_lease_end) == (t("2026-05-01T00:00"), 4000)
    assert c.since == AT - timedelta(days=30)  # the chain started before the window
    assert leasecost.cost_line(c) == (
        "cost: CNY 3,000.00 to date, CNY 3,000.00 by 2026-04-01 00:00 (period end),"
        " CNY 4,000.00 by 2026-05-01 00:00"
    )


def _now_lease(cli: Cli) -> None:
    """A monthly lease of 30000 started 10 days ago, ending in 10 days: one month paid."""
    _node(cli, "n1", 8)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    r = cli("lease", "add", "n1", "--billing", "monthly", "--price", "30000",
            "--start", (now - timedelta(days=10)).isoformat(),
            "--end", (now + timedelta(days=10)).isoformat())  # fmt: skip
    assert r.code == 0, r.err


def test_cost_command_table_and_json(cli: Cli) -> None:
    _now_lease(cli)
    r = cli("cost", "--wide")  # a line a row (default: 80 columns, tests/cli/test_cli_width.py)
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.startswith("n1"))
    assert "monthly" in line and "CNY 30,000.00" in line
    assert "zuka lease edit n1 --hourly-price P" in line
    doc = json.loads(cli("cost", "n1", "--days", "7", "--json").out)
    (row,) = doc["leases"]
    assert (row["node"], row["to_date"], row["by_lease_end"]) == ("n1", "30000.00", "30000.00")
    assert row["verdict"].endswith("zuka lease edit n1 --hourly-price P")
    since = datetime.fromisoformat(row["window"]["since"])
    until = datetime.fromisoformat(row["window"]["until"])
    assert until - since == timedelta(days=7)
    assert (
        Decimal(row["paid_card_hours"]) == Decimal(until.timestamp() - since.timestamp()) * 8 / 3600
    )
    shown = cli("node", "show", "n1").out
    assert "cost: CNY 30,000.00 to date, CNY 30,000.00 by " in shown


def test_unknown_node_and_no_lease(cli: Cli) -> None:
    _node(cli, "n1", 8)
    r = cli("cost", "ghost")
    assert r.code == 2 and "ghost" in r.err
    r = cli("cost", "n1")
    assert r.code == 0 and r.out.startswith("no lease bills now on n1\n")
    assert "`zuka lease list n1`" in r.out and "zuka report --month" in r.out
    assert cli("cost").out.startswith("no lease bills now on any node\n")
    assert json.loads(cli("cost", "--json").out)["leases"] == []
    assert "cost:" not in cli("node", "show", "n1").out


def test_a_renewal_not_started_leaves_the_measured_use_as_it_was(
    cli: Cli, ledger_path: Path
) -> None:
    """A recorded renewal pays for nothing yet: it must not count the node's history again
    (it doubled busy card-hours, and turned unknown hours into idle ones)."""
    _monthly(cli, ledger_path, "64")
    before = _cost(ledger_path, "m1").usage
    with Ledger.open(ledger_path) as ledger:
        ledger.renew_lease("m1", t("2026-06-01T00:00"))
    after = _cost(ledger_path, "m1")
    assert len(after.chain) == 2 and after.usage is not None and before is not None
    assert (after.usage.busy, after.usage.idle, after.usage.unknown) == (
        before.busy,
        before.idle,
        before.unknown,
    )
    assert after.usage.busy == 80 and after.usage.unknown == PAID - 160
    with Ledger.open(ledger_path, readonly=True) as ledger:
        renewal = ledger.leases("m1")[-1]
        usage = HistoryStore(ledger).lease_usage(renewal, t("2026-03-01T00:00"), AT, cards=8)
    assert (usage.busy, usage.idle, usage.unknown) == (0, 0, 0)


def test_cost_json_gives_money_to_the_fen(cli: Cli) -> None:
    """A month at 30,000.01 started 10 days ago, ending in 10 days (a started month in
    full, spread over the 20 days it pays for): the last 7 days' cost is 30,000.01 x 7/20 =
    10,500.0035, "10500.00" in JSON (as the report's JSON), not 10500.0035; an hourly
    lease's to date (10.07 an hour, pro rata to the second) has two decimals too."""
    _node(cli, "n1", 8)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    assert cli("lease", "add", "n1", "--billing", "monthly", "--price", "30000.01",
               "--start", (now - timedelta(days=10)).isoformat(),
               "--end", (now + timedelta(days=10)).isoformat()).code == 0  # fmt: skip
    _node(cli, "h1", 8)
    assert cli("lease", "add", "h1", "--billing", "hourly", "--price", "10.07", "--start",
               (now - timedelta(seconds=7777)).isoformat()).code == 0  # fmt: skip
    r = cli("cost", "--json", "--days", "7")
    assert r.code == 0, r.err
    rows = {row["node"]: row for row in json.loads(r.out)["leases"]}
    assert (rows["n1"]["to_date"], rows["n1"]["by_lease_end"]) == ("30000.01", "30000.01")
    assert rows["n1"]["window_cost"] == "10500.00"
    assert re.fullmatch(r"\d+\.\d\d", rows["h1"]["to_date"]), rows["h1"]["to_date"]
