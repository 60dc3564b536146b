"""`zuka poll`, `collect`, `sim` and `node trust` against simulated nodes over real SSH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.ledger.paths import sim_trust_store
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet
from leases.sim.ledger import FleetThread, register_sim_nodes, serve_ledger_nodes
from tests.support.cli import Cli
from tests.support.waiting import wait_until_sync

ZUKA = [sys.executable, "-m", "tui.cli.main"]


@pytest.fixture
def sim_ledger(ledger_path: Path) -> Iterator[tuple[Path, SimFleet]]:
    """Four simulated nodes registered in the test's ledger, served from a thread."""
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 4, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
        fleet = runner.fleet
    yield ledger_path, fleet
    runner.stop()


def test_poll_once_json(cli: Cli, sim_ledger: tuple[Path, SimFleet]) -> None:
    r = cli("poll", "--once", "--json")
    assert r.code == 0, r.err
    rows = {row["node"]: row for row in json.loads(r.out)}
    assert set(rows) == {"sim-001", "sim-002", "sim-003", "sim-004"}
    assert all(row["health"] == "ok" for row in rows.values()), rows
    assert len(rows["sim-001"]["gpus"]) == 8 and len(rows["sim-004"]["gpus"]) == 8
    assert rows["sim-002"]["gpus"][0]["mem_total_mib"] == 81920
    human = cli("poll", "--once", "sim-001")
    assert human.code == 0 and "sim-001" in human.out and "sim-002" not in human.out
    assert cli("poll", "--once", "ghost").code == 2


