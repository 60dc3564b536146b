"""`zuka ps` and `zuka kill` on a ledger whose latest readings come from simulated nodes:
the list (table and JSON, filtered), the refusals (no terminal and no confirmation, a wrong
pid typed, an unknown pid), a stop that goes through, and its entries in `zuka log`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
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


def _at(node: str, seconds_before: float | None) -> NodeStatus:
    at = None if seconds_before is None else NOW - timedelta(seconds=seconds_before)
    return NodeStatus(node, NodeHealth.OK, "", NOW, at)


def test_readings_age_says_how_old_the_list_is() -> None:
    age = processes.readings_age
    assert age([], NOW) == ""
    assert age([_at("a", 40)], NOW) == "read 40 s ago"
    assert age([_at("a", 40), _at("b", 75)], NOW) == "read 40 s ago"  # within a minute
    stale = [_at("a", 3), _at("b", 720), _at("c", 5)]
    assert age(stale, NOW) == "read 3 s ago; older: b 12 min ago"
    many = [_at("new", 1)] + [_at(f"n{i}", 3600 * (i + 1)) for i in range(5)]
    assert age(many, NOW) == ("read 1 s ago; older: n4 5 h ago, n3 4 h ago, n2 3 h ago and 2 more")
    assert age([_at("a", 10), _at("x", None)], NOW) == "read 10 s ago; never read: x"
    assert age([_at("x", None)], NOW) == "never read: x"
    assert age([_at("a", -30)], NOW) == "read 0 s ago"  # a clock behind the node's
    assert age([_at("\x1b[2Jevil", 3 * 86400), _at("a", 0)], NOW).endswith("␛[2Jevil 3 days ago")
    assert processes.age_words(119) == "119 s" and processes.age_words(7199) == "119 min"


def test_ps_says_how_old_the_readings_are(fleet: Cli) -> None:
    r = fleet("ps")
    assert r.code == 0, r.err
    # (The readings were written at NOW; how long ago that is depends on today's date.)
    assert re.fullmatch(r"read [0-9]+ (s|min|h|days) ago", r.out.splitlines()[0]), r.out
    assert r.out.splitlines()[1].split()[:2] == ["NODE", "GPU"]
    assert "read " not in fleet("ps", "--json").out  # JSON stays the rows alone


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
    assert "Operation not permitted" in fleet("log", "n", "--wide").out


def test_ps_says_mib_and_run_times_as_the_dashboard_does(fleet: Cli) -> None:
    """`MiB` as the dashboard's process table and every other table write it (not
    `MIB`); a run time in the dashboard's own narrow form ("4时58分"), in both languages."""
    from leases.core.i18n import EN, ZH, using
    from tui.widgets.valuewords import elapsed_cell

    rows = json.loads(fleet("ps", "--json").out)
    assert rows
    for lang, name in ((EN, "en"), (ZH, "zh_CN")):
        text = fleet("ps", "--lang", name).out
        header = text.splitlines()[1].split()
        assert "MiB" in header and "MIB" not in header
        with using(lang):
            for row in rows:
                assert elapsed_cell(row["elapsed_s"]) in text
