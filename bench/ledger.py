"""How fast `zuka node list --json` is on a ledger of 1,000 nodes with 3 leases each.

Targets: under 0.5 s wall time and under 80 MB peak RSS for the whole command (interpreter
start included), since it is what scripts and shell prompts run. CPU time (user + system)
is printed beside wall time because it varies less on a busy machine.

Run: python bench/ledger.py [--runs N] [--nodes N] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from leases.ledger.store import Ledger  # noqa: E402

WALL_TARGET_S = 0.5
RSS_TARGET_MB = 80.0
TZ = ZoneInfo("Asia/Shanghai")
PROVIDERS = (("aliyun", "cloud"), ("autodl", "platform"), ("idc-hz", "colo"))
GPU_MODELS = ("A100-SXM4-80GB", "H800", "RTX 4090", "L40S")


def fleet(n_nodes: int) -> dict[str, list[dict[str, Any]]]:
    """Records for n_nodes nodes, each with two ended monthly leases and one open lease."""
    providers = [{"name": name, "kind": kind} for name, kind in PROVIDERS]
    nodes: list[dict[str, Any]] = []
    leases: list[dict[str, Any]] = []
    jan = datetime(2025, 1, 1, tzinfo=TZ)
    for i in range(n_nodes):
        name = f"gpu-{i:04d}"
        provider = PROVIDERS[i % len(PROVIDERS)][0]
        nodes.append(
            {
                "name": name,
                "provider": provider,
                "ssh_host": f"10.{i // 250}.{i % 250}.7",
                "ssh_port": 20000 + i,
                "ssh_user": "root",
                "gpu_model": GPU_MODELS[i % len(GPU_MODELS)],
                "gpu_count": 8,
                "vram_gib": 80,
                "interconnect": "nvlink" if i % 2 else "pcie",
                "tags": ["train", f"team-{i % 7}"],
            }
        )
        starts = [jan + timedelta(days=30 * k) for k in range(4)]
        for k in range(3):
            last = k == 2
            hourly = last and i % 3 == 0
            leases.append(
                {
                    "node": name,
                    "billing_type": "hourly" if hourly else "monthly",
                    "unit_price": "9.80" if hourly else "38000.00",
                    "start": starts[k].isoformat(),
                    "end": None if hourly else starts[k + 1].isoformat(),
                    "deposit": "5000" if provider == "idc-hz" and k == 0 else None,
                    "contract_no": f"HT-{i:04d}-{k}",
                    "ended_at": None if last else starts[k + 1].isoformat(),
                }
            )
    return {"providers": providers, "nodes": nodes, "leases": leases}


GNU_TIME = Path("/usr/bin/time")


def run_once(argv: list[str]) -> tuple[float, float, float, bytes]:
    """Wall seconds, CPU seconds, peak RSS in MB and stdout of one child process.

    The RSS comes from GNU time where there is one: Linux carries the parent's peak RSS over
    exec into a child's ru_maxrss, so wait4() on a child of this (large) process overstates it.
    """
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as rss_file:
        timed = [str(GNU_TIME), "-f", "%M", "-o", rss_file.name, *argv] if _gnu_time() else argv
        began = time.perf_counter()
        proc = subprocess.Popen(timed, cwd=ROOT, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read() if proc.stderr else b""
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode()}")
        out.seek(0)
        if _gnu_time():
            rss_kib = float(rss_file.read().split()[-1])
        else:  # an upper bound: includes what this process held when it forked
            rss_kib = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)
        cpu = usage.ru_utime + usage.ru_stime
        return took, cpu, rss_kib / 1024, out.read()


def _gnu_time() -> bool:
    return sys.platform.startswith("linux") and os.access(GNU_TIME, os.X_OK)


def measure(label: str, argv: list[str], runs: int) -> tuple[float, float, float]:
    run_once(argv)  # warm the page cache and the .pyc files
    walls, cpus, rsss = [], [], []
    for _ in range(runs):
        wall, cpu, rss, _ = run_once(argv)
        walls.append(wall)
        cpus.append(cpu)
        rsss.append(rss)
    best, median, peak = min(walls), statistics.median(walls), max(rsss)
    print(
        f"  {label:<28} wall min {best:6.3f} s  median {median:6.3f} s  "
        f"CPU median {statistics.median(cpus):6.3f} s  peak RSS {peak:6.1f} MB"
    )
    return best, median, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--keep", metavar="PATH", help="build the ledger here and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "ledger.db"
        data = fleet(args.nodes)
        began = time.perf_counter()
        with Ledger.open(path) as ledger:
            counts = ledger.import_records(data)
        built = time.perf_counter() - began
        size_kib = path.stat().st_size / 1024
        print(
            f"ledger: {counts['nodes']} nodes, {counts['leases']} leases, built in "
            f"{built:.2f} s, {size_kib:.0f} KiB"
        )

        cli = [
            sys.executable,
            "-m",
            "tui.cli.main",
            "node",
            "list",
            "--json",
            "--ledger",
            str(path),
        ]
        listed = json.loads(run_once(cli)[3])
        assert len(listed) == args.nodes, f"listed {len(listed)} nodes, expected {args.nodes}"

        print(f"{args.runs} runs each, after one warm-up run:")
        measure("python -c pass (floor)", [sys.executable, "-c", "pass"], args.runs)
        measure(
            "python -m tui.cli.main --help",
            [sys.executable, "-m", "tui.cli.main", "--help"],
            args.runs,
        )
        _, median, peak = measure("zuka node list --json", cli, args.runs)

    wall_ok, rss_ok = median < WALL_TARGET_S, peak < RSS_TARGET_MB
    print(
        f"node list --json: median {median:.3f} s (target < {WALL_TARGET_S} s: "
        f"{'met' if wall_ok else 'MISSED'}), peak RSS {peak:.1f} MB "
        f"(target < {RSS_TARGET_MB:.0f} MB: {'met' if rss_ok else 'MISSED'})"
    )
    return 0 if wall_ok and rss_ok else 1


if __name__ == "__main__":
    sys.exit(main())
