"""Acceptance runs in the ledger: stored with their digest on the audit chain, read back
as they were, refused when the row was changed outside zuka, bounded, kept when their
node is deleted."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.ledger import acceptance_rows
from leases.ledger.acceptance_rows import RunChanged
from leases.ledger.auditchain import ACCEPTANCE_TRIGGERS
from leases.ledger.store import Ledger
from tests.support.cli import Cli

AT = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def _tamper(path: Path, sql: str) -> None:
    """Writing as someone who has the file: the triggers that guard the runs dropped,
    the row changed, the triggers put back exactly as they were."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for name in ACCEPTANCE_TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(sql)
        for trigger in ACCEPTANCE_TRIGGERS.values():
            conn.execute(trigger)
    finally:
        conn.close()


def _verdict(*evidence: Evidence, status: Status = Status.FAILED) -> Verdict:
    return Verdict(
        "n",
        Level.QUICK,
        AT,
        datetime(2026, 12, 2, 3, 0, 5, tzinfo=UTC),
        (
            CheckResult(
                "inventory.vram",
                "VRAM per GPU",
                status,
                "GPU 3 reports 24564 MiB",
                expected="81920 MiB",
                found="24564 MiB",
                evidence=("query-gpu",),
            ),
            CheckResult("sshd.password", "Password login", Status.PASSED, "off"),
        ),
        evidence or (Evidence("query-gpu", "nvidia-smi --query-gpu=...", 0, "a\x1b[31m", "", 0.2),),
    )


def test_a_run_round_trips_and_its_digest_is_on_the_chain(z: Cli, ledger_path: Path) -> None:
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        stored = acceptance_rows.store(ledger, node.id, "n", None, _verdict())
        assert stored.verdict == _verdict()  # every field, the escape in stdout too
        assert stored.status is Status.FAILED and stored.lease_id is None
        entry = ledger.last_entries(1)[0]
        assert (entry.action, entry.entity, entry.entity_id) == (
            "accept.run",
            "acceptance",
            stored.id,
        )
        assert entry.after is not None and entry.after["digest"] == acceptance_rows.digest(
            ledger.rows("SELECT * FROM acceptance_runs")[0]
        )
        assert ledger.verify_audit().ok
        assert acceptance_rows.problems(ledger) == []
        assert acceptance_rows.last_id(ledger, node.id) == stored.id


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE acceptance_runs SET status = 'passed'",
        "UPDATE acceptance_runs SET results = replace(results, 'failed', 'passed')",
        "UPDATE acceptance_runs SET evidence = replace(evidence, 'nvidia', 'nvidja')",
        # The row and its own digest rewritten together: the chain still holds the old one.
        "UPDATE acceptance_runs SET status = 'passed', digest = '" + "0" * 64 + "'",
    ],
)
def test_a_run_changed_outside_zuka_is_refused(z: Cli, ledger_path: Path, sql: str) -> None:
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        run_id = acceptance_rows.store(ledger, node.id, "n", None, _verdict()).id
    _tamper(ledger_path, sql)
    with Ledger.open(ledger_path) as ledger:
        with pytest.raises(RunChanged, match="changed outside zuka"):
            acceptance_rows.load(ledger, run_id)
        assert len(acceptance_rows.problems(ledger)) == 1


def test_the_digest_recomputed_matches_only_the_row_as_written() -> None:
    row = {"node_id": 1, "node": "n", "lease_id": None, "level": "quick", "status": "failed",
           "started": "s", "finished": "f", "results": "[]", "evidence": "[]"}  # fmt: skip
    assert acceptance_rows.digest(row) == acceptance_rows.digest(dict(row))
    assert acceptance_rows.digest(row) != acceptance_rows.digest({**row, "lease_id": 2})


def test_what_is_stored_is_bounded(z: Cli, ledger_path: Path) -> None:
    big = "x" * (512 * 1024)
    evidence = tuple(Evidence(f"k{i}", "cmd", 0, big, big, 0.0) for i in range(6))  # 6 MiB
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        stored = acceptance_rows.store(ledger, node.id, "n", None, _verdict(*evidence))
        kept = sum(len(e.stdout) + len(e.stderr) for e in stored.verdict.evidence)
        # 4 MiB kept whole (8 streams of 512 KiB), the other 4 streams say they were not.
        assert kept == 4 * 1024 * 1024 + 4 * len(acceptance_rows.NOT_KEPT)
        assert stored.verdict.evidence[5].stdout == acceptance_rows.NOT_KEPT


def test_deleting_the_node_keeps_its_runs(z: Cli, ledger_path: Path) -> None:
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        run_id = acceptance_rows.store(ledger, node.id, "n", None, _verdict()).id
    assert z("node", "delete", "n", "--force").code == 0
    with Ledger.open(ledger_path) as ledger:
        run = acceptance_rows.load(ledger, run_id)
        assert run.node == "n" and run.status is Status.FAILED
        assert ledger.verify_audit().ok


