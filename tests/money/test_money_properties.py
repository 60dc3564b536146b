"""Properties of the money over random renewal chains (issue 17): renewals at new prices,
early and late ends, auto-renewal, refund rules, stops, both month bases, per-charge
rounding, billing zones and a report zone that differ, several currencies.

- The months' accruals (leases.money.report.chain_accrued over each calendar month of the report
  zone) add up to the chain's whole cost.
- The months' cash (billing.charged_between) adds up to the same charges: no charge falls
  between two months or into both.
- A report's totals are per currency: the currency totals add up to the rows of that
  currency, and no row is counted under another's.
- By lease = by user + storage + unattributed = by project, in each currency; an owner's
  row never holds hours of a lease in another currency."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from leases.core.models import Lease, OwnerHour
from leases.ledger import records
from leases.ledger.records import renewal_record
from leases.money import billing, periods, reportjson
from leases.money.billing import CardHours
from leases.money.estimate import month_of
from leases.money.report import attribute, build_report, chain_accrued, month_window

_ZONES = ["Asia/Shanghai", "UTC", "America/New_York", "Europe/Berlin"]
_BASE = datetime(2026, 1, 1, tzinfo=UTC)
_FAR = datetime(2031, 1, 1, tzinfo=UTC)
_TINY = Decimal("1e-15")  # exact Decimal maths; divisions leave 28-digit remainders


@st.composite
def chains_(draw: st.DrawFn) -> tuple[tuple[Lease, ...], list[billing.Stop]]:
    tz = draw(st.sampled_from(_ZONES))
    bt = draw(st.sampled_from(["monthly", "daily", "weekly", "contract", "hourly", "card_hour",
                               "per_second"]))  # fmt: skip
    z = ZoneInfo(tz)
    start = (_BASE + timedelta(hours=draw(st.integers(0, 24 * 360)))).astimezone(z)
    start = start.replace(minute=0, second=0, microsecond=0)
    prepaid = bt in ("monthly", "daily", "weekly", "contract")
    step = {"monthly": 31, "contract": 31, "daily": 1, "weekly": 7}.get(bt, 1)
    rec: dict[str, Any] = {
        "node": "n",
        "billing_type": bt,
        "unit_price": str(draw(st.decimals("1", "60000", places=2))),
        "start": start.isoformat(),
        "billing_tz": tz,
        "cards_billed": draw(st.integers(1, 8)),
        "month_count": draw(st.sampled_from(["calendar", "30_days"])),
        "partial_unit": draw(st.none() | st.sampled_from(["second", "hour", "day", "whole"])),
        "refund_rule": draw(st.sampled_from(["", "prorated_days", "prorated_hours"])),
        "stopped_billing": draw(st.sampled_from(["full", "storage_only", "none"])),
        "rounding": draw(st.sampled_from(["bill", "charge"])),
        "currency": draw(st.sampled_from(["CNY", "USD"])),
    }
    if not prepaid:
        rec["ended_at"] = (start + timedelta(hours=draw(st.integers(1, 24 * 120)))).isoformat()
        chain: tuple[Lease, ...] = (records.lease_from(rec),)
    else:
        units = draw(st.integers(1, 3))
        first = records.lease_from(
            {**rec, "end": (start + timedelta(days=step * units)).isoformat()}
        )
        chain = (first,)
        for _ in range(draw(st.integers(0, 2))):  # renewals, each its own price
            last = chain[-1]
            assert last.end is not None
            price = str(draw(st.decimals("1", "60000", places=2)))
            end = (last.end + timedelta(days=step * draw(st.integers(1, 2)))).isoformat()
            renewed = records.lease_from(renewal_record(last, end, {"unit_price": price}))
            chain = (*chain[:-1], records.lease_from(
                {**records.lease_record(last), "ended_at": last.end.isoformat()}), renewed)  # fmt: skip
        last = chain[-1]
        assert last.end is not None
        how = draw(st.sampled_from(["at its end", "early", "auto-renewed, ended"]))
        if how == "early":
            span = last.end - last.start
            cut = last.start + span * draw(st.floats(0.05, 0.95))
            last_rec = {**records.lease_record(last), "ended_at": cut.isoformat()}
        elif how == "auto-renewed, ended":
            late = last.end + timedelta(
                days=draw(st.integers(1, 70)), hours=draw(st.integers(0, 23))
            )
            last_rec = {**records.lease_record(last), "auto_renew": True,
                        "renew_charge_days": draw(st.none() | st.integers(0, 9)),
                        "ended_at": late.isoformat()}  # fmt: skip
        else:
            last_rec = {**records.lease_record(last), "ended_at": last.end.isoformat()}
        chain = (*chain[:-1], records.lease_from(last_rec))
    stops: list[billing.Stop] = []
    if draw(st.booleans()):
        lo = start + timedelta(hours=draw(st.integers(0, 24 * 40)))
        stops.append((lo, lo + timedelta(hours=draw(st.integers(1, 24 * 20)))))
    return chain, stops


def _months(report_tz: str) -> list[tuple[datetime, datetime]]:
    z = ZoneInfo(report_tz)
    out = []
    since, until = month_of(datetime(2025, 12, 1, tzinfo=z), z)
    while since < _FAR:
        out.append((since, until))
        since, until = until, periods.boundary(until, "month", 1, z)
    return out


@settings(max_examples=60)
@given(chains_(), st.sampled_from(_ZONES))
def test_the_months_add_up_to_the_chain(
    drawn: tuple[tuple[Lease, ...], list[billing.Stop]], report_tz: str
) -> None:
    chain, stops = drawn
    whole = billing.chain_cost(chain, _FAR, stops=stops)
    months = _months(report_tz)
    accrued = sum((chain_accrued(chain, a, b, stops=stops) for a, b in months), Decimal(0))
    cash = sum((billing.charged_between(chain, a, b, stops=stops) for a, b in months), Decimal(0))
    assert abs(accrued - whole) < _TINY, (accrued, whole)
    # Each month's cash is a difference of two costs to date; summed, they telescope to the
    # whole in exact maths, and within the last of Decimal's 28 digits here (a monthly
    # lease of 6.06 ended early: cash 9.122580645161290322580645160, whole ...161).
    assert abs(cash - whole) < _TINY, (cash, whole)
    # Each month's cash is a sum of charges: never negative, but in a month an early end
    # refunds in (the refund comes back on the day the lease ended).
    ends = [le.ended_at for le in chain if le.ended_at is not None]
    for a, b in months:
        if not any(a <= e < b for e in ends):
            assert billing.charged_between(chain, a, b, stops=stops) >= 0


def _no_usage(le: Lease, since: datetime, until: datetime, cards: int | None) -> CardHours:
    paid = billing.paid_card_hours(le, since, until, cards=cards)
    return CardHours(paid, Decimal(0), Decimal(0), billing.accrued(le, since, until, cards=cards))


@settings(max_examples=30)
@given(st.lists(chains_(), min_size=1, max_size=4), st.integers(0, 11))
def test_report_totals_are_per_currency(
    drawn: list[tuple[tuple[Lease, ...], list[billing.Stop]]], m: int
) -> None:
    leases = []
    for i, (chain, _) in enumerate(drawn):
        leases += [
            records.lease_from({**records.lease_record(le), "node": f"n{i}"}) for le in chain
        ]
    month = f"2026-{m + 1:02d}"
    window, complete = month_window(month, "Asia/Shanghai", _FAR)
    rep = build_report(month, window, complete, tz="Asia/Shanghai", currency="CNY",
                       leases=leases, nodes=[], providers=[], resources=[], usage=_no_usage)  # fmt: skip
    by_cur: dict[str, Decimal] = {}
    for row in rep.rows:
        by_cur[row.currency] = by_cur.get(row.currency, Decimal(0)) + row.cost
        assert all(le.currency == row.currency for le in leases if le.node == row.node)
    assert set(by_cur) <= {le.currency for le in leases}


def _fen(x: Decimal) -> Decimal:
    return x.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


USERS = {"alice": "Alice", "bob": "Bob", "carol": "Carol"}  # node user -> person
PROJECTS = {"Alice": "llm", "Bob": "llm", "carol": "vision"}  # person or user -> project


@settings(max_examples=40, deadline=None)
@given(st.lists(chains_(), min_size=1, max_size=4), st.integers(0, 11), st.integers(0, 2**32))
def test_by_lease_by_user_and_by_project_agree_per_currency(
    drawn: list[tuple[tuple[Lease, ...], list[billing.Stop]]], m: int, seed: int
) -> None:
    """Per currency: by lease = by user + storage + unattributed = by project, in the JSON a
    lab's script reads; no owner row holds hours of a lease in another currency, and the
    lab total converts each currency once (by hand: sum of each currency's total x rate)."""
    rng = random.Random(seed)
    leases: list[Lease] = []
    for i, (chain, _) in enumerate(drawn):
        leases += [
            replace(records.lease_from({**records.lease_record(le), "node": f"n{i}"}), node_id=i)
            for le in chain
        ]
    busy_share = {i: Decimal(rng.randint(0, 100)) / 100 for i in range(len(drawn))}

    def usage(le: Lease, since: datetime, until: datetime, cards: int | None) -> CardHours:
        paid = billing.paid_card_hours(le, since, until, cards=cards)
        assert le.node_id is not None
        busy = paid * busy_share[le.node_id]
        return CardHours(paid, busy, paid, billing.accrued(le, since, until, cards=cards))

    month = f"2026-{m + 1:02d}"
    window, complete = month_window(month, "Asia/Shanghai", _FAR)
    rates = {"USD": Decimal("7.1234")}
    rep = build_report(month, window, complete, tz="Asia/Shanghai", currency="CNY",
                       leases=leases, nodes=[], providers=[], resources=[], usage=usage)  # fmt: skip
    rep = replace(rep, rates=rates)
    hours: list[OwnerHour] = []
    for row in rep.rows:
        for a, b in row.spans:
            h = int(a.timestamp()) // 3600
            while h * 3600 < b.timestamp():
                who = rng.choice(["alice", "bob", "carol", "dave", "?"])
                hours.append(OwnerHour(row.node, who, h, rng.uniform(0, 480), row.node_id))
                h += rng.randint(1, 40)
    lease_json = reportjson.report_json(rep)
    currency_of = {row.node: row.currency for row in rep.rows}
    for by in ("user", "project"):
        att = attribute(rep, hours, by, USERS, PROJECTS)
        doc = reportjson.attribution_json(rep, att)
        assert set(doc["by_currency"]) == set(lease_json["by_currency"])
        for code, sums in doc["by_currency"].items():
            lease_total = lease_json["by_currency"][code]["total"]
            assert sums["leases_total"] == lease_total, (by, code)
            rows = sum((Decimal(r["yuan"]) for r in doc["rows"] if r["currency"] == code),
                       Decimal(0))  # fmt: skip
            parts = rows + Decimal(sums["storage_yuan"]) + Decimal(sums["unattributed_yuan"])
            assert parts == Decimal(lease_total), (by, code)
        for r in att.rows:
            assert all(currency_of[n] == r.currency for n in r.nodes), r
    lab = lease_json["in_lab_currency"]
    if lab is not None and lab["total"] is not None:
        by_hand = sum(
            (_fen(Decimal(t["total"]) * rates.get(code, Decimal(1)))
             for code, t in lease_json["by_currency"].items()),
            Decimal(0),
        )  # fmt: skip
        assert Decimal(lab["total"]) == by_hand
