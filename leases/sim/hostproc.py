"""A simulated node's host beyond its GPUs, as /proc and df show it: uptime and load,
meminfo, the cpu lines of /proc/stat and /proc/net/dev (counters that advance with the
clock), and its disks with their quotas (`df -P -k -T` with no path).

AutoDL-style nodes (named autodl-*) are containers: an overlay root of 30 GiB, the 50 GiB
data disk /root/autodl-tmp (an xfs project quota: df shows the quota as its size; on
some nodes nearly full, so the demo raises disk_full), file storage /root/autodl-fs and a
/dev/shm. Other nodes are whole machines with a data array. Load follows the GPU jobs at
the instant read; CPU ticks and network bytes are integrals of a smooth use per
scenario, so they only grow. Pure.
"""

from __future__ import annotations

import functools
import math
import re
from datetime import datetime

from leases.sim.gpu import Scenario, SimNode, readings
from leases.sim.output import Answer

GIB_KIB = 1024 * 1024
_HZ = 100  # USER_HZ: /proc/stat counts in 1/100 s
_PERIOD_S = 1800.0  # the swing of CPU and network use
# Average CPU busy share per scenario (the data pipeline of a starved job keeps every
# core busy while its GPUs wait).
_CPU_USE = {
    Scenario.BUSY: 0.45,
    Scenario.IDLE_MONTHLY: 0.02,
    Scenario.BURSTY: 0.25,
    Scenario.STARVED: 0.92,
}


def _autodl(node: SimNode) -> bool:
    return node.name.lower().startswith("autodl")


def cpus(node: SimNode) -> int:
    return node.count * 16


def _uptime(node: SimNode, now: datetime) -> float:
    boot = 1_767_225_600 - (node.seed % 40) * 86_400  # 2026-01-01, minus up to 40 days
    return max(1.0, now.timestamp() - boot)


@functools.lru_cache(maxsize=1024)
def _busy_share(node: SimNode, now: datetime) -> float:
    """The GPUs' mean busy share at `now` (cached: /proc/loadavg and meminfo both ask)."""
    reads = readings(node, now)
    return sum(r.util_gpu for r in reads) / (100 * len(reads)) if reads else 0.0


def _integral(node: SimNode, t: float, base: float, swing: float) -> float:
    """∫0..t of base + swing*sin(2πs/P + phase) ds: grows as long as swing <= base."""
    phase = (node.seed % 97) / 97 * 2 * math.pi
    w = 2 * math.pi / _PERIOD_S
    return base * t - swing / w * (math.cos(w * t + phase) - math.cos(phase))


def _mem_total_kib(node: SimNode) -> int:
    return node.count * (32 if _autodl(node) else 128) * GIB_KIB


def _mem_kib(node: SimNode, now: datetime) -> tuple[int, int]:
    total = _mem_total_kib(node)
    used = 0.08 + 0.55 * _busy_share(node, now)
    if node.scenario is Scenario.STARVED:
        used = 0.97  # its loader caches the data set in RAM
    return total, int(total * (1 - min(used, 0.99)))


@functools.lru_cache(maxsize=4096)
def proc_file(node: SimNode, path: str, now: datetime) -> str | None:
    """The text of the /proc files the poller reads; None for any other path."""
    up = _uptime(node, now)
    n = cpus(node)
    if path == "/proc/uptime":
        return f"{up:.2f} {up * n * 0.6:.2f}\n"
    if path == "/proc/loadavg":
        busy = _busy_share(node, now)
        load = n * (0.03 + 0.6 * busy)
        procs = f"3/{900 + n * 4} {40_000 + node.seed % 9000}"
        return f"{load:.2f} {load * 0.95:.2f} {load * 0.9:.2f} {procs}\n"
    if path == "/proc/meminfo":
        total, avail = _mem_kib(node, now)
        return (
            f"MemTotal:       {total} kB\nMemFree:        {avail // 2} kB\n"
            f"MemAvailable:   {avail} kB\nBuffers:          204800 kB\n"
            f"Cached:         {avail // 3} kB\nSwapTotal:              0 kB\n"
            "SwapFree:               0 kB\n"
        )
    if path == "/proc/stat":
        return _stat(node, up, n)
    if path == "/proc/net/dev":
        return _net_dev(node, up)
    return None