def test_collect_holds_the_lock_and_feeds_the_ledger(
    cli: Cli, sim_ledger: tuple[Path, SimFleet]
) -> None:
    path, _ = sim_ledger
    collector = subprocess.Popen(
        [*ZUKA, "collect", "--ledger", str(path), "--interval", "0.5", "--flush", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert collector.stdout is not None
        started = collector.stdout.readline()  # printed once it holds the lock
        assert "zuka collect: 4 nodes" in started
        answers: list[tuple[str, list[dict[str, object]]]] = []

        def all_ok() -> bool:
            r = cli("poll", "--once", "--json")
            rows = json.loads(r.out)
            answers.append((r.err, rows))
            return len(rows) == 4 and all(row["health"] == "ok" for row in rows)

        wait_until_sync(all_ok, interval=0.2, what="the collector's readings of 4 nodes")
        err, rows = answers[-1]
        assert "a collector (pid" in err  # read from the collector, did not poll
        assert len(rows) == 4 and all(row["health"] == "ok" for row in rows), rows
        second = subprocess.run(
            [*ZUKA, "collect", "--ledger", str(path)], capture_output=True, text=True, timeout=30
        )
        assert second.returncode == 1 and "already polls" in second.stderr
    finally:
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=30)
    assert collector.returncode == 0, err


def test_collect_refuses_a_flush_interval_that_is_not_positive(
    cli: Cli, sim_ledger: tuple[Path, SimFleet]
) -> None:
    r = cli("collect", "--flush", "0")
    assert r.code == 2 and "flush" in r.err and "greater than zero" in r.err, r.err


def test_sim_command_runs_a_fleet_in_a_ledger(tmp_path: Path) -> None:
    path = tmp_path / "sim.db"
    sim = subprocess.Popen(
        [*ZUKA, "sim", "--nodes", "3", "--ledger", str(path), "--history", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        first = sim.stdout.readline()
        assert "3 simulated nodes" in first, sim.stderr.read() if sim.poll() is not None else first
        polled = subprocess.run(
            [*ZUKA, "poll", "--once", "--json", "--ledger", str(path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        rows = json.loads(polled.stdout)
        assert [r["health"] for r in rows] == ["ok", "ok", "ok"], polled.stderr
        with Ledger.open(path, create=False) as ledger:
            hours = ledger.conn.execute("SELECT COUNT(*) FROM gpu_hour").fetchone()[0]
            assert hours >= 3 * 47  # two days of backfilled hours per node
            assert [le.billing_type.value for le in ledger.leases()] == [
                "card_hour", "monthly", "monthly",
            ]  # fmt: skip
    finally:
        sim.send_signal(signal.SIGINT)
        sim.communicate(timeout=30)
    assert sim.returncode == 0


def test_sim_on_a_ledger_with_more_nodes_says_which_it_does_not_serve(tmp_path: Path) -> None:
    # A new user's slip: `zuka sim --nodes 2` on the ledger an earlier `--nodes 4` left.
    path = tmp_path / "sim.db"
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 4, datetime(2026, 11, 2, tzinfo=UTC))
    sim = subprocess.Popen(
        [*ZUKA, "sim", "--nodes", "2", "--ledger", str(path), "--history", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None and sim.stderr is not None
        warning = sim.stderr.readline()
        assert "2 simulated nodes" in sim.stdout.readline()
        assert "the ledger also holds 2 nodes this fleet does not serve" in warning
        assert "sim-003, sim-004" in warning and "unreachable" in warning
    finally:
        sim.send_signal(signal.SIGINT)
        sim.communicate(timeout=30)
    assert sim.returncode == 0


def test_a_second_sim_on_a_ledger_in_use_is_refused(tmp_path: Path) -> None:
    # It would move the first one's nodes to ports of its own, and leave them unreachable.
    path = tmp_path / "sim.db"
    sim = subprocess.Popen(
        [*ZUKA, "sim", "--nodes", "2", "--ledger", str(path), "--history", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        assert "2 simulated nodes" in sim.stdout.readline()
        with Ledger.open(path, create=False) as ledger:
            ports = sorted(n.ssh.port or 0 for n in ledger.nodes())
        second = subprocess.run(
            [*ZUKA, "sim", "--nodes", "3", "--ledger", str(path), "--history", "0"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2
        assert f"another zuka sim (pid {sim.pid}) serves this ledger" in second.stderr
        with Ledger.open(path, create=False) as ledger:
            assert sorted(n.ssh.port or 0 for n in ledger.nodes()) == ports  # untouched
    finally:
        sim.send_signal(signal.SIGINT)
        sim.communicate(timeout=30)
    assert sim.returncode == 0


def test_node_trust_flow(cli: Cli, ledger_path: Path, tmp_path: Path) -> None:
    runner = FleetThread([SimNode("fresh", "RTX 4090", 1, Scenario.BUSY, seed=7)])
    fleet = runner.start()
    try:
        key = fleet.write_client_key(tmp_path)
        ep = fleet["fresh"]
        r = cli("node", "add", "fresh", "--ssh", f"ssh -p {ep.port} -i {key} root@127.0.0.1")
        assert r.code == 0, r.err
        polled = json.loads(cli("poll", "--once", "--json").out)
        assert polled[0]["health"] == "untrusted"
        fingerprint = polled[0]["fingerprint"]
        assert fingerprint == ep.host_key.get_fingerprint("sha256")
        wrong = cli("node", "trust", "fresh", "--fingerprint", "SHA256:not-it")
        assert wrong.code == 2 and "does not match" in wrong.err
        before = json.loads(cli("log", "--json").out)
        ok = cli("node", "trust", "fresh", "--fingerprint", fingerprint)
        assert ok.code == 0 and f"trusted {fingerprint}" in ok.out
        assert (ledger_path.parent / "known_hosts").exists()
        # Who trusted which key is on the audit log (the trust store's line says neither),
        # in the node's own log, and zuka undo does not take it back.
        (entry,) = json.loads(cli("log", "--json").out)[len(before) :]
        assert (entry["action"], entry["node"]) == ("node.trust", "fresh")
        assert entry["after"]["fingerprint"] == fingerprint
        assert entry["after"]["port"] == ep.port
        node_log = cli("log", "fresh", "--wide").out
        assert f"trusted {fingerprint} of 127.0.0.1:{ep.port}" in node_log
        undo = cli("undo")
        assert undo.code != 0 and "cannot be undone" in undo.err, undo.err
        assert cli("audit", "verify").code == 0
        assert json.loads(cli("poll", "--once", "--json").out)[0]["health"] == "ok"
        assert "already trusted" in cli("node", "trust", "fresh").out
        runner.call(fleet.rotate_host_key("fresh"))
        changed = cli("node", "trust", "fresh", "--fingerprint", fingerprint)
        assert changed.code == 1 and "CHANGED" in changed.err
        assert json.loads(cli("poll", "--once", "--json").out)[0]["health"] == "hostkey_changed"
    finally:
        runner.stop()
    assert not sim_trust_store(ledger_path).exists()
    assert os.stat(ledger_path.parent / "known_hosts").st_mode & 0o777 == 0o600


def test_poll_beside_a_collector_shows_no_released_nodes_reading_for_its_name(
    cli: Cli, ledger_path: Path
) -> None:
    """Issue 19: what a collector wrote is read by node id. The released `sim-001` last read
    'driver_mismatch'; the new `sim-001` has no reading from the collector yet."""
    from dataclasses import replace

    from leases.core.models import NodeHealth, NodeStatus
    from leases.telemetry.lock import PollerLock
    from leases.telemetry.rollups import HistoryStore

    now = datetime.now(UTC)
    with Ledger.open(ledger_path) as ledger:
        (old,) = register_sim_nodes(ledger, 1, now)
        HistoryStore(ledger).write_latest(
            [NodeStatus(old.name, NodeHealth.DRIVER_MISMATCH, "reboot", checked=now)]
        )
        ledger.conn.execute("UPDATE nodes SET state = 'released' WHERE id = ?", [old.id])
        ledger.conn.commit()
        ledger.add_node(replace(old, id=None))
    collector = PollerLock(ledger_path)  # stands in for a running `zuka collect`
    assert collector.acquire()
    try:
        r = cli("poll", "--once", "--json")
    finally:
        collector.release()
    assert r.code == 0 and "a collector (pid" in r.err, r.err
    (row,) = json.loads(r.out)
    assert (row["node"], row["health"]) == ("sim-001", "connecting"), row


def test_the_trust_use_case_never_accepts_a_changed_key(
    cli: Cli, ledger_path: Path, tmp_path: Path
) -> None:
    """leases.app.trust, which `zuka node trust` and the dashboard's t both call: a key that
    CHANGED is refused even when asked with its own fingerprint; known_hosts is untouched."""
    import asyncio

    from leases.app.trust import HostKeyTrust, refused

    runner = FleetThread([SimNode("fresh", "RTX 4090", 1, Scenario.BUSY, seed=7)])
    fleet = runner.start()
    try:
        key = fleet.write_client_key(tmp_path)
        ep = fleet["fresh"]
        assert (
            cli("node", "add", "fresh", "--ssh", f"ssh -p {ep.port} -i {key} root@127.0.0.1").code
            == 0
        )
        fingerprint = ep.host_key.get_fingerprint("sha256")
        assert cli("node", "trust", "fresh", "--fingerprint", fingerprint).code == 0
        runner.call(fleet.rotate_host_key("fresh"))
        known = (ledger_path.parent / "known_hosts").read_bytes()
        with Ledger.open(ledger_path, create=False) as ledger:
            node = ledger.node("fresh")

        async def offer() -> tuple[bool, bool]:
            async with HostKeyTrust(ledger_path, node) as trust:
                offered = await trust.offered()
                assert offered is not None
                return refused(offered), trust.accept(offered, offered.fingerprint)

        assert asyncio.run(offer()) == (True, False)
        assert (ledger_path.parent / "known_hosts").read_bytes() == known
    finally:
        runner.stop()


def test_json_says_when_samples_read_again_were_read() -> None:
    """A status whose samples an unchanged answer gave again (NodeStatus.samples_at): its
    GPUs' `at` in --json is the reading's, not the time they were first read."""
    from leases.core.models import GpuSample, NodeHealth, NodeStatus
    from tui.cli.fleet import status_json

    first, later = (
        datetime(2026, 11, 20, 8, 0, tzinfo=UTC),
        datetime(2026, 11, 20, 8, 0, 5, tzinfo=UTC),
    )
    sample = GpuSample("n1", first, 0, util_gpu=86.0)
    again = NodeStatus("n1", NodeHealth.OK, checked=later, at=later, samples=(sample,),
                       samples_at=later)  # fmt: skip
    fresh = NodeStatus("n1", NodeHealth.OK, checked=first, at=first, samples=(sample,))
    assert [g["at"] for g in status_json(again)["gpus"]] == [later.isoformat()]
    assert [g["at"] for g in status_json(fresh)["gpus"]] == [first.isoformat()]
    assert status_json(again)["gpus"][0]["util_gpu"] == 86.0
