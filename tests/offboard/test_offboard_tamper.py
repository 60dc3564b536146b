"""Attacks on the offboarding's records from behind zuka's back (SQLite edits), found in
review after issue 16's hardening: each one must be refused before anything runs, and
`zuka audit verify` must name it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from leases.ledger.store import Ledger
from leases.offboard import evidence
from leases.offboard.evidence import Tampered
from tests.offboard.test_offboard import _run
from tests.offboard.test_offboard_other_leases import _replan, earlier  # noqa: F401  (earlier: a fixture)
from tests.support.cli import Cli


def _sql(ledger_path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(ledger_path) as conn:
        conn.execute(sql, args)


async def test_an_older_plan_put_back_in_force_by_superseded_by_is_refused(
    earlier: Path,  # noqa: F811
    ledger_path: Path,
    cli: Cli,
) -> None:
    """The user included an earlier lease's bucket, then kept it after all (the plan in
    force keeps it). Re-pointing superseded_by makes the older plan, which deletes it, the
    one in force: the ledger still gives that plan again, so only the chain can tell."""
    with Ledger.open(ledger_path) as ledger:
        _replan(ledger)
        deletes = _replan(ledger, include=["bucket:old-bkt"])
        keeps = _replan(ledger, keep={"bucket:old-bkt": "the next lease reuses it"})
        assert "s3:old-bkt" not in {s.key for s in keeps.plan.steps}
    _sql(ledger_path, "UPDATE offboard_plans SET superseded_by = NULL WHERE id = ?", deletes.id)
    _sql(
        ledger_path,
        "UPDATE offboard_plans SET superseded_by = ? WHERE id = ?",
        deletes.id,
        keeps.id,
    )
    with Ledger.open(ledger_path) as ledger, pytest.raises(Tampered):
        await _run(ledger, earlier)
    assert (earlier / "cloud" / "111" / "old-bkt").exists()
    checked = cli("audit", "verify")
    assert checked.code == 1 and "THE OFFBOARDING EVIDENCE DOES NOT VERIFY" in checked.out


def test_a_plan_moved_to_another_lease_in_sqlite_is_refused(
    earlier: Path,  # noqa: F811
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _replan(ledger)
        other = next(le.id for le in ledger.leases("n1") if le.id != stored.plan.lease_id)
    _sql(ledger_path, "UPDATE offboard_plans SET lease_id = ? WHERE id = ?", other, stored.id)
    with Ledger.open(ledger_path) as ledger, pytest.raises(Tampered, match="node or lease"):
        evidence.load(ledger, stored.id)


def _refused_then_accepted(cli: Cli, ledger_path: Path) -> None:
    """bkt-1 changed in SQLite: `zuka offboard` refuses to plan on it (leases.ledger.rowaudit)
    until somebody takes the row as it is; even then the acceptance is nobody's proof that
    it is gone (only an edit with a note, or an offboarding's sighting, is)."""
    with sqlite3.connect(ledger_path) as conn:
        (rid,) = conn.execute("SELECT id FROM resources WHERE native_id = 'bkt-1'").fetchone()
    refused = cli("offboard", "n1")
    assert (
        refused.code == 2 and f"resource {rid} of node 'n1' was edited outside zuka" in refused.err
    )
    assert cli("audit", "accept", "resource", str(rid)).code == 0


def test_a_resource_marked_verified_in_sqlite_is_listed_not_left_out(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    """verified_at set behind zuka's back before any plan: no chained entry says so, so
    the bucket is listed (NOT deleted, to check, to include), never silently dropped; one
    marked by hand with `zuka resource edit --verified` is taken as gone."""
    import sqlite3

    from leases.config.sections import Config
    from leases.offboard import runner
    from tests.support.offboard_files import PLANNERS

    with sqlite3.connect(ledger_path) as conn:
        conn.execute(
            "UPDATE resources SET deleted_at = '2026-01-01T00:00:00+08:00',"
            " verified_at = '2026-01-01T00:00:00+08:00' WHERE native_id = 'bkt-1'"
        )
    _refused_then_accepted(cli, ledger_path)
    r = cli("resource", "edit", "n1", "--kind", "scratch_path", "--id", "/data/b",
            "--deleted", "--verified", "--notes", "wiped by hand, ls shows nothing")  # fmt: skip
    assert r.code == 0, r.err
    with Ledger.open(ledger_path) as ledger:
        plan = runner.replan(ledger, ledger.node("n1"), Config(), PLANNERS)
        keys = {s.key for s in plan.steps}
        assert "s3:bkt-1" not in keys and "shred:/data/b" not in keys
        left = {x.ref: x for x in plan.left}
        assert set(left) == {"bucket:bkt-1"} and left["bucket:bkt-1"].why == "unproven"
        line = plan.not_deleted()[0]
        assert "no entry of the audit log says so" in line and "--include bucket:bkt-1" in line
        again = runner.replan(
            ledger, ledger.node("n1"), Config(), PLANNERS, include=["bucket:bkt-1"]
        )
        assert "s3:bkt-1" in {s.key for s in again.steps}


async def test_an_included_unproven_resource_of_this_lease_runs_without_a_changed_plan(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    """Included, it is deleted (seen first) by a run that never finds its own plan changed
    (the inclusion is kept with the plan, whatever the resource's state becomes)."""
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE resources SET verified_at = '2026-01-01T00:00:00+08:00'"
                     " WHERE native_id = 'bkt-1'")  # fmt: skip
    _refused_then_accepted(cli, ledger_path)
    with Ledger.open(ledger_path) as ledger:
        stored = _replan(ledger, include=["bucket:bkt-1"])
        assert stored.plan.included
        result = await _run(ledger, fleet)
        assert result.finished, result.reason
        assert not (fleet / "cloud" / "111" / "bkt-1").exists()


async def test_an_earlier_offboardings_finish_cleared_in_sqlite_is_refused(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    """Cleared, the finish of a node's earlier offboarding would make that one's plans
    look like this one's, and its sightings count again: refused."""
    with Ledger.open(ledger_path) as ledger:
        _replan(ledger)
        first = await _run(ledger, fleet)
        assert first.finished
    assert cli("node", "restore", "n1").code == 0
    (fleet / "released").unlink()
    with Ledger.open(ledger_path) as ledger:
        _replan(ledger)
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE offboard_plans SET finished_at = NULL WHERE id = ?", [first.stored.id])
    with Ledger.open(ledger_path) as ledger, pytest.raises(Tampered, match="its finish"):
        await _run(ledger, fleet)
