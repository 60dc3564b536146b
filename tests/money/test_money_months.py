"""Which month a charge falls in, and renewals that ending a lease must keep (issue 17,
items 2 and 3), through `zuka report` as a lab reads it. Hand arithmetic beside each figure;
the month bounds are Shanghai's (the ledger's default billing zone)."""

from __future__ import annotations

import json
from decimal import Decimal as D

from leases.ledger import records
from leases.money import billing
from leases.money.amounts import fen
from leases.money.estimate import estimate
from tests.support.cli import Cli

Row = tuple[str, str]  # (cost, charged_in_month) of the node's row; ("-", "-"): no row


def month(z: Cli, m: str) -> tuple[Row, str]:
    """The node's row of month `m` and the month's total charged."""
    r = z("report", "--month", m, "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    rows = [(x["cost"], x["charged_in_month"]) for x in doc["leases"] if x["node"] == "n"]
    assert len(rows) <= 1, rows
    return (rows[0] if rows else ("-", "-")), doc["total"]["charged_in_month"]


def test_a_charge_at_midnight_on_the_first_is_that_months(z: Cli) -> None:
    """Monthly 2026-02-01 -> 03-01 at 30,000: charged at 00:00 on 1 February. February's
    cash showed 0.00 and January had no row (its `charged` held the 30,000 unseen)."""
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-02-01", "--end", "2026-03-01")  # fmt: skip
    assert r.code == 0, r.err
    assert month(z, "2026-01") == (("-", "-"), "0.00")
    assert month(z, "2026-02") == (("30000.00", "30000.00"), "30000.00")
    assert month(z, "2026-03") == (("-", "-"), "0.00")


def test_a_renewal_starting_on_the_first_is_booked_in_its_own_month(z: Cli) -> None:
    """A renewal from 2026-09-01 00:00 was booked in August's cash."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
             "--start", "2026-08-01", "--end", "2026-09-01").code == 0  # fmt: skip
    r = z("lease", "renew", "n", "--until", "2026-10-01")
    assert r.code == 0, r.err
    assert month(z, "2026-08") == (("30000.00", "30000.00"), "30000.00")
    assert month(z, "2026-09") == (("30000.00", "30000.00"), "30000.00")


def test_ending_an_auto_renewing_lease_keeps_the_renewals_it_was_charged(z: Cli) -> None:
    """Monthly 30,000 from 2026-08-01 12:00 to 09-01 12:00, auto-renewed, then ended at
    10-15 12:00. Two renewals were charged (09-01 12:00 and 10-01 12:00); the refund rule
    is unknown, so no refund: 90,000 in all. Before, the end erased both: September showed
    483.87 (its 12 hours of the first month) and October 0.00.
    Accrual (each charge over the days it pays for, Shanghai time):
      August    30,000 x 30.5/31                                     = 29,516.13
      September 30,000 x 0.5/31 (first month) + 30,000 x 29.5/30     = 29,983.87
      October   30,000 x 0.5/30 (second) + 30,000 x 14/14 (third: paid for 10-01 12:00 to
                the end at 10-15 12:00, no refund, so all of it there) = 30,500.00
    Sum 90,000.00. Cash: August 30,000, September 30,000, October 30,000."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
             "--start", "2026-08-01T12:00", "--end", "2026-09-01T12:00", "--auto-renew").code == 0  # fmt: skip
    r = z("lease", "end", "n", "--at", "2026-10-15T12:00")
    assert r.code == 0, r.err
    assert month(z, "2026-08") == (("29516.13", "30000.00"), "30000.00")
    assert month(z, "2026-09") == (("29983.87", "30000.00"), "30000.00")
    assert month(z, "2026-10") == (("30500.00", "30000.00"), "30000.00")
    assert month(z, "2026-11") == (("-", "-"), "0.00")