def _stat(node: SimNode, up: float, n: int) -> str:
    base = _CPU_USE.get(node.scenario, 0.15)
    busy = _integral(node, up, base, base * 0.6) * _HZ * n
    total = up * _HZ * n
    user, system = int(busy * 0.85), int(busy * 0.15)
    idle, iowait = int(total - busy) - int(total * 0.002), int(total * 0.002)
    lines = [f"cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0"]
    for i in range(n):
        lines.append(f"cpu{i} {user // n} 0 {system // n} {idle // n} {iowait // n} 0 0 0 0 0")
    lines += ["intr 123456 0 0", f"ctxt {int(total * 40)}", "btime 1767225600", "processes 4321"]
    return "\n".join(lines) + "\n"


def _net_dev(node: SimNode, up: float) -> str:
    rate = 40e6 * _CPU_USE.get(node.scenario, 0.15)  # bytes/s in: the data set streams in
    rx = int(_integral(node, up, rate, rate * 0.8))
    tx = int(_integral(node, up, rate / 8, rate / 10))
    lo = int(up * 2000)
    head = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast"
        "|bytes    packets errs drop fifo colls carrier compressed\n"
    )
    row = "{:>6}: {} {} 0 0 0 0 0 0 {} {} 0 0 0 0 0 0\n"
    return (
        head
        + row.format("lo", lo, lo // 100, lo, lo // 100)
        + row.format("eth0", rx, rx // 1400, tx, tx // 1400)
    )


def mounts(node: SimNode) -> list[tuple[str, str, str, int, int]]:
    """(device, type, mount point, 1024-blocks, used) of every file system df lists."""
    shm = _mem_total_kib(node) // 2
    if _autodl(node):
        # One AutoDL node in three has its data disk nearly full (the demo's disk_full).
        full = node.seed % 3 == 0
        quota = 50 * GIB_KIB
        used = int(quota * (0.95 if full else 0.42))
        return [
            ("overlay", "overlay", "/", 30 * GIB_KIB, int(30 * GIB_KIB * 0.61)),
            ("tmpfs", "tmpfs", "/dev", 65536, 0),
            ("shm", "tmpfs", "/dev/shm", shm, int(shm * 0.03)),
            ("/dev/md0", "xfs", "/root/autodl-tmp", quota, used),
            ("autodl-fs", "fuse.juicefs", "/root/autodl-fs", 20 * GIB_KIB, 6 * GIB_KIB),
            ("/dev/nvme0n1p2", "ext4", "/etc/hosts", 1_921_725_720, 87_344_112),
        ]
    return [
        ("/dev/nvme0n1p2", "ext4", "/", 1_921_725_720, 87_344_112),
        ("tmpfs", "tmpfs", "/dev/shm", shm, int(shm * 0.01)),
        ("/dev/md0", "xfs", "/data", 7_501_000_000, 412_000_000),
        ("tmpfs", "tmpfs", "/run", 26_000_000, 2_900),
    ]


def df_all(node: SimNode) -> Answer:
    lines = ["Filesystem     Type     1024-blocks       Used  Available Capacity Mounted on"]
    for dev, kind, at, blocks, used in mounts(node):
        pct = -(-used * 100 // blocks) if blocks else 0
        lines.append(
            f"{dev:<14} {kind:<8} {blocks:>11} {used:>10} {blocks - used:>10} {pct:>7}% {at}"
        )
    return Answer("".join(line + "\n" for line in lines), "", 0)


def grep_files(node: SimNode, args: list[str], now: datetime) -> Answer:
    """`grep [-E] PATTERN FILE...` over the /proc files above."""
    flags = [a for a in args if a.startswith("-")]
    words = [a for a in args if not a.startswith("-")]
    if len(words) < 2 or not set(flags) <= {"-E", "-c", "-v"}:
        return Answer("", "grep: the simulator reads grep [-E] [-c] [-v] PATTERN FILE...\n", 2)
    try:
        pattern = re.compile(words[0])
    except re.error:
        return Answer("", "grep: Unmatched ( or \\(\n", 2)
    out, err, matched = [], [], False
    for path in words[1:]:
        text = proc_file(node, path, now)
        if text is None:
            err.append(f"grep: {path}: No such file or directory\n")
            continue
        keep = "-v" not in flags
        found = [ln + "\n" for ln in text.splitlines() if bool(pattern.search(ln)) == keep]
        matched = matched or bool(found)
        out += [f"{len(found)}\n"] if "-c" in flags else found
    status = 2 if err else 0 if matched else 1
    return Answer("".join(out), "".join(err), status)
