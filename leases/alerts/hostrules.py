"""The alert rules on a node's host beyond its GPUs (leases.core.host, read with the GPUs by
leases.telemetry.hoststats): a data disk, quota, root fs or /dev/shm nearly full
(`disk_full`), memory nearly gone (`ram_full`). A full data disk kills a training job at
its next checkpoint; a full /dev/shm kills its DataLoader workers and NCCL; a node out of
memory has its job killed by the OOM killer.

A reading that is not fresh neither raises nor clears (HOLD), as for the GPU readings."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from leases.alerts.alert import FRESH, Alert, AlertKind, Level, NodeFacts, make_alert
from leases.alerts.said import Said, call, joined, phrase, plain, say
from leases.config.sections import AlertsConfig
from leases.core.host import GIB, KIB, Mount, MountKind
from leases.core.i18n import N_
from leases.core.models import NodeHealth
from leases.core.severity import Severity
from leases.core.textsafe import visible

# An alert clears this many points under its threshold (no flapping at the line).
CLEAR_POINTS = 3.0
# Critical from this share used of a disk, or under this share of memory available.
DISK_CRITICAL_PCT = 98.0
RAM_CRITICAL_PCT = 2.0
_DISK_ACTION = {
    MountKind.SHM: N_(
        "free /dev/shm (stale torch_* or nccl-* files of dead jobs) or restart the"
        " container with a larger --shm-size; DataLoader workers and NCCL fail when it is full"
    ),
    MountKind.ROOT: N_(
        "free space on the root fs (pip and conda caches, ~/.cache, old"
        " checkpoints, logs) or move them to the data disk"
    ),
}
_DATA_ACTION = N_(
    "delete or move old checkpoints and data sets, or enlarge the disk (quota) at the"
    " provider before the job's next checkpoint fails"
)


def _mount(m: Mount) -> Said:
    """The disk's label (stored English, marked in leases.telemetry.hoststats: said in the
    language in use) and its path: "AutoDL data disk /root/autodl-tmp"."""
    path = plain(visible(m.path, 160))
    if not m.label:
        return path
    return joined(" ", phrase(visible(m.label, 80)), path)


def _gib(kib: int) -> str:
    return f"{kib * KIB / GIB:.1f}"


def host_rules(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    r = f.latest
    if r is None or r.host is None:
        return
    h = r.host
    name = visible(f.node.name)
    at = r.checked or now
    fresh = r.health is NodeHealth.OK and now - at <= FRESH
    when = (
        ""
        if fresh
        else say(
            N_(" when last read, {span} ago"), span=call("duration", (now - at).total_seconds())
        )
    )
    limit = config.disk_full_pct
    for m in h.mounts:
        if m.kind is MountKind.OTHER:
            continue
        pct = m.used_pct
        if pct < limit - CLEAR_POINTS:
            continue
        whole = m.used_kib + m.avail_kib
        yield make_alert(
            f,
            AlertKind.DISK_FULL,
            Severity.CRITICAL if pct >= DISK_CRITICAL_PCT else Severity.WARNING,
            say(
                N_("{name}: {mount} {used} of {whole} GiB, {pct} %{when} (alert at {limit} %)"),
                name=name,
                mount=_mount(m),
                used=_gib(m.used_kib),
                whole=_gib(whole),
                pct=f"{pct:.0f}",
                when=when,
                limit=f"{limit:.0f}",
            ),
            say(_DISK_ACTION.get(m.kind, _DATA_ACTION)),
            key=visible(m.path, 160),
            level=Level.RAISE if fresh and pct >= limit else Level.HOLD,
        )
    avail = h.mem_available_pct
    if avail is None or h.mem_total_kib is None or h.mem_available_kib is None:
        return
    floor = config.ram_free_pct
    if avail > floor + CLEAR_POINTS:
        return
    yield make_alert(
        f,
        AlertKind.RAM_FULL,
        Severity.CRITICAL if avail <= RAM_CRITICAL_PCT else Severity.WARNING,
        say(
            N_(
                "{name}: container memory {free} of {total} GiB available, {pct} %{when} (alert"
                " under {floor} %)"
            )
            if h.mem_cgroup
            else N_(
                "{name}: memory {free} of {total} GiB available, {pct} %{when} (alert"
                " under {floor} %)"
            ),
            name=name,
            free=_gib(h.mem_available_kib),
            total=_gib(h.mem_total_kib),
            pct=f"{avail:.0f}",
            when=when,
            floor=f"{floor:.0f}",
        ),
        say(
            N_(
                "the OOM killer ends the largest process next: fewer DataLoader workers, a"
                " smaller prefetch or in-memory cache, or a node with more memory"
            )
        ),
        level=Level.RAISE if fresh and avail <= floor else Level.HOLD,
    )
