"""Deposits as they really go (issue 20, item 2): paid on a day, back in parts (`zuka lease
refund`), listed with what is outstanding (`zuka lease refunds`), in the month's cash of
every report format, outstanding in every month's report until back in full (after the
lease ended and its node was released too), and the alert while it is not. Hand
arithmetic beside each figure; the months are past ones, so nothing depends on today."""

from __future__ import annotations

import csv
import io
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.alerts.alert import AlertKind
from leases.alerts.facts import gather
from leases.alerts.rules import evaluate
from leases.config.sections import AlertsConfig
from leases.ledger.store import Ledger
from tests.support.cli import Cli

# 72,000 paid on 05-03 for a two-month contract from 05-01 (ended 07-01).
DEPOSIT = ("--deposit", "72,000", "--deposit-paid-on", "2026-05-03")


@pytest.fixture
def dep(z: Cli) -> Cli:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-05-01", "--end", "2026-07-01", *DEPOSIT).code == 0  # fmt: skip
    return z


def _deposits(cli: Cli, month: str) -> dict[str, object]:
    r = cli("report", "--month", month, "--format", "json")
    assert r.code == 0, r.err
    doc: dict[str, object] = json.loads(r.out)["deposits"]
    return doc


def _line(cli: Cli, month: str) -> tuple[str, str, str] | None:
    """(paid in month, refunded in month, outstanding at month end) of node n's deposit."""
    lines = _deposits(cli, month)["lines"]
    assert isinstance(lines, list)
    if not lines:
        return None
    (x,) = lines
    return x["paid_in_month"], x["refunded_in_month"], x["outstanding"]


def test_refunded_in_two_parts_month_by_month(dep: Cli) -> None:
    """Paid 72,000 in May; 30,000 back on 07-10, 42,000 on 08-20 (30,000 + 42,000 = 72,000)."""
    r = dep("lease", "refund", "n", "--amount", "30,000", "--on", "2026-07-10")
    assert r.code == 0, r.err
    # 72,000 - 30,000 = 42,000 still out
    assert r.out.strip() == (
        "recorded CNY 30,000.00 of the deposit of n back on 2026-07-10; outstanding: CNY 42,000.00"
    )
    assert dep("lease", "refund", "n", "--amount", "42000", "--on", "2026-08-20").code == 0
    assert _line(dep, "2026-05") == ("72000.00", "0.00", "72000.00")
    assert _line(dep, "2026-06") == ("0.00", "0.00", "72000.00")  # outstanding, no lease row
    assert _line(dep, "2026-07") == ("0.00", "30000.00", "42000.00")
    assert _line(dep, "2026-08") == ("0.00", "42000.00", "0.00")
    assert _line(dep, "2026-09") is None  # back in full: gone from the report
    # The charges are apart: July's lease row shows no deposit cash.
    july = json.loads(dep("report", "--month", "2026-07", "--format", "json").out)
    assert july["leases"] == []  # the lease ended 07-01: no charge, no accrual in July


def test_the_listing_says_what_is_outstanding(dep: Cli) -> None:
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10",
               "--notes", "transfer 8812").code == 0  # fmt: skip
    (row,) = json.loads(dep("lease", "refunds", "--json").out)
    assert (row["deposit"], row["refunded"], row["outstanding"]) == (
        "72000.00",
        "30000.00",
        "42000.00",
    )
    assert row["paid_on"] == "2026-05-03" and row["paid_on_assumed"] is False
    assert [(x["amount"], x["refunded_on"], x["notes"]) for x in row["refunds"]] == [
        ("30000.00", "2026-07-10", "transfer 8812")
    ]
    table = dep("lease", "refunds", "n").out
    assert "CNY 30,000.00 on 2026-07-10" in table and "CNY 42,000.00" in table


