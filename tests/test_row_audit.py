"""A row changed with sqlite3 behind zuka's back leaves the audit chain whole, so the chain
alone never saw it: each row is compared with the record the chain last wrote of it
(leases.rowaudit). The money commands and the offboarding refuse to rest on such a row,
naming it; `zuka audit verify` lists every one; `zuka audit accept` takes a checked row on
the chain in the accepting user's name, and `zuka undo` takes that back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import Cli

from leases import rowaudit
from leases.ledger import Ledger

MONTH = ("report", "--month", "2026-08", "--format", "json")


def _sql(path: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, params)


def _lease_id(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT max(id) FROM leases").fetchone()[0])


def _monthly(z: Cli) -> None:
    """Monthly 30,000 for August 2026 on n."""
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000",
          "--start", "2026-08-01", "--end", "2026-09-01")  # fmt: skip
    assert r.code == 0, r.err


def _charged(z: Cli) -> str:
    r = z(*MONTH)
    assert r.code == 0, r.err
    return str(json.loads(r.out)["total"]["charged_in_month"])


def test_a_price_edited_with_sqlite_is_refused_by_every_money_command(
    z: Cli, ledger_path: Path
) -> None:
    """3,000 written over 30,000 in the table: the chain verified, and August showed 3,000."""
    _monthly(z)
    assert _charged(z) == "30000.00"
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "UPDATE leases SET unit_price = '3000' WHERE id = ?", lease)
    for args in (
        MONTH,
        ("cost",),
        (
            "plan",
            "buy",
            "--card-price",
            "100000",
            "--life-years",
            "3",
            "--power-w",
            "400",
            "--kwh",
            "0.8",
            "--hosting",
            "500",
        ),
    ):
        r = z(*args)
        assert r.code == 2, (args, r.out)
        assert f"lease {lease} of node 'n' was edited outside zuka" in r.err
        assert 'unit_price "30000" on the audit log, "3000" in the table' in r.err
        assert f"zuka audit accept lease {lease}" in r.err
        assert r.out == ""
    verify = z("audit", "verify")
    assert verify.code == 1
    assert "ROWS CHANGED OUTSIDE ZUKA (1;" in verify.out and "unit_price" in verify.out
    doc = json.loads(z("audit", "verify", "--json").out)
    assert doc["ok"] is False
    assert doc["rows"][0]["fields"] == [{"field": "unit_price", "logged": "30000", "now": "3000"}]


def test_accepting_the_edit_puts_it_on_the_chain_and_undo_takes_it_back(
    z: Cli, ledger_path: Path
) -> None:
    _monthly(z)
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "UPDATE leases SET unit_price = '29000' WHERE id = ?", lease)
    r = z("audit", "accept", "lease", str(lease))
    assert r.code == 0, r.err
    assert f"accepted lease {lease} as edited outside zuka" in r.out
    assert _charged(z) == "29000.00"  # the accepted price, in the accepting user's name
    assert z("audit", "verify").code == 0
    log = json.loads(z("log", "--json").out)
    assert log[-1]["action"] == "row.accept"
    assert (log[-1]["before"]["unit_price"], log[-1]["after"]["unit_price"]) == ("30000", "29000")
    again = z("audit", "accept", "lease", str(lease))
    assert again.code == 2 and "nothing to accept" in again.err
    assert z("undo").code == 0
    assert _charged(z) == "30000.00"  # the logged record set back
    assert z("audit", "verify").code == 0


def test_a_stop_removed_and_a_resource_added_with_sqlite_are_named(
    z: Cli, ledger_path: Path
) -> None:
    """Removing a stop bills a stopped node; a row inserted by hand is a price nobody
    recorded. Both refused; a removed row is accepted as removed."""
    r = z("lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-08-01")
    assert r.code == 0, r.err
    assert z("lease", "stop", "n", "--at", "2026-08-02").code == 0
    assert z("lease", "resume", "n", "--at", "2026-08-03").code == 0
    _sql(ledger_path, "DELETE FROM stops")
    refused = z(*MONTH)
    assert refused.code == 2 and "stop 1 of node 'n' was removed outside zuka" in refused.err
    assert z("audit", "accept", "stop", "1").code == 0
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "INSERT INTO resources (lease_id, kind, native_id, created, price)"
         " VALUES (?, 'disk', 'd-9', '2026-08-01T00:00:00+08:00', '500')", lease)  # fmt: skip
    added = z(*MONTH)
    assert added.code == 2
    assert "no audit entry wrote it: added outside zuka" in added.err


def test_a_value_that_does_not_read_is_named_and_cannot_be_accepted(
    z: Cli, ledger_path: Path
) -> None:
    _monthly(z)
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "UPDATE leases SET currency = '' WHERE id = ?", lease)
    r = z(*MONTH)
    assert r.code == 2 and "does not read" in r.err
    refused = z("audit", "accept", "lease", str(lease))
    assert refused.code == 2 and "cannot be taken as it is" in refused.err


def test_changes_made_through_zuka_are_never_drift(z: Cli, ledger_path: Path) -> None:
    """A node renamed, a lease edited, renewed and ended, a resource added and marked
    deleted, a node deleted and the deletion undone: every row is as the chain wrote it."""
    _monthly(z)
    steps = [
        ("lease", "edit", "n", "--price", "31000"),
        ("lease", "renew", "n", "--until", "2026-10-01"),
        ("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--price", "300"),
        ("node", "edit", "n", "--rename", "m"),
        ("resource", "edit", "m", "--kind", "disk", "--id", "d-1", "--deleted", "now",
         "--notes", "gone"),
        ("lease", "end", "m", "--at", "2026-10-01T00:00"),
        ("node", "delete", "m", "--force"),
        ("undo",),
    ]  # fmt: skip
    for args in steps:
        r = z(*args)
        assert r.code == 0, (args, r.err)
    with Ledger.open(ledger_path) as ledger:
        assert rowaudit.drifted(ledger) == []
    assert z("audit", "verify").code == 0


def test_accepting_on_a_broken_chain_is_refused(z: Cli, ledger_path: Path) -> None:
    _monthly(z)
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "UPDATE leases SET unit_price = '1' WHERE id = ?", lease)
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("DROP TRIGGER audit_no_update")
    r = z("audit", "accept", "lease", str(lease))
    assert r.code == 2 and "does not verify" in r.err
    assert z("audit", "accept", "lease", "999").code == 2  # no such row, nothing logged


def test_a_bucket_renamed_with_sqlite_refuses_the_offboarding(z: Cli, ledger_path: Path) -> None:
    """The plan deletes what the resource rows name: one renamed in the table would point
    the deletion at another bucket."""
    _monthly(z)
    r = z("resource", "add", "n", "--kind", "bucket", "--id", "lab-scratch", "--region",
          "cn-beijing")  # fmt: skip
    assert r.code == 0, r.err
    _sql(ledger_path, "UPDATE resources SET native_id = 'lab-checkpoints'")
    plan = z("offboard", "n")
    assert plan.code == 2
    assert "the offboarding of n would rest on values nobody recorded" in plan.err
    assert '"lab-scratch" on the audit log, "lab-checkpoints" in the table' in plan.err


def test_the_dashboard_says_it_and_shows_no_month_cost(z: Cli, ledger_path: Path) -> None:
    from datetime import UTC, datetime

    from leases.config import Config
    from leases.fleetdata import FleetReader, ReadRequest

    _monthly(z)
    now = datetime(2026, 8, 20, tzinfo=UTC)
    with Ledger.open(ledger_path) as ledger:
        assert FleetReader(ledger, Config()).read(ReadRequest(now)).money is not None
    _sql(ledger_path, "UPDATE leases SET unit_price = '3000'")
    with Ledger.open(ledger_path) as ledger:
        data = FleetReader(ledger, Config()).read(ReadRequest(now))
    assert data.money is None
    (said,) = [p for p in data.problems if p.startswith("month's cost not computed")]
    assert "lease 1 of node 'n' was edited outside zuka" in said
