"""Invoices (fapiao) and prepaid balances (issue 20, items 3 and 4), typed as a lab types
them and read back from the CLI: each figure worked out by hand beside it, never by zuka's
own functions. Then the mistakes people make: each refused with exit code 2, a message
naming the option, and the ledger file unchanged byte for byte."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.cli import json_of as _json
from tests.support.cli import ok as _ok


def _invoice(*terms: str) -> tuple[str, ...]:
    return ("invoice", "add", "--provider", "P", "--issued", "2026-09-03", *terms)


# -- VAT on an invoice ------------------------------------------------------------------


def test_a_tax_included_invoice_at_6_percent(z: Cli) -> None:
    _ok(z, *_invoice("--number", "No.0012", "--period", "2026-08", "--amount", "30,000",
                     "--vat", "6%"))  # fmt: skip
    [inv] = _json(z, "invoice", "list")
    # tax = 30,000 x 0.06 / 1.06 = 1,698.1132... -> 1,698.11 (half up to the fen);
    # net = 30,000 - 1,698.11 = 28,301.89; the total is the amount as written
    assert (inv["tax"], inv["net"], inv["total"]) == ("1698.11", "28301.89", "30000.00")
    assert (inv["period_start"], inv["period_to"]) == ("2026-08-01", "2026-08-31")
    assert "period_end" not in inv  # the exclusive bound is the ledger's, not the reader's
    assert inv["vat_rate"] == "0.06" and inv["tax_included"] is True and inv["kind"] == "special"
    table = _ok(z, "invoice", "list")
    assert "2026-08-01 – 2026-08-31" in table and "CNY 1,698.11" in table and "6 %" in table


def test_a_special_invoice_at_13_percent_tax_excluded(z: Cli) -> None:
    out = _ok(z, *_invoice("--number", "88", "--from", "2026-08-01", "--to", "2026-08-31",
                           "--amount", "10000", "--vat", "0.13", "--tax-excluded"))  # fmt: skip
    # tax = 10,000 x 0.13 = 1,300.00; total = 10,000 + 1,300 = 11,300.00
    assert "total CNY 11,300.00 (tax CNY 1,300.00 at 13 %, net CNY 10,000.00" in out
    [inv] = _json(z, "invoice", "list", "--month", "2026-08")
    assert (inv["tax"], inv["net"], inv["total"]) == ("1300.00", "10000.00", "11300.00")
    assert inv["period_to"] == "2026-08-31"  # --to is the last day covered, included
    assert "covering 2026-08-01 to 2026-08-31" in out


def test_the_tax_is_rounded_half_up_not_half_even(z: Cli) -> None:
    _ok(z, *_invoice("--number", "1", "--period", "2026-08", "--amount", "0.5", "--vat", "13%",
                     "--tax-excluded"))  # fmt: skip
    # 0.50 x 0.13 = 0.065: half up 0.07 (half to even would say 0.06); total 0.57
    [inv] = _json(z, "invoice", "list")
    assert (inv["tax"], inv["total"]) == ("0.07", "0.57")


def test_a_vat_rate_reads_as_percent_fraction_or_whole_number(z: Cli) -> None:
    for no, rate in (("1", "6%"), ("2", "0.06"), ("3", "6")):
        _ok(z, *_invoice("--number", no, "--period", "2026-08", "--amount", "106", "--vat", rate))
    # 106 x 0.06 / 1.06 = 6.00 each
    assert [i["tax"] for i in _json(z, "invoice", "list")] == ["6.00"] * 3


def test_an_invoice_is_edited_deleted_and_undone(z: Cli) -> None:
    _ok(z, *_invoice("--number", "7", "--period", "2026-08", "--amount", "1000", "--vat", "6%"))
    [inv] = _json(z, "invoice", "list")
    _ok(z, "invoice", "edit", str(inv["id"]), "--vat", "13%", "--kind", "ordinary")
    # 1,000 x 0.13 / 1.13 = 115.044... -> 115.04
    [inv] = _json(z, "invoice", "list")
    assert (inv["tax"], inv["kind"]) == ("115.04", "ordinary")
    _ok(z, "invoice", "delete", str(inv["id"]))
    assert _json(z, "invoice", "list") == []
    _ok(z, "undo")
    assert [i["number"] for i in _json(z, "invoice", "list")] == ["7"]


# -- the month's invoiced and uninvoiced charges in the report ---------------------------


def _august(z: Cli) -> None:
    _ok(z, "lease", "add", "n", "--billing", "monthly", "--price", "30000",
        "--start", "2026-08-01", "--end", "2026-09-01")  # fmt: skip
    _ok(z, "resource", "add", "n", "--kind", "disk", "--id", "d-1", "--created", "2026-08-01",
        "--price", "1200", "--price-per", "month")  # fmt: skip


def test_the_report_shows_the_months_uninvoiced_charges(z: Cli) -> None:
    _august(z)
    _ok(z, *_invoice("--number", "0012", "--period", "2026-08", "--amount", "30000",
                     "--vat", "6%"))  # fmt: skip
    # charged in August: the month's 30,000 on 08-01 + the disk's 1,200 for the whole month
    # = 31,200; invoiced 30,000 (tax included); uninvoiced 31,200 - 30,000 = 1,200
    doc = _json(z, "report", "--month", "2026-08")
    assert doc["invoicing"] == [{
        "provider": "P", "node": None, "currency": "CNY", "charged_in_month": "31200.00",
        "invoiced": "30000.00", "uninvoiced": "1200.00", "invoiced_over_charged": "0.00",
        "invoices": ["0012"], "notes": None,
    }]  # fmt: skip
    md = _ok(z, "report", "--month", "2026-08")
    assert "## Invoices" in md
    assert "| P | all leases | CNY 31,200.00 | CNY 30,000.00 | CNY 1,200.00 | 0012 | - |" in md
    rows = list(csv.DictReader(io.StringIO(_ok(z, "report", "--month", "2026-08",
                                               "--format", "csv"))))  # fmt: skip
    [inv] = [r for r in rows if r["row"] == "invoicing"]
    assert (inv["provider"], inv["charged_in_month"], inv["invoiced"], inv["uninvoiced"]) == (
        "P", "31200.00", "30000.00", "1200.00")  # fmt: skip


def test_an_invoice_over_the_charges_says_by_how_much(z: Cli) -> None:
    _august(z)
    _ok(z, *_invoice("--number", "1", "--node", "n", "--period", "2026-08", "--amount", "32000",
                     "--vat", "6%"))  # fmt: skip
    # n charged 31,200 in August; invoiced 32,000: 800 more than charged, uninvoiced 0
    doc = _json(z, "report", "--month", "2026-08")
    per = {r["node"]: r for r in doc["invoicing"]}
    assert set(per) == {None, "n"}  # the provider's line and the lease's the invoice names
    assert (per["n"]["uninvoiced"], per["n"]["invoiced_over_charged"]) == ("0.00", "800.00")
    assert per["n"]["notes"] == "invoiced more than charged by CNY 800.00"
    assert "invoiced more than charged by CNY 800.00" in _ok(z, "report", "--month", "2026-08")


def test_an_invoice_across_two_months_follows_the_charges(z: Cli) -> None:
    _august(z)
    _ok(z, *_invoice("--number", "Q3", "--from", "2026-08-01", "--to", "2026-09-30",
                     "--amount", "6100", "--vat", "6%"))  # fmt: skip
    # charged: August 30,000 + the disk's 1,200 = 31,200; September the disk's 1,200 only
    # (the lease ended on 09-01, the disk bills on): 32,400 in the period. August's part
    # 6,100 x 31,200 / 32,400 = 5,874.074... -> 5,874.07 (not 6,100 x 31 / 61 days = 3,100)
    [row] = _json(z, "report", "--month", "2026-08")["invoicing"]
    assert row["invoiced"] == "5874.07"
    assert row["notes"] == ("invoice Q3 covers 2026-08-01 to 2026-09-30: CNY 5,874.07 of it"
                            " here, by the charges of each month")  # fmt: skip
    # uninvoiced 31,200 - 5,874.07 = 25,325.93
    assert row["uninvoiced"] == "25325.93"
    # September: what is left, 6,100 - 5,874.07 = 225.93; 1,200 - 225.93 = 974.07
    [sep] = _json(z, "report", "--month", "2026-09")["invoicing"]
    assert (sep["charged_in_month"], sep["invoiced"], sep["uninvoiced"]) == (
        "1200.00", "225.93", "974.07")  # fmt: skip


def test_a_ledger_without_invoices_reports_as_before(z: Cli) -> None:
    _august(z)
    assert _json(z, "report", "--month", "2026-08")["invoicing"] == []
    assert "## Invoices" not in _ok(z, "report", "--month", "2026-08")


# -- prepaid balances ---------------------------------------------------------------------


def _autodl(z: Cli) -> None:
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip


def test_the_balance_is_worked_out_from_the_top_up_and_the_charges(z: Cli) -> None:
    _autodl(z)
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    # 24 h x 8 cards x 1.98 = 380.16 charged since the top-up; 5,000 - 380.16 = 4,619.84
    assert (doc["balance"], doc["charged_since"], doc["topups_since"]) == (
        "4619.84", "380.16", "5000.00")  # fmt: skip
    # burn now: 1.98 x 8 x 24 = 380.16/day; 4,619.84 / 380.16 = 12.1523... days
    assert (doc["burn_per_day"], doc["days_left"]) == ("380.16", "12.15")
    # 4,619.84 / 380.16 = 12.1523569 days = 12 d + 0.1523569 x 86,400 s = 13,163.6 s
    # (3 h 39 min 23.6 s) after 08-02 10:00: the first whole second it is spent, 13:39:24
    assert doc["runs_out"] == "2026-08-14 13:39:24"
    assert doc["stops_then"] == ["n"] and doc["worked_out"] is True
    assert doc["since"] == "2026-08-01T09:00:00+08:00" and doc["since_reading"] is None
    text = _ok(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert (
        "balance CNY 4,619.84" in text and "worked out by zuka since 0 at the first top-up" in text
    )
    assert "12.15 days left" in text and "then stops: n" in text


def test_a_reading_sets_the_balance_even_below_zero(z: Cli) -> None:
    _autodl(z)
    _ok(z, "provider", "balance", "P", "--set=-20", "--at", "2026-08-02T12:00")
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T12:00")
    assert doc["balance"] == "-20.00" and doc["since_reading"] == "-20.00"
    assert doc["days_left"] == "0.00"  # already run out
    # an hour later: -20 - 1 h x 8 x 1.98 (15.84) = -35.84
    later = _json(z, "provider", "balance", "P", "--at", "2026-08-02T13:00")
    assert later["balance"] == "-35.84" and later["since"] == "2026-08-02T12:00:00+08:00"
    # a top-up after the reading counts: -35.84 + 1,000 = 964.16 at 13:00
    _ok(z, "provider", "topup", "P", "--amount", "1000", "--at", "2026-08-02T13:00")
    assert _json(z, "provider", "balance", "P", "--at", "2026-08-02T13:00")["balance"] == "964.16"
    text = _ok(z, "provider", "balance", "P", "--at", "2026-08-02T12:00")
    assert "since the reading of CNY -20.00" in text and "it has run out" in text


def test_a_stopped_node_burns_only_its_storage(z: Cli) -> None:
    _ok(z, "provider", "topup", "P", "--amount", "100", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00", "--stopped-billing", "storage_only")  # fmt: skip
    _ok(z, "resource", "add", "n", "--kind", "disk", "--id", "d-1", "--created",
        "2026-08-01T10:00", "--price", "0.5", "--price-per", "day")  # fmt: skip
    _ok(z, "lease", "stop", "n", "--at", "2026-08-01T12:00")
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T12:00")
    # charged: 2 h x 15.84 = 31.68, disk 1 day x 0.5 + 2 h (0.5 x 2 / 24 = 0.041666...)
    # = 0.541666...; 100 - 31.68 - 0.541666 = 67.778333 -> 67.78
    assert doc["balance"] == "67.78"
    # stopped: only the disk burns, 0.50 a day; nothing of zuka's stops when it runs out
    assert doc["burn_per_day"] == "0.50" and doc["stops_then"] == []
    # 67.778333 / 0.5 = 135.556 days
    assert doc["days_left"] == "135.56"


def test_provider_list_shows_the_balance_where_there_are_entries(z: Cli) -> None:
    _ok(z, "provider", "add", "Q", "--kind", "cloud")
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T09:00")
    listed = {p["name"]: p["balance"] for p in _json(z, "provider", "list")}
    assert listed == {"P": "5000.00", "Q": None}  # no lease at P: nothing charged
    assert "CNY 5,000.00" in _ok(z, "provider", "list")


# -- the mistakes -------------------------------------------------------------------------


MISTAKES = [
    ("duplicate invoice number",
     _invoice("--number", "0012", "--period", "2026-08", "--amount", "5", "--vat", "6%"),
     "--number: is already the number of invoice #1 of provider P: an invoice number is unique"
     " per provider"),
    ("VAT 60 %", _invoice("--number", "9", "--period", "2026-08", "--amount", "5", "--vat",
                          "60%"), "--vat: must be a VAT rate from 0 to 30 %"),
    ("a comma as a decimal point", _invoice("--number", "9", "--period", "2026-08",
                                            "--amount", "1,5", "--vat", "6%"),
     "--amount: is not a number: a comma only groups thousands"),
    ("issued in the future", ("invoice", "add", "--provider", "P", "--issued", "2099-01-05",
                              "--number", "9", "--period", "2026-08", "--amount", "5", "--vat",
                              "6%"), "--issued: is in the future"),
    ("the period in the wrong order", _invoice("--number", "9", "--from", "2026-08-31", "--to",
                                               "2026-08-01", "--amount", "5", "--vat", "6%"),
     "--to: is before --from 2026-08-31"),
    ("a period over a year", _invoice("--number", "9", "--from", "2026-01-01", "--to",
                                      "2027-01-31", "--amount", "5", "--vat", "6%"),
     "an invoice covers at most 366 days"),
    ("a month that is not one", _invoice("--number", "9", "--period", "2026-13", "--amount",
                                         "5", "--vat", "6%"), "--period: must be a month"),
    ("an invoice of the wrong provider's node", (
        "invoice", "add", "--provider", "Q", "--node", "n", "--issued", "2026-09-03",
        "--number", "9", "--period", "2026-08", "--amount", "5", "--vat", "6%"),
     "--node: is at provider P, not Q"),
    ("a lease start that names no lease", (
        "invoice", "add", "--provider", "P", "--node", "n", "--lease-start", "2026-07-01",
        "--issued", "2026-09-03", "--number", "9", "--period", "2026-08", "--amount", "5",
        "--vat", "6%"), "--lease-start: no lease of n starts then"),
    ("a top-up for a provider that does not exist",
     ("provider", "topup", "PP", "--amount", "5000"),
     "--provider: no provider of that name in the ledger (got 'PP')"),
    ("a top-up of nothing", ("provider", "topup", "P", "--amount", "0"),
     "amount: a top-up must be greater than zero"),
    ("a top-up in the future", ("provider", "topup", "P", "--amount", "5", "--at", "2099-01-01"),
     "--at: is in the future"),
    ("a reading with a comma", ("provider", "balance", "P", "--set", "1,5"),
     "amount: is not a number"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "typed", "said"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_is_refused_and_changes_nothing(
    z: Cli, ledger_path: Path, what: str, typed: tuple[str, ...], said: str
) -> None:
    _ok(z, "provider", "add", "Q", "--kind", "cloud")
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    _ok(z, *_invoice("--number", "0012", "--period", "2026-08", "--amount", "5", "--vat", "6%"))
    before = ledger_path.read_bytes()
    r = z(*typed)
    assert r.code == 2, (what, r.out, r.err)
    assert said in r.err, r.err
    assert ledger_path.read_bytes() == before


def test_a_prepaid_renewal_before_the_run_out_is_a_coming_charge(z: Cli) -> None:
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "monthly", "--price", "3000", "--start",
        "2026-07-15", "--end", "2026-08-15", "--auto-renew")  # fmt: skip
    _ok(z, "provider", "topup", "P", "--amount", "9000", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    # m's month was charged on 07-15, before the top-up: only n's 380.16 since;
    # 9,000 - 380.16 = 8,619.84; m burns nothing until its renewal
    assert (doc["balance"], doc["burn_per_day"]) == ("8619.84", "380.16")
    # At the burn alone it would last 8,619.84 / 380.16 = 22.67 days, but m renews on 08-15
    # 00:00 for 3,000: by then (12 d 14 h = 12.58333 days) 380.16 x 12.58333 = 4,783.68 is
    # burnt, 8,619.84 - 4,783.68 - 3,000 = 836.16 is left, which lasts 836.16 / 380.16 =
    # 2.19949 days more: 12.58333 + 2.19949 = 14.78 days
    assert doc["days_left"] == "14.78" and doc["stops_then"] == ["n"]
    assert doc["coming_charges"] == [
        {"node": "m", "at": "2026-08-15T00:00:00+08:00", "amount": "3000.00"}]  # fmt: skip
    text = _ok(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    assert "coming before then: m's prepaid charge of CNY 3,000.00 on 2026-08-15 00:00" in text


def test_hostile_text_in_an_invoice_is_shown_never_obeyed(z: Cli) -> None:
    _ok(z, *_invoice("--number", '=HYPERLINK("http://x")', "--period", "2026-08",
                     "--amount", "100", "--vat", "6%", "--notes", "<b>|x|</b>"))  # fmt: skip
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01",
        "--end", "2026-08-02")  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(_ok(z, "report", "--month", "2026-08",
                                               "--format", "csv"))))  # fmt: skip
    [inv] = [r for r in rows if r["row"] == "invoicing"]
    assert inv["notes"] == '\'=HYPERLINK("http://x")'  # a spreadsheet shows it as text
    # 24 h x 10 = 240 charged; 100 invoiced; 140 uninvoiced
    assert (inv["charged_in_month"], inv["uninvoiced"]) == ("240.00", "140.00")
    md = _ok(z, "report", "--month", "2026-08")
    # Markdown's and HTML's specials escaped: a cell stays a cell, never a link or a tag
    assert "| =HYPERLINK\\(&quot;http://x&quot;\\) | - |" in md
    [listed] = _json(z, "invoice", "list")
    assert listed["notes"] == "<b>|x|</b>"  # JSON carries it as it is, as text
    r = z(*_invoice("--number", "x\x1b[31m", "--period", "2026-08", "--amount", "1",
                    "--vat", "6%"))  # fmt: skip
    assert r.code == 2 and "--number" in r.err and "\x1b" not in r.err
    r = z(*_invoice("--number", "9" * 61, "--period", "2026-08", "--amount", "1", "--vat", "6%"))
    assert r.code == 2 and "--number" in r.err


def test_a_payment_schedule_s_instalment_before_the_run_out_is_a_coming_charge(z: Cli) -> None:
    """The renewal case above with a 12-month term paid monthly instead: its instalment of
    08-15 brings the run-out forward the same way."""
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "monthly", "--price", "3000", "--start",
        "2026-07-15", "--end", "2027-07-15", "--payment-schedule", "monthly")  # fmt: skip
    _ok(z, "provider", "topup", "P", "--amount", "9000", "--at", "2026-08-01T09:00")
    _ok(z, "lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
        "--start", "2026-08-01T10:00")  # fmt: skip
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T10:00")
    # m's first instalment was charged on 07-15, before the top-up: 9,000 - 380.16
    assert doc["balance"] == "8619.84"
    # 380.16 x 12.58333 days to 08-15 00:00 = 4,783.68; 8,619.84 - 4,783.68 - 3,000 =
    # 836.16, lasting 836.16 / 380.16 = 2.19949 days: 14.78 days in all (to 08-17 04:47)
    assert doc["days_left"] == "14.78"
    assert doc["coming_charges"] == [
        {"node": "m", "at": "2026-08-15T00:00:00+08:00", "amount": "3000.00"}]  # fmt: skip
