"""The books (leases.ledger.books, book_rows): every book's row is checked as written,
audited, undone, compared with its audit entry when edited behind zuka's back, and
carried by an export into another ledger. A bill's lines are hashed into its record, so
a line changed in SQLite shows as its bill's drift."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from leases.core.errors import InputError
from leases.ledger import books, rowaudit
from leases.ledger.store import Ledger
from leases.ledger.undo import undo_last
from tests.support.cli import Cli


def _ledger(z: Cli, path: Path) -> Ledger:
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-08-01", "--end", "2026-09-01", "--deposit", "60000")  # fmt: skip
    assert r.code == 0, r.err
    return Ledger.open(path)


def _line(no: int, amount: str, rid: str = "i-abc") -> dict[str, object]:
    return {"line_no": no, "period_start": "2026-08-01T00:00:00+08:00",
            "period_end": "2026-09-01T00:00:00+08:00", "resource_id": rid,
            "product": "ECS", "amount": amount, "currency": "CNY"}  # fmt: skip


def _bill(led: Ledger, mark: str, lines: list[dict[str, object]]) -> dict[str, Any]:
    """A bill of provider P with these lines (`mark` makes its file's hash its own)."""
    rec = {"provider_id": led.provider("P").id, "format": "aliyun", "source": "b.csv",
           "sha256": mark * 64, "imported_at": "2026-09-02T10:00:00+08:00"}  # fmt: skip
    return led.add_book("bill", rec, lines=lines)


def test_an_invoice_is_checked_audited_and_undone(z: Cli, ledger_path: Path) -> None:
    led = _ledger(z, ledger_path)
    pid = led.provider("P").id
    inv = led.add_book(
        "invoice",
        {
            "provider_id": pid,
            "number": "No.0012",
            "issued_on": "2026-09-03",
            "period_start": "2026-08-01",
            "period_end": "2026-09-01",
            "amount": "30,000",
            "vat_rate": "6%",
        },
    )
    assert inv["amount"] == "30000" and inv["vat_rate"] == "0.06" and inv["tax_included"] == 1
    assert [r["number"] for r in led.book_rows("invoice")] == ["No.0012"]
    assert rowaudit.drifted(led) == []
    led.edit_book("invoice", inv["id"], {"vat_rate": "0.13"})
    assert led.book_rows("invoice")[0]["vat_rate"] == "0.13"
    undo_last(led)
    assert led.book_rows("invoice")[0]["vat_rate"] == "0.06"
    undo_last(led)  # an undo undone is the change made again
    assert led.book_rows("invoice")[0]["vat_rate"] == "0.13"
    led.delete_book("invoice", inv["id"])
    assert led.book_rows("invoice") == []
    undo_last(led)
    assert led.book_rows("invoice")[0]["number"] == "No.0012"
    assert rowaudit.drifted(led) == []
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE invoices SET amount = '300' WHERE id = ?", [inv["id"]])
    found = rowaudit.drifted(led)
    assert [(d.entity, d.fields) for d in found] == [("invoice", (("amount", "30000", "300"),))]


@pytest.mark.parametrize(
    ("entity", "rec", "field"),
    [
        (
            "invoice",
            {
                "number": "1",
                "issued_on": "2026-09-03",
                "period_start": "2026-09-01",
                "period_end": "2026-08-01",
                "amount": "1",
                "vat_rate": "6%",
            },
            "period_end",
        ),
        (
            "invoice",
            {
                "number": "1",
                "issued_on": "2026-09-03",
                "period_start": "2026-08-01",
                "period_end": "2026-09-01",
                "amount": "1",
                "vat_rate": "60%",
            },
            "vat_rate",
        ),
        (
            "invoice",
            {
                "number": "1",
                "issued_on": "2026-09-31",
                "period_start": "2026-08-01",
                "period_end": "2026-09-01",
                "amount": "1",
                "vat_rate": "6%",
            },
            "issued_on",
        ),
        ("balance", {"kind": "topup", "amount": "0", "at": "2026-08-01T00:00:00+08:00"}, "amount"),
        (
            "balance",
            {"kind": "topup", "amount": "1,00", "at": "2026-08-01T00:00:00+08:00"},
            "amount",
        ),
        ("balance", {"kind": "topup", "amount": "100", "at": "2026-08-01T00:00:00"}, "at"),
    ],
)
def test_a_bad_book_record_is_refused_naming_the_field(
    z: Cli, ledger_path: Path, entity: str, rec: dict[str, object], field: str
) -> None:
    led = _ledger(z, ledger_path)
    before = ledger_path.read_bytes()
    with pytest.raises(InputError) as exc:
        led.add_book(entity, {"provider_id": led.provider("P").id, **rec})
    assert exc.value.field == field
    assert led.book_rows(entity) == []
    led.close()
    assert ledger_path.read_bytes() == before


def test_a_bill_line_edited_in_sqlite_is_its_bills_drift(z: Cli, ledger_path: Path) -> None:
    led = _ledger(z, ledger_path)
    bill = _bill(led, "a", [_line(1, "30000"), _line(2, "-500", "")])
    assert bill["line_count"] == 2
    assert rowaudit.drifted(led) == []
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE bill_lines SET amount = '3000' WHERE line_no = 1")
    found = rowaudit.drifted(led)
    assert [(d.entity, d.entity_id) for d in found] == [("bill", bill["id"])]
    assert found[0].fields[0][0] == "lines_hash"
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE bill_lines SET amount = '30000' WHERE line_no = 1")
    assert rowaudit.drifted(led) == []
    led.delete_book("bill", bill["id"])
    assert led.book_rows("bill") == []
    assert led.rows("SELECT * FROM bill_lines") == []
    undo_last(led)
    assert [ln["amount"] for ln in led.book_lines("bill", bill["id"])] == ["30000", "-500"]
    assert rowaudit.drifted(led) == []


def test_books_go_through_an_export_into_another_ledger(
    z: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    led = _ledger(z, ledger_path)
    lease_id = led.leases("n")[0].id
    led.add_book("deposit_refund", {"lease_id": lease_id, "amount": "20000",
                                    "refunded_on": "2026-09-10"})  # fmt: skip
    led.add_book("balance", {"provider_id": led.provider("P").id, "kind": "topup",
                             "amount": "5000", "at": "2026-08-01T09:00:00+08:00"})  # fmt: skip
    led.add_book("offer", {"provider": "AutoDL", "channel": "platform", "gpu_model": "H800",
                           "billing_type": "card_hour", "unit_price": "15.8",
                           "quoted_on": "2026-11-20", "valid_until": "2026-12-20"})  # fmt: skip
    _bill(led, "b", [_line(1, "30000")])
    data = led.export_records()
    other = Ledger.open(tmp_path / "other.db")
    counts = other.import_records(data)
    assert counts["deposit_refunds"] == counts["balance_entries"] == counts["offers"] == 1
    assert other.export_records() == data
    assert rowaudit.drifted(other) == []


def test_vat_rates_read_as_people_write_them() -> None:
    assert [books.vat_rate(v) for v in ("6%", "0.06", "6", "13％", "0", "9%")] == [
        "0.06", "0.06", "0.06", "0.13", "0", "0.09"]  # fmt: skip
    for bad in ("", "31%", "-1", "six"):
        with pytest.raises(InputError):
            books.vat_rate(bad)


def test_a_books_ids_are_never_reused(z: Cli, ledger_path: Path) -> None:
    """Bill 4 deleted and another imported must not be bill 4 again: the user, the audit
    log and an undo would take it for the first."""
    led = _ledger(z, ledger_path)
    rec = {"provider_id": led.provider("P").id, "kind": "topup", "amount": "100",
           "at": "2026-08-01T09:00:00+08:00"}  # fmt: skip
    first = led.add_book("balance", rec)
    led.delete_book("balance", first["id"])
    assert led.add_book("balance", rec)["id"] == first["id"] + 1


def test_a_row_changed_outside_zuka_cannot_be_laundered_by_delete_and_undo(
    z: Cli, ledger_path: Path
) -> None:
    """An invoice's amount set to 1 with sqlite3, then deleted and the delete undone, came
    back as 1 with a clean audit log: the delete's entry carried the outside value."""
    led = _ledger(z, ledger_path)
    inv = led.add_book("invoice", {"provider_id": led.provider("P").id, "number": "7",
                                   "issued_on": "2026-09-03", "period_start": "2026-08-01",
                                   "period_end": "2026-09-01", "amount": "30000",
                                   "vat_rate": "6%"})  # fmt: skip
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE invoices SET amount = '1'")
    for write in (lambda: led.delete_book("invoice", inv["id"]),
                  lambda: led.edit_book("invoice", inv["id"], {"notes": "x"})):  # fmt: skip
        with pytest.raises(InputError) as exc:
            write()
        assert "changed outside zuka" in exc.value.reason and "amount" in exc.value.reason
        assert "zuka audit accept invoice" in exc.value.reason
    assert led.book_rows("invoice")[0]["amount"] == "1"
    assert [d.entity for d in rowaudit.drifted(led)] == ["invoice"]


def test_a_refund_resting_on_a_refund_changed_outside_zuka_is_refused(
    z: Cli, ledger_path: Path
) -> None:
    """72,000 deposit, 30,000 back; that refund set to 1 in SQLite: a refund of 71,000
    would have been accepted (total back 101,000 of 72,000)."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-05-01", "--end", "2026-07-01", "--deposit", "72000").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-15").code == 0
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE deposit_refunds SET amount = '1'")
    before = ledger_path.read_bytes()
    r = z("lease", "refund", "n", "--amount", "71000", "--on", "2026-07-20")
    assert r.code == 2 and "changed outside zuka" in r.err, r.err
    assert ledger_path.read_bytes() == before


def test_an_import_keeps_the_books_date_rules_and_counts_a_top_up_once(
    z: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    """`zuka import` wrote a refund dated 2027, an invoice issued in 2030 and a top-up of
    2029, which the commands refuse; and the same export imported twice counted its top-ups
    twice."""
    led = _ledger(z, ledger_path)
    led.add_book("balance", {"provider_id": led.provider("P").id, "kind": "topup",
                             "amount": "5000", "at": "2026-08-01T09:00:00+08:00"})  # fmt: skip
    data = led.export_records()
    other = Ledger.open(tmp_path / "o.db")
    other.import_records({"providers": data["providers"]})
    for books_only in (
        {"balance_entries": [{**data["balance_entries"][0], "at": "2029-01-01T00:00:00+08:00"}]},
        {
            "invoices": [
                {
                    "provider": "P",
                    "number": "1",
                    "issued_on": "2030-01-01",
                    "period_start": "2026-08-01",
                    "period_end": "2026-09-01",
                    "amount": "1",
                    "vat_rate": "6%",
                }
            ]
        },
    ):
        with pytest.raises(InputError) as exc:
            other.import_records(books_only)
        assert "in the future" in exc.value.reason
    assert (
        other.import_records({"balance_entries": data["balance_entries"]})["balance_entries"] == 1
    )
    with pytest.raises(InputError) as exc:
        other.import_records({"balance_entries": data["balance_entries"]})
    assert "recorded already" in exc.value.reason
    assert len(other.book_rows("balance")) == 1


def test_a_blob_written_into_a_bill_line_is_its_bills_drift(z: Cli, ledger_path: Path) -> None:
    """A BLOB cell made the lines' hash fail ("JSON cannot hold BLOB values") without naming
    the row: audit verify, bill check, alerts and bill delete all stopped there."""
    led = _ledger(z, ledger_path)
    bill = _bill(led, "c", [_line(1, "30000"), _line(2, "12")])
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE bill_lines SET description = x'ff00' WHERE line_no = 2")
    [found] = rowaudit.drifted(led)
    assert (found.entity, found.entity_id) == ("bill", bill["id"])
    r = z("audit", "verify")
    assert r.code == 1 and f"bill {bill['id']}" in r.out, r.out


def test_a_node_the_books_rest_on_is_not_deleted_even_forced(z: Cli, ledger_path: Path) -> None:
    """node delete --force of a node with a deposit refund ended in a bare FOREIGN KEY
    error."""
    assert z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
             "2026-05-01", "--end", "2026-07-01", "--deposit", "72000").code == 0  # fmt: skip
    assert z("lease", "refund", "n", "--amount", "30000", "--on", "2026-07-15").code == 0
    assert z("lease", "end", "n", "--at", "2026-07-01").code == 0
    before = ledger_path.read_bytes()
    r = z("node", "delete", "n", "--force")
    assert r.code == 2 and "the books refer to its leases: 1 deposit refund(s)" in r.err, r.err
    assert ledger_path.read_bytes() == before
