"""Billing (leases.money.billing) against hand-computed tables, and its properties.

Every figure in the tables was worked out by hand; the comment beside it says how.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlite_utils import Database

from leases.core import fields
from leases.core.errors import InputError
from leases.core.models import BillingType, Lease, Resource, ResourceKind
from leases.ledger import records
from leases.ledger.records import renewal_record
from leases.ledger.schema import MIGRATIONS
from leases.ledger.store import Ledger
from leases.money import billing, periods
from leases.money.amounts import fen
from leases.money.estimate import current_period, estimate, unknowns
from leases.money.renewals import chains
from leases.money.units import partial, refund_rule
from leases.money.verdict import break_even_hours, hourly_vs_monthly, lease_break_even, verdict_text
from leases.telemetry.history import (
    GpuMinute,
    NodeMinute,
    busy_verdict,
    hour_of,
    pack_minute,
    unpack_minute,
)
from leases.telemetry.rollups import HistoryStore

D = Decimal


def lease(**kw: Any) -> Lease:
    return records.lease_from({"node": "n1", **kw})


def t(text: str) -> datetime:
    """A time; without an offset it is Shanghai time."""
    return fields.moment("at", text)


# -- hand-computed tables -----------------------------------------------------------------

TABLE = [
    # per_second 0.001 a second across the January month end: 150 s = 0.15.
    ("per_second month end", dict(billing_type="per_second", unit_price="0.001",
     start="2026-01-31T23:59:00"), "2026-02-01T00:01:30", "0.15"),
    # hourly 12 over the leap day: 2028-02-28 22:00 to 03-01 01:30 is 27.5 h = 330.
    ("hourly leap day", dict(billing_type="hourly", unit_price="12",
     start="2028-02-28T22:00"), "2028-03-01T01:30", "330"),
    # the same, a started hour billed in full: 28 h = 336.
    ("hourly started hour", dict(billing_type="hourly", unit_price="12", partial_unit="hour",
     start="2028-02-28T22:00"), "2028-03-01T01:30", "336"),
    # per started minute (Baidu, 胜算云): 10 min 1 s is 11 minutes of 12/h = 2.20.
    ("hourly per minute", dict(billing_type="hourly", unit_price="12", partial_unit="minute",
     start="2026-05-01T00:00"), "2026-05-01T00:10:01", "2.20"),
    # card_hour 1.98 x 8 cards x 2.5 h = 39.60.
    ("card_hour", dict(billing_type="card_hour", unit_price="1.98", cards_billed=8,
     start="2026-11-02"), "2026-11-02T02:30", "39.60"),
    # daily 100, three whole days = 300 (charged at the start).
    ("daily", dict(billing_type="daily", unit_price="100", start="2026-03-01T10:00",
     end="2026-03-04T10:00"), "2026-03-01T10:00", "300"),
    # daily, two hours over: a started day in full = 400.
    ("daily partial day", dict(billing_type="daily", unit_price="100",
     start="2026-03-01T10:00", end="2026-03-04T12:00"), "2026-03-02", "400"),
    # the same pro rata by started hour: 300 + 100 x 2/24 = 308.33.
    ("daily partial hours", dict(billing_type="daily", unit_price="100", partial_unit="hour",
     start="2026-03-01T10:00", end="2026-03-04T12:00"), "2026-03-02", "308.33"),
    # weekly 600 over the year end, two weeks = 1200.
    ("weekly year end", dict(billing_type="weekly", unit_price="600", start="2026-12-28",
     end="2027-01-11"), "2027-01-01", "1200"),
    # calendar months from the 31st through the leap February: Jan 31 -> Feb 29 -> Mar 31
    # -> Apr 30 is three months = 90000.
    ("monthly calendar leap", dict(billing_type="monthly", unit_price="30000",
     start="2028-01-31", end="2028-04-30"), "2028-02-29T12:00", "90000"),
    # 30-day months: Jan 31 to Apr 30 2028 is 90 days = 3 months = 90000.
    ("monthly 30 days", dict(billing_type="monthly", unit_price="30000", month_count="30_days",
     start="2028-01-31", end="2028-04-30"), "2028-03-01", "90000"),
    # 91 days of 30-day months: the started 4th month in full = 120000 ...
    ("monthly 30 days over", dict(billing_type="monthly", unit_price="30000",
     month_count="30_days", start="2028-01-31", end="2028-05-01"), "2028-03-01", "120000"),
    # ... or by the started day: 3 + 1/30 months = 91000.
    ("monthly 30 days by day", dict(billing_type="monthly", unit_price="30000",
     month_count="30_days", partial_unit="day", start="2028-01-31", end="2028-05-01"),
     "2028-03-01", "91000"),
    # contract 36000 a month for 12 calendar months = 432000.
    ("contract", dict(billing_type="contract", unit_price="36000", start="2026-06-01",
     end="2027-06-01"), "2026-12-31", "432000"),
    # Shanghai: 2026-02-28 16:00 UTC is Mar 1 00:00, to Apr 1 00:00 (Mar 31 16:00 UTC) is
    # one calendar month = 30000.
    ("Shanghai month", dict(billing_type="monthly", unit_price="30000",
     start="2026-02-28T16:00:00+00:00", end="2026-03-31T16:00:00+00:00"),
     "2026-03-10T00:00:00+00:00", "30000"),
    # The same instants billed in UTC: Feb 28 16:00 -> Mar 28 16:00 is a month, 3 days over:
    # a started month in full = 60000.
    ("UTC month", dict(billing_type="monthly", unit_price="30000", billing_tz="UTC",
     start="2026-02-28T16:00:00+00:00", end="2026-03-31T16:00:00+00:00"),
     "2026-03-10T00:00:00+00:00", "60000"),
    # ... and by started day: 1 + 3/31 months = 32903.23.
    ("UTC month by day", dict(billing_type="monthly", unit_price="30000", billing_tz="UTC",
     partial_unit="day", start="2026-02-28T16:00:00+00:00",
     end="2026-03-31T16:00:00+00:00"), "2026-03-10T00:00:00+00:00", "32903.23"),
    # hourly 12 ended early at 05:20: 5 h 20 min = 64, and it stays 64 afterwards.
    ("hourly ended", dict(billing_type="hourly", unit_price="12", start="2026-01-01",
     ended_at="2026-01-01T05:20"), "2026-03-01", "64"),
    # hourly 10 with a 100-hour minimum, ended after 5 h: the minimum, 1000.
    ("minimum commitment", dict(billing_type="hourly", unit_price="10", min_commitment=100,
     start="2026-01-01", ended_at="2026-01-01T05:00"), "2026-01-02", "1000"),
    # released at its end: hourly 10 with an end at 03:00 bills 3 h = 30 after that.
    ("hourly released at end", dict(billing_type="hourly", unit_price="10",
     start="2026-01-01", end="2026-01-01T03:00"), "2026-01-05", "30"),
    # a month at 30000 then hourly at 50: one day after the end = 30000 + 24 x 50 = 31200.
    ("monthly falls back to hourly", dict(billing_type="monthly", unit_price="30000",
     start="2026-01-01", end="2026-02-01", on_expiry="hourly", hourly_price="50"),
     "2026-02-02", "31200"),
    # auto-renew charged 9 days before the end (Aliyun): on Jan 23 the next month = 60000.
    ("auto-renew charge day", dict(billing_type="monthly", unit_price="30000",
     start="2026-01-01", end="2026-02-01", on_expiry="renews", renew_charge_days=9),
     "2026-01-23", "60000"),
    ("auto-renew before the charge day", dict(billing_type="monthly", unit_price="30000",
     start="2026-01-01", end="2026-02-01", on_expiry="renews", renew_charge_days=9),
     "2026-01-22T23:59", "30000"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("terms", "at", "expected"), [r[1:] for r in TABLE], ids=[r[0] for r in TABLE]
)
def test_cost_to_date_matches_the_hand_computed_table(
    terms: dict[str, Any], at: str, expected: str
) -> None:
    assert fen(billing.cost_to_date(lease(**terms), t(at))) == D(expected).quantize(D("0.01"))


EARLY = dict(billing_type="monthly", unit_price="30000", start="2026-01-01", end="2026-04-01",
             ended_at="2026-02-10T12:00", hourly_price="60")  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("none", "90000"),  # no refund: three months
        ("prorated_days", "41000"),  # 40.5 days used -> 41 of 90 days
        ("prorated_hours", "40500"),  # 972 of 2160 hours
        ("used_then_hourly", "43680"),  # January 30000 + 228 h x 60 (Tencent)
        ("", "90000"),  # unknown: no refund assumed
        ("refund minus a 10% fee, ask sales", "90000"),
    ],
)
def test_a_prepaid_lease_ended_early_follows_its_refund_rule(rule: str, expected: str) -> None:
    le = lease(**EARLY, refund_rule=rule)
    assert billing.cost_to_date(le, t("2026-05-01")) == D(expected)
    # Before the end, the three months were charged whole (90,000 on 01-01); what the rule
    # refunds comes back on the day it ended (02-10 12:00), as providers refund on release.
    assert billing.cost_to_date(le, t("2026-01-01")) == D(90000)
    assert billing.cost_to_date(le, t("2026-02-10T11:59")) == D(90000)
    assert billing.cost_to_date(le, t("2026-02-10T12:00")) == D(expected)
    notes = unknowns(le, t("2026-05-01"))
    assert bool(notes) == (refund_rule(le) is None)


def test_hourly_fallback_without_a_price_is_said_to_be_unknown() -> None:
    le = lease(billing_type="monthly", unit_price="30000", start="2026-01-01",
               end="2026-02-01", on_expiry="hourly")  # fmt: skip
    est = estimate(le, t("2026-02-02"))
    assert est.to_date == D(30000)
    assert est.unknown and "--hourly-price" in est.unknown[0]


def test_a_renewal_chain_costs_the_sum_of_its_leases() -> None:
    first = lease(billing_type="monthly", unit_price="30000", start="2026-01-01",
                  end="2026-02-01", min_commitment=2)  # fmt: skip
    second = records.lease_from(renewal_record(first, "2026-03-01", {"unit_price": "28000"}))
    first = records.lease_from({**records.lease_record(first), "ended_at": "2026-02-01"})
    (chain,) = chains([first, second])
    assert billing.chain_cost(chain, t("2026-01-15")) == D(30000)
    assert billing.chain_cost(chain, t("2026-02-01")) == D(58000)
    # The minimum (2 months of the first lease, 60000) holds for the chain, once, at its end.
    assert billing.chain_cost(chain, t("2026-03-01")) == D(60000)
    est = estimate(chain, t("2026-02-15"))
    # Its period ends with the chain, so the minimum is owed by then too.
    assert (est.to_date, est.by_period_end, est.by_lease_end) == (D(58000), D(60000), D(60000))
    assert est.period == (t("2026-02-01"), t("2026-03-01"))
    assert est.lease_end == t("2026-03-01")


def test_stops_pause_a_lease_that_bills_storage_only() -> None:
    stop = [(t("2026-01-01T03:00"), t("2026-01-01T05:00"))]
    full = lease(billing_type="hourly", unit_price="10", start="2026-01-01")
    paused = lease(billing_type="hourly", unit_price="10", start="2026-01-01",
                   stopped_billing="storage_only")  # fmt: skip
    at = t("2026-01-01T10:00")
    assert billing.cost_to_date(full, at, stops=stop) == D(100)  # 10 h
    assert billing.cost_to_date(paused, at, stops=stop) == D(80)  # 10 h less 2 stopped
    still = [(t("2026-01-01T08:00"), None)]  # stopped since 08:00
    assert billing.cost_to_date(paused, at, stops=still) == D(80)
    assert billing.paid_card_hours(paused, t("2026-01-01"), at, stops=stop, cards=8) == D(64)


def test_storage_lines_bill_from_created_until_deleted_after_the_lease_ends() -> None:
    le = lease(billing_type="hourly", unit_price="10", start="2026-01-01",
               ended_at="2026-01-02", stopped_billing="storage_only")  # fmt: skip
    disk = Resource(0, ResourceKind.DISK, "d-1", created=t("2026-01-15"), price=D(31))
    # Jan 15 to Feb 15 is one calendar month = 31, although the lease ended Jan 2.
    assert billing.storage_cost(disk, le, t("2026-02-15")) == D(31)
    # Deleted Feb 1: 17 of January's 31 days = 17.
    gone = Resource(0, ResourceKind.DISK, "d-1", created=t("2026-01-15"), price=D(31),
                    deleted_at=t("2026-02-01"))  # fmt: skip
    assert billing.storage_cost(gone, le, t("2026-03-01")) == D(17)
    # AutoDL's expanded disk: 0.0066 a GB a day, 500 GB = 3.3 a day, through a stop.
    per_day = Resource(0, ResourceKind.DISK, "d-2", price=D("3.3"), price_per="day")  # type: ignore[arg-type]
    stops = [(t("2026-01-01T02:00"), None)]
    assert billing.storage_cost(per_day, le, t("2026-01-11"), stops=stops) == D("33.0")
    est = estimate(le, t("2026-01-11"), stops=stops, storage=[(per_day, le)])
    # The lease ran 00:00-02:00 before the stop (20); the disk billed on through it.
    assert est.to_date == D(20) + D("33.0") and est.storage_to_date == D("33.0")


def test_the_current_period_of_pay_as_you_go_is_the_month_in_the_billing_zone() -> None:
    # 2026-03-31 17:00 UTC is already April 1 in Shanghai.
    at = t("2026-03-31T17:00:00+00:00")
    sh = lease(billing_type="hourly", unit_price="1", start="2026-03-01")
    utc = lease(billing_type="hourly", unit_price="1", start="2026-03-01", billing_tz="UTC")
    assert current_period(sh, at) == (t("2026-04-01"), t("2026-05-01"))
    assert current_period(utc, at) == (
        t("2026-03-01T00:00:00+00:00"), t("2026-04-01T00:00:00+00:00"),
    )  # fmt: skip
    # By the end of the period: Shanghai's April runs to Apr 30 16:00 UTC, UTC's March to
    # Apr 1 00:00 UTC: 720 + 23 h more against 7 h.
    e_sh, e_utc = estimate(sh, at), estimate(utc, at)
    assert e_sh.by_period_end - e_sh.to_date == D(720 - 1)
    assert e_utc.by_period_end - e_utc.to_date == D(7)


def test_a_card_hour_lease_without_cards_is_refused_by_name() -> None:
    le = lease(billing_type="card_hour", unit_price="2", start="2026-01-01")
    with pytest.raises(Exception, match="cards"):
        billing.cost_to_date(le, t("2026-01-02"))
    assert billing.cost_to_date(le, t("2026-01-01T01:00"), cards=4) == D(8)


# -- card-hours, idle yuan, break-even ---------------------------------------------------


def test_idle_yuan_and_effective_price_from_card_minutes() -> None:
    # 8 cards x 10 h paid = 80; history: 30 h busy, 50 h known; 800 yuan.
    ch = billing.card_hours(D(80), 30 * 60, 50 * 60, D(800))
    assert (ch.busy, ch.idle, ch.unknown) == (D(30), D(20), D(30))
    assert ch.idle_yuan == D(200)  # 800 x 20/80
    assert fen(ch.price_per_busy_hour or D(0)) == D("26.67")


def test_unknown_minutes_are_never_idle() -> None:
    ch = billing.card_hours(D(80), 0, 0, D(800))  # no history at all
    assert (ch.idle, ch.unknown, ch.idle_yuan, ch.price_per_busy_hour) == (0, 80, 0, None)
    # A minute without a utilisation reading has no idle verdict; a loaded card that runs
    # nothing is idle; memory with power above idle is busy.
    assert busy_verdict(None, None, None) is None
    assert busy_verdict(None, 70_000.0, 140.0, 700.0) is None
    assert busy_verdict(0.0, 70_000.0, 140.0, 700.0) is False  # H100 loaded, idle
    assert busy_verdict(3.0, 70_000.0, 420.0, 700.0) is True  # starved, but working
    assert busy_verdict(3.0, 500.0, 420.0, 700.0) is False  # driver memory only
    assert busy_verdict(55.0, None, None) is True
    assert busy_verdict(0.0, 30_000.0, 300.0) is False  # no limit: 300 W is under 400 W
    hour = hour_of("n1", 1, [NodeMinute("n1", 60 + i, (GpuMinute(0, 0, None, None, None, None),
                                                        GpuMinute(1, 6, 0.0, 0.0, 1.0, 30.0)))
                             for i in range(60)])  # fmt: skip
    assert (hour.gpus[0].known_minutes, hour.gpus[1].known_minutes) == (0, 60)
    assert hour.busy_card_minutes == 0


def test_minute_rows_keep_the_power_limit_and_old_rows_still_read() -> None:
    g = GpuMinute(3, 6, 4.0, 9.0, 70_000.0, 420.0, 700.0)
    (back,) = unpack_minute(pack_minute([g]))
    assert back.power_limit_w == 700.0 and back.busy is True
    old = bytes.fromhex("03060409701101006810")  # a 10-byte row as written before
    (was,) = unpack_minute(old)
    assert (was.index, was.util_mean, was.power_limit_w) == (3, 4.0, None)


def test_break_even_and_the_verdict() -> None:
    assert break_even_hours(D(30000), D(60)) == D(500)
    le = lease(billing_type="monthly", unit_price="30000", start="2026-01-01",
               end="2026-02-01", hourly_price="60", cards_billed=8)  # fmt: skip
    assert lease_break_even(le) == D(500)
    # 60 an hour for 8 cards = 7.5 a card-hour; 300 busy card-hours = 2250 against 30000.
    ch = billing.card_hours(D(8 * 744), 300 * 60, 8 * 744 * 60, D(30000))
    verdict = billing.lease_verdict(le, ch)
    assert verdict is not None
    assert (
        verdict_text(verdict, le.currency)
        == "hourly would have cost CNY 27,750.00 less (the provider's early-release refund rule is unknown)"
    )
    busy = hourly_vs_monthly(D(30000), D(5000), D("7.5"))
    assert verdict_text(busy, "CNY") == "monthly saves CNY 7,500.00"
    assert verdict_text(busy, "USD") == "monthly saves USD 7,500.00"
    # Unknown hours count as used: they cannot make hourly look cheaper.
    assert hourly_vs_monthly(D(30000), D(0), D("7.5"), D(4000)).monthly_saves == 0


def test_a_lease_usage_read_from_real_history(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h", "gpu_count": 2}))
    le = ledger.add_lease(lease(billing_type="card_hour", unit_price="2", cards_billed=2,
                                start="2026-01-01T00:00:00+00:00"))  # fmt: skip
    store = HistoryStore(ledger)
    base = int(t("2026-01-01T00:00:00+00:00").timestamp()) // 3600
    # Hour 0: GPU 0 busy all hour, GPU 1 loaded but idle. Hour 1: nothing read (unknown).
    minutes = [NodeMinute("n1", base * 60 + i, (GpuMinute(0, 6, 90.0, 99.0, 40e3, 300.0, 700.0),
                                                 GpuMinute(1, 6, 0.0, 0.0, 40e3, 90.0, 700.0)))
               for i in range(60)]  # fmt: skip
    store.write_minutes(minutes)
    usage = store.lease_usage(le, t("2026-01-01T00:00:00+00:00"), t("2026-01-01T02:00:00+00:00"))
    assert (usage.paid, usage.busy, usage.idle, usage.unknown) == (4, 1, 1, 2)
    assert usage.cost == D(8) and usage.idle_yuan == D(2)
    ledger.close()


def test_m006_gives_existing_leases_the_old_terms(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    MIGRATIONS.apply(Database(conn), stop_before="m006_lease_terms")
    conn.execute("PRAGMA user_version = 5")
    conn.execute("INSERT INTO nodes (name, ssh_host) VALUES ('n1', 'h')")
    conn.execute("INSERT INTO leases (node_id, billing_type, unit_price, start) VALUES"
                 " (1, 'hourly', '3', '2026-01-01T00:00:00+08:00')")  # fmt: skip
    conn.commit()
    conn.close()
    with Ledger.open(path) as ledger:
        (le,) = ledger.leases()
        assert (le.stopped_billing, le.month_count, le.partial_unit, le.refund_rule) == (
            "full", "calendar", None, "",
        )  # fmt: skip
        assert partial(le) == "second"


# -- properties ---------------------------------------------------------------------------

_TYPES = [bt.value for bt in BillingType]
_START = datetime(2028, 1, 31, tzinfo=UTC)


@st.composite
def leases(draw: st.DrawFn) -> Lease:
    bt = draw(st.sampled_from(_TYPES))
    start = _START + timedelta(minutes=draw(st.integers(0, 60 * 24 * 60)))
    span = timedelta(hours=draw(st.integers(1, 24 * 200)))
    ended = draw(st.none() | st.integers(0, 24 * 200))
    rec: dict[str, Any] = {
        "billing_type": bt,
        "unit_price": str(draw(st.decimals("0.01", "50000", places=2))),
        "start": start.isoformat(),
        "billing_tz": draw(st.sampled_from(["Asia/Shanghai", "UTC", "America/New_York"])),
        "cards_billed": draw(st.integers(1, 8)),
        "month_count": draw(st.sampled_from(["calendar", "30_days"])),
        "partial_unit": draw(st.none() | st.sampled_from(["second", "minute", "hour", "day", "whole"])),
        "on_expiry": draw(st.sampled_from(["released", "hourly", "renews"])),
        "hourly_price": draw(st.none() | st.just("40")),
        "renew_charge_days": draw(st.none() | st.integers(0, 9)),
        "min_commitment": draw(st.none() | st.integers(1, 5)),
        "refund_rule": draw(st.sampled_from(["", "none", "prorated_days", "prorated_hours", "used_then_hourly"])),
        "stopped_billing": draw(st.sampled_from(["full", "storage_only", "none"])),
    }  # fmt: skip
    if BillingType(bt).prepaid or draw(st.booleans()):
        rec["end"] = (start + span).isoformat()
    if ended is not None:
        rec["ended_at"] = (start + timedelta(hours=ended)).isoformat()
    return records.lease_from({"node": "n1", **rec})


_STOPS = [
    (_START + timedelta(days=3), _START + timedelta(days=5)),
    (_START + timedelta(days=40), None),
]


@settings(max_examples=150, deadline=None)
@given(leases(), st.lists(st.integers(0, 24 * 400), min_size=2, max_size=5))
def test_cost_never_falls_as_time_passes_and_projection_is_never_below(
    le: Lease, hours: list[int]
) -> None:
    times = sorted(_START + timedelta(hours=h) for h in hours)
    costs = [billing.cost_to_date(le, at, stops=_STOPS) for at in times]
    # It never falls as time passes, but once: by what an early end refunds, on its day.
    ended = le.ended_at
    before = [c for at, c in zip(times, costs, strict=True) if ended is None or at < ended]
    after = [c for at, c in zip(times, costs, strict=True) if ended is not None and at >= ended]
    assert before == sorted(before) and after == sorted(after)
    assert all(c >= 0 for c in costs)
    if ended is None or times[0] >= ended:  # the lease as it will stand: never below
        est = estimate(le, times[0], stops=_STOPS)
        assert est.by_period_end >= est.to_date
        assert est.by_lease_end is None or est.by_lease_end >= est.to_date


@given(
    st.decimals("1", "500000", places=2),
    st.decimals("0.01", "500", places=2),
    st.integers(1, 16),
)
def test_break_even_agrees_with_both_prices(monthly: Decimal, hourly: Decimal, cards: int) -> None:
    hours = break_even_hours(monthly, hourly, cards)
    assert abs(hours * hourly * cards - monthly) <= monthly * D("1e-20")
    # One hour more and monthly wins; one less and hourly does.
    assert hourly_vs_monthly(monthly, (hours + 1) * cards, hourly).monthly_saves > 0
    if hours > 1:
        assert hourly_vs_monthly(monthly, (hours - 1) * cards, hourly).monthly_saves < 0


def test_an_upfront_charge_accrues_month_by_month() -> None:
    le = lease(billing_type="monthly", unit_price="31000", start="2026-01-01", end="2026-03-01")
    # Charged 62000 on Jan 1; January's share is one month of two, half of February 14 of
    # its 28 days.
    assert billing.accrued(le, t("2026-01-01"), t("2026-02-01")) == D(31000)
    assert billing.accrued(le, t("2026-02-01"), t("2026-02-15")) == D(15500)
    assert billing.accrued(le, t("2025-12-01"), t("2026-04-01")) == D(62000)


def test_fen_never_raises() -> None:
    assert fen(Decimal("1.005")) == Decimal("1.01")
    for odd in ("1e30", "1e-30", "-1e40", "1e100", "123456789012345678901234567.891"):
        assert fen(Decimal(odd)).as_tuple().exponent == -2 or abs(Decimal(odd)) >= 10**26
    assert fen(Decimal("1e-30")) == 0


def test_lease_terms_out_of_range_are_refused() -> None:
    base = dict(billing_type="monthly", unit_price="30000", start="2026-01-01",
                end="2026-02-01", cards_billed="8")  # fmt: skip
    for key, bad in (("renew_charge_days", "400"), ("renew_charge_days", "61"),
                     ("notice_days", "400"), ("release_after_stopped_days", "4000"),
                     ("cards_billed", "-2")):  # fmt: skip
        with pytest.raises(InputError, match=key):
            lease(**{**base, key: bad})
    assert lease(**{**base, "renew_charge_days": "60"}).renew_charge_days == 60
    # The pure functions refuse what the ledger would: negative cards.
    hourly = lease(billing_type="card_hour", unit_price="2", start="2026-01-01")
    for odd in (replace(hourly, cards_billed=-2), hourly):
        with pytest.raises(InputError, match="cards"):
            billing.cost_to_date(odd, t("2026-01-02"), cards=-8)
    with pytest.raises(InputError, match="cards"):
        billing.paid_card_hours(replace(hourly, cards_billed=-2), t("2026-01-01"), t("2026-01-02"))


# -- DST: elapsed time in UTC, periods on the billing zone's wall clock -------------------


def test_an_hour_across_the_fall_back_fold_is_billed() -> None:
    ny = ZoneInfo("America/New_York")
    le = lease(billing_type="hourly", unit_price="10", start="2026-11-01T05:30:00+00:00",
               billing_tz="America/New_York")  # fmt: skip
    # 01:30 EDT (fold 0) to 01:30 EST (fold 1): one real hour, though the wall clock repeats.
    at = datetime(2026, 11, 1, 6, 30, tzinfo=UTC).astimezone(ny)
    assert at.fold == 1 and at.replace(tzinfo=None) == le.start.replace(tzinfo=None)
    assert billing.cost_to_date(le, at) == 10
    assert billing.paid_card_hours(le, le.start, at, cards=1) == 1
    assert billing.accrued(le, le.start, at) == 10
    # (compared as timestamps: Python never calls an ambiguous time equal across zones)
    assert [(a.timestamp(), b.timestamp()) for a, b in billing.runs(le, at)] == [
        (le.start.timestamp(), at.timestamp())
    ]
    assert not billing.over(le, at)
    ended = replace(le, ended_at=at)
    assert billing.over(ended, at) and billing.cost_to_date(ended, at) == 10
    # Hourly boundaries count real hours from the start: the 2nd starts at 01:30 EST.
    assert periods.boundary(le.start, "hour", 1, ny).timestamp() == at.timestamp()


@pytest.mark.parametrize(
    ("tz", "start", "end", "hours"),
    [
        # Berlin springs forward on 2026-03-29: 24 + 23 + 24 real hours.
        ("Europe/Berlin", "2026-03-28T00:00", "2026-03-31T00:00", 71),
        # New York falls back on 2026-11-01: 24 + 25 + 24.
        ("America/New_York", "2026-10-31T00:00", "2026-11-03T00:00", 73),
    ],
)
def test_daily_lease_across_a_dst_day(tz: str, start: str, end: str, hours: int) -> None:
    le = lease(billing_type="daily", unit_price="240", cards_billed="2", billing_tz=tz,
               start=start, end=end)  # fmt: skip
    # Cost counts the zone's calendar days (3 x 240); paid card-hours are real elapsed hours
    # (what measured busy hours, also real, are compared with): 2 cards x `hours`.
    assert billing.cost_to_date(le, le.end) == 720
    assert billing.paid_card_hours(le, le.start, le.end) == 2 * hours
    assert billing.accrued(le, le.start, le.end) == 720
    # The middle day alone: its own price, its own real length.
    z = ZoneInfo(tz)
    d1, d2 = le.start + timedelta(days=1), le.start + timedelta(days=2)
    d1, d2 = d1.replace(tzinfo=z), d2.replace(tzinfo=z)
    assert billing.accrued(le, d1, d2) == 240
    assert billing.paid_card_hours(le, d1, d2) == 2 * (hours - 48)


# An auto-renew monthly lease (30000, Aug 3 - Sep 3, charged 9 days early), month by month
# in Shanghai: every period's price spread over its own days. Aug: 29/31 of the first
# period; Sep: 2/31 of it + 28/30 of Sep 3 - Oct 3; Oct: 2/30 + 29/31 of Oct 3 - Nov 3;
# Nov: 2/31 + 28/30 of Nov 3 - Dec 3; Dec: 2/30 + 29/31 of Dec 3 - Jan 3.
AUTO_RENEW_MONTHS = [
    ("2026-08", D(30000) * 29 / 31),
    ("2026-09", D(30000) * 2 / 31 + D(28000)),
    ("2026-10", D(2000) + D(30000) * 29 / 31),
    ("2026-11", D(30000) * 2 / 31 + D(28000)),
    ("2026-12", D(2000) + D(30000) * 29 / 31),
]


@pytest.mark.parametrize(("month", "want"), AUTO_RENEW_MONTHS)
def test_accrued_spreads_auto_renewals_over_the_periods_they_pay_for(
    month: str, want: Decimal
) -> None:
    le = lease(billing_type="monthly", unit_price="30000", start="2026-08-03",
               end="2026-09-03", auto_renew=True, renew_charge_days=9)  # fmt: skip
    since = t(f"{month}-01")
    until = periods.boundary(since, "month", 1, periods.zone(le))
    assert abs(billing.accrued(le, since, until) - want) < D("1e-18")
    # A renewal charged (Nov 24) but not started belongs to its own month: November cut
    # at Nov 28 holds none of the period from Dec 3.
    if month == "2026-11":
        part = billing.accrued(le, since, t("2026-11-28"))
        assert abs(part - (D(30000) * 2 / 31 + D(30000) * 25 / 30)) < D("1e-18")


def test_accrued_spreads_an_hourly_fallback_as_it_runs() -> None:
    le = lease(billing_type="monthly", unit_price="30000", start="2026-08-03",
               end="2026-09-03", on_expiry="hourly", hourly_price="50")  # fmt: skip
    # Sep 3 00:00 - Sep 5 00:00 at 50 an hour = 2400, with 2/31 of the month.
    got = billing.accrued(le, t("2026-09-01"), t("2026-09-05"))
    assert abs(got - (D(30000) * 2 / 31 + D(2400))) < D("1e-18")
