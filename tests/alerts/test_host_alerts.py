"""disk_full and ram_full (leases.alerts.hostrules): on hand-made host figures, at and around
their thresholds, stale readings held, and end to end through the ledger."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from leases.alerts import state as alertstate
from leases.alerts.alert import AlertKind, Level, NodeFacts
from leases.alerts.hostrules import host_rules
from leases.alerts.watch import check
from leases.config.load import ConfigError, load_config
from leases.config.sections import AlertsConfig
from leases.core.host import GIB, KIB, HostStats, Mount, MountKind
from leases.core.models import NodeHealth, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.rollups import HistoryStore

NOW = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
CONFIG = AlertsConfig()
NODE = records.node_from({"name": "n1", "ssh_host": "10.0.0.9", "ssh_user": "root"})
G = GIB // KIB  # a GiB in KiB
Q = 50 * G  # a 50 GiB quota


def _disk(path: str, used_pct: float, kind: MountKind = MountKind.DATA, label: str = "") -> Mount:
    used = int(Q * used_pct / 100)
    return Mount(path, "xfs", Q, used, Q - used, label, kind)


def _facts(host: HostStats, at: datetime = NOW, health: NodeHealth = NodeHealth.OK) -> NodeFacts:
    status = NodeStatus("n1", health, checked=at, at=at, host=host)
    return NodeFacts(NODE, latest=status)


def _run(host: HostStats, **kw: object) -> list:  # type: ignore[type-arg]
    return list(host_rules(_facts(host, **kw), CONFIG, NOW))  # type: ignore[arg-type]


def test_a_nearly_full_autodl_data_disk_names_the_mount_and_what_to_do() -> None:
    host = HostStats(mounts=(_disk("/root/autodl-tmp", 94.2, label="AutoDL data disk"),))
    (a,) = _run(host)
    assert a.kind is AlertKind.DISK_FULL and a.level is Level.RAISE
    assert a.severity.value == "warning"
    assert (
        a.message == "n1: AutoDL data disk /root/autodl-tmp 47.1 of 50.0 GiB, 94 % (alert at 90 %)"
    )
    assert "checkpoint" in a.action
    assert a.key == "/root/autodl-tmp"  # one alert per mount


def test_thresholds_hold_and_clear_without_flapping() -> None:
    assert _run(HostStats(mounts=(_disk("/data", 86.9),))) == []  # under 87: cleared
    (held,) = _run(HostStats(mounts=(_disk("/data", 88.0),)))
    assert held.level is Level.HOLD  # between clear and raise: an open one stays open
    (at,) = _run(HostStats(mounts=(_disk("/data", 90.0),)))
    assert at.level is Level.RAISE
    (full,) = _run(HostStats(mounts=(_disk("/data", 99.0),)))
    assert full.severity.value == "critical"


def test_shm_and_root_count_other_mounts_do_not() -> None:
    host = HostStats(
        mounts=(
            _disk("/dev/shm", 97, MountKind.SHM, "shared memory"),
            _disk("/", 95, MountKind.ROOT, "root fs"),
            _disk("/home", 99, MountKind.OTHER),
        )
    )
    alerts = _run(host)
    assert [a.key for a in alerts] == ["/dev/shm", "/"]
    assert "--shm-size" in alerts[0].action
    assert "pip" in alerts[1].action


def test_memory_nearly_gone() -> None:
    total = 256 * GIB // KIB
    low = HostStats(mem_total_kib=total, mem_available_kib=int(total * 0.04))
    (a,) = _run(low)
    assert a.kind is AlertKind.RAM_FULL and a.level is Level.RAISE
    assert a.message == "n1: memory 10.2 of 256.0 GiB available, 4 % (alert under 5 %)"
    assert "OOM" in a.action
    gone = replace(low, mem_available_kib=int(total * 0.01))
    assert _run(gone)[0].severity.value == "critical"
    assert _run(replace(low, mem_available_kib=int(total * 0.09))) == []
    (held,) = _run(replace(low, mem_available_kib=int(total * 0.07)))
    assert held.level is Level.HOLD
    assert _run(HostStats(mem_total_kib=total)) == []  # MemAvailable unknown: no verdict


def test_a_stale_or_failed_reading_holds_and_says_when() -> None:
    host = HostStats(mounts=(_disk("/data", 95),))
    (stale,) = _run(host, at=NOW - timedelta(minutes=30))
    assert stale.level is Level.HOLD and "when last read, 30 minutes ago" in stale.message
    (down,) = _run(host, health=NodeHealth.UNREACHABLE)
    assert down.level is Level.HOLD
    assert list(host_rules(NodeFacts(NODE), CONFIG, NOW)) == []  # never read


def test_hostile_mount_paths_are_shown_safely() -> None:
    (a,) = _run(HostStats(mounts=(_disk("/data\x1b]0;pwned\x07", 95),)))
    assert "\x1b" not in a.message and "\x07" not in a.message and "\x1b" not in a.key


def test_the_thresholds_are_config_keys(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[alerts]\ndisk_full_pct = 80\nram_free_pct = 10\n")
    path.chmod(0o600)
    config = load_config(path, env={})
    assert (config.alerts.disk_full_pct, config.alerts.ram_free_pct) == (80.0, 10.0)
    path.write_text("[alerts]\ndisk_full_pct = 150\nram_free_pct = 0\n")
    with pytest.raises(ConfigError, match="disk_full_pct") as said:
        load_config(path, env={})
    assert "ram_free_pct" in str(said.value)
    (a,) = list(host_rules(_facts(HostStats(mounts=(_disk("/data", 85),))), config.alerts, NOW))
    assert "(alert at 80 %)" in a.message


def test_end_to_end_from_the_stored_status(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", create=True, clock=lambda: NOW) as ledger:
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.9",
                                           "ssh_user": "root"}))  # fmt: skip
        host = HostStats(
            mem_total_kib=100,
            mem_available_kib=3,
            mounts=(_disk("/root/autodl-tmp", 96, label="AutoDL data disk"),),
        )
        HistoryStore(ledger).write_latest([NodeStatus("n1", NodeHealth.OK, checked=NOW,
                                                      at=NOW, host=host)])  # fmt: skip
        check(ledger, CONFIG, lambda: NOW)
        kinds = sorted(a.kind for a in alertstate.alerts(ledger, NOW))
        assert kinds == ["disk_full", "ram_full"]


def test_a_containers_limit_is_said_as_such() -> None:
    host = HostStats(mem_total_kib=16 * G, mem_available_kib=G // 2, mem_cgroup=True)
    (a,) = _run(host)
    assert a.kind is AlertKind.RAM_FULL
    assert a.message.startswith("n1: container memory 0.5 of 16.0 GiB available, 3 %")
