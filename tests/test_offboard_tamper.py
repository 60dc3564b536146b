"""Attacks on the offboarding's records from behind zuka's back (SQLite edits), found in
review after issue 16's hardening: each one must be refused before anything runs, and
`zuka audit verify` must name it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import Cli
from test_offboard import _run
from test_offboard_other_leases import _replan, earlier, fleet  # noqa: F401  (fixtures)

from leases.ledger import Ledger
from leases.offboard import evidence
from leases.offboard.evidence import Tampered


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
