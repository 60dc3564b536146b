"""Payment schedules (issue 20, item 1): a monthly or contract term paid a month or a
quarter at a time drives cost to date and the month's cash; the accrual is the same as
upfront; the whole term is still owed. Every figure worked out by hand beside it; the
months are past ones, so no test depends on today."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal as D
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from leases.ledger import records
from leases.money import billing, leasecost, renewals
from tests.support.cli import Cli

SH = ZoneInfo("Asia/Shanghai")


def _t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=SH)


def _month(z: Cli, month: str) -> tuple[str, str]:
    """(accrued, charged in month) of node n's row in `zuka report --month`."""
    r = z("report", "--month", month, "--format", "json")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["leases"]
    return row["cost"], row["charged_in_month"]


def _lease(**rec: str) -> records.Lease:
    return records.lease_from({"node": "n", "billing_tz": "Asia/Shanghai", **rec})


def test_a_year_at_1000_monthly_is_charged_1000_a_month(z: Cli) -> None:
    """12 months from 2026-03-01 at 1,000, monthly: 1,000 on the 1st of each month."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-03-01", "--end", "2027-03-01", "--payment-schedule", "monthly").code == 0  # fmt: skip
    # March: 1,000 charged on 03-01 (upfront would be 12 x 1,000 = 12,000); accrued a
    # whole month of the 12,000 term = 1,000.
    assert _month(z, "2026-03") == ("1000.00", "1000.00")
    assert _month(z, "2026-04") == ("1000.00", "1000.00")
    assert _month(z, "2026-11") == ("1000.00", "1000.00")


def test_cost_to_date_counts_the_instalments_charged_by_then() -> None:
    le = _lease(billing_type="monthly", unit_price="1000", start="2026-03-01T00:00:00",
                end="2027-03-01T00:00:00", payment_schedule="monthly")  # fmt: skip
    # Two weeks in: the first instalment only, 1,000 (not 12,000).
    assert billing.cost_to_date(le, _t("2026-03-15")) == D(1000)
    # 00:00 on 04-01 is the second instalment's moment: 2 x 1,000.
    assert billing.cost_to_date(le, _t("2026-04-01")) == D(2000)
    assert billing.cost_to_date(le, _t("2026-03-31T23:59")) == D(1000)
    # From 2027-02-01 on, all twelve: 12,000; the same after the end.
    assert billing.cost_to_date(le, _t("2027-02-01")) == D(12000)
    assert billing.cost_to_date(le, _t("2027-06-01")) == D(12000)
    # The same lease upfront: 12,000 from its first moment.
    up = _lease(billing_type="monthly", unit_price="1000", start="2026-03-01T00:00:00",
                end="2027-03-01T00:00:00")  # fmt: skip
    assert billing.cost_to_date(up, _t("2026-03-15")) == D(12000)


def test_a_colo_contract_paid_quarterly(z: Cli) -> None:
    """36,000 a month, a year from 2026-04-01, quarterly: 3 x 36,000 = 108,000 on 04-01,
    07-01, 10-01 and 2027-01-01; nothing in the months between. Accrued: 36,000 a month
    either way."""
    assert z("lease", "add", "n", "--billing", "contract", "--price", "36000", "--start",
             "2026-04-01", "--end", "2027-04-01", "--payment-schedule", "quarterly").code == 0  # fmt: skip
    assert _month(z, "2026-04") == ("36000.00", "108000.00")
    assert _month(z, "2026-05") == ("36000.00", "0.00")
    assert _month(z, "2026-06") == ("36000.00", "0.00")
    assert _month(z, "2026-07") == ("36000.00", "108000.00")


def test_the_last_part_quarter_is_what_is_left(z: Cli) -> None:
    """5 months from 2026-04-01 at 36,000, quarterly: 108,000 on 04-01, then the 2 months
    left, 2 x 36,000 = 72,000, on 07-01."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "36000", "--start",
             "2026-04-01", "--end", "2026-09-01", "--payment-schedule", "quarterly").code == 0  # fmt: skip
    assert _month(z, "2026-04")[1] == "108000.00"
    assert _month(z, "2026-07") == ("36000.00", "72000.00")
    assert _month(z, "2026-08") == ("36000.00", "0.00")


