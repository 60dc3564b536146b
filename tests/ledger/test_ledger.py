"""The ledger itself: schema versions, the append-only audit log, record round trips."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from functools import cache
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from leases.core import secrets
from leases.core.errors import InputError, LedgerError
from leases.core.models import BillingType, ExpiryAction, Lease, RefundState
from leases.core.textsafe import is_clean
from leases.ledger import records
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.paths import resolve_ledger_path
from leases.ledger.schema import MIGRATIONS
from leases.ledger.store import Ledger


def test_schema_version_counts_the_migrations() -> None:
    assert len(MIGRATIONS._migrations) == SCHEMA_VERSION


def test_a_newer_ledger_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    Ledger.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="newer zuka"):
        Ledger.open(path)
    assert path.read_bytes() == before


def test_not_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LedgerError, match="not a zuka ledger"):
        Ledger.open(path)


def test_audit_log_is_append_only(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "h"}))
        for sql in ("DELETE FROM audit", "UPDATE audit SET action = 'x'"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                ledger.conn.execute(sql)
        assert [e.action for e in ledger.history("n1")] == ["node.add"]


def test_ledger_path_precedence(tmp_path: Path) -> None:
    assert resolve_ledger_path("/x/cli.db", {"ZUKA_LEDGER": "/y/env.db"}) == Path("/x/cli.db")
    assert resolve_ledger_path(None, {"ZUKA_LEDGER": "/y/env.db"}) == Path("/y/env.db")
    assert resolve_ledger_path(None, {}).name == "ledger.db"


money = st.decimals(min_value=0, max_value=10**9, places=4, allow_nan=False, allow_infinity=False)
moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)
# Notes as the notes check (leases.core.fields.text, multiline) accepts them: tab and newline,
# but no control, reordering or invisible character (textsafe.is_clean), and no lone
# surrogate. The check is right to refuse the others ('\xad', a soft hyphen, draws
# nothing): test_notes_with_a_character_that_draws_nothing_are_refused says so. Drawing
# them here made this test fail now and then, and only where CI was not set.
NOTE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)).filter(
        lambda c: c in "\t\n" or is_clean(c)
    ),
    max_size=40,
)


@cache
def _refused_in_notes() -> list[str]:
    """Every character but a surrogate that visible() would replace, tab and newline aside
    (a few hundred; too few in all of Unicode for a filter on st.characters)."""
    return [chr(c) for c in range(0x110000)
            if not 0xD800 <= c <= 0xDFFF and chr(c) not in "\t\n" and not is_clean(chr(c))]  # fmt: skip


# Built when a test first draws from it, not at collection.
REFUSED_IN_NOTES = st.deferred(lambda: st.sampled_from(_refused_in_notes()))


@settings(max_examples=200, deadline=None)
@given(
    billing=st.sampled_from(BillingType),
    price=money,
    start=moments,
    days=st.integers(1, 400),
    deposit=st.none() | money,
    refund=st.sampled_from([RefundState.NONE, RefundState.PENDING, RefundState.FORFEITED]),
    on_expiry=st.sampled_from(ExpiryAction),
    notes=NOTE_TEXT,
    cards=st.none() | st.integers(1, 64),
)
def test_lease_records_round_trip(
    billing: BillingType, price: Decimal, start: datetime, days: int, deposit: Decimal | None,
    refund: RefundState, on_expiry: ExpiryAction, notes: str, cards: int | None,
) -> None:  # fmt: skip
    # Notes shaped like a secret are refused (tests/core/test_hostile_inputs.py); rare here.
    assume(secrets.token_kind(notes) is None)
    # A price has the precision of its unit (fen for a day or more, 4 places for an hour,
    # test_money_guards); an amount paid, fen.
    fine = (
        4 if billing in (BillingType.HOURLY, BillingType.CARD_HOUR, BillingType.PER_SECOND) else 2
    )
    price = price.quantize(Decimal(10) ** -fine, rounding=ROUND_DOWN)
    deposit = None if deposit is None else deposit.quantize(Decimal("0.01"), rounding=ROUND_DOWN)
    lease = records.lease_from({
        "node": "n1", "billing_type": billing.value, "unit_price": str(price),
        "start": start.isoformat(), "end": (start + timedelta(days=days)).isoformat(),
        "deposit": None if deposit is None else str(deposit), "deposit_refund": refund.value,
        "on_expiry": on_expiry.value, "notes": notes, "cards_billed": cards,
    })  # fmt: skip
    again = records.lease_from(records.lease_record(lease))
    assert again == lease
    assert isinstance(again.unit_price, Decimal) and again.unit_price == price
    assert records.lease_record(again) == records.lease_record(lease)


@given(before=NOTE_TEXT, char=REFUSED_IN_NOTES, after=NOTE_TEXT)
def test_notes_with_a_character_that_draws_nothing_are_refused(
    before: str, char: str, after: str
) -> None:
    notes = before + char + after
    with pytest.raises(InputError) as err:
        records.lease_from({"node": "n1", "billing_type": "hourly", "unit_price": "1",
                            "start": "2026-01-01", "notes": notes})  # fmt: skip
    assert err.value.field == "notes"
    assert char not in str(err.value)  # shown by its stand-in, never raw


def test_prepaid_needs_an_end_and_periods_do_not_overlap(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="prepaid"):
        records.lease_from(
            {"node": "n", "billing_type": "weekly", "unit_price": "1", "start": "2026-01-01"}
        )
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add_node(records.node_from({"name": "n", "ssh_host": "h"}))
        first = ledger.add_lease(
            Lease("n", BillingType.HOURLY, Decimal(3), datetime(2026, 1, 1, tzinfo=UTC))
        )
        assert first.open
        with pytest.raises(InputError, match="overlaps"):
            ledger.add_lease(
                Lease("n", BillingType.HOURLY, Decimal(3), datetime(2026, 2, 1, tzinfo=UTC))
            )
        ledger.end_lease("n", datetime(2026, 1, 15, tzinfo=UTC))
        later = ledger.add_lease(
            Lease("n", BillingType.HOURLY, Decimal(4), datetime(2026, 2, 1, tzinfo=UTC))
        )
        assert ledger.current_lease("n") == later


def test_a_renewal_starts_when_the_running_period_ends(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    with Ledger.open(tmp_path / "l.db", clock=lambda: now) as ledger:
        ledger.add_node(records.node_from({"name": "m", "ssh_host": "h"}))
        ledger.add_lease(records.lease_from({
            "node": "m", "billing_type": "monthly", "unit_price": "48000",
            "start": "2026-11-15", "end": "2026-12-15",
        }))  # fmt: skip
        ledger.renew_lease("m", "2027-01-15", {"unit_price": "50000"})
        current = ledger.current_lease("m")
        assert current is not None and current.unit_price == Decimal(48000)  # still this month
        assert ledger.current_leases()[current.node_key] == current
        assert [le.unit_price for le in ledger.leases("m", open_only=True)] == [48000, 50000]
        later = ledger.current_lease("m", datetime(2026, 12, 20, tzinfo=UTC))
        assert later is not None and later.unit_price == Decimal(50000)
        again = ledger.renew_lease("m", "2027-02-15")  # renews the latest period
        assert again.start == datetime(2027, 1, 15, tzinfo=again.start.tzinfo)
