"""`zuka accept` against the simulated fleet with the tests' own checks (the families
land separately), its exit status, --last, --json, and the markdown report on hostile
evidence."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.accept import registry
from leases.accept.engine import Check, Context
from leases.app.acceptance import Stored
from leases.app.acceptreport import fenced, report_md
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.ledger.auditchain import ACCEPTANCE_TRIGGERS
from leases.ledger.store import Ledger
from leases.sim.fleet import SimFleet
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from tests.support.acceptchecks import ALWAYS, COUNT
from tests.support.cli import Cli


@pytest.fixture
def sim_ledger(ledger_path: Path) -> Iterator[tuple[Path, SimFleet]]:
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 2, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    yield ledger_path, runner.fleet
    runner.stop()


@pytest.fixture
def own_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "checks", lambda: (COUNT, ALWAYS))


def test_accept_passes_fails_and_keeps_the_verdict(
    cli: Cli, sim_ledger: tuple[Path, SimFleet], own_checks: None
) -> None:
    r = cli("accept", "sim-001")
    assert r.code == 0, r.err
    assert "checking: GPU count against the lease" in r.out
    assert "passed      GPU count: nvidia-smi -L lists 8 GPUs; the lease says 8" in r.out
    assert "sim-001: passed (2 passed; level quick, run 1)" in r.out
    assert "return window unknown (record it: zuka provider edit" in r.out
    # Sold as 9 GPUs: the node answers 8.
    assert cli("node", "edit", "sim-001", "--gpus", "9").code == 0
    failed = cli("accept", "sim-001", "--json")
    assert failed.code == 1, failed.err
    doc = json.loads(failed.out)
    assert doc["status"] == "failed" and doc["results"][0]["found"] == "8"
    assert doc["evidence"][0]["command"] == "nvidia-smi -L"
    assert "checking:" in failed.err  # progress on stderr with --json
    last = cli("accept", "sim-001", "--last")
    assert last.code == 1 and "failed      GPU count" in last.out and "run 2" in last.out
    report = cli("accept", "sim-001", "--last", "--report", "md")
    assert report.code == 1
    assert "# Hand-over acceptance of sim-001" in report.out
    assert "expected: 9" in report.out and "found: 8" in report.out
    assert "GPU 0:" in report.out  # the raw evidence of the failed check
    # What was sold, as the run kept it: not what the ledger says since.
    assert cli("node", "edit", "sim-001", "--gpus", "8").code == 0
    later = cli("accept", "sim-001", "--last", "--report", "md")
    assert "## As sold (the ledger)" in later.out and "- GPUs: 9" in later.out


def test_an_unreachable_node_is_not_checked(
    cli: Cli, sim_ledger: tuple[Path, SimFleet], own_checks: None
) -> None:
    assert cli("node", "edit", "sim-002", "--ssh", "ssh://root@127.0.0.1:1").code == 0
    r = cli("accept", "sim-002")
    assert r.code == 3, (r.out, r.err)
    assert "sim-002: not checked" in r.out
    assert "not_checked" not in r.out and "  not checked " in r.out  # words, not the enum
    assert cli("accept", "sim-002", "--last", "--json").code == 3


def test_last_without_a_run_says_so(cli: Cli, sim_ledger: tuple[Path, SimFleet]) -> None:
    r = cli("accept", "sim-001", "--last")
    assert r.code == 2 and "no acceptance run recorded" in r.err


def test_options_that_contradict_each_other_are_refused_and_run_nothing(
    cli: Cli, sim_ledger: tuple[Path, SimFleet], own_checks: None
) -> None:
    both = cli("accept", "sim-001", "--json", "--report", "md")
    assert both.code == 2 and "--report" in both.err and "give one" in both.err
    level = cli("accept", "sim-001", "--last", "--level", "burn")
    assert level.code == 2 and "runs nothing" in level.err
    # Neither ran a check: there is still no run to show.
    assert "no acceptance run recorded" in cli("accept", "sim-001", "--last").err
    assert cli("accept", "sim-001").code == 0
    last = cli("accept", "sim-001", "--last")
    assert last.code == 0 and ", checked 20" in last.out and "(Asia/Shanghai)" in last.out


def test_help_says_the_exit_statuses(cli: Cli) -> None:
    r = cli("accept", "--help")
    assert "1 failed, 3 not checked" in r.out


def test_the_report_is_safe_on_hostile_evidence() -> None:
    hostile = "ok\n```\n# not a heading\x1b[2J\x1b]52;c;AAAA\x07 ```` [link](http://x)\n"
    at = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
    verdict = Verdict(
        "n\x1b[31m",
        Level.QUICK,
        at,
        at,
        (CheckResult("t.x", "T|itle", Status.FAILED, "words `x` *y*", evidence=("e",)),),
        (Evidence("e", "nvidia-smi -L", 0, hostile, "err\x1b[0m", 0.1),),
    )
    stored = Stored(1, "n\x1b[31m", at, "Asia/Shanghai", "P", verdict, Status.FAILED, None, False)
    md = report_md(stored)
    assert "\x1b" not in md and "\x07" not in md
    assert "\n# not a heading" in md  # inside the fence, where it is text
    # The fence is longer than any run of backticks in the output: five here.
    assert "`````text\nok\n```\n# not a heading" in md
    blocks = md.split("`````text\n")
    assert blocks[1].split("\n`````")[0].count("````") == 1  # its own run of 4, not closed
    assert "T\\|itle" in md and "words \\`x\\` \\*y\\*" in md
    assert fenced("a") == "```text\na\n```"


class _Hostile:
    async def run(self, cmd: str, timeout: float | None = None) -> object:
        from leases.ssh.stream import CommandResult

        return CommandResult(0, "```\x1b[2J", "")


async def test_the_use_case_stores_what_a_check_found(ledger_path: Path) -> None:
    from leases.app import acceptance
    from leases.config.sections import Config

    async def check(ctx: Context) -> Sequence[CheckResult]:
        await ctx.probe.run("x", "nvidia-smi -L")
        return [CheckResult("t.x", "X", Status.WARNED, "odd", evidence=("x",))]

    at = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
    with Ledger.open(ledger_path, clock=lambda: at) as ledger:
        register_sim_nodes(ledger, 1, at)
        seen: list[str] = []
        stored = await acceptance.accept(
            ledger, "sim-001", Config(), level=Level.QUICK, clock=lambda: at,
            runner=_Hostile(),  # type: ignore[arg-type]
            checks=[Check("t", "X", Level.QUICK, check)], found=lambda r: seen.append(r.check),
        )  # fmt: skip
        assert seen == ["t.x"] and stored.status is Status.WARNED
        assert stored.lease_start is not None and stored.window_known is False
        assert acceptance.last(ledger, "sim-001") == stored  # what was sold, kept with it
        assert [s.id for s in acceptance.history(ledger, "sim-001")] == [stored.id]
        md = report_md(stored)
        assert "\x1b" not in md and "````text\n```\u241b[2J\n````" in md


def test_a_failed_run_deleted_with_sqlite3_is_noticed(
    cli: Cli, sim_ledger: tuple[Path, SimFleet], own_checks: None
) -> None:
    path, _ = sim_ledger
    assert cli("accept", "sim-001").code == 0  # run 1 passed
    assert cli("node", "edit", "sim-001", "--gpus", "9").code == 0
    assert cli("accept", "sim-001").code == 1  # run 2 failed
    conn = sqlite3.connect(path, isolation_level=None)
    try:  # the guard dropped, the row deleted, the guard put back as it was
        conn.execute("DROP TRIGGER acceptance_runs_no_delete")
        conn.execute("DELETE FROM acceptance_runs WHERE id = 2")
        conn.execute(ACCEPTANCE_TRIGGERS["acceptance_runs_no_delete"])
    finally:
        conn.close()
    last = cli("accept", "sim-001", "--last")
    assert last.code != 0 and "passed" not in last.out
    assert "acceptance run 2 was changed outside zuka (its row is gone" in last.err + last.out
    verify = cli("audit", "verify")
    assert verify.code != 0 and "acceptance run 2 was changed outside zuka" in verify.out