def test_accrual_is_the_same_as_upfront_only_the_cash_moves(z: Cli) -> None:
    """2 months from 01-15 at 30,000. January accrues 17 of the first month's 31 days:
    30,000 x 17/31 = 16,451.61, upfront or monthly. Cash: upfront 60,000 in January and 0
    in February; monthly 30,000 on 01-15 and 30,000 on 02-15."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-01-15", "--end", "2026-03-15", "--payment-schedule", "monthly").code == 0  # fmt: skip
    assert _month(z, "2026-01") == ("16451.61", "30000.00")
    # February: 14/31 of the first month + 14/28 of the second = 13,548.39 + 15,000
    assert _month(z, "2026-02") == ("28548.39", "30000.00")
    # a started lease keeps its schedule (its cash is paid): the same lease typed upfront
    assert z("lease", "delete", "n", "--start", "2026-01-15").code == 0
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-01-15", "--end", "2026-03-15", "--payment-schedule", "upfront").code == 0  # fmt: skip
    assert _month(z, "2026-01") == ("16451.61", "60000.00")
    assert _month(z, "2026-02") == ("28548.39", "0.00")


def test_calendar_months_from_the_31st_and_30_day_months() -> None:
    # From 01-31, calendar months: instalments on 01-31, 02-28 (no 31st), 03-31.
    le = _lease(billing_type="monthly", unit_price="1000", start="2026-01-31T00:00:00",
                end="2026-04-30T00:00:00", payment_schedule="monthly")  # fmt: skip
    assert billing.cost_to_date(le, _t("2026-02-27T23:00")) == D(1000)
    assert billing.cost_to_date(le, _t("2026-02-28")) == D(2000)
    assert billing.cost_to_date(le, _t("2026-03-30")) == D(2000)
    assert billing.cost_to_date(le, _t("2026-03-31")) == D(3000)
    # 30-day months from 01-01, 60 days: instalments on 01-01 and 01-31, both in January.
    le30 = _lease(billing_type="monthly", unit_price="1000", start="2026-01-01T00:00:00",
                  end="2026-03-02T00:00:00", payment_schedule="monthly",
                  month_count="30_days")  # fmt: skip
    jan = billing.charged_between([le30], _t("2026-01-01"), _t("2026-02-01"))
    assert jan == D(2000)


def test_an_early_end_charges_no_later_instalment_and_refunds_the_running_one(z: Cli) -> None:
    """3,000 a month from 2026-04-01 for a year, monthly, refunded by the unused days, ended
    06-11: April 3,000 and May 3,000 in full; June (30 days) used 10: 3,000 x 10/30 = 1,000
    kept. Nothing from July on."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "3000", "--start",
             "2026-04-01", "--end", "2027-04-01", "--payment-schedule", "monthly",
             "--refund-rule", "prorated_days").code == 0  # fmt: skip
    assert z("lease", "end", "n", "--at", "2026-06-11").code == 0
    # June's cash 1,000; accrued 7,000 over April, May and a third of June (7/3 units):
    # June 7,000 x (1/3)/(7/3) = 1,000.
    assert _month(z, "2026-06") == ("1000.00", "1000.00")
    assert _month(z, "2026-05") == ("3000.00", "3000.00")
    r = z("report", "--month", "2026-07", "--format", "json")
    assert json.loads(r.out)["leases"] == []  # nothing charged, nothing accrued


def test_an_early_end_with_an_unknown_refund_rule_keeps_the_running_instalment() -> None:
    """No refund rule: the instalment paid for June is kept whole: 3 x 3,000 = 9,000."""
    le = _lease(billing_type="monthly", unit_price="3000", start="2026-04-01T00:00:00",
                end="2027-04-01T00:00:00", payment_schedule="monthly",
                ended_at="2026-06-11T00:00:00")  # fmt: skip
    assert billing.cost_to_date(le, _t("2026-12-01")) == D(9000)