def test_lease_list_says_an_auto_renewing_lease_renews_at_its_end(z: Cli) -> None:
    """`lease list` printed "released" under AT END for a lease recorded --auto-renew
    (on_expiry's default): the provider renews it, as PAID UNTIL already counted."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
             "--start", "2026-08-01T12:00", "--end", "2026-09-01T12:00", "--auto-renew").code == 0  # fmt: skip
    r = z("lease", "list")
    assert r.code == 0, r.err
    head, row = r.out.splitlines()[:2]
    assert row[head.index("AT END") :].split()[0] == "renews"


def _lease(**rec: str) -> records.Lease:
    return records.lease_from({"node": "n", "billing_tz": "Asia/Shanghai", **rec})


def test_a_refund_rule_refunds_the_renewal_the_lease_ended_in() -> None:
    """The same lease with `prorated_days`: the third period (10-01 12:00 to 11-01 12:00,
    31 days) used 14 days, so 30,000 x 14/31 = 13,548.39 is kept; 73,548.39 in all."""
    le = _lease(billing_type="monthly", unit_price="30000", start="2026-08-01T12:00:00+08:00",
                end="2026-09-01T12:00:00+08:00", auto_renew="1", refund_rule="prorated_days",
                ended_at="2026-10-15T12:00:00+08:00")  # fmt: skip
    at = le.ended_at
    assert at is not None
    got = billing.cost_to_date(le, at)
    assert fen(got) == D("73548.39")
    assert fen(D(60000) + D(30000) * 14 / 31) == D("73548.39")


def test_a_renewal_charged_early_for_a_period_never_begun() -> None:
    """Charged 9 days ahead (Aliyun): ended 5 days before the third period began, the
    renewal charged for it on 09-22 stays charged (unknown refund rule: none assumed) and
    falls in the month it was charged; with prorated days it is refunded in full."""
    rec = dict(billing_type="monthly", unit_price="30000", start="2026-08-01T00:00:00+08:00",
               end="2026-09-01T00:00:00+08:00", auto_renew="1", renew_charge_days="9",
               ended_at="2026-09-26T00:00:00+08:00")  # fmt: skip
    le = _lease(**rec)
    at = le.ended_at
    assert at is not None
    # The first renewal (charged 08-23 for September), the second (charged 09-22 for
    # October), the upfront 30,000: 90,000.
    assert billing.cost_to_date(le, at) == D(90000)
    kept = _lease(**rec, refund_rule="prorated_days")
    # September's renewal used 25 of its 30 days: 30,000 x 25/30 = 25,000; October's none.
    assert billing.cost_to_date(kept, at) == D(30000) + D(25000)


def test_ending_a_lease_released_at_its_end_records_its_end_not_now(z: Cli) -> None:
    """Daily 300 x 7 from 2026-11-01, released by the platform at its end (11-08, past):
    `lease end` printed "ended at its end" but stored the moment it ran, and the next
    month had a row of ¥0 for it."""
    assert z("lease", "add", "n", "--billing", "daily", "--price", "300",
             "--start", "2026-11-01", "--end", "2026-11-08").code == 0  # fmt: skip
    r = z("lease", "end", "n")
    assert r.code == 0, r.err
    (lease,) = json.loads(z("lease", "list", "--json").out)
    assert lease["ended_at"] == "2026-11-08T00:00:00+08:00"
    assert month(z, "2026-11") == (("2100.00", "2100.00"), "2100.00")  # 300 x 7


def test_paid_until_of_an_auto_renewing_lease_ended_after_renewals(z: Cli) -> None:
    """Monthly from 08-01 12:00 to 09-01 12:00, auto-renewed, ended 10-15 12:00: renewed
    on 09-01 and 10-01, so paid until 11-01 12:00. `lease list` said 09-01 12:00."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
             "--start", "2026-08-01T12:00", "--end", "2026-09-01T12:00", "--auto-renew").code == 0  # fmt: skip
    assert z("lease", "end", "n", "--at", "2026-10-15T12:00").code == 0
    (lease,) = json.loads(z("lease", "list", "--json").out)
    assert lease["paid_until"] == "2026-11-01T12:00:00+08:00"


def test_by_period_end_of_an_auto_renewing_lease_is_this_periods_cost() -> None:
    """Monthly 60,000 from 11-03 to 12-03, auto-renewed, asked on 12-02: this period cost
    60,000 by its end; the renewal charged at 12-03 00:00 pays for the next (it showed
    120,000)."""
    le = _lease(billing_type="monthly", unit_price="60000", start="2026-11-03",
                end="2026-12-03", auto_renew="true")  # fmt: skip
    at = records.lease_from({**records.lease_record(le)}).start.replace(month=12, day=2)
    e = estimate(le, at)
    assert e.to_date == D("60000") and e.by_period_end == D("60000")
