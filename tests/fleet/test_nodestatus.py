"""One NodeStatus as the fleet shows it, the join of polled and stored statuses, and one
health summary, shared by the CLI and the dashboard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from leases.core.models import GpuSample, Node, NodeHealth, NodeStatus, SshTarget
from leases.fleet.nodestatus import (
    current,
    figures,
    health_label,
    health_summary,
    is_stale,
    refused,
    stale_after_s,
    unless_stale,
)

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def latest(name: str, at: datetime, health: NodeHealth = NodeHealth.OK) -> NodeStatus:
    """A status as HistoryStore.latest_by_id reads it back."""
    gpu = GpuSample(name, at, 0, util_gpu=50.0, mem_used_mib=2048.0, mem_total_mib=4096.0)
    ok = health is NodeHealth.OK
    return NodeStatus(name, health, "", at, at if ok else None, (gpu,))


def node(node_id: int, name: str, problem: str = "") -> Node:
    return Node(name, SshTarget("127.0.0.1"), id=node_id, problem=problem)


def test_a_stored_status_stands_until_it_is_old_then_reads_stale() -> None:
    st = unless_stale(latest("a", NOW))
    assert st.health is NodeHealth.OK and st.at == st.checked == NOW and len(st.samples) == 1
    old = unless_stale(
        latest("a", NOW - timedelta(minutes=5)), stale_before=NOW - timedelta(seconds=30)
    )
    assert is_stale(old) and old.samples == ()
    bad = unless_stale(latest("b", NOW, NodeHealth.TIMEOUT))
    assert bad.at is None and bad.checked == NOW


def test_current_prefers_refused_then_the_poller_then_the_store() -> None:
    nodes = [node(1, "a"), node(2, "b", "bad host")]
    rows = {1: latest("a", NOW), 2: latest("b", NOW)}
    got = current(nodes, None, rows, NOW - timedelta(seconds=30))
    assert got[1].health is NodeHealth.OK
    assert got[2] == refused("b", "bad host")
    polled = {"a": NodeStatus("a", NodeHealth.TIMEOUT)}
    assert current(nodes, polled, rows, NOW)[1].health is NodeHealth.TIMEOUT


def test_a_new_node_never_shows_the_stored_status_of_a_released_one_of_its_name() -> None:
    """By node id: the released node 1 'a' had a reading; the new node 2 'a' has none yet."""
    rows = {1: latest("a", NOW)}
    assert current([node(2, "a")], None, rows, NOW - timedelta(seconds=30)) == {}


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
