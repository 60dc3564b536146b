"""`zuka ps` and `zuka kill` on a ledger whose latest readings come from simulated nodes:
the list (table and JSON, filtered), the refusals (no terminal and no confirmation, a wrong
pid typed, an unknown pid), a stop that goes through, and its entries in `zuka log`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.app import processes
from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.ledger.store import Ledger
from leases.sim.commands import answer
from leases.sim.gpu import SimNode, readings
from leases.ssh.stream import CommandResult
from leases.telemetry.owners import APPS_OWNERS_COMMAND, parse_apps_owners
from leases.telemetry.rollups import HistoryStore
from tests.support.cli import Cli

NOW = datetime(2026, 12, 2, 13, 30, tzinfo=UTC)
SIM = SimNode("n", "A800", count=2, seed=0)  # alice's jobs


class SimRunner:
    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        out, err, status = answer(SIM, cmd, NOW)
        return CommandResult(status, out, err)


@pytest.fixture
def fleet(z: Cli, ledger_path: Path) -> Cli:
    samples = tuple(
        GpuSample("n", NOW, r.gpu.index, uuid=r.gpu.uuid, util_gpu=float(r.util_gpu))
        for r in readings(SIM, NOW)
    )
    procs = parse_apps_owners(answer(SIM, APPS_OWNERS_COMMAND, NOW).stdout, "n").processes
    with Ledger.open(ledger_path) as ledger:
        status = NodeStatus("n", NodeHealth.OK, "", NOW, NOW, samples, procs or ())
        HistoryStore(ledger).write_latest([status])
    return z


def _pids(z: Cli) -> list[int]:
    r = z("ps", "--json")
    assert r.code == 0, r.err
    return [row["pid"] for row in json.loads(r.out)]


def test_ps_lists_users_and_command_lines(fleet: Cli) -> None:
    r = fleet("ps")
    assert r.code == 0, r.err
    assert "alice" in r.out and "python train.py --config configs/llama-7b.yaml" in r.out
    rows = json.loads(fleet("ps", "--json").out)
    assert {row["user"] for row in rows} == {"alice"} and rows[0]["start"]
    assert rows[0]["command"].endswith(" ")  # exact, as read
    assert json.loads(fleet("ps", "--json", "--user", "bob").out) == []
    assert fleet("ps", "--sort", "nope").code == 2


def test_kill_refusals_change_nothing(fleet: Cli) -> None:
    pid = _pids(fleet)[0]
    r = fleet("kill", "n", str(pid))
    assert r.code != 0 and f"--yes-i-typed {pid}" in r.err
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid + 1))
    assert r.code != 0 and "type the process's pid" in r.err
    r = fleet("kill", "n", "4", "--yes-i-typed", "4")
    assert r.code != 0 and "no GPU process 4" in r.err
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid), "--grace", "-1")
    assert r.code != 0 and "grace" in r.err
    assert not SIM.killed
    assert "process." not in fleet("log").out


def test_kill_goes_through_and_is_logged(fleet: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "runner_for", lambda ledger, node: SimRunner())
    pid = _pids(fleet)[0]
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid), "--grace", "0")
    assert r.code == 0, r.err
    assert "stopped after SIGTERM" in r.out and pid in SIM.killed
    log = fleet("log").out
    assert "process.term" in log and "process.gone" in log
    assert f"pid {pid} of alice: SIGTERM sent: python train.py" in log
    SIM.killed.clear()


def test_kill_json_and_a_missing_ledger(fleet: Cli, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setattr(processes, "runner_for", lambda ledger, node: SimRunner())
    pid = _pids(fleet)[-1]
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid), "--grace", "0", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["ok"] and doc["outcome"] == "stopped" and doc["user"] == "alice"
    SIM.killed.clear()
    for args in (("ps",), ("kill", "n", "5", "--yes-i-typed", "5")):
        r = fleet(*args, ledger=tmp_path / "nothing.db")
        assert r.code == 1 and "no ledger at" in r.err
        assert not (tmp_path / "nothing.db").exists()


def test_kill_of_another_users_process_says_one_sentence(
    fleet: Cli, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """carol's process (the login may not signal it): the sentence only, not the node's
    raw shell error; the raw words stay in --json and the audit."""
    carol = SimNode("n", "A800", count=2, seed=2)

    class CarolRunner:
        async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
            out, err, status = answer(carol, cmd, NOW)
            return CommandResult(status, out, err)

    procs = parse_apps_owners(answer(carol, APPS_OWNERS_COMMAND, NOW).stdout, "n").processes
    assert procs and procs[0].owner == "carol"
    with Ledger.open(ledger_path) as ledger:
        status = NodeStatus("n", NodeHealth.OK, "", NOW, NOW, (), procs)
        HistoryStore(ledger).write_latest([status])
    monkeypatch.setattr(processes, "runner_for", lambda ledger, node: CarolRunner())
    pid = procs[0].pid
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid))
    assert r.code == 1
    assert "not permitted" not in r.out.lower() and "kill:" not in r.out
    assert r.out.strip() == f"n pid {pid}: {processes.Outcome.DENIED.value}"
    r = fleet("kill", "n", str(pid), "--yes-i-typed", str(pid), "--json")
    assert "Operation not permitted" in json.loads(r.out)["steps"][0]
    assert "Operation not permitted" in fleet("log", "n").out
