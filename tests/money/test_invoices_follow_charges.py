"""An invoice follows the charges it covers (review findings on issue 20): a quarterly
invoice on a quarter's instalment charged on the 1st is the first month's, not spread by
days; an invoice of one lease never covers another lease's charges on the provider's line;
a period with no charge falls in the month it was issued. Every figure by hand."""

from __future__ import annotations

import json
from typing import Any

from tests.support.cli import Cli
from tests.support.cli import ok as _ok


def _lines(z: Cli, month: str) -> dict[str | None, Any]:
    doc = json.loads(_ok(z, "report", "--month", month, "--json"))
    return {r["node"]: r for r in doc["invoicing"]}


def _two_contracts(z: Cli) -> None:
    """n: a contract at 36,000 a month paid by the quarter (108,000 on 10-01, 01-01, ...);
    m: the same paid monthly (36,000 on the 1st of each month)."""
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "n", "--billing", "contract", "--price", "36000", "--start",
        "2026-10-01", "--end", "2027-10-01", "--payment-schedule", "quarterly")  # fmt: skip
    _ok(z, "lease", "add", "m", "--billing", "contract", "--price", "36000", "--start",
        "2026-10-01", "--end", "2027-10-01", "--payment-schedule", "monthly")  # fmt: skip


def _invoice(*terms: str) -> tuple[str, ...]:
    return ("invoice", "add", "--provider", "P", "--issued", "2026-10-05", "--vat", "6%",
            *terms)  # fmt: skip


def test_a_quarterly_invoice_covers_the_quarter_s_instalment_in_its_month(z: Cli) -> None:
    _two_contracts(z)
    _ok(z, *_invoice("--node", "n", "--number", "0012", "--from", "2026-10-01", "--to",
                     "2026-12-31", "--amount", "108000"))  # fmt: skip
    # October: n charged its quarter, 3 x 36,000 = 108,000 on 10-01, the only charge of
    # n in the invoice's period: all of the 108,000 is October's (not 108,000 x 31/92 =
    # 36,391.30 by days)
    octo = _lines(z, "2026-10")
    assert (octo["n"]["charged_in_month"], octo["n"]["invoiced"], octo["n"]["uninvoiced"]) == (
        "108000.00", "108000.00", "0.00")  # fmt: skip
    assert octo["n"]["notes"] is None and octo["n"]["invoiced_over_charged"] == "0.00"
    # the provider: 108,000 + m's 36,000 = 144,000 charged; uninvoiced m's 36,000
    assert (octo[None]["charged_in_month"], octo[None]["invoiced"],
            octo[None]["uninvoiced"]) == ("144000.00", "108000.00", "36000.00")  # fmt: skip
    # November and December: n charged nothing; the invoice has nothing there, and m's
    # 36,000 is uninvoiced (it was "35,217.39 invoiced" when shared by days)
    for month in ("2026-11", "2026-12"):
        got = _lines(z, month)
        assert set(got) == {None}, got
        assert (got[None]["charged_in_month"], got[None]["invoiced"], got[None]["uninvoiced"],
                got[None]["notes"]) == ("36000.00", "0.00", "36000.00", None)  # fmt: skip


def test_one_lease_s_invoice_never_covers_another_lease_s_charges(z: Cli) -> None:
    _two_contracts(z)
    _ok(z, *_invoice("--node", "n", "--number", "7", "--period", "2026-10",
                     "--amount", "110000"))  # fmt: skip
    octo = _lines(z, "2026-10")
    # n: charged 108,000, invoiced 110,000: 2,000 over, nothing uninvoiced
    assert (octo["n"]["uninvoiced"], octo["n"]["invoiced_over_charged"]) == ("0.00", "2000.00")
    # the provider: 144,000 charged, 110,000 invoiced, but n's 2,000 over does not cover
    # m's 36,000: uninvoiced 36,000 (not 144,000 - 110,000 = 34,000), over 2,000
    assert (octo[None]["invoiced"], octo[None]["uninvoiced"],
            octo[None]["invoiced_over_charged"]) == ("110000.00", "36000.00", "2000.00")  # fmt: skip
    assert octo[None]["notes"] == "invoiced more than charged by CNY 2,000.00"
    # a provider-wide invoice of 30,000 covers m's: 36,000 - 30,000 = 6,000 uninvoiced
    _ok(z, *_invoice("--number", "8", "--period", "2026-10", "--amount", "30000"))
    octo = _lines(z, "2026-10")
    assert (octo[None]["invoiced"], octo[None]["uninvoiced"],
            octo[None]["invoiced_over_charged"]) == ("140000.00", "6000.00", "2000.00")  # fmt: skip


def test_an_invoice_of_a_period_with_no_charge_falls_in_the_month_it_was_issued(z: Cli) -> None:
    _two_contracts(z)
    _ok(z, *_invoice("--node", "m", "--number", "9", "--period", "2026-09", "--amount", "500"))
    # September: m had not started; nothing charged, the invoice is not September's
    assert _lines(z, "2026-09") == {}
    # October, the month it was issued: m charged 36,000, invoiced 500: 35,500 uninvoiced
    octo = _lines(z, "2026-10")
    assert (octo["m"]["invoiced"], octo["m"]["uninvoiced"]) == ("500.00", "35500.00")
    assert octo["m"]["notes"] == ("invoice 9 (2026-09-01 to 2026-09-30) covers no charge zuka"
                                  " knows: counted in 2026-10, the month it was issued")  # fmt: skip
    assert "(exclusive)" not in _ok(z, "report", "--month", "2026-10")


def test_a_vat_rate_that_is_not_china_s_is_kept_and_said_on_stderr(z: Cli) -> None:
    r = z(*_invoice("--number", "1", "--period", "2026-10", "--amount", "107"), "--vat", "7%",
          "--json")  # fmt: skip
    assert r.code == 0, r.err
    said = "7 % is not one of China's VAT rates (0, 1, 3, 5, 6, 9, 13 %): check the fapiao"
    assert said in r.err
    rec = json.loads(r.out)  # stdout stays JSON, the warning apart
    assert rec["vat_rate"] == "0.07"
    assert rec["period_to"] == "2026-10-31"  # the last day, as --period and --to mean it
    # 107 x 0.07 / 1.07 = 7.00: recorded as typed
    [inv] = json.loads(_ok(z, "invoice", "list", "--json"))
    assert inv["tax"] == "7.00"
    # China's rates say nothing; an edit to an odd one says it again
    r = z(*_invoice("--number", "2", "--period", "2026-10", "--amount", "106"))  # 6 %
    assert r.code == 0 and r.err == ""
    r = z("invoice", "edit", str(rec["id"]), "--vat", "13%")
    assert r.code == 0 and r.err == ""
    r = z("invoice", "edit", str(rec["id"]), "--vat", "0.08")
    assert r.code == 0 and "8 % is not one of China's VAT rates" in r.err