def test_by_the_lease_end_the_whole_term_is_owed_and_said_so() -> None:
    """At 2026-03-15 a year at 1,000 monthly has charged 1,000; 12,000 is owed by the term."""
    le = _lease(billing_type="monthly", unit_price="1000", start="2026-03-01T00:00:00",
                end="2027-03-01T00:00:00", payment_schedule="monthly")  # fmt: skip
    le = records.Lease(**{**le.__dict__, "id": 1})
    c = leasecost.node_cost(None, [le], [], None, _t("2026-03-15"))
    assert c is not None and c.estimate is not None
    assert c.estimate.to_date == D(1000)
    assert c.estimate.by_lease_end == D(12000)
    # By the period's end (04-01), the April instalment not yet: 1,000.
    assert c.estimate.by_period_end == D(1000)
    assert leasecost.by_lease_end(c) == (
        "CNY 12,000.00 by 2027-03-01 00:00 (owed by the term: CNY 12,000.00, of which CNY 1,000.00 charged)"
    )
    doc = leasecost.to_json(c)
    assert (doc["term_owed"], doc["term_charged"]) == ("12000.00", "1000.00")


def test_renew_keeps_the_schedule_unless_given(z: Cli) -> None:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-01-01", "--end", "2026-04-01", "--payment-schedule", "quarterly").code == 0  # fmt: skip
    assert z("lease", "renew", "n", "--until", "2026-07-01").code == 0
    got = [le["payment_schedule"] for le in json.loads(z("lease", "list", "--json").out)]
    assert got == ["quarterly", "quarterly"]
    assert z("lease", "renew", "n", "--until", "2026-10-01", "--payment-schedule",
             "monthly").code == 0  # fmt: skip
    got = [le["payment_schedule"] for le in json.loads(z("lease", "list", "--json").out)]
    assert got == ["quarterly", "quarterly", "monthly"]
    # The renewal from 04-01 pays its quarter, 3 x 1,000 = 3,000, on 04-01.
    assert _month(z, "2026-04")[1] == "3000.00"
    # The one from 07-01 pays 1,000 a month.
    assert _month(z, "2026-08")[1] == "1000.00"


@pytest.mark.parametrize(
    ("terms", "field"),
    [
        # a schedule on an hourly lease: billed as it runs
        (("--billing", "hourly", "--price", "12", "--start", "2026-03-01",
          "--payment-schedule", "monthly"), "payment-schedule"),
        # on a daily term: paid whole
        (("--billing", "daily", "--price", "240", "--start", "2026-03-01", "--end",
          "2026-03-08", "--payment-schedule", "quarterly"), "payment-schedule"),
        # a typo of the schedule
        (("--billing", "monthly", "--price", "1000", "--start", "2026-03-01", "--end",
          "2026-06-01", "--payment-schedule", "montly"), "payment-schedule"),
        # a comma for a decimal point in the price
        (("--billing", "monthly", "--price", "1,5", "--start", "2026-03-01", "--end",
          "2026-06-01", "--payment-schedule", "monthly"), "price"),
        # the end before the start
        (("--billing", "monthly", "--price", "1000", "--start", "2026-06-01", "--end",
          "2026-03-01", "--payment-schedule", "monthly"), "end"),
    ],
)  # fmt: skip
def test_a_schedule_that_makes_no_sense_is_refused(
    z: Cli, ledger_path: Path, terms: tuple[str, ...], field: str
) -> None:
    before = ledger_path.read_bytes()
    r = z("lease", "add", "n", *terms)
    assert r.code == 2
    assert field in r.err, r.err
    assert ledger_path.read_bytes() == before


def test_an_hourly_lease_cannot_be_edited_onto_a_schedule(z: Cli, ledger_path: Path) -> None:
    assert z("lease", "add", "n", "--billing", "hourly", "--price", "12", "--start",
             "2026-03-01").code == 0  # fmt: skip
    before = ledger_path.read_bytes()
    r = z("lease", "edit", "n", "--payment-schedule", "monthly")
    assert r.code == 2
    assert "payment-schedule" in r.err and "an hourly lease is billed as it runs" in r.err
    assert ledger_path.read_bytes() == before