def test_markdown_and_csv_carry_the_deposits_too(dep: Cli) -> None:
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10").code == 0
    md = dep("report", "--month", "2026-07", "--format", "md").out
    assert "## Deposits (cash apart from the charges)" in md
    assert "| P | n | 2026-05-01 00:00 | CNY 72,000.00 | 2026-05-03 | CNY 0.00 | CNY 30,000.00 |" \
        " CNY 42,000.00 | - |" in md  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(dep("report", "--month", "2026-07", "--format",
                                               "csv").out)))  # fmt: skip
    (line,) = [r for r in rows if r["row"] == "deposit"]
    assert (line["node"], line["provider"], line["deposit"]) == ("n", "P", "72000.00")
    assert (line["deposit_refunded_in_month"], line["deposit_outstanding"]) == (
        "30000.00",
        "42000.00",
    )
    (total,) = [r for r in rows if r["row"] == "deposits_total"]
    assert total["deposit_outstanding"] == "42000.00"


def test_an_outstanding_deposit_stays_after_the_node_is_released(dep: Cli) -> None:
    assert dep("lease", "end", "n", "--at", "2026-07-01").code == 0
    assert dep("node", "archive", "n").code == 0
    # Three months on, nothing back: all 72,000 outstanding in October's report.
    doc = _deposits(dep, "2026-10")
    assert doc["by_currency"] == {"CNY": {"paid_in_month": "0.00", "refunded_in_month": "0.00",
                                          "outstanding": "72000.00", "forfeited": "0.00"}}  # fmt: skip


def test_no_paid_on_day_counts_as_paid_on_the_lease_start_and_says_so(z: Cli) -> None:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-04-30T20:00", "--end", "2026-05-30T20:00", "--deposit", "5000").code == 0  # fmt: skip
    # Started 04-30 20:00 Shanghai: paid in April, not May.
    assert _line(z, "2026-04") == ("5000.00", "0.00", "5000.00")
    doc = _deposits(z, "2026-04")
    assert doc["notes"] == [
        "a deposit with no paid-on day is counted as paid on its lease's start day"
    ]
    # A refund before that day is refused, naming the start day.
    r = z("lease", "refund", "n", "--amount", "100", "--on", "2026-04-29")
    assert r.code == 2 and "2026-04-30, the lease's start day" in r.err


