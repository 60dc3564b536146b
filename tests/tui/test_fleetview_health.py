"""The fleet table's state cell for the nvidia-smi faults that have states of their own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leases.core.models import Node, NodeHealth, NodeStatus, SshTarget
from tui.screens.fleetview import HEALTH_RANK, fleet_row

NOW = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
NODE = Node("box", SshTarget("gw.example.cn", 6666, "root"))


@pytest.mark.parametrize(
    ("health", "label"),
    [
        (NodeHealth.NVML_LIBRARY_MISSING, "no NVML lib"),
        (NodeHealth.NVML_PERMISSION, "NVML denied"),
    ],
)
def test_nvml_faults_show_red_in_their_words(health: NodeHealth, label: str) -> None:
    row = fleet_row(NODE, NodeStatus("box", health, "x", checked=NOW), None, [], NOW)
    state = row.cells["state"]
    assert (state.plain, state.style) == (label, "red")
    # Sorted beside the other driver faults, after "needs reboot", before "GPU lost".
    assert HEALTH_RANK[NodeHealth.DRIVER_MISMATCH] < HEALTH_RANK[health]
    assert HEALTH_RANK[health] < HEALTH_RANK[NodeHealth.GPU_LOST]
