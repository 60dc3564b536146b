"""A row changed with sqlite3 behind zuka's back leaves the audit chain whole, so the chain
alone never saw it: each row is compared with the record the chain last wrote of it
(leases.ledger.rowaudit). The money commands and the offboarding refuse to rest on such a row,
naming it; `zuka audit verify` lists every one; `zuka audit accept` takes a checked row on
the chain in the accepting user's name, and `zuka undo` takes that back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from leases.ledger import rowaudit
from leases.ledger.store import Ledger
from tests.support.cli import Cli

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

    from leases.config.sections import Config
    from leases.fleet.data import FleetReader, ReadRequest

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


def _two_nodes(z: Cli) -> None:
    """n (8 GPUs at P) and m (4 GPUs at P), hourly leases from Feb 1 and Feb 3."""
    assert (
        z("node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "4", "--provider", "P").code == 0
    )
    for node, day in (("n", "01"), ("m", "03")):
        r = z("lease", "add", node, "--billing", "hourly", "--price", "10", "--start",
              f"2026-02-{day}", "--end", "2026-03-01")  # fmt: skip
        assert r.code == 0, r.err


def test_a_resource_moved_to_another_nodes_lease_is_named_and_never_deleted(
    z: Cli, ledger_path: Path
) -> None:
    """m's bucket moved to n's lease in SQLite: `zuka offboard n` would have planned to
    delete m's bucket. Its record (node name, lease start) says nothing of the move: the
    lease it belongs to is compared by id."""
    _two_nodes(z)
    assert z("resource", "add", "m", "--kind", "bucket", "--id", "precious-data").code == 0
    with sqlite3.connect(ledger_path) as conn:
        n_lease, m_lease = (r[0] for r in conn.execute(
            "SELECT l.id FROM leases l JOIN nodes x ON x.id = l.node_id ORDER BY x.name DESC"))  # fmt: skip
    _sql(ledger_path, "UPDATE resources SET lease_id = ?", n_lease)
    plan = z("offboard", "n")
    assert plan.code == 2 and "precious-data" not in plan.out
    assert f"lease_id {m_lease} on the audit log, {n_lease} in the table" in plan.err
    assert z("audit", "verify").code == 1


def test_a_lease_moved_to_another_node_is_named(z: Cli, ledger_path: Path) -> None:
    _two_nodes(z)
    with sqlite3.connect(ledger_path) as conn:
        n_id = conn.execute("SELECT id FROM nodes WHERE name = 'n'").fetchone()[0]
        m_id = conn.execute("SELECT id FROM nodes WHERE name = 'm'").fetchone()[0]
        conn.execute("UPDATE leases SET node_id = ? WHERE node_id = ?", [m_id, n_id])
    r = z(*MONTH)
    assert r.code == 2 and f"node_id {n_id} on the audit log, {m_id} in the table" in r.err


def test_a_column_added_since_the_rows_entry_is_compared_with_its_migration_default() -> None:
    """A lease last written before m006/m013 (its entry has no stopped_billing, rounding...):
    those columns hold the migration's defaults; anything else was written behind zuka's
    back (a 30,000 month turned into 3,390,000 through a storage price and stop terms)."""
    from leases.ledger import records

    old = records.lease_record(records.lease_from({
        "node": "n", "billing_type": "monthly", "unit_price": "30000",
        "start": "2026-02-01T00:00:00+08:00", "end": "2026-03-01T00:00:00+08:00",
    }))  # fmt: skip
    logged = rowaudit.Logged(7, {k: v for k, v in old.items()
                                 if k not in ("stopped_billing", "rounding", "hourly_price")})  # fmt: skip
    assert rowaudit.compare("lease", 1, logged, old) is None  # the defaults: as migrated
    edited = {**old, "stopped_billing": "none", "hourly_price": "1"}
    found = rowaudit.compare("lease", 1, logged, edited)
    assert found is not None
    assert found.fields == (("stopped_billing", "full", "none"), ("hourly_price", None, "1"))


def test_a_stop_put_back_by_an_undo_is_compared_too(z: Cli, ledger_path: Path) -> None:
    """A lease deleted with its stop and brought back by `zuka undo`: the stop is in the
    delete entry's bundle as its table row, and is checked as such."""
    r = z("lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-02-01",
          "--end", "2026-03-01", "--stopped-billing", "none")  # fmt: skip
    assert r.code == 0, r.err
    assert z("lease", "stop", "n", "--at", "2026-02-10T00:00").code == 0
    assert z("lease", "resume", "n", "--at", "2026-02-11T00:00").code == 0
    assert z("lease", "delete", "n", "--start", "2026-02-01", "--force").code == 0
    assert z("undo").code == 0
    assert z("audit", "verify").code == 0
    _sql(ledger_path, "UPDATE stops SET start = '2026-01-31T16:00:00+00:00',"
         ' "end" = \'2026-02-28T16:00:00+00:00\'')  # fmt: skip
    r = z("report", "--month", "2026-02")
    assert r.code == 2 and "stop 1 of node 'n' was edited outside zuka" in r.err
    assert "start" in r.err