def test_refunded_with_a_date_brings_back_the_rest_that_day(z: Cli) -> None:
    """10,000 paid 05-01; 4,000 back 06-10; marked refunded on 07-05: the rest,
    10,000 - 4,000 = 6,000, came back on 07-05."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-05-01", "--end", "2026-06-01", "--deposit", "10000", "--deposit-paid-on",
             "2026-05-01").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "4000", "--on", "2026-06-10").code == 0
    assert z("lease", "edit", "n", "--deposit-refund", "refunded", "--deposit-refunded-on",
             "2026-07-05").code == 0  # fmt: skip
    assert _line(z, "2026-06") == ("0.00", "4000.00", "6000.00")
    assert _line(z, "2026-07") == ("0.00", "6000.00", "0.00")
    assert _line(z, "2026-08") is None


def test_a_forfeited_deposit_is_a_loss_not_outstanding(z: Cli, ledger_path: Path) -> None:
    """10,000 paid; 2,500 back; then forfeited: 10,000 - 2,500 = 7,500 lost, 0 outstanding,
    from the day the lease ended (06-01, the state has no day of its own): before it, all of
    it was outstanding; the loss is said in the month it was lost, not in every month after."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-05-01", "--end", "2026-06-01", "--deposit", "10000").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "2500", "--on", "2026-06-10").code == 0
    assert z("lease", "edit", "n", "--deposit-refund", "forfeited").code == 0
    may = _deposits(z, "2026-05")["lines"]
    assert isinstance(may, list)
    assert (may[0]["outstanding"], may[0]["forfeited"]) == ("10000.00", "0.00")
    june = _deposits(z, "2026-06")["lines"]
    assert isinstance(june, list)
    (x,) = june
    assert (x["outstanding"], x["forfeited"]) == ("0.00", "7500.00")
    assert _deposits(z, "2026-08")["lines"] == []
    before = ledger_path.read_bytes()
    r = z("lease", "refund", "n", "--amount", "100", "--on", "2026-08-01")
    assert r.code == 2 and "node" in r.err and "forfeited" in r.err
    assert ledger_path.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        # before the deposit was paid (05-03)
        (("--amount", "100", "--on", "2026-05-02"), "on", "before the deposit was paid"),
        # more than the deposit
        (("--amount", "72000.01", "--on", "2026-07-10"), "amount", "more than is left"),
        # a comma for a decimal point
        (("--amount", "1,5", "--on", "2026-07-10"), "amount", "decimal"),
        (("--amount", "0", "--on", "2026-07-10"), "amount", "greater than zero"),
        (("--amount", "-5", "--on", "2026-07-10"), "amount", ""),
        (("--amount", "10.005", "--on", "2026-07-10"), "amount", "2 decimal places"),
        # a day in the wrong order, and a day that is not one
        (("--amount", "100", "--on", "10/07/2026"), "on", ""),
        (("--amount", "100", "--on", "2026-02-30"), "on", ""),
        # in the future
        (("--amount", "100", "--on", "2099-01-01"), "on", "in the future"),
        # the wrong lease of the node
        (("--amount", "100", "--on", "2026-07-10", "--lease-start", "2026-06-01"),
         "lease_start", "no lease of n starts then"),
        # odd bytes in the notes
        (("--amount", "100", "--on", "2026-07-10", "--notes", "ok\x1b[2J"), "notes", ""),
        (("--amount", "100", "--on", "2026-07-10", "--notes", "x" * 501), "notes", ""),
    ],
)  # fmt: skip
def test_a_mistaken_refund_is_refused_and_changes_nothing(
    dep: Cli, ledger_path: Path, args: tuple[str, ...], field: str, words: str
) -> None:
    before = ledger_path.read_bytes()
    r = dep("lease", "refund", "n", *args)
    assert r.code == 2, r.out
    assert f"{field}:" in r.err or f"--{field.replace('_', '-')}" in r.err, r.err
    assert words in r.err
    assert ledger_path.read_bytes() == before


def test_refunds_over_the_deposit_in_two_steps_are_refused(dep: Cli, ledger_path: Path) -> None:
    """50,000 back, then 22,000.01 more: 50,000 + 22,000.01 = 72,000.01 > 72,000."""
    assert dep("lease", "refund", "n", "--amount", "50000", "--on", "2026-07-10").code == 0
    before = ledger_path.read_bytes()
    r = dep("lease", "refund", "n", "--amount", "22000.01", "--on", "2026-07-11")
    assert r.code == 2
    assert "amount: is more than is left of the deposit: CNY 22,000.00 of CNY 72,000.00" in r.err
    assert ledger_path.read_bytes() == before
    assert dep("lease", "refund", "n", "--amount", "22000", "--on", "2026-07-11").code == 0


def test_a_refund_of_a_lease_with_no_deposit_or_a_wrong_node(z: Cli, ledger_path: Path) -> None:
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "1000", "--start",
             "2026-05-01", "--end", "2026-06-01").code == 0  # fmt: skip
    before = ledger_path.read_bytes()
    r = z("lease", "refund", "n", "--amount", "100", "--on", "2026-05-10")
    assert r.code == 2 and "node:" in r.err and "no deposit to refund" in r.err
    r = z("lease", "refund", "nn", "--amount", "100", "--on", "2026-05-10")
    assert r.code == 2 and "node" in r.err
    assert ledger_path.read_bytes() == before


def test_undo_takes_a_refund_back_and_audit_verify_holds(dep: Cli) -> None:
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10").code == 0
    assert dep("audit", "verify").code == 0
    assert dep("undo").code == 0
    (row,) = json.loads(dep("lease", "refunds", "--json").out)
    assert (row["refunded"], row["outstanding"], row["refunds"]) == ("0.00", "72000.00", [])
    assert dep("audit", "verify").code == 0


NOW = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


