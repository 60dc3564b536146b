"""A node whose nvidia-smi cannot load the driver's library, or whose login user NVML
refuses, is said in words of its own, with the fix: the fleet's state label and the
no-readings alert (the dashboard's row: tests/tui/test_fleetview_health.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from leases.alerts.alert import Gap, NodeFacts
from leases.alerts.health import gap_rules
from leases.config.sections import AlertsConfig
from leases.core.models import Node, NodeHealth, NodeStatus, SshTarget
from leases.fleet.nodestatus import health_label, health_summary

NOW = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
NODE = Node("box", SshTarget("gw.example.cn", 6666, "root"))


@pytest.mark.parametrize(
    ("health", "label", "fix"),
    [
        (NodeHealth.NVML_LIBRARY_MISSING, "no NVML lib", "mount it into the container"),
        (NodeHealth.NVML_PERMISSION, "NVML denied", "video or render group"),
    ],
)
def test_each_fault_has_its_label_and_alert(health: NodeHealth, label: str, fix: str) -> None:
    assert health_label(health) == label
    assert health_summary([NodeStatus("box", health)]) == f"1 {label}"
    # No readings for 20 minutes (the default threshold is under that): the alert's action
    # is the fix on the node, not "check the provider's console".
    gap = Gap(NOW - timedelta(minutes=20), health, "nvidia-smi said so")
    (alert,) = [a for a in gap_rules(NodeFacts(NODE, gap=gap), AlertsConfig(), NOW)]
    assert health.value.replace("_", " ") in alert.message
    assert fix in alert.action and alert.action.startswith("on the node: ")


def test_other_faults_keep_the_console_action() -> None:
    gap = Gap(NOW - timedelta(minutes=20), NodeHealth.DRIVER_NOT_LOADED, "exit 9")
    (alert,) = gap_rules(NodeFacts(NODE, gap=gap), AlertsConfig(), NOW)
    assert alert.action.startswith("check the node at the provider's console")
