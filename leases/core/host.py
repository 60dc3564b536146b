"""A node beyond its GPUs: CPU, load, memory, disks and network as last read
(leases.telemetry.hoststats reads them; NodeStatus.host carries them).

Every figure is None when it was not read; `problems` names what could not be read. A
record round-trips through JSON (`host_record`, `host_from`) so the poller's latest status
keeps it in node_latest; a record that does not read back is "not read", never an error.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from leases.core.textsafe import visible

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
# Bounds on a record read back (the ledger is a file anyone may edit): no sane node comes
# near them, and a figure past them would overflow when turned into a float.
_MAX_INT = 2**63
_MAX_MOUNTS = 64
_MAX_PROBLEMS = 5
_PATH_SHOWN = 120
_TEXT_SHOWN = 200


def _num(v: object, kind: type) -> Any:
    """A figure as stored, or None when it is not one: a bool, text, a non-finite or
    negative number, an integer past _MAX_INT (never raises)."""
    if v is None or isinstance(v, bool):
        return None
    if kind is int and isinstance(v, int):
        return v if 0 <= v < _MAX_INT else None
    if kind is float and isinstance(v, int | float):
        try:
            f = float(v)
        except OverflowError:  # an int too large for a float
            return None
        return f if math.isfinite(f) and 0 <= f < _MAX_INT else None
    return None


def _text(v: object, max_len: int) -> str | None:
    return visible(v, max_len) if isinstance(v, str) else None


def _mount(m: object) -> Mount | None:
    """One stored mount, or None when any part of it does not read back."""
    if not isinstance(m, dict):
        return None
    path, fs_type = _text(m.get("path"), _PATH_SHOWN), _text(m.get("fs_type"), _TEXT_SHOWN)
    label = _text(m.get("label", ""), _TEXT_SHOWN)
    sizes = [_num(m.get(k), int) for k in ("total_kib", "used_kib", "avail_kib")]
    kind = m.get("kind", "other")
    total, used, avail = sizes
    if (
        not path
        or fs_type is None
        or label is None
        or total is None
        or used is None
        or avail is None
        or not isinstance(kind, str)
    ):
        return None
    try:
        mount_kind = MountKind(kind)
    except ValueError:
        return None
    return Mount(path, fs_type, total, used, avail, label, mount_kind)


def host_from(d: object) -> HostStats | None:
    """A record written by host_record, or None when it is not one (an old row: '{}').

    Never raises on what the ledger holds: a figure that does not read back (text, a
    non-finite or out-of-range number) is unknown, a mount that does not is left out, and
    texts are made safe to show again (leases.core.textsafe)."""
    if not isinstance(d, dict) or not d:
        return None
    stored = d.get("mounts", ())
    mounts = tuple(
        m
        for m in (
            _mount(x) for x in (stored if isinstance(stored, list | tuple) else ())[:_MAX_MOUNTS]
        )
        if m is not None
    )
    said = d.get("problems", ())
    problems = tuple(
        visible(p, _TEXT_SHOWN)
        for p in (said if isinstance(said, list | tuple) else ())[:_MAX_PROBLEMS]
        if isinstance(p, str)
    )
    ints = {k: _num(d.get(k), int) for k in _INTS}
    floats = {k: _num(d.get(k), float) for k in _FLOATS}
    cgroup = d.get("mem_cgroup") is True
    return HostStats(**ints, **floats, mounts=mounts, problems=problems, mem_cgroup=cgroup)