def test_the_alert_counts_a_partial_refund_and_its_command_works(
    dep: Cli, ledger_path: Path
) -> None:
    """Ended 07-01; 30,000 back; 142 days on (2026-11-20): 72,000 - 30,000 = 42,000 still
    outstanding, warned of; the command it gives records the rest and the alert clears."""
    assert dep("lease", "end", "n", "--at", "2026-07-01").code == 0
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10").code == 0
    config = AlertsConfig()
    with Ledger.open(ledger_path, clock=lambda: NOW) as ledger:
        found = [a for a in evaluate(gather(ledger, config, NOW), config, NOW)
                 if a.kind is AlertKind.DEPOSIT]  # fmt: skip
    (alert,) = found
    assert alert.message.startswith(
        "n: deposit CNY 42,000.00 of CNY 72,000.00 (the rest came back)"
    )
    assert str(alert.yuan) == "42000.00"
    command = alert.action.removeprefix("ask the provider for the refund, then record it: ")
    assert command == (
        "zuka lease refund n --lease-start '2026-05-01 00:00' --amount 42000 --on YYYY-MM-DD"
    )
    done = dep(*shlex.split(command.replace("YYYY-MM-DD", "2026-11-19"))[1:])
    assert done.code == 0, done.err
    with Ledger.open(ledger_path, clock=lambda: NOW) as ledger:
        found = [a for a in evaluate(gather(ledger, config, NOW), config, NOW)
                 if a.kind is AlertKind.DEPOSIT]  # fmt: skip
    assert found == []


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        # the deposit below what came back: 10,000 < 30,000
        (("--deposit", "10000"), "deposit"),
        # paid after it came back (07-10)
        (("--deposit-paid-on", "2026-08-01"), "deposit-paid-on"),
    ],
)
def test_an_edit_that_would_make_the_refunds_untrue_is_refused(
    dep: Cli, ledger_path: Path, edit: tuple[str, ...], field: str
) -> None:
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10").code == 0
    before = ledger_path.read_bytes()
    r = dep("lease", "edit", "n", "--start", "2026-05-01", *edit)
    assert r.code == 2 and f"--{field}:" in r.err, r.err
    assert ledger_path.read_bytes() == before


def test_a_lease_with_refunds_is_not_deleted(dep: Cli, ledger_path: Path) -> None:
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10").code == 0
    before = ledger_path.read_bytes()
    r = dep("lease", "delete", "n", "--start", "2026-05-01", "--force")
    assert r.code == 2 and "1 deposit refund(s)" in r.err, r.err
    assert ledger_path.read_bytes() == before


