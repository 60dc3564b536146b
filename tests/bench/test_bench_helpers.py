"""The bench helpers that issue 23's figures rest on: bench/tui.py must not hide zuka's
`tui` package from the other scripts in bench/, the floor of bench/poll.py reads what it
asks for on a kept shell channel, the cold poll's ledger and environment read nothing of
the user's, and bench/collect_soak.py counts poll gaps apart for flaky nodes."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from leases.core.models import NodeHealth
from leases.ledger.paths import trust_store
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet
from leases.sim.ledger import register_sim_nodes
from leases.telemetry.gpuread import GPUS_MARK
from leases.telemetry.hoststats import HOST_MARK
from leases.telemetry.owners import OWNERS_MARK
from leases.telemetry.rollups import HistoryStore

BENCH = Path(__file__).resolve().parents[2] / "bench"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def load(name: str) -> ModuleType:
    """A bench module by its path: bench/ never goes on this process's sys.path (its tui.py
    would stand for zuka's package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def test_a_bench_script_importing_tui_gets_zukas_package_not_bench_tui() -> None:
    # As `python bench/starvation.py` runs: bench/ first on sys.path, then `from tui.cli...`.
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); "
        "from tui.cli.fleet import _bounded_sweep; import tui; print(tui.__file__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == BENCH.parent / "tui" / "__init__.py"


def test_the_floor_reads_each_answer_to_its_sentinel_on_one_shell(tmp_path: Path) -> None:
    peers = load("_pollpeers")

    async def go() -> None:
        fleet = SimFleet([SimNode(f"n{i}", "A100", 8, Scenario.BUSY, seed=i) for i in range(2)])
        await fleet.start()
        try:
            key = fleet.write_client_key(tmp_path)
            known = tmp_path / "known_hosts"
            known.write_text("".join(ep.known_hosts_line() + "\n" for ep in fleet))
            ports = [ep.port for ep in fleet]
            ch = await peers._open(ports[0], key, known)
            first = await peers._ask(ch, peers.QUERY)
            # Eight CSV rows of the query, then the sentinel: nothing of the next answer.
            rows = [line for line in first.splitlines() if "," in line]
            assert len(rows) == 8
            assert first.rstrip().endswith(peers.SENTINEL)
            both = await peers._ask(ch, peers.APPS_HOST)
            # The one command zuka's 6th sweep sends: the GPUs, the owners, the host.
            assert all(mark in both for mark in (GPUS_MARK, OWNERS_MARK, HOST_MARK))
            assert both.rstrip().endswith(peers.SENTINEL)
            ch.conn.close()
            figures = await peers.floor(ports, key, known, rounds=2)
            assert figures.failed == 0
            assert 0 < figures.warm < 30 and 0 < figures.apps < 30 and 0 < figures.cold < 30
        finally:
            await fleet.stop()

    asyncio.run(go())


def key_files(folder: Path, known_hosts: str, key: str) -> tuple[Path, Path]:
    """A known_hosts file and a client key file holding these texts."""
    (folder / "known_hosts").write_text(known_hosts)
    (folder / "key").write_text(key)
    return folder / "known_hosts", folder / "key"


def test_the_floor_counts_a_node_it_cannot_reach_as_failed(tmp_path: Path) -> None:
    peers = load("_pollpeers")
    known, key = key_files(tmp_path, "", "not a key")
    figures = asyncio.run(peers.floor([1], key, known, rounds=1))  # port 1: nothing listens
    assert figures.failed == 1


def test_the_cold_polls_ledger_holds_the_nodes_and_their_host_keys(tmp_path: Path) -> None:
    peers = load("_pollpeers")
    known, key = key_files(tmp_path, "[127.0.0.1]:2201 ssh-ed25519 AAAA\n", "")
    path = peers.build_ledger(tmp_path / "l", ["a-1", "a-2"], [2201, 2202], key, known)
    with Ledger.open(path) as ledger:
        nodes = {n.name: n for n in ledger.nodes()}
    assert sorted(nodes) == ["a-1", "a-2"]
    assert nodes["a-2"].ssh.port == 2202 and nodes["a-2"].ssh.key_path == str(key)
    assert trust_store(path).read_text() == known.read_text()


def test_the_cold_polls_environment_reads_nothing_of_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    peers = load("_pollpeers")
    for name in ("SSH_AUTH_SOCK", "ZUKA_LEDGER", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, "/somewhere/of/the/user")
    monkeypatch.setenv("PYTHONPATH", "/the/checkout")
    env = peers.clean_env(tmp_path)
    assert env["HOME"] == str(tmp_path)
    assert not {"SSH_AUTH_SOCK", "ZUKA_LEDGER", "XDG_CONFIG_HOME"} & set(env)
    assert env["PYTHONPATH"] == "/the/checkout"


def test_pssh_missing_is_said_not_timed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    peers = load("_pollpeers")
    monkeypatch.setattr(peers, "PSSH", str(tmp_path / "no-parallel-ssh"))
    timed = peers.pssh([22], tmp_path / "k", tmp_path / "kh", 32, 1, tmp_path)
    assert timed.note.startswith("skipped: no ")
    assert timed.wall != timed.wall  # NaN: no figure


def test_the_soak_counts_gaps_of_flaky_nodes_apart(tmp_path: Path) -> None:
    soak = load("collect_soak")
    path = tmp_path / "ledger.db"
    with Ledger.open(path, actor="test") as ledger:
        nodes = register_sim_nodes(ledger, 8, NOW)  # the 7th of the mix is flaky
        store = HistoryStore(ledger)
        flaky = next(n for n in nodes if "sim:flaky" in n.tags)
        busy = nodes[0]
        store.open_gap(flaky.name, NOW, NodeHealth.UNREACHABLE, "dropped")
        store.open_gap(busy.name, NOW, NodeHealth.TIMEOUT, "took too long")
    figures = soak.ledger_figures(path)
    assert figures["poll_gaps"] == 2
    assert figures["gaps_by_kind"] == {"sim:flaky": 1, "sim:busy": 1}
    assert figures["gap_details"] == [("timeout: took too long", 1)]


def test_the_fleets_clock_runs_as_many_times_as_fast_as_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bench/poll.py --fleet-speed: the simulated nodes' clock K times the wall's, so that
    their GPU rows (which move every 10 s of it) change as a busy node's do."""
    fleet = load("_fleet_server")
    wall = [1000.0]
    monkeypatch.setattr(fleet.time, "monotonic", lambda: wall[0])
    clock = fleet._clock(10.0)
    start = clock()
    wall[0] += 1.5
    assert (clock() - start).total_seconds() == pytest.approx(15.0)


@pytest.mark.parametrize("speed", ["0", "-1", "nan", "inf", "1001"])
def test_a_fleet_speed_that_is_no_speed_is_refused_by_name(
    speed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # bench/poll.py as people run it (it imports its peers from beside it), before any
    # fleet starts; the fleet process's own option in process.
    run = subprocess.run(
        [sys.executable, str(BENCH / "poll.py"), "--fleet-speed", speed],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2 and "--fleet-speed: must be above 0" in run.stderr
    with pytest.raises(SystemExit) as exit_:
        load("_fleet_server").main(["--speed", speed, "--dir", "/nonexistent"])
    assert exit_.value.code == 2
    assert "--speed: must be above 0" in capsys.readouterr().err
