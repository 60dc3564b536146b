"""History storage: 90 days of a 200-node x 8-GPU fleet, and busy card-hours per lease.

Builds a real ledger with 200 nodes (a lease each), writes 90 days of hour roll-ups and
the minute roll-ups that the default retention keeps (14 days) in the ledger's own packed
format (rolled up by leases.telemetry.history, bulk-inserted for speed), then
prints the file size and the time of `busy_card_hours` over the last 30 days for every
lease. Targets: under 1 GB, under 200 ms.

    python bench/history.py [--nodes 200] [--days 90] [--minute-days 14]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.ledger.store import Ledger
from leases.telemetry.history import GpuMinute, NodeMinute, hour_of, pack_hour, pack_minute
from leases.telemetry.rollups import HistoryStore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--minute-days", type=int, default=14)
    args = ap.parse_args()
    rng = random.Random(1)
    now = datetime(2026, 11, 30, tzinfo=UTC)
    start = now - timedelta(days=args.days)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        ledger = Ledger.open(path)
        ledger.import_records(
            {
                "nodes": [
                    {"name": f"n{i:03d}", "ssh_host": f"10.0.{i // 250}.{i % 250}",
                     "gpu_count": args.gpus}
                    for i in range(args.nodes)
                ],
                "leases": [
                    {"node": f"n{i:03d}", "billing_type": "monthly", "unit_price": "50000",
                     "start": start.isoformat(), "end": (now + timedelta(days=5)).isoformat()}
                    for i in range(args.nodes)
                ],
            }
        )  # fmt: skip
        store = HistoryStore(ledger)
        t0 = time.perf_counter()
        minute_from = int((now - timedelta(days=args.minute_days)).timestamp()) // 60
        first_hour = int(start.timestamp()) // 3600
        last_hour = int(now.timestamp()) // 3600
        # Two kinds of hour (busy, idle): roll them up once, through the real code paths.
        kinds = {}
        for util in (90.0, 1.0):
            gpus = tuple(
                GpuMinute(g, 12, util, util + 5, 40_000.0, 300.0) for g in range(args.gpus)
            )
            mins = [NodeMinute("x", m, gpus) for m in range(60)]
            kinds[util] = (pack_minute(gpus), hour_of("x", 0, mins))
        minutes_written = hours_written = 0
        conn = ledger.conn
        for i in range(args.nodes):
            node_id = store.node_id(f"n{i:03d}")
            busy_share = rng.random()
            hour_rows, minute_rows = [], []
            for h in range(first_hour, last_hour):
                blob, hour = kinds[90.0 if rng.random() < busy_share else 1.0]
                hour_rows.append((node_id, h, pack_hour(hour.gpus), hour.busy_card_minutes,
                                  hour.known_card_minutes))  # fmt: skip
                if h * 60 >= minute_from:
                    minute_rows.extend((node_id, h * 60 + m, blob) for m in range(60))
            with ledger.transaction():
                conn.executemany("INSERT INTO gpu_hour VALUES (?, ?, ?, ?, ?)", hour_rows)
                conn.executemany("INSERT INTO gpu_minute VALUES (?, ?, ?)", minute_rows)
            hours_written += len(hour_rows)
            minutes_written += len(minute_rows)
        build_s = time.perf_counter() - t0
        ledger.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = path.stat().st_size
        timings = []
        for _ in range(5):
            t = time.perf_counter()
            busy = store.busy_card_hours(now - timedelta(days=30), now)
            timings.append(time.perf_counter() - t)
        ledger.close()
    mb = size / 1e6
    print(f"fleet: {args.nodes} nodes x {args.gpus} GPUs, {args.days} days of hour roll-ups, "
          f"{args.minute_days} days of minute roll-ups")  # fmt: skip
    print(f"rows: {hours_written:,} node-hours, {minutes_written:,} node-minutes "
          f"(built in {build_s:.0f} s)")  # fmt: skip
    print(f"ledger size: {mb:,.0f} MB  (target < 1000 MB: {'met' if mb < 1000 else 'MISSED'})")
    print(f"per node-minute row: {size / max(1, minutes_written):.0f} bytes (all {args.gpus} GPUs)")
    ms = min(timings) * 1000
    verdict = "met" if ms < 200 else "MISSED"
    print(f"busy card-hours, last 30 days, {len(busy)} leases: min {ms:.1f} ms, "
          f"max {max(timings) * 1000:.1f} ms  (target < 200 ms: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
