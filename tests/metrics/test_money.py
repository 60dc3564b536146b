"""The money gauges' figures from a real ledger, against figures worked out here by hand,
and a ledger with a row changed outside zuka (no figure exported, a refusal instead)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from leases.core import fields
from leases.ledger.store import Ledger
from leases.metrics.exporter import Exporter, Settings
from leases.metrics.gauges import LeaseMoney, Money, Place
from leases.metrics.listen import Listen
from leases.metrics.money import MoneyCache, money, places
from tests.support.cli import Cli
from tests.support.hours import whole_hours


def by_name(m: Money) -> dict[str, LeaseMoney]:
    return {lm.node: lm for lm in m.leases}


def t(text: str) -> datetime:
    return fields.moment("at", text)  # Shanghai time, the default billing zone


AT = t("2026-03-11T00:20")


def _monthly(z: Cli, path: Path) -> None:
    """Node n (8 cards at provider P, a platform): 30,000 a month, two months paid up
    front from 1 March; 10 busy hours on 2 March, 10 idle ones on 3 March, one idle hour
    on 1 April."""
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-03-01T00:00", "--end", "2026-05-01")  # fmt: skip
    assert r.code == 0, r.err
    whole_hours(path, "n", t("2026-03-02T00:00"), 10, busy=True)
    whole_hours(path, "n", t("2026-03-03T00:00"), 10, busy=False)
    whole_hours(path, "n", t("2026-04-01T05:00"), 1, busy=False)


def test_a_known_lease_by_hand(z: Cli, ledger_path: Path) -> None:
    _monthly(z, ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        got = money(ledger, AT)
        assert places(ledger) == {"n": Place("platform", "P")}
    assert got.refused == ()
    m = by_name(got)["n"]
    assert (m.lease, m.place, m.billing, m.currency) == (
        "1",
        Place("platform", "P"),
        "monthly",
        "CNY",
    )
    assert m.cost_to_date == 60000  # both months charged at the start
    # March to 00:00 on the 11th (whole hours): 10 days of 31 of a 30,000 month, 10 x 24 x 8
    # = 1,920 card-hours paid, 80 of them known idle: 30000 x 10/31 x 80/1920 = 12500/31.
    assert m.idle_month is not None and abs(m.idle_month - Decimal(12500) / 31) < Decimal("1e-9")
    assert m.end == t("2026-05-01T00:00")
    # In April only April's hours count: 2 days of 30 (the 1st and 2nd), 384 card-hours,
    # 8 idle: 30000 x 2/30 x 8/384 = 125/3.
    with Ledger.open(ledger_path, readonly=True) as ledger:
        april = by_name(money(ledger, t("2026-04-03T00:59")))["n"]
    assert april.idle_month is not None and abs(april.idle_month - Decimal(125) / 3) < Decimal(
        "1e-9"
    )
    # In the month's first hour no whole hour is billed yet: unknown, not zero.
    with Ledger.open(ledger_path, readonly=True) as ledger:
        assert by_name(money(ledger, t("2026-04-01T00:30")))["n"].idle_month is None


def test_a_node_without_a_card_count_keeps_its_cost_and_end(z: Cli, ledger_path: Path) -> None:
    # A node added without --gpus: idle yuan cannot be weighed by card (not known, no
    # sample), but the lease's cost to date and end still go out, as `zuka cost` shows them.
    assert z("node", "add", "m", "--ssh", "root@10.0.0.8", "--provider", "P").code == 0
    r = z("lease", "add", "m", "--billing", "monthly", "--price", "30000",
          "--start", "2026-03-01T00:00", "--end", "2026-05-01")  # fmt: skip
    assert r.code == 0, r.err
    with Ledger.open(ledger_path, readonly=True) as ledger:
        got = money(ledger, AT)
    assert got.refused == ()
    m = by_name(got)["m"]
    assert m.cost_to_date == 60000 and m.end == t("2026-05-01T00:00")
    assert m.idle_month is None


def test_the_endpoint_text_for_the_known_lease(z: Cli, ledger_path: Path) -> None:
    _monthly(z, ledger_path)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        exporter = Exporter(Settings(Listen("127.0.0.1", 0), b"t", True), ledger, dict, lambda: AT)
        text = exporter.gauges.render().decode()
    got = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    labels = {"node": "n", "lease": "1", "channel": "platform", "provider": "P",
              "billing": "monthly", "currency": "CNY"}  # fmt: skip
    assert got["zuka_lease_cost_to_date_yuan"].labels == labels
    assert got["zuka_lease_cost_to_date_yuan"].value == 60000
    assert abs(got["zuka_lease_idle_month_yuan"].value - 12500 / 31) < 1e-9
    # 2026-05-01 00:00 in Shanghai is 2026-04-30 16:00 UTC.
    assert got["zuka_lease_end_timestamp_seconds"].value == 1777564800
    assert "zuka_money_refused" not in got


def test_a_lease_in_dollars_is_never_exported_as_yuan(z: Cli, ledger_path: Path) -> None:
    """Node n in yuan as above; node u (8 cards at P) on a 3,100 USD month from 1 March to
    1 April, paid up front, its 8 cards idle for 10 hours on 3 March."""
    _monthly(z, ledger_path)
    assert (
        z("node", "add", "u", "--ssh", "root@10.0.0.10", "--gpus", "8", "--provider", "P").code == 0
    )
    r = z("lease", "add", "u", "--billing", "monthly", "--price", "3100", "--currency", "USD",
          "--start", "2026-03-01T00:00", "--end", "2026-04-01")  # fmt: skip
    assert r.code == 0, r.err
    whole_hours(ledger_path, "u", t("2026-03-03T00:00"), 10, busy=False)
    with Ledger.open(ledger_path, readonly=True) as ledger:
        exporter = Exporter(Settings(Listen("127.0.0.1", 0), b"t", True), ledger, dict, lambda: AT)
        text = exporter.gauges.render().decode()
    got = {(s.name, s.labels["node"]): s for f in text_string_to_metric_families(text)
           for s in f.samples if "node" in s.labels}  # fmt: skip
    # The yuan gauges hold node n only, in yuan.
    assert {n for name, n in got if name.endswith("_yuan")} == {"n"}
    assert got[("zuka_lease_cost_to_date_yuan", "n")].value == 60000
    # Node u's figures in the unitless gauges, in dollars, named by the currency label:
    # the month charged at its start, 3,100; idle: 10 days of 31 billed to 00:00 on the
    # 11th, 1,920 card-hours, 80 of them idle: 3100 x 10/31 x 80/1920 = 125/3.
    cost, idle = got[("zuka_lease_cost_to_date", "u")], got[("zuka_lease_idle_month", "u")]
    assert cost.labels["currency"] == idle.labels["currency"] == "USD"
    assert cost.value == 3100 and abs(idle.value - 125 / 3) < 1e-9
    assert ("zuka_lease_cost_to_date", "n") not in got
    # 2026-04-01 00:00 in Shanghai is 2026-03-31 16:00 UTC: the end is not money.
    assert got[("zuka_lease_end_timestamp_seconds", "u")].value == 1774972800


def test_a_row_changed_outside_zuka_exports_no_money(z: Cli, ledger_path: Path) -> None:
    _monthly(z, ledger_path)
    with Ledger.open(ledger_path) as ledger:
        ledger.conn.execute("UPDATE leases SET unit_price = '1' WHERE id = 1")
        ledger.conn.commit()
    with Ledger.open(ledger_path, readonly=True) as ledger:
        got = money(ledger, AT)
    assert got.leases == ()
    assert got.refused == (("n", "1", Place("platform", "P")),)
    assert z("cost").code != 0  # zuka cost refuses the same ledger


def test_money_is_worked_out_at_most_once_a_minute(z: Cli, ledger_path: Path) -> None:
    _monthly(z, ledger_path)
    mono = [1000.0]
    with Ledger.open(ledger_path, readonly=True) as ledger:
        cache = MoneyCache(ledger, lambda: AT, every_s=60, monotonic=lambda: mono[0])
        first = cache()
        for step in (1.0, 30.0, 58.9):
            mono[0] = 1000.0 + step
            assert cache() is first
        assert cache.computed == 1
        mono[0] = 1060.0
        cache()
        assert cache.computed == 2


def test_a_ledger_that_cannot_be_read_refuses_money_and_keeps_the_scrape(
    z: Cli, ledger_path: Path
) -> None:
    _monthly(z, ledger_path)
    mono = [0.0]
    with Ledger.open(ledger_path, readonly=True) as ledger:
        cache = MoneyCache(ledger, lambda: AT, every_s=60, monotonic=lambda: mono[0])
        assert by_name(cache())["n"].cost_to_date == 60000
        ledger.conn.close()  # what a vanished or locked file looks like to the reader
        mono[0] = 60.0
        got = cache()
        assert got.leases == () and got.refused == (("", "", Place()),)
        mono[0] = 61.0
        assert cache() is got and cache.computed == 2  # not tried again at every scrape
