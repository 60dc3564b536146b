"""Attacker review of issue 19 (fleet by node id): a dashboard that polls by itself keeps its
poller's status and its last hour of live readings by node NAME. A node released and a new
node added under the same name while the dashboard runs inherits the released node's
status and sparkline until the next poll (the status) or for the hour (the readings), since
Poller.set_nodes keeps a name it already knows. Not a regression of the restructure (the
code before it did the same), but what issue 19 item 5 ("nodes known by id") leaves open:
this test fails until the poller forgets a name whose node id changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from leases.core.models import GpuSample, Node, NodeHealth, NodeStatus, SshTarget
from leases.fleet.live import recent_readings
from leases.ssh.pool import SshPool
from leases.telemetry.history import RecentHistory
from leases.telemetry.poller import Poller

NOW = datetime(2026, 11, 20, 4, 0, tzinfo=UTC)


def _node(node_id: int, host: str) -> Node:
    return replace(Node("a100-1", ssh=SshTarget(host, user="root")), id=node_id)


def test_a_reused_name_does_not_inherit_the_released_nodes_live_state() -> None:
    recent = RecentHistory()
    old = _node(1, "10.0.0.1")
    poller = Poller([old], pool=SshPool(), recent=recent)
    sample = GpuSample("a100-1", NOW, 0, util_gpu=97.0)
    recent.add([sample])
    poller.statuses["a100-1"] = NodeStatus("a100-1", NodeHealth.OK, "", NOW, NOW, (sample,))
    new = _node(2, "10.0.0.9")  # the old one archived, a new node under its name
    poller.set_nodes([new])
    assert poller.statuses["a100-1"].health is not NodeHealth.OK  # not polled yet
    live = recent_readings([new], poller.statuses, recent, {}, NOW, 5.0)
    assert not live.get(2), live  # the released node's 97 % is not the new node's
