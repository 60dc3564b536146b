"""A cold `zuka poll --once`: the GPU processes read only where they are shown (--json,
--processes), one command a node once the probe is kept, the same table otherwise
(simulated nodes over SSH, the commands counted as the simulated nodes answer them)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import leases.sim.fleet
from leases.ledger.store import Ledger
from leases.sim import SimFleet
from leases.telemetry.owners import APPS_OWNERS_COMMAND
from tests.cli.test_cli_fleet import sim_ledger  # noqa: F401
from tests.support.cli import Cli


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every command the simulated nodes answer (their fleet runs in a thread)."""
    seen: list[str] = []
    lock = threading.Lock()
    answer = leases.sim.fleet.answer

    def counted(node: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        with lock:
            seen.append(command)
        return answer(node, command, *args, **kwargs)

    monkeypatch.setattr(leases.sim.fleet, "answer", counted)
    yield seen


def apps(commands: list[str]) -> list[str]:
    return [c for c in commands if c.startswith(APPS_OWNERS_COMMAND)]


def test_the_table_reads_no_processes_and_one_command_a_node(
    cli: Cli,
    sim_ledger: tuple[Path, SimFleet],  # noqa: F811
    commands: list[str],
) -> None:
    first = cli("poll", "--once")
    assert first.code == 0, first.err
    assert "PROCS" not in first.out.splitlines()[0]
    assert len(commands) == 4 and not apps(commands)  # probe and reading in one command
    commands.clear()
    again = cli("poll", "--once")
    assert again.code == 0
    assert len(commands) == 4 and not apps(commands)  # the probe kept: one command a node
    path, _ = sim_ledger
    with Ledger.open(path) as ledger:
        assert ledger.conn.execute("SELECT count(*) FROM node_probe").fetchone() == (4,)


def test_json_and_processes_read_them(
    cli: Cli,
    sim_ledger: tuple[Path, SimFleet],  # noqa: F811
    commands: list[str],
) -> None:
    r = cli("poll", "--once", "--json")
    assert r.code == 0, r.err
    assert len(apps(commands)) == 4
    rows = {row["node"]: row for row in json.loads(r.out)}
    assert any(row["processes"] for row in rows.values())  # a busy node runs some
    commands.clear()
    busy = next(name for name, row in rows.items() if row["processes"])
    table = cli("poll", "--once", "--processes", busy)
    assert table.code == 0, table.err
    assert len(apps(commands)) == 1
    header, line = table.out.splitlines()[:2]
    names = header.split()
    assert names[-2:] == ["PROCS", "DETAIL"]
    # An ok node's DETAIL is empty: its count ends the line.
    assert line.split()[-1] == str(len(rows[busy]["processes"]))
