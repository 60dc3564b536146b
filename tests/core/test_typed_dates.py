"""Dates as people type them (issue 22): 2026-12-1 is the first of December, a month 13
or a 30th of February is refused naming the field, and a lease date years too far ahead
(2036 for 2026) is refused, while the end of a 3-year contract is taken."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from leases.app.leases import add_lease, edit_lease, renew_lease
from leases.core import fields
from leases.core.errors import InputError
from leases.core.models import Lease
from leases.ledger import records
from leases.ledger.store import Ledger

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("2026-12-1", date(2026, 12, 1)),
        ("2026-1-9", date(2026, 1, 9)),
        ("2026-02-28", date(2026, 2, 28)),
    ],
)
def test_a_single_digit_month_or_day_is_taken(typed: str, meant: date) -> None:
    assert fields.day("on", typed) == meant
    assert fields.moment("start", typed).date() == meant


def test_a_single_digit_day_before_a_time() -> None:
    at = fields.moment("start", "2026-3-4T10:30", "UTC")
    assert at == datetime(2026, 3, 4, 10, 30, tzinfo=UTC)
    assert fields.moment("start", "2026-3-4 10:30", "UTC") == at


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("2026-13-01", "has month 13: a month is 1 to 12"),
        ("2026-0-10", "has month 0"),
        ("2026-02-30", "has day 30: February 2026 has 28 days"),
        ("2028-2-30", "February 2028 has 29 days"),
        ("2026-04-31", "April 2026 has 30 days"),
        ("2026-12-1x", "is not a valid date"),
        ("２０２６-1-1", "is not a valid date"),  # ASCII digits only
        ("2026-1-١", "is not a valid date"),
    ],
)
def test_nonsense_is_refused_naming_the_field(typed: str, words: str) -> None:
    for parse in (fields.day, fields.moment):
        with pytest.raises(InputError) as caught:
            parse("start", typed)
        assert caught.value.field == "start" and words in caught.value.reason


def test_the_horizon_by_hand() -> None:
    fields.within_horizon("end", "x", datetime(2031, 12, 2, tzinfo=UTC), NOW)  # 5 years: taken
    with pytest.raises(InputError) as caught:
        fields.within_horizon("end", "x", datetime(2031, 12, 3, tzinfo=UTC), NOW)
    assert caught.value.field == "end"
    assert "more than 5 years ahead (after 2031-12-02)" in caught.value.reason


def _ledger() -> Ledger:
    ledger = Ledger.open(None, clock=lambda: NOW)
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h"}))
    return ledger


def _lease(start: str, end: str | None = None) -> Lease:
    rec = {"node": "n1", "billing_type": "monthly", "unit_price": "100", "start": start}
    return records.lease_from({**rec, "end": end} if end else rec)


def test_a_three_year_contract_signed_ahead_is_taken() -> None:
    ledger = _ledger()
    lease, _ = add_lease(ledger, _lease("2027-1-1", "2030-1-1"))
    assert lease.end is not None and lease.end.year == 2030


@pytest.mark.parametrize(("start", "end", "field"), [("2036-01-01", "2036-02-01", "start"),
                                                     ("2026-12-01", "2036-12-01", "end")])  # fmt: skip
def test_a_lease_years_too_far_ahead_is_refused(start: str, end: str, field: str) -> None:
    ledger = _ledger()
    with pytest.raises(InputError) as caught:
        add_lease(ledger, _lease(start, end))
    assert caught.value.field == field and "5 years ahead" in caught.value.reason
    assert ledger.leases("n1") == []


def test_an_edit_and_a_renewal_years_ahead_are_refused() -> None:
    ledger = _ledger()
    add_lease(ledger, _lease("2026-12-01", "2027-01-01"))
    with pytest.raises(InputError) as caught:
        edit_lease(ledger, "n1", {"end": "2037-01-01"}, None)
    assert caught.value.field == "end"
    with pytest.raises(InputError) as caught:
        renew_lease(ledger, "n1", "2037-1-1", {})
    assert caught.value.field == "until" and "5 years ahead" in caught.value.reason
    assert len(ledger.leases("n1")) == 1
    renewed, _ = renew_lease(ledger, "n1", "2027-2-1", {})
    assert renewed.end is not None and renewed.end.month == 2


def test_a_lease_is_named_by_a_single_digit_day() -> None:
    start = fields.moment("start", "2026-12-01T09:30")
    assert fields.names_start("start", "2026-12-1", start, fields.DEFAULT_TZ)
    assert not fields.names_start("start", "2026-12-2", start, fields.DEFAULT_TZ)
    assert fields.names_start("start", "2026-12-1 09:30", start, fields.DEFAULT_TZ)
