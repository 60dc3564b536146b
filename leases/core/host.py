"""A node beyond its GPUs: CPU, load, memory, disks and network as last read
(leases.telemetry.hoststats reads them; NodeStatus.host carries them).

Every figure is None when it was not read; `problems` names what could not be read. A
record round-trips through JSON (`host_record`, `host_from`) so the poller's latest status
keeps it in node_latest; a record that does not read back is "not read", never an error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

KIB = 1024
GIB = 1024**3


class MountKind(StrEnum):
    """What a mount is to the lab: its data disk (or quota), the root fs, shared memory."""

    DATA = "data"
    ROOT = "root"
    SHM = "shm"
    OTHER = "other"


@dataclass(frozen=True)
class Mount:
    """One mounted file system as df sees it (a project quota shows as its size)."""

    path: str  # as the node printed it, made safe to show (leases.core.textsafe)
    fs_type: str
    total_kib: int
    used_kib: int
    avail_kib: int
    label: str = ""  # what it is on its platform ("AutoDL data disk"); "" when not known
    kind: MountKind = MountKind.OTHER

    @property
    def used_pct(self) -> float:
        """Used of what the user can write (used + available, as df's Capacity counts)."""
        whole = self.used_kib + self.avail_kib
        return 100.0 * self.used_kib / whole if whole > 0 else 0.0

    @property
    def name(self) -> str:
        """The label and the path ("AutoDL data disk /root/autodl-tmp"), or the path."""
        return f"{self.label} {self.path}" if self.label else self.path


@dataclass(frozen=True)
class HostStats:
    """The node's host figures at one reading."""

    cpu_pct: float | None = None  # busy share of all CPUs since the reading before
    cpus: int | None = None
    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    mem_total_kib: int | None = None
    mem_available_kib: int | None = None
    swap_total_kib: int | None = None
    swap_free_kib: int | None = None
    mounts: tuple[Mount, ...] = ()
    net_rx_bps: float | None = None  # bytes per second, all interfaces but lo and bridges
    net_tx_bps: float | None = None
    problems: tuple[str, ...] = ()
    # Memory is the container's cgroup limit and working set (tighter than /proc/meminfo).
    mem_cgroup: bool = False

    @property
    def mem_used_pct(self) -> float | None:
        if not self.mem_total_kib or self.mem_available_kib is None:
            return None
        return 100.0 * (self.mem_total_kib - self.mem_available_kib) / self.mem_total_kib

    @property
    def mem_available_pct(self) -> float | None:
        used = self.mem_used_pct
        return None if used is None else 100.0 - used

    @property
    def fullest_data(self) -> Mount | None:
        """The fullest data disk (or quota), else the root fs; None when no disk was read."""
        data = [m for m in self.mounts if m.kind is MountKind.DATA]
        pool = data or [m for m in self.mounts if m.kind is MountKind.ROOT]
        return max(pool, key=lambda m: m.used_pct, default=None)

    @property
    def shm(self) -> Mount | None:
        return next((m for m in self.mounts if m.kind is MountKind.SHM), None)


def host_record(h: HostStats) -> dict[str, Any]:
    """JSON-ready, for node_latest and `--json`."""
    return asdict(h)


_INTS = ("cpus", "mem_total_kib", "mem_available_kib", "swap_total_kib", "swap_free_kib")
_FLOATS = ("cpu_pct", "load1", "load5", "load15", "net_rx_bps", "net_tx_bps")


def _num(v: object, kind: type) -> Any:
    if v is None or isinstance(v, bool):
        return None
    if kind is int and isinstance(v, int):
        return v
    if kind is float and isinstance(v, int | float):
        return float(v)
    return None


def host_from(d: object) -> HostStats | None:
    """A record written by host_record, or None when it is not one (an old row: '{}')."""
    if not isinstance(d, dict) or not d:
        return None
    try:
        mounts = tuple(
            Mount(
                str(m["path"]),
                str(m["fs_type"]),
                int(m["total_kib"]),
                int(m["used_kib"]),
                int(m["avail_kib"]),
                str(m.get("label", "")),
                MountKind(m.get("kind", "other")),
            )
            for m in d.get("mounts", ())
        )
        problems = tuple(str(p) for p in d.get("problems", ()))
    except (KeyError, TypeError, ValueError):
        return None
    ints = {k: _num(d.get(k), int) for k in _INTS}
    floats = {k: _num(d.get(k), float) for k in _FLOATS}
    cgroup = d.get("mem_cgroup") is True
    return HostStats(**ints, **floats, mounts=mounts, problems=problems, mem_cgroup=cgroup)