def test_month_by_month_the_cash_and_the_accrual_both_add_up_to_the_term() -> None:
    """5 months from 04-01 at 36,000, quarterly: 5 x 36,000 = 180,000 in all, charged
    108,000 (April) + 72,000 (July); accrued 36,000 in each of the five months."""
    le = _lease(billing_type="monthly", unit_price="36000", start="2026-04-01T00:00:00",
                end="2026-09-01T00:00:00", payment_schedule="quarterly")  # fmt: skip
    months = [_t(f"2026-{m:02d}-01") for m in range(3, 11)]
    cash = [billing.charged_between([le], a, b) for a, b in pairwise(months)]
    accrual = [billing.accrued(le, a, b) for a, b in pairwise(months)]
    # March .. September
    assert cash == [0, 108000, 0, 0, 72000, 0, 0]
    assert accrual == [0, 36000, 36000, 36000, 36000, 36000, 0]
    assert sum(cash) == sum(accrual) == D(180000)


def test_an_early_end_leaves_the_months_before_it_as_they_were(z: Cli) -> None:
    """36,000 a month from 2026-09-15 for a year, paid monthly, no refund rule; ended
    2026-11-25. Each instalment accrues over the month it pays for:
    September: 16 of 09-15..10-15's 30 days: 36,000 x 16/30 = 19,200.00.
    October: 14/30 of it = 16,800 + 17 of 10-15..11-15's 31 days: 36,000 x 17/31 =
    19,741.935..., together 36,541.94.
    November: 14/31 of 10-15..11-15 = 16,258.064... + the instalment charged 11-15, kept
    whole (no refund rule), over 11-15..11-25, all in November: 36,000 -> 52,258.06.
    Recording the end leaves September and October as they were."""
    assert z("lease", "add", "n", "--billing", "contract", "--price", "36000", "--start",
             "2026-09-15", "--end", "2027-09-15", "--payment-schedule", "monthly").code == 0  # fmt: skip
    assert _month(z, "2026-09")[0] == "19200.00"
    assert _month(z, "2026-10")[0] == "36541.94"
    assert z("lease", "end", "n", "--at", "2026-11-25").code == 0
    assert _month(z, "2026-09") == ("19200.00", "36000.00")
    assert _month(z, "2026-10") == ("36541.94", "36000.00")
    assert _month(z, "2026-11") == ("52258.06", "36000.00")
    # Nothing after the end: 3 x 36,000 = 108,000 charged and accrued in all.
    assert json.loads(z("report", "--month", "2026-12", "--format", "json").out)["leases"] == []


def test_paid_until_is_the_end_of_the_last_instalment_charged() -> None:
    """A year from 2026-10-01 at 36,000, quarterly: instalments on 10-01, 2027-01-01,
    04-01, 07-01. On 2026-12-02 only the first is charged: paid until 2027-01-01, not the
    term's end 2027-10-01; on 2027-01-01 the second: 2027-04-01; after 07-01, the end."""
    le = _lease(billing_type="contract", unit_price="36000", start="2026-10-01T00:00:00",
                end="2027-10-01T00:00:00", payment_schedule="quarterly")  # fmt: skip
    assert renewals.paid_so_far([le], _t("2026-12-02")) == _t("2027-01-01")
    assert renewals.paid_so_far([le], _t("2027-01-01")) == _t("2027-04-01")
    assert renewals.paid_so_far([le], _t("2027-08-01")) == _t("2027-10-01")
    # Not started yet: the first quarter is what its start will pay for.
    assert renewals.paid_so_far([le], _t("2026-09-01")) == _t("2027-01-01")
    # Upfront: the whole term at the start.
    up = _lease(billing_type="contract", unit_price="36000", start="2026-10-01T00:00:00",
                end="2027-10-01T00:00:00")  # fmt: skip
    assert renewals.paid_so_far([up], _t("2026-12-02")) == _t("2027-10-01")


def test_lease_list_shows_the_schedule_and_what_is_paid_for(z: Cli) -> None:
    """A year from 2026-01-01, quarterly, ended 2026-05-10: the instalment of 04-01 paid for
    04-01..07-01, so paid until 2026-07-01 (not the term's end 2027-01-01)."""
    assert z("lease", "add", "n", "--billing", "contract", "--price", "36000", "--start",
             "2026-01-01", "--end", "2027-01-01", "--payment-schedule", "quarterly").code == 0  # fmt: skip
    assert z("lease", "end", "n", "--at", "2026-05-10").code == 0
    (doc,) = json.loads(z("lease", "list", "--json").out)
    assert doc["paid_until"] == "2026-07-01T00:00:00+08:00"
    table = z("lease", "list").out
    assert "contract, quarterly" in table and "2026-07-01" in table, table
