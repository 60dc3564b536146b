"""One NodeStatus conversion and one health summary, shared by the CLI and the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from leases.core.models import GpuSample, Latest, NodeHealth
from leases.fleet.nodestatus import (
    current,
    figures,
    from_latest,
    health_label,
    health_summary,
    is_stale,
    refused,
    stale_after_s,
)
from leases.telemetry.poller import NodeStatus

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def latest(name: str, at: datetime, health: NodeHealth = NodeHealth.OK) -> Latest:
    gpu = GpuSample(name, at, 0, util_gpu=50.0, mem_used_mib=2048.0, mem_total_mib=4096.0)
    return Latest(name, at, health, "", None, (gpu,), ())


def test_from_latest_keeps_the_reading_and_marks_an_old_one_stale() -> None:
    st = from_latest(latest("a", NOW))
    assert st.health is NodeHealth.OK and st.at == st.checked == NOW and len(st.samples) == 1
    old = from_latest(
        latest("a", NOW - timedelta(minutes=5)), stale_before=NOW - timedelta(seconds=30)
    )
    assert is_stale(old) and old.samples == ()
    bad = from_latest(latest("b", NOW, NodeHealth.TIMEOUT))
    assert bad.at is None and bad.checked == NOW


def test_current_prefers_refused_then_the_poller_then_the_store() -> None:
    rows = {"a": latest("a", NOW), "b": latest("b", NOW)}
    got = current({"b": "bad host"}, None, rows, NOW - timedelta(seconds=30))
    assert got["a"].health is NodeHealth.OK
    assert got["b"] == refused("b", "bad host")
    polled = {"a": NodeStatus("a", NodeHealth.TIMEOUT)}
    assert current({}, polled, rows, NOW)["a"].health is NodeHealth.TIMEOUT


def test_health_summary() -> None:
    statuses = [NodeStatus("a"), NodeStatus("b", NodeHealth.OK), NodeStatus("c", NodeHealth.OK)]
    assert health_summary(statuses) == "1 connecting, 2 ok"
    assert health_summary([]) == "no readings yet"


def test_the_summary_says_a_health_in_the_fleet_tables_words() -> None:
    # The status line said '1 driver_mismatch' while the table said 'needs reboot'.
    statuses = [NodeStatus("a", NodeHealth.DRIVER_MISMATCH), NodeStatus("b", NodeHealth.OK)]
    assert health_summary(statuses) == "1 needs reboot, 1 ok"
    assert health_label(NodeHealth.DRIVER_MISMATCH) == "needs reboot"
    assert health_label(NodeHealth.TIMEOUT) == "timeout"


def test_figures_unknown_is_none_and_busy_counts_cards() -> None:
    s = [
        GpuSample("a", NOW, 0, util_gpu=90.0, mem_used_mib=1024.0, power_w=300.0),
        GpuSample("a", NOW, 1, util_gpu=0.0, mem_used_mib=None, power_w=50.0),
    ]
    f = figures(s)
    assert f.util == 45.0 and f.power_w == 350.0
    assert f.mem_used_gib is None  # one card's memory unknown: the sum is unknown
    assert f.busy == 1 and f.idle == 1


def test_stale_after() -> None:
    assert stale_after_s(1.0) == 30.0 and stale_after_s(10.0) == 60.0
