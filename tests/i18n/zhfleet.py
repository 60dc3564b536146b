"""The demo fleet with Chinese names (nodes, a provider), recorded at NOW with an hour of
readings on one node, its host (CPU, memory, every kind of disk, network) and a process
with its run time: what the dashboard's Chinese tests and snapshots show."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from html import unescape
from pathlib import Path
from typing import Any

from leases.core.host import GIB, KIB, HostStats, Mount, MountKind
from leases.core.models import GpuProcess, GpuSample, NodeHealth, NodeStatus
from leases.ledger.store import Ledger
from leases.sim.demoledger import demo_records
from leases.telemetry.history import GpuMinute, NodeMinute
from leases.telemetry.rollups import HistoryStore

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
# Chinese names where the ledger takes them (a node's name is ASCII: a host-like word,
# leases.core.fields), as labs name their providers; and Chinese notes.
NODES: dict[str, str] = {}
PROVIDERS = {"AutoDL": "算力云", "Aliyun": "阿里云"}
NOTES = "训练集群，合同见共享盘"
NODE = "a100-monthly-1"
G = GIB // KIB
# NODE's host as an SSH poll reads it: a mount of each kind, with its label as stored.
HOST = HostStats(
    cpu_pct=37.4, cpus=64, load1=12.5, load5=11.0, load15=9.75,
    mem_total_kib=512 * G, mem_available_kib=128 * G, swap_total_kib=8 * G, swap_free_kib=6 * G,
    mounts=(
        Mount("/", "overlay", 30 * G, 18 * G, 12 * G, "root fs", MountKind.ROOT),
        Mount("/dev/shm", "tmpfs", 64 * G, 1 * G, 63 * G, "shared memory", MountKind.SHM),
        # Not full: a full disk's alert still says its mount's label in English
        # (leases.alerts.hostrules passes Mount.name as it is stored; to be said in words).
        Mount("/root/autodl-tmp", "xfs", 50 * G, 20 * G, 30 * G, "AutoDL data disk",
              MountKind.DATA),
        Mount("/data", "xfs", 100 * G, 10 * G, 90 * G, "data disk", MountKind.DATA),
    ),
    net_rx_bps=21_500_000.0, net_tx_bps=2_700.0,
)  # fmt: skip


def _renamed(rec: dict[str, Any]) -> dict[str, Any]:
    out = dict(rec)
    for key in ("name", "node"):
        if out.get(key) in NODES:
            out[key] = NODES[out[key]]
    if out.get("name") in PROVIDERS:
        out["name"] = PROVIDERS[out["name"]]
    if out.get("provider") in PROVIDERS:
        out["provider"] = PROVIDERS[out["provider"]]
    if "notes" in out and out.get("name", out.get("node")) == NODE:
        out["notes"] = NOTES
    return out


def build(path: Path) -> Path:
    """The ledger at path: the demo fleet renamed, NODE's last hour and GPUs now."""
    records = demo_records(date(2026, 11, 30))
    renamed = {kind: [_renamed(r) for r in rows] for kind, rows in records.items()}
    with Ledger.open(path, clock=lambda: NOW, actor="tester") as ledger:
        ledger.import_records(renamed)  # type: ignore[arg-type]
        _readings(ledger)
    return path


def _readings(ledger: Ledger) -> None:
    store = HistoryStore(ledger)
    gpus = 8
    this_minute = int(NOW.timestamp()) // 60
    store.write_minutes(
        NodeMinute(NODE, m, tuple(
            GpuMinute(g, 12, float((m * 7 + g * 5) % 100), 100.0, 20_000.0 + 1000 * g,
                      150.0 + (m % 50) * 4, 400.0)
            for g in range(gpus)))
        for m in range(this_minute - 60, this_minute)
    )  # fmt: skip
    samples = tuple(
        GpuSample(NODE, NOW, g, uuid=f"GPU-{g}", name="NVIDIA A100-SXM4-80GB", util_gpu=90.0 + g,
                  mem_used_mib=40_000.0, mem_total_mib=81_920.0, power_w=300.0,
                  power_limit_w=400.0, temp_c=61.0, pstate="P0")
        for g in range(gpus)
    )  # fmt: skip
    procs = (
        GpuProcess(NODE, "GPU-0", 4242, "python train.py", 38_000.0, "alice",
                   elapsed_s=55 * 60 + 32, cmdline="python train.py"),
    )  # fmt: skip
    store.write_latest(
        [NodeStatus(NODE, NodeHealth.OK, "", checked=NOW, samples=samples, processes=procs,
                    host=HOST)]
    )  # fmt: skip


def svg_text(svg: str) -> str:
    """The words an SVG screenshot (App.export_screenshot) shows, line by line."""
    lines = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    text = "\n".join(unescape(re.sub(r"<[^>]+>", "", line)) for line in lines)
    return text.replace("\xa0", " ")


def svg_rows(svg: str) -> list[str]:
    """The screen lines an SVG screenshot shows, each whole (svg_text gives a line's
    pieces, one a line): its text elements joined by their row (y) in order of x."""
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text[^>]*\bx="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg, re.S):
        text = unescape(re.sub(r"<[^>]+>", "", m.group(3))).replace("\xa0", " ")
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), text))
    return ["".join(t for _x, t in sorted(parts)) for _y, parts in sorted(rows.items())]
