"""Whole hours of history written straight into a ledger, for the money tests that work
figures out by hand from them."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from leases.ledger.store import Ledger
from leases.telemetry.history import GpuHour, NodeHour
from leases.telemetry.rollups import HistoryStore


def whole_hours(path: Path, node: str, start: datetime, n: int, busy: bool) -> None:
    """n whole hours from start of 8 cards all known, all busy or all idle."""
    with Ledger.open(path) as ledger:
        h0 = int(start.timestamp()) // 3600
        HistoryStore(ledger).write_hours(
            NodeHour(node, h0 + k, tuple(
                GpuHour(i, 60, 60 if busy else 0, 90.0 if busy else 0.0, 99.0, 1000.0, 300.0)
                for i in range(8)
            ))
            for k in range(n)
        )  # fmt: skip
