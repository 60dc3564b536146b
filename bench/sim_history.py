"""How long backfilling 30 days of one-minute history for the demo fleet takes.

Run: python bench/sim_history.py
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from leases.sim import default_demo_fleet, history


def main() -> None:
    end = datetime(2025, 6, 1, tzinfo=UTC)
    start = end - timedelta(days=30)
    nodes = default_demo_fleet()
    began = time.perf_counter()
    rows = readings = 0
    for node in nodes:
        for row in history(node, start, end):
            rows += 1
            readings += len(row.util_gpu)
    took = time.perf_counter() - began
    print(f"{len(nodes)} nodes, 30 days at 1 min: {rows:,} rows, {readings:,} GPU readings "
          f"in {took:.2f} s ({readings / took / 1e6:.1f} M readings/s)")  # fmt: skip


if __name__ == "__main__":
    main()