def test_an_added_row_is_shown_before_it_is_accepted(z: Cli, ledger_path: Path) -> None:
    _monthly(z)
    _sql(ledger_path, "INSERT INTO resources (lease_id, kind, native_id, created, price,"
         " price_per) VALUES (?, 'bucket', 'other-teams-bucket', '2026-08-01T00:00:00+08:00',"
         " '100000', 'hour')", _lease_id(ledger_path))  # fmt: skip
    verify = z("audit", "verify")
    assert verify.code == 1
    assert 'native_id "other-teams-bucket"' in verify.out and 'price "100000"' in verify.out
    accepted = z("audit", "accept", "resource", "1")
    assert accepted.code == 0 and "other-teams-bucket" in accepted.out


def test_an_export_never_launders_a_row_changed_outside_zuka(z: Cli, ledger_path: Path) -> None:
    """Exported and imported, an edited row would be chained anew as if recorded."""
    _monthly(z)
    _sql(ledger_path, "UPDATE leases SET unit_price = '3'")
    r = z("export", "--format", "json")
    assert r.code == 2 and r.out == "" and "so the export would rest on" in r.err


def test_deleting_the_last_renewal_lets_the_lease_it_renewed_run_on(z: Cli) -> None:
    """renew ended the lease at its end; with the renewal deleted it stayed ended on a
    future day: `lease renew` said it was not open, `node archive` that it was."""
    _monthly(z)
    assert z("lease", "renew", "n", "--until", "2026-10-01").code == 0
    r = z("lease", "delete", "n", "--start", "2026-09-01")
    assert r.code == 0, r.err
    assert "the lease from 2026-08-01T00:00:00+08:00 it renewed runs on again" in r.out
    (lease,) = json.loads(z("lease", "list", "--json").out)
    assert lease["ended_at"] is None
    again = z("lease", "renew", "n", "--until", "2026-10-01")
    assert again.code == 0, again.err
    assert z("audit", "verify").code == 0


def test_a_row_changed_outside_zuka_is_a_critical_alert_until_accepted(
    z: Cli, ledger_path: Path
) -> None:
    """`zuka alerts` printed the auto-renew charge from a price edited in SQLite without
    a word; now the edit is an alert of its own, critical, with the command."""
    _monthly(z)
    lease = _lease_id(ledger_path)
    _sql(ledger_path, "UPDATE leases SET unit_price = '3' WHERE id = ?", lease)
    listed = z("alerts", "--json")
    assert listed.code == 0, listed.err
    (edited,) = [a for a in json.loads(listed.out) if a["kind"] == "edited_outside_zuka"]
    assert edited["severity"] == "critical"
    assert 'unit_price "30000" on the audit log, "3" in the table' in edited["message"]
    assert edited["action"].endswith(f"zuka audit accept lease {lease}")
    assert z("audit", "accept", "lease", str(lease)).code == 0
    after = json.loads(z("alerts", "--json").out)
    assert not [a for a in after if a["kind"] == "edited_outside_zuka"]


def test_the_timers_check_again_only_after_a_commit(z: Cli, ledger_path: Path) -> None:
    """drifted_since (the collector's and the dashboard's every minute) reads the rows
    again once another connection committed (sqlite3 behind zuka's back) or zuka wrote."""
    _monthly(z)
    with Ledger.open(ledger_path) as ledger:
        assert rowaudit.drifted_since(ledger) == []
        _sql(ledger_path, "UPDATE leases SET unit_price = '3'")  # another connection
        (found,) = rowaudit.drifted_since(ledger)
        assert found.fields == (("unit_price", "30000", "3"),)
        assert rowaudit.drifted_since(ledger) == [found]  # nothing committed since
        rowaudit.accept(ledger, "lease", found.entity_id)  # zuka's own write
        assert rowaudit.drifted_since(ledger) == []
