"""Findings of an attacker's review of issue 20 (prepaid balances, invoices, the books):
each typed as the attacker typed it, refused with exit code 2, a message naming what was
wrong, and the ledger file unchanged byte for byte; figures worked out by hand."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.alerts.alert import AlertKind
from leases.alerts.balance import provider_alerts
from leases.app.leases import edit_lease
from leases.config.sections import AlertsConfig
from leases.core.errors import InputError
from leases.ledger import records
from leases.ledger.store import Ledger
from tests.support.cli import Cli
from tests.support.cli import json_of as _json
from tests.support.cli import ok as _ok


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


# -- 5. a started lease keeps its payment schedule -------------------------------------


def _quarter_paid_monthly(z: Cli) -> None:
    # 36,000 a month, 2026-08-01 to 2026-11-01, paid month by month: 36,000 on each 1st
    _ok(z, "lease", "add", "n", "--billing", "monthly", "--price", "36000", "--start",
        "2026-08-01", "--end", "2026-11-01", "--payment-schedule", "monthly")  # fmt: skip


def test_a_started_lease_keeps_its_payment_schedule(z: Cli, ledger_path: Path) -> None:
    _quarter_paid_monthly(z)
    cash = _json(z, "report", "--month", "2026-10")
    err = _refused(z, ledger_path, "--payment-schedule: the lease", "lease", "edit", "n", "--start",
                   "2026-08-01", "--payment-schedule", "upfront")  # fmt: skip
    assert "the lease started on 2026-08-01 under its schedule monthly" in err
    assert "zuka lease renew n --until ... --payment-schedule upfront" in err
    # October's instalment is charged as before: 36,000 (not 0, as if paid at the start)
    assert _json(z, "report", "--month", "2026-10") == cash
    # the same schedule typed again changes nothing and is no refusal
    assert "nothing changed" in _ok(z, "lease", "edit", "n", "--start", "2026-08-01",
                                    "--payment-schedule", "monthly")  # fmt: skip


def test_a_lease_not_started_may_change_its_schedule(tmp_path: Path) -> None:
    # 2026-07-31 16:00 UTC is 2026-08-01 00:00 in Shanghai (UTC+8): the lease's start
    before = datetime(2026, 7, 31, 15, 59, tzinfo=UTC)
    at_start = datetime(2026, 7, 31, 16, tzinfo=UTC)
    now = [before]
    with Ledger.open(tmp_path / "l.db", clock=lambda: now[0], create=True) as ledger:
        ledger.add_node(records.node_from({"name": "n", "ssh_host": "10.0.0.1"}))
        ledger.add_lease(records.lease_from({
            "node": "n", "billing_type": "monthly", "unit_price": "36000", "start": "2026-08-01",
            "end": "2026-11-01", "payment_schedule": "monthly", "billing_tz": "Asia/Shanghai"}))  # fmt: skip
        edited, _ = edit_lease(ledger, "n", {"payment_schedule": "quarterly"}, "2026-08-01")
        assert edited.payment_schedule == "quarterly"
        now[0] = at_start
        with pytest.raises(InputError) as exc:
            edit_lease(ledger, "n", {"payment_schedule": "upfront"}, "2026-08-01")
        assert exc.value.field == "payment_schedule"
        assert "started on 2026-08-01 under its schedule quarterly" in exc.value.reason


# -- 2. commands on the books refuse rows changed outside zuka -------------------------


def _sql(ledger_path: Path, statement: str) -> None:
    conn = sqlite3.connect(ledger_path)
    with conn:
        conn.execute(statement)
    conn.close()


def _deposit_refunded(z: Cli) -> None:
    _ok(z, "lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start",
        "2026-06-01", "--end", "2026-07-01", "--deposit", "60000")  # fmt: skip
    _ok(z, "lease", "refund", "n", "--amount", "20000", "--on", "2026-07-10")


def test_a_refund_changed_outside_zuka_is_refused_by_the_refunds(z: Cli, ledger_path: Path) -> None:
    _deposit_refunded(z)
    _sql(ledger_path, "UPDATE deposit_refunds SET amount = '60000'")
    said = "deposit_refund 1 was edited outside zuka"
    err = _refused(z, ledger_path, said, "lease", "refunds")
    assert 'amount "20000" on the audit log, "60000" in the table' in err
    _refused(z, ledger_path, said, "lease", "refund", "n", "--amount", "100", "--on",
             "2026-07-11")  # fmt: skip
    # the invoices and the balance rest on the books too
    _refused(z, ledger_path, said, *_invoice("--number", "1", "--amount", "100"))
    _refused(z, ledger_path, said, "provider", "topup", "P", "--amount", "100", "--at",
             "2026-08-01T09:00")  # fmt: skip
    _refused(z, ledger_path, said, "provider", "balance", "P", "--set", "100", "--at",
             "2026-08-01T09:00")  # fmt: skip
    _refused(z, ledger_path, said, "offer", "list")


def test_an_invoice_changed_outside_zuka_is_refused_by_its_edit(z: Cli, ledger_path: Path) -> None:
    _ok(z, *_invoice("--number", "9", "--amount", "100"))
    _sql(ledger_path, "UPDATE invoices SET amount = '1000'")
    said = "invoice 1 was edited outside zuka"
    _refused(z, ledger_path, said, "invoice", "edit", "1", "--notes", "checked")
    _refused(z, ledger_path, said, "invoice", "delete", "1")
    _refused(z, ledger_path, said, "bill", "list")


# -- 1. a provider account has one currency --------------------------------------------


def _usd_hourly(z: Cli) -> None:
    # 10 USD an hour from 2026-08-01 00:00 (Shanghai), billed by the hour as it runs
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--currency", "USD",
        "--start", "2026-08-01")  # fmt: skip


def test_a_topup_is_in_the_currency_of_the_providers_leases(z: Cli) -> None:
    _usd_hourly(z)
    out = _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-02T00:00")
    assert "recorded a top-up of USD 5,000.00 on P" in out, out
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-03T00:00")
    # from the top-up on 08-02 00:00 to 08-03 00:00: 24 h x 10 = 240 USD;
    # 5,000 - 240 = 4,760 USD
    assert (doc["currency"], doc["balance"], doc["charged_since"]) == ("USD", "4760.00", "240.00")


def test_a_balance_with_a_lease_in_another_currency_cannot_be_worked_out(
    z: Cli, ledger_path: Path
) -> None:
    _usd_hourly(z)
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--currency", "CNY", "--at",
        "2026-08-02T00:00")  # fmt: skip
    said = ("cannot be worked out: the lease from 2026-08-01 00:00 of node n is in USD, the"
            " account in CNY")  # fmt: skip
    _refused(z, ledger_path, said, "provider", "balance", "P", "--at", "2026-08-03T00:00")
    with Ledger.open(ledger_path, create=False) as ledger:
        [alert] = provider_alerts(ledger, AlertsConfig(), datetime(2026, 8, 3, tzinfo=UTC))
    assert alert.kind is AlertKind.UNEVALUATED
    assert "cannot evaluate the prepaid balance of P" in alert.message and said in alert.message


def test_an_entry_in_another_currency_than_the_accounts_is_refused(
    z: Cli, ledger_path: Path
) -> None:
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-02T00:00")  # CNY
    said = "currency: the account of provider P is in CNY (entry 1): a provider account has one"
    _refused(z, ledger_path, said, "provider", "topup", "P", "--amount", "100", "--currency",
             "USD", "--at", "2026-08-03T00:00")  # fmt: skip
    _refused(z, ledger_path, said, "provider", "balance", "P", "--set", "100", "--currency",
             "USD", "--at", "2026-08-03T00:00")  # fmt: skip
    # an import writes through the same book rule
    with Ledger.open(ledger_path, create=False) as ledger, pytest.raises(InputError) as exc:
        ledger.add_book("balance", {"provider_id": 1, "kind": "topup", "amount": "1",
                                    "currency": "USD", "at": "2026-08-03T00:00:00+08:00"})  # fmt: skip
    assert exc.value.field == "currency"
    # with no --currency, the account's: CNY
    _ok(z, "provider", "topup", "P", "--amount", "100", "--at", "2026-08-03T00:00")


def test_a_lease_over_before_the_account_began_is_no_part_of_it(z: Cli) -> None:
    # n: 10 USD an hour in July, over on 07-10; m: 20 CNY an hour from 08-01
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--currency", "USD",
        "--start", "2026-07-01", "--end", "2026-07-10")  # fmt: skip
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "hourly", "--price", "20", "--start", "2026-08-01")
    # the leases do not share a currency: the config's (CNY, the default)
    _ok(z, "provider", "topup", "P", "--amount", "1000", "--at", "2026-08-01T00:00")
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T00:00")
    # 24 h x 20 = 480 CNY; 1,000 - 480 = 520
    assert (doc["currency"], doc["balance"]) == ("CNY", "520.00")


def test_a_topup_with_no_lease_is_in_the_configs_currency(z: Cli, tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text('[billing]\ncurrency = "USD"\n')
    config.chmod(0o600)
    _ok(z, "provider", "topup", "P", "--amount", "100", "--at", "2026-08-01T00:00",
        "--config", str(config))  # fmt: skip
    doc = _json(z, "provider", "balance", "P", "--at", "2026-08-02T00:00")
    assert (doc["currency"], doc["balance"]) == ("USD", "100.00")


def test_an_auto_renewing_lease_in_another_currency_stops_the_balance(z: Cli) -> None:
    """n's USD month ended on its end in July, but renews: its renewals charge on into the
    CNY account's time, so the balance cannot be worked out (it left them out silently)."""
    _ok(z, "lease", "add", "n", "--billing", "monthly", "--price", "1000", "--currency", "USD",
        "--start", "2026-06-01", "--end", "2026-07-01", "--auto-renew")  # fmt: skip
    _ok(z, "node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8", "--provider", "P")
    _ok(z, "lease", "add", "m", "--billing", "hourly", "--price", "20", "--start", "2026-08-01")
    _ok(z, "provider", "topup", "P", "--amount", "1000", "--currency", "CNY",
        "--at", "2026-08-01T00:00")  # fmt: skip
    r = z("provider", "balance", "P", "--at", "2026-08-02T00:00")
    assert r.code == 2 and "is in USD, the account in CNY" in r.err, r.err


