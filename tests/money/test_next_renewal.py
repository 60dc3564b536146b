"""When a lease is next renewed (`zuka lease list`'s RENEWS), by hand-worked dates: never
before its start, a lease starting in the future included (issue 22)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from leases.core.models import Lease
from leases.ledger import records
from leases.money import renewals

CST = ZoneInfo("Asia/Shanghai")


def _lease(start: str, end: str | None, lid: int, **more: Any) -> Lease:
    rec = {"node": "n", "billing_type": "monthly", "unit_price": "100", "start": start, **more}
    return replace(records.lease_from({**rec, "end": end} if end else rec), id=lid)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=CST)


def test_a_lease_starting_in_the_future_renews_at_its_end() -> None:
    future = _lease("2027-03-01", "2027-04-01", 1, on_expiry="renews")
    now = _at("2026-12-02T08:00")
    assert renewals.next_renewal([future], future, now) == _at("2027-04-01T00:00")


def test_a_renewed_lease_renews_where_the_next_starts() -> None:
    first = _lease("2026-11-22", "2026-12-22", 1, ended_at="2026-12-22")
    second = _lease("2026-12-22", "2027-01-21", 2)
    chain = [first, second]
    assert renewals.chains(chain) == [tuple(chain)]
    now = _at("2026-12-02T08:00")
    assert renewals.next_renewal(chain, first, now) == _at("2026-12-22T00:00")
    assert renewals.next_renewal(chain, second, now) is None  # nothing follows, no auto-renew
    for lease in chain:
        got = renewals.next_renewal(chain, lease, now)
        assert got is None or got > lease.start


def test_an_auto_renewing_lease_past_its_end_renews_at_the_period_holding_now() -> None:
    lease = _lease("2026-09-15", "2026-10-15", 1, auto_renew=True)
    # Renewed by the provider on 10-15 and 11-15: next on 12-15.
    assert renewals.next_renewal([lease], lease, _at("2026-12-02T08:00")) == _at("2026-12-15T00:00")


def test_no_renewal_for_an_open_ended_an_ended_or_a_released_lease() -> None:
    now = _at("2026-12-02T08:00")
    hourly = records.lease_from({"node": "n", "billing_type": "hourly", "unit_price": "3",
                                 "start": "2026-12-01"})  # fmt: skip
    assert renewals.next_renewal([hourly], hourly, now) is None
    released = _lease("2026-11-01", "2026-12-01", 1)
    assert renewals.next_renewal([released], released, now) is None
    ended = _lease("2026-11-10", "2026-12-10", 1, auto_renew=True, ended_at="2026-11-20")
    assert renewals.next_renewal([ended], ended, now) is None