def test_a_refund_goes_to_the_deposit_of_the_lease_the_renewal_renews(
    z: Cli, ledger_path: Path
) -> None:
    """50,000 paid with the lease from 09-20; renewed at 10-20 (the renewal holds no
    deposit). With no --lease-start the refund goes to the lease whose deposit is out."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-09-20", "--end", "2026-10-20", "--deposit", "50000", "--deposit-paid-on",
             "2026-09-18").code == 0  # fmt: skip
    assert z("lease", "renew", "n", "--until", "2026-11-20").code == 0
    r = z("lease", "refund", "n", "--amount", "20000", "--on", "2026-11-25")
    assert r.code == 0, r.err
    # 50,000 - 20,000 = 30,000 still out
    assert r.out.strip().endswith("outstanding: CNY 30,000.00")
    (row,) = json.loads(z("lease", "refunds", "--json").out)
    assert row["lease_start"].startswith("2026-09-20") and row["outstanding"] == "30000.00"
    assert z("lease", "refund", "n", "--amount", "30000", "--on", "2026-11-26").code == 0
    # All 50,000 back: nothing outstanding on the node; the message names the lease with a
    # deposit and how to name it, and nothing changes.
    before = ledger_path.read_bytes()
    r = z("lease", "refund", "n", "--amount", "1", "--on", "2026-11-27")
    assert r.code == 2
    assert "node:" in r.err and "2026-09-20 00:00 (refunded)" in r.err, r.err
    assert "--lease-start" in r.err
    assert ledger_path.read_bytes() == before


def test_a_part_refund_reads_partly_back_with_its_notes(dep: Cli) -> None:
    """72,000 paid; 30,000 back on 07-10 (note "transfer 8812"): partly back, not none."""
    assert dep("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-10",
               "--notes", "transfer 8812").code == 0  # fmt: skip
    (row,) = json.loads(dep("lease", "refunds", "--json").out)
    assert row["state"] == "partly back"
    table = dep("lease", "refunds").out
    assert "partly back" in table and "CNY 30,000.00 on 2026-07-10 (transfer 8812)" in table
    # The other 42,000 back: 30,000 + 42,000 = 72,000, refunded.
    assert dep("lease", "refund", "n", "--amount", "42000", "--on", "2026-08-20").code == 0
    (row,) = json.loads(dep("lease", "refunds", "--json").out)
    assert row["state"] == "refunded"


def test_the_lease_table_says_the_deposit_as_it_stood_at_the_month_end(z: Cli) -> None:
    """50,000 paid 09-28 with the lease of October and November; 20,000 back 11-10, the
    rest (50,000 - 20,000 = 30,000) 12-01, marked refunded that day. November's lease row
    says what the Deposits section says: part of it back, 30,000 still out at 11-30; not
    today's "refunded". October's: all of it out (paid)."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-10-01", "--end", "2026-12-01", "--deposit", "50000", "--deposit-paid-on",
             "2026-09-28").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "20000", "--on", "2026-11-10").code == 0
    assert z("lease", "edit", "n", "--deposit-refund", "refunded", "--deposit-refunded-on",
             "2026-12-01").code == 0  # fmt: skip
    nov = json.loads(z("report", "--month", "2026-11", "--format", "json").out)
    (row,) = nov["leases"]
    assert (row["deposit"], row["deposit_state"]) == ("50000.00", "partly refunded")
    assert nov["deposits"]["lines"][0]["outstanding"] == "30000.00"
    assert nov["total"]["deposits"] == {"partly refunded": "50000.00"}
    oct_ = json.loads(z("report", "--month", "2026-10", "--format", "json").out)
    assert oct_["leases"][0]["deposit_state"] == "paid"
    md = z("report", "--month", "2026-11").out
    assert "50,000.00 partly refunded" in md and "50,000.00 refunded" not in md, md
    rows = list(csv.DictReader(io.StringIO(z("report", "--month", "2026-11", "--format",
                                              "csv").out)))  # fmt: skip
    assert next(r["deposit_state"] for r in rows if r.get("node") == "n") == "partly refunded"


def test_a_deposit_outlives_its_node_and_its_name(z: Cli, ledger_path: Path) -> None:
    """n's lease with a 50,000 deposit ended, n archived, a new n added: the refund of the
    old n's deposit was refused ("has no lease to attach it to"), so it stayed outstanding
    in every report for good."""
    for typed in (
        ("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
         "2026-06-01", "--end", "2026-07-01", "--deposit", "50000", "--deposit-paid-on",
         "2026-05-25"),
        ("lease", "end", "n", "--at", "2026-07-01"),
        ("node", "archive", "n"),
        ("node", "add", "n", "--ssh", "root@10.0.0.7", "--gpus", "8", "--provider", "P"),
    ):  # fmt: skip
        r = z(*typed)
        assert r.code == 0, (typed, r.err)
    r = z("lease", "refund", "n", "--amount", "30000", "--on", "2026-09-20",
          "--lease-start", "2026-06-01")  # fmt: skip
    assert r.code == 0, r.err
    assert "outstanding: CNY 20,000.00" in r.out  # 50,000 - 30,000
    r = z("lease", "refund", "n", "--amount", "20000", "--on", "2026-10-10")  # no --lease-start
    assert r.code == 0, r.err
    assert "outstanding: CNY 0.00" in r.out