def test_an_invoice_number_with_spaces_inside_is_the_same_number(z: Cli) -> None:
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    _ok(z, "invoice", "add", "--provider", "P", "--number", "12345678", "--issued",
        "2026-09-03", "--period", "2026-08", "--amount", "1000", "--vat", "6%")  # fmt: skip
    r = z("invoice", "add", "--provider", "P", "--number", "1234 5678", "--issued",
          "2026-09-03", "--period", "2026-08", "--amount", "1000", "--vat", "6%")  # fmt: skip
    assert r.code == 2 and "unique per provider" in r.err, r.err


def test_a_provider_wide_invoice_in_a_currency_no_lease_bills_in_is_refused(z: Cli) -> None:
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    r = z("invoice", "add", "--provider", "P", "--number", "9", "--issued", "2026-09-03",
          "--period", "2026-08", "--amount", "100", "--vat", "6%", "--currency", "USD")  # fmt: skip
    assert r.code == 2 and "the provider's leases bill in CNY" in r.err, r.err


def test_a_node_charged_to_a_prepaid_account_keeps_its_provider(z: Cli) -> None:
    """node edit --provider moved n's 240 of charges from P's balance (-1,000 by hand) to
    Q's, which showed 5,000 untouched."""
    _ok(z, "lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    _ok(z, "provider", "topup", "P", "--amount", "5000", "--at", "2026-08-01T00:00")
    _ok(z, "provider", "add", "Q", "--kind", "platform")
    r = z("node", "edit", "n", "--provider", "Q")
    assert r.code == 2 and "charged to its prepaid account by P" in r.err, r.err
