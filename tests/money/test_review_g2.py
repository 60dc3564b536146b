"""Findings of an attacker's review of issue 20 (prepaid balances, invoices, the books):
each typed as the attacker typed it, refused with exit code 2, a message naming what was
wrong, and the ledger file unchanged byte for byte; figures worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import Cli


def _ok(z: Cli, *args: str) -> str:
    r = z(*args)
    assert r.code == 0, r.err
    return r.out


def _json(z: Cli, *args: str) -> Any:
    return json.loads(_ok(z, *args, "--json"))


def _refused(z: Cli, ledger_path: Path, said: str, *typed: str) -> str:
    before = ledger_path.read_bytes()
    r = z(*typed)
    assert r.code == 2, (r.out, r.err)
    assert said in r.err, r.err
    assert ledger_path.read_bytes() == before
    return r.err


def _invoice(*terms: str) -> tuple[str, ...]:
    return ("invoice", "add", "--provider", "P", "--issued", "2026-09-03", "--period", "2026-08",
            "--vat", "6%", *terms)  # fmt: skip


# -- 3. an invoice number typed full-width is the same number --------------------------


def test_a_full_width_invoice_number_is_the_same_number(z: Cli, ledger_path: Path) -> None:
    _ok(z, *_invoice("--number", "77", "--amount", "100"))
    # "７７" is U+FF17 twice: NFKC makes it "77", the number of the invoice above
    _refused(z, ledger_path, "is already the number of invoice #1",
             *_invoice("--number", "\uff17\uff17", "--amount", "100"))  # fmt: skip
    _refused(z, ledger_path, "is already the number of invoice #1",
             *_invoice("--number", " 77\u3000", "--amount", "100"))  # fmt: skip


def test_a_full_width_number_is_stored_normalised(z: Cli) -> None:
    _ok(z, *_invoice("--number", "No.\uff10\uff10\uff11\uff12", "--amount", "100"))
    [inv] = _json(z, "invoice", "list")
    assert inv["number"] == "No.0012"


# -- 4. an invoice of a lease is in the lease's currency -------------------------------


def test_an_invoice_in_another_currency_than_its_lease_is_refused(
    z: Cli, ledger_path: Path
) -> None:
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--currency", "USD",
        "--start", "2026-08-01")  # fmt: skip
    # no --currency: CNY, the lease's is USD
    err = _refused(z, ledger_path, "currency", *_invoice("--node", "n", "--number", "5",
                                                         "--amount", "100"))  # fmt: skip
    assert "USD" in err and "CNY" in err
    _ok(z, *_invoice("--node", "n", "--number", "5", "--amount", "100", "--currency", "USD"))
    [inv] = _json(z, "invoice", "list")
    _refused(z, ledger_path, "currency", "invoice", "edit", str(inv["id"]), "--currency", "CNY")
