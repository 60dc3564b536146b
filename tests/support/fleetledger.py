"""A demo ledger with fixed readings and an hour of history, as a collector would have
written them: what the dashboard tests and snapshots draw (the clock frozen at NOW)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from leases.core.models import GpuSample, NodeHealth, NodeStatus
from leases.sim.demoledger import build_demo_ledger
from leases.telemetry.history import GpuMinute, NodeMinute
from leases.telemetry.rollups import HistoryStore

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
# This node was down for the first half of the hour: its sparkline shows the gap.
GAP_NODE = "gpushare-4090-c"


def frozen_ledger(path: Path) -> None:
    with build_demo_ledger(path, date(2026, 11, 30)) as ledger:
        store = HistoryStore(ledger)
        rows = []
        for i, node in enumerate(ledger.nodes()):
            if node.name.startswith("colo-njidc-4090"):
                rows.append(NodeStatus(node.name, NodeHealth.DRIVER_MISMATCH, "driver/library version mismatch: the node needs a reboot", checked=NOW))  # fmt: skip
                continue
            util = float((i * 37) % 101)
            gpus = tuple(
                GpuSample(node.name, NOW, g, name=node.gpu_model, util_gpu=util,
                          mem_used_mib=1000.0 * (g + 1), mem_total_mib=81920.0,
                          power_w=100.0 + g, power_limit_w=400.0, temp_c=40.0, pstate="P0")
                for g in range(node.gpu_count)
            )  # fmt: skip
            rows.append(NodeStatus(node.name, NodeHealth.OK, "", checked=NOW, samples=gpus))
            base = int(NOW.timestamp()) // 60
            first = 30 if node.name == GAP_NODE else 0
            store.write_minutes([
                NodeMinute(node.name, base - 60 + m, (GpuMinute(0, 6, float((m * 7 + i) % 100), 100.0, 1.0, 1.0),))
                for m in range(first, 60)
            ])  # fmt: skip
        store.write_latest(rows)
