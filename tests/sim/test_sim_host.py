"""The simulated node's host (leases.sim.hostproc): /proc and df in the real tools' formats,
counters that advance with the clock, load that follows the GPU jobs, AutoDL-style quotas
(one of the demo's AutoDL nodes nearly full, so `zuka demo` shows disk_full)."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta

from leases.alerts.alert import AlertKind, NodeFacts
from leases.alerts.hostrules import host_rules
from leases.config.sections import AlertsConfig
from leases.core.host import MountKind
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger import records
from leases.sim import SimNode, answer
from leases.sim.gpu import Scenario
from leases.telemetry import hoststats

T = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
SNIPPET = hoststats.SNIPPET


def _read(node: SimNode, at: datetime) -> hoststats.HostReading:
    out = answer(node, f"echo {hoststats.HOST_MARK} 0; {SNIPPET}", at)
    assert out.stderr == "" and out.exit_status == 0
    _, status, host = hoststats.split_output(out.stdout)
    assert status == 0
    return hoststats.parse_host(host)


def test_an_autodl_node_answers_every_section_in_the_real_format() -> None:
    node = SimNode("autodl-4090-b", "RTX 4090", 8, Scenario.BUSY, seed=zlib.crc32(b"autodl-4090-b"))
    r = _read(node, T)
    assert r.problems == ()
    assert r.cpus == 128 and r.load is not None and r.uptime_s is not None
    assert r.mem["MemTotal"] == 8 * 32 * 1024 * 1024
    by_path = {m.path: m for m in r.mounts}
    assert set(by_path) == {"/", "/dev/shm", "/root/autodl-tmp", "/root/autodl-fs"}
    tmp = by_path["/root/autodl-tmp"]
    assert (tmp.fs_type, tmp.total_kib) == ("xfs", 50 * 1024 * 1024)  # the quota as its size
    assert round(tmp.used_pct) == 95
    assert by_path["/"].fs_type == "overlay" and by_path["/dev/shm"].kind is MountKind.SHM


def test_a_whole_machine_has_its_data_array() -> None:
    r = _read(SimNode("colo-a800", "A800", 8, Scenario.BUSY, seed=4), T)
    kinds = {m.path: m.kind for m in r.mounts}
    assert kinds == {"/": MountKind.ROOT, "/dev/shm": MountKind.SHM, "/data": MountKind.DATA}


def test_counters_advance_with_the_clock_and_load_follows_the_jobs() -> None:
    busy = SimNode("b", "A100", 8, Scenario.BUSY, seed=7)
    idle = SimNode("i", "A100", 8, Scenario.IDLE_MONTHLY, seed=7)
    for node in (busy, idle):
        a, b = _read(node, T), _read(node, T + timedelta(seconds=60))
        assert b.uptime_s is not None and a.uptime_s is not None
        assert round(b.uptime_s - a.uptime_s) == 60
        s = hoststats.stats(b, a)
        assert s.cpu_pct is not None and 0 <= s.cpu_pct <= 100
        assert s.net_rx_bps is not None and s.net_rx_bps > 0
    busy_s = hoststats.stats(_read(busy, T + timedelta(seconds=60)), _read(busy, T))
    idle_s = hoststats.stats(_read(idle, T + timedelta(seconds=60)), _read(idle, T))
    assert busy_s.cpu_pct is not None and idle_s.cpu_pct is not None
    assert busy_s.cpu_pct > idle_s.cpu_pct
    assert (busy_s.load1 or 0) > (idle_s.load1 or 0)


def test_acceptances_df_of_a_path_is_unchanged() -> None:
    out = answer(SimNode("autodl-x", "RTX 4090", 8, seed=3), "df -PT -- /", T)
    assert out.stdout.splitlines()[1].split()[-1] == "/"
    assert "/dev/nvme0n1p2" in out.stdout


def test_the_demos_nearly_full_autodl_disk_raises_disk_full() -> None:
    name = "autodl-4090-b"
    node = SimNode(name, "RTX 4090", 8, Scenario.BUSY, seed=zlib.crc32(name.encode()))
    host = hoststats.stats(_read(node, T), None)
    facts = NodeFacts(
        records.node_from({"name": name, "ssh_host": "10.0.0.9", "ssh_user": "root"}),
        latest=NodeStatus(name, NodeHealth.OK, checked=T, at=T, host=host),
    )
    (alert,) = list(host_rules(facts, AlertsConfig(), T))
    assert alert.kind is AlertKind.DISK_FULL
    assert alert.message.startswith(f"{name}: AutoDL data disk /root/autodl-tmp 47.5 of 50.0 GiB")
