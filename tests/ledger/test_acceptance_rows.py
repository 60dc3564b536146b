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
from leases.ledger.store import Ledger
from tests.support.cli import Cli

AT = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


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
    conn = sqlite3.connect(ledger_path)
    with conn:
        conn.execute(sql)
    conn.close()
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
    conn = sqlite3.connect(ledger_path)
    with conn:
        conn.execute("UPDATE acceptance_runs SET status = 'passed'")
    conn.close()
    r = z("audit", "verify")
    assert r.code != 0 and "acceptance run 1 was changed outside zuka" in r.out