def test_audit_verify_names_a_run_changed_outside_zuka(z: Cli, ledger_path: Path) -> None:
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        acceptance_rows.store(ledger, node.id, "n", None, _verdict())
    assert z("audit", "verify").code == 0
    _tamper(ledger_path, "UPDATE acceptance_runs SET status = 'passed'")
    r = z("audit", "verify")
    assert r.code != 0 and "acceptance run 1 was changed outside zuka" in r.out


def _two_runs(ledger_path: Path) -> tuple[int, int, int]:
    """A passing run, then a failing one, of node n: (node id, first, second)."""
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        first = acceptance_rows.store(ledger, node.id, "n", None, _verdict(status=Status.PASSED))
        second = acceptance_rows.store(ledger, node.id, "n", None, _verdict())
        return node.id, first.id, second.id


@pytest.mark.parametrize("name", ["no_update", "no_delete"])
def test_sqlite3_cannot_edit_or_delete_a_run_while_the_triggers_stand(
    z: Cli, ledger_path: Path, name: str
) -> None:
    _two_runs(ledger_path)
    sql = {
        "no_update": "UPDATE acceptance_runs SET status = 'passed' WHERE id = 2",
        "no_delete": "DELETE FROM acceptance_runs WHERE id = 2",
    }[name]
    conn = sqlite3.connect(ledger_path)
    with pytest.raises(sqlite3.IntegrityError, match="acceptance runs are never"), conn:
        conn.execute(sql)
    conn.close()
    with Ledger.open(ledger_path) as ledger:
        assert acceptance_rows.load(ledger, 2).status is Status.FAILED


def test_a_deleted_failing_run_is_refused_not_replaced_by_the_one_before(
    z: Cli, ledger_path: Path
) -> None:
    node_id, first, second = _two_runs(ledger_path)
    _tamper(ledger_path, f"DELETE FROM acceptance_runs WHERE id = {second}")
    with Ledger.open(ledger_path) as ledger:
        # The chain's newest run of the node is the deleted one: not the passing run 1.
        assert acceptance_rows.last_id(ledger, node_id) == second
        assert acceptance_rows.run_ids(ledger, node_id) == [first, second]
        with pytest.raises(RunChanged, match="its row is gone"):
            acceptance_rows.load(ledger, second)
        assert acceptance_rows.load(ledger, first).status is Status.PASSED
        assert acceptance_rows.problems(ledger) == [
            f"acceptance run {second} was changed outside zuka (its row is gone, its audit"
            " entry is not); it is not shown as zuka's verdict. Check `zuka audit verify`,"
            " then run the acceptance again: zuka accept NODE"
        ]
        assert ledger.verify_audit().ok  # the chain itself is whole: only the row is gone
    r = z("audit", "verify")
    assert r.code != 0 and f"acceptance run {second} was changed outside zuka" in r.out


def test_the_lease_filter_also_follows_the_chain(z: Cli, ledger_path: Path) -> None:
    with Ledger.open(ledger_path, clock=lambda: AT) as ledger:
        node = ledger.node("n")
        assert node.id is not None
        acceptance_rows.store(ledger, node.id, "n", 7, _verdict(status=Status.PASSED))
        gone = acceptance_rows.store(ledger, node.id, "n", 7, _verdict()).id
        acceptance_rows.store(ledger, node.id, "n", 8, _verdict(status=Status.PASSED))
    _tamper(ledger_path, f"DELETE FROM acceptance_runs WHERE id = {gone}")
    with Ledger.open(ledger_path) as ledger:
        assert acceptance_rows.last_id(ledger, node.id, 7) == gone
        assert acceptance_rows.last_id(ledger, node.id, 8) == 3
        assert acceptance_rows.last_id(ledger, node.id) == 3
        assert acceptance_rows.last_id(ledger, node.id + 1) is None


def test_dropping_the_triggers_is_caught_by_audit_verify(z: Cli, ledger_path: Path) -> None:
    _two_runs(ledger_path)
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    conn.execute("DROP TRIGGER acceptance_runs_no_delete")
    conn.close()
    with Ledger.open(ledger_path) as ledger:
        report = ledger.verify_audit()
    assert not report.ok and "acceptance_runs_no_delete" in str(report.reason)


def test_archiving_and_deleting_the_node_still_work_with_the_triggers(
    z: Cli, ledger_path: Path
) -> None:
    _two_runs(ledger_path)
    assert z("node", "delete", "n", "--force").code == 0
    with Ledger.open(ledger_path) as ledger:
        assert [acceptance_rows.load(ledger, i).status for i in (1, 2)] == [
            Status.PASSED,
            Status.FAILED,
        ]
        assert acceptance_rows.problems(ledger) == []
        assert ledger.verify_audit().ok
