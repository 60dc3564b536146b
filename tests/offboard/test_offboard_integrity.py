"""The confirmed plan is the executed plan, and a step's state is what its evidence says.

The stored plan's body and each step's state are read against their entries on the audit
log's hash chain: an edit in SQLite behind zuka's back (a step's bucket swapped, its hash
left alone or made again; a step set to "verified") is refused before anything runs, and
`zuka audit verify` names it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from leases.ledger.store import Ledger
from leases.offboard import evidence, runner
from leases.offboard.evidence import State, Tampered
from tests.offboard.test_offboard import _plan, _run
from tests.support.cli import Cli
from tests.support.offboard_files import calls


def _sql(ledger_path: Path, sql: str, *args: object) -> None:
    """An edit behind zuka's back, as anyone who can write the file can make it."""
    with sqlite3.connect(ledger_path) as conn:
        conn.execute(sql, args)


def _body(ledger_path: Path, plan_id: int) -> str:
    with sqlite3.connect(ledger_path) as conn:
        return str(
            conn.execute("SELECT body FROM offboard_plans WHERE id = ?", [plan_id]).fetchone()[0]
        )


@pytest.mark.parametrize("rehash", [False, True], ids=["hash-left", "hash-made-again"])
async def test_a_swapped_bucket_in_the_stored_body_is_refused_and_nothing_is_deleted(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
    rehash: bool,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
    body = _body(ledger_path, stored.id).replace("bkt-1", "not-ours")
    _sql(ledger_path, "UPDATE offboard_plans SET body = ? WHERE id = ?", body, stored.id)
    if rehash:
        digest = hashlib.sha256(body.encode()).hexdigest()
        _sql(ledger_path, "UPDATE offboard_plans SET hash = ? WHERE id = ?", digest, stored.id)
    with Ledger.open(ledger_path) as ledger, pytest.raises(Tampered) as refused:
        await _run(ledger, fleet)
    assert "does not match its evidence on the audit chain" in str(refused.value)
    # Nothing ran: both buckets and every scratch file are still there.
    assert calls(fleet) == []
    assert sorted(p.name for p in (fleet / "cloud" / "111").iterdir()) == ["bkt-1", "not-ours"]
    assert sorted(p.name for p in (fleet / "node" / "data").iterdir()) == ["a", "b", "keep"]
    # The command line says it in words (no traceback), and audit verify names the plan.
    said = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert said.code == 2 and "edited outside zuka" in said.err and "Traceback" not in said.err
    checked = cli("audit", "verify")
    assert checked.code == 1 and "THE OFFBOARDING EVIDENCE DOES NOT VERIFY" in checked.out
    assert f"plan {stored.id}" in checked.out
    assert cli("offboard", "n1", "--report").code == 2


def test_a_step_key_changed_in_the_body_is_refused_in_words(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
    body = _body(ledger_path, stored.id).replace('"key":"s3:bkt-1"', '"key":"s3:elsewhere"')
    digest = hashlib.sha256(body.encode()).hexdigest()
    _sql(
        ledger_path,
        "UPDATE offboard_plans SET body = ?, hash = ? WHERE id = ?",
        body,
        digest,
        stored.id,
    )
    for args in (("--execute", "--confirm", "n1"), ("--report",), ("--recheck",), ()):
        said = cli("offboard", "n1", *args)
        assert said.code == 2, (args, said.out, said.err)
        assert "LookupError" not in said.err and "Traceback" not in said.err
        assert "edited outside zuka" in said.err


async def test_a_step_set_to_verified_in_sqlite_is_refused_not_skipped(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
    _sql(
        ledger_path,
        "UPDATE offboard_steps SET state = 'verified' WHERE plan_id = ? AND key = 's3:bkt-1'",
        stored.id,
    )
    with Ledger.open(ledger_path) as ledger:
        with pytest.raises(Tampered) as refused:
            evidence.load(ledger, stored.id)
        assert "s3:bkt-1 is verified in offboard_steps, but its evidence says pending" in str(
            refused.value
        )
        with pytest.raises(Tampered):
            await _run(ledger, fleet)
    assert (fleet / "cloud" / "111" / "bkt-1").exists() and calls(fleet) == []
    report = cli("offboard", "n1", "--report")
    assert report.code == 2 and "every step verified" not in report.out
    assert cli("audit", "verify").code == 1


async def test_a_finished_plan_set_unfinished_in_sqlite_is_refused(
    fleet: Path,
    ledger_path: Path,
) -> None:
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        result = await _run(ledger, fleet)
        assert result.finished
    _sql(ledger_path, "UPDATE offboard_plans SET finished_at = NULL")
    with Ledger.open(ledger_path) as ledger, pytest.raises(Tampered, match="its finish"):
        evidence.load(ledger, result.stored.id)


async def test_states_read_from_the_chain_survive_a_new_plan_that_carries_them(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    """A re-plan carries the states of the steps it shares: those come from the old
    plan's evidence, and the new plan loads and verifies."""
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        done = await _run(ledger, fleet, choices=runner.Choices(stop_after="shred:/data/a"))
        assert done.stored.state("shred:/data/a").state is State.VERIFIED
    assert cli("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/c").code == 0
    with Ledger.open(ledger_path) as ledger:
        again = _plan(ledger)
        assert again.id != stored.id
        assert again.state("shred:/data/a").state is State.VERIFIED
        assert again.state("shred:/data/c").state is State.PENDING
        assert evidence.problems(ledger) == []
    assert cli("audit", "verify").code == 0
