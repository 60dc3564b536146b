"""Terms that were accepted without a word and then priced wrong (issue 17, item 10): a
"monthly" lease of 28 days, a priced disk created years before its lease, a utilisation of
1.5 (1.5 % or 150 %?). The disk and the utilisation are refused naming what was wrong,
changing nothing; the 28 days are said wherever the lease is typed or priced. (A deposit refunded before it was paid: test_typed_amounts.)"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.money import plan
from tests.support.cli import Cli


def _leases(path: Path) -> int:
    with Ledger.open(path, create=False) as ledger:
        return len(ledger.leases("n"))


def test_a_monthly_lease_of_28_days_is_said_where_it_is_typed_and_priced(
    z: Cli, ledger_path: Path
) -> None:
    """2026-03-01 -> 03-29 was charged as a whole month (30,000) without a word. It may be
    what the contract says (a started month in full), so it is recorded, and said: when it
    is typed (the dashboard's forms show the same message) and beside every figure of it."""
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-03-01", "--end", "2026-03-29")  # fmt: skip
    assert r.code == 0, r.err
    said = ("it runs 28 days, not a whole number of months, and how a part month is billed is"
            " not recorded: a started month is charged in full (1 x 30000); if that is wrong,"
            " end it at 2026-04-01 00:00 (1 month) or give --partial-unit")  # fmt: skip
    assert r.out.strip() == f"added a lease to n (note: {said})"
    doc = json.loads(z("report", "--month", "2026-03", "--format", "json").out)
    (row,) = doc["leases"]
    assert row["charged_in_month"] == "30000.00" and said in row["notes"]
    # Said how the part month bills: no note; 30,000 x 28/31 = 27,096.77.
    r = z("lease", "edit", "n", "--partial-unit", "day")
    assert r.code == 0 and "note" not in r.out, r.out
    doc = json.loads(z("report", "--month", "2026-03", "--format", "json").out)
    assert doc["leases"][0]["charged_in_month"] == "27096.77" and doc["leases"][0]["notes"] == []
    # A calendar month from 31 January ends on 28 February: whole, nothing said.
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-01-31", "--end", "2026-02-28")  # fmt: skip
    assert r.code == 0 and "note" not in r.out, r.out
    # Ten days of a weekly lease: both whole ends offered.
    r = z("lease", "add", "n", "--billing", "weekly", "--price", "3000",
          "--start", "2026-06-01", "--end", "2026-06-11")  # fmt: skip
    assert "2026-06-08 00:00 (1 week) or 2026-06-15 00:00 (2 weeks)" in r.out, r.out
    assert _leases(ledger_path) == 3


def test_a_priced_disk_created_before_its_lease_is_refused(z: Cli, ledger_path: Path) -> None:
    """Storage was billed from --created: a disk of 2023 on a lease of 2026 cost three
    years of storage. Unpriced resources (evidence for offboarding) may predate it."""
    assert z("lease", "add", "n", "--billing", "hourly", "--price", "20",
             "--start", "2026-11-01").code == 0  # fmt: skip
    r = z("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--created", "2023-11-01",
          "--price", "100", "--price-per", "month")  # fmt: skip
    assert r.code == 2, r.out
    assert "--created: is before its lease's start (2026-11-01 00:00)" in r.err
    with Ledger.open(ledger_path, create=False) as ledger:
        assert ledger.resources("n") == []
    ok = z("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--created", "2026-11-02",
           "--price", "100", "--price-per", "month")  # fmt: skip
    assert ok.code == 0, ok.err
    ok = z("resource", "add", "n", "--kind", "snapshot", "--id", "s-1", "--created", "2023-11-01")
    assert ok.code == 0, ok.err
    r = z("resource", "add", "n", "--kind", "snapshot", "--id", "s-2", "--created", "2099-01-01")
    assert r.code == 2 and "--created: is in the future" in r.err, r.err


@pytest.mark.parametrize(
    ("typed", "share"),
    [("0.65", "0.65"), ("65", "0.65"), ("65%", "0.65"), ("1.5%", "0.015"), ("１．５％", "0.015"),
     ("1.5", None), ("65.5", None), ("150", None), ("150%", None), ("0", None), ("1,5", None)],
)  # fmt: skip
def test_a_utilisation_is_a_share_or_a_percent_never_a_guess(
    z: Cli, typed: str, share: str | None
) -> None:
    """--utilisation 1.5 was read as 1.5 %: a lab meaning 150 % (a typo) got a plan. The
    flag is read before the ledger, so a refusal needs no fleet; what is accepted is the
    share plan buy prices (test_plan runs it on a fleet)."""
    if share is not None:
        assert plan.utilisation_share("utilisation", typed) == Decimal(share)
        return
    with pytest.raises(InputError, match="utilisation"):
        plan.utilisation_share("utilisation", typed)
    r = z("plan", "buy", "--card-price", "100000", "--life-years", "4", "--power-w", "400",
          "--kwh", "0.8", "--hosting", "300", "--cards", "8", "--utilisation", typed)  # fmt: skip
    assert r.code == 2 and "utilisation:" in r.err and typed.strip() in r.err, (r.out, r.err)


@pytest.mark.parametrize(
    ("billing", "price", "ok"),
    [("monthly", "30000.55", True), ("monthly", "30000.555", False), ("daily", "240.001", False),
     ("hourly", "1.9855", True), ("hourly", "1.98551", False), ("card_hour", "2.12345", False),
     ("per_second", "0.000551", True)],
)  # fmt: skip
def test_a_unit_price_has_the_precision_of_its_billing_unit(
    z: Cli, ledger_path: Path, billing: str, price: str, ok: bool
) -> None:
    """A month is priced in fen, an hour to 4 places (cloud list prices), a second to 6:
    30000.555 a month is a typo, refused naming the field and the bound."""
    terms = ("--end", "2026-04-01") if billing in ("monthly", "daily") else ()
    r = z("lease", "add", "n", "--billing", billing, "--price", price, "--cards", "8",
          "--start", "2026-03-01", *terms)  # fmt: skip
    if ok:
        assert r.code == 0, r.err
        return
    places = 2 if billing in ("monthly", "daily") else 4
    assert r.code == 2 and f"(--price): has more than {places} decimal places" in r.err, r.err
    assert _leases(ledger_path) == 0


def test_an_empty_currency_is_refused_not_read_as_cny(z: Cli, ledger_path: Path) -> None:
    """Review of issue 17: `lease edit n --currency ""` turned a USD lease into CNY."""
    assert z("lease", "add", "n", "--billing", "hourly", "--price", "2", "--currency", "USD",
             "--start", "2026-11-01").code == 0  # fmt: skip
    for args in (("lease", "edit", "n", "--currency", ""),
                 ("lease", "add", "n", "--billing", "hourly", "--price", "2", "--currency", " ",
                  "--start", "2026-12-01")):  # fmt: skip
        r = z(*args)
        assert r.code == 2 and "--currency: is empty" in r.err, r.err
    with Ledger.open(ledger_path, create=False) as ledger:
        assert [le.currency for le in ledger.leases("n")] == ["USD"]
