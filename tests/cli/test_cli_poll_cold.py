"""A cold `zuka poll --once`: the GPU processes read only where they are shown (--json,
--processes), one command a node once the probe is kept, the same table otherwise
(simulated nodes over SSH, the commands counted as the simulated nodes answer them)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import leases.sim.fleet
from leases.ledger.store import Ledger
from leases.sim import SimFleet
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry.owners import APPS_OWNERS_COMMAND
from tests.cli.test_cli_fleet import sim_ledger  # noqa: F401
from tests.support.cli import Cli
from tui.cli.main import build_parser
from tui.cli.pollargs import narrow


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every command the simulated nodes answer (their fleet runs in a thread)."""
    seen: list[str] = []
    lock = threading.Lock()
    answer = leases.sim.fleet.answer

    def counted(node: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        with lock:
            seen.append(unwrap_sh(command) or command)  # what sh runs (leases.ssh.posixsh)
        return answer(node, command, *args, **kwargs)

    monkeypatch.setattr(leases.sim.fleet, "answer", counted)
    yield seen


def apps(commands: list[str]) -> list[str]:
    """The commands that read the processes: the owner query alone, or riding on the GPU
    query once the node's fields are known (leases.telemetry.gpuread.with_apps)."""
    return [c for c in commands if APPS_OWNERS_COMMAND in c]


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
    # The probe kept by the first poll: the GPUs and the processes in one command.
    assert len(commands) == 1 and len(apps(commands)) == 1
    header, line = table.out.splitlines()[:2]
    names = header.split()
    assert names[-2:] == ["PROCS", "DETAIL"]
    # An ok node's DETAIL is empty: its count ends the line.
    assert line.split()[-1] == str(len(rows[busy]["processes"]))


# -- what a cold poll imports ------------------------------------------------------------

# Modules `zuka poll` has no use for: other commands' handlers, the dashboard, the
# simulator, the alert watch (the collector's), the record fields' flags (errors only).
NOT_FOR_POLL = (
    "tui.cli.nodes", "tui.cli.leases", "tui.cli.providers", "tui.cli.resources",
    "tui.cli.audit", "tui.cli.transfer", "tui.dashboard", "textual", "leases.sim",
    "leases.alerts.watch", "leases.notify", "leases.app.flags", "leases.money.leasecost",
)  # fmt: skip


def test_a_poll_imports_only_what_it_needs(sim_ledger: tuple[Path, SimFleet]) -> None:  # noqa: F811
    path, _ = sim_ledger
    code = (
        "import sys\n"
        "from tui.cli.main import main\n"
        f"code = main(['poll', '--once', '--ledger', {str(path)!r}])\n"
        f"print(code, sorted(m for m in sys.modules if m.startswith({NOT_FOR_POLL!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 []"


@pytest.mark.parametrize(
    ("argv", "alone"),
    [
        (["poll", "--once"], "poll"),
        (["--json", "poll"], "poll"),
        (["--ledger", "x.db", "poll", "n1"], "poll"),
        (["--ledger", "poll", "node", "list"], None),  # a ledger named poll
        (["-h", "poll"], None),  # the whole help: every command listed
        (["node", "list"], None),
        ([], None),
    ],
)
def test_which_command_gets_a_parser_alone(argv: list[str], alone: str | None) -> None:
    assert narrow(argv) == alone


def test_polls_own_parser_is_the_same_as_in_the_whole_one() -> None:
    def helped(parser: argparse.ArgumentParser) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            parser.parse_args(["poll", "--help"])
        return out.getvalue()

    assert helped(build_parser("poll")) == helped(build_parser())
    whole = build_parser().parse_args(["poll", "--once", "--processes", "n1"])
    alone = build_parser("poll").parse_args(["poll", "--once", "--processes", "n1"])
    assert vars(whole) == vars(alone)


def test_a_mistyped_poll_option_still_gets_its_suggestion(cli: Cli) -> None:
    r = cli("poll", "--onc")
    assert r.code == 2 and "did you mean --once?" in r.err


# -- the cloud instances' states ---------------------------------------------------------


def test_cloud_states_are_read_only_when_an_active_node_has_an_instance(
    cli: Cli,
    sim_ledger: tuple[Path, SimFleet],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import leases.telemetry.cloudstate as cloudstate

    calls: list[object] = []

    async def run_once(*args: object, **kwargs: object) -> list[object]:
        calls.append(args)
        return []

    monkeypatch.setattr(cloudstate, "run_once", run_once)
    assert cli("poll", "--once").code == 0
    assert calls == []  # no node has an instance: nothing to read
    broken = tmp_path / "broken.toml"
    broken.write_text("[alerts\n")
    r = cli("poll", "--once", "--config", str(broken))
    assert r.code == 2 and "not valid TOML" in r.err  # the config is still checked
    edited = cli("node", "edit", "sim-002", "--instance-id", "i-0123456789abcdef0")
    assert edited.code == 0, edited.err
    assert cli("poll", "--once").code == 0
    assert len(calls) == 1
    assert cli("poll", "--once", "sim-001").code == 0  # named nodes: read as before
    assert len(calls) == 2
