"""The node's host beyond its GPUs as the node screen and the fleet table show it, computed
without Textual: CPU, load per core, memory, each disk with its label and a bar, /dev/shm,
network in and out (leases.core.host). Mount paths were made safe when read
(leases.telemetry.hoststats); they are cut again here to fit."""

from __future__ import annotations

from rich.cells import cell_len

from leases.core.host import GIB, KIB, HostStats, Mount, MountKind
from leases.core.i18n import _
from leases.core.textsafe import visible

BAR_WIDTH = 12
_NAME_WIDTH = 34


def bar(pct: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, filled to pct (0-100)."""
    filled = round(max(0.0, min(100.0, pct)) / 100 * width)
    return "█" * filled + "░" * (width - filled)


def pad(text: str, width: int) -> str:
    """text padded to `width` terminal cells (a Chinese character is two)."""
    return text + " " * max(0, width - cell_len(text))


def _gib(kib: int) -> str:
    return f"{kib * KIB / GIB:,.1f}"


def rate(bps: float | None) -> str:
    """Bytes per second, in the unit that reads best."""
    if bps is None:
        return "?"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bps >= size:
            return f"{bps / size:.1f} {unit}"
    return f"{bps:.0f} B/s"


def disk_name(m: Mount) -> str:
    """The label in the language in use (stored in English: a marked msgid) and the path."""
    return f"{_(m.label)} {m.path}" if m.label else m.path


def _disk_line(m: Mount) -> str:
    name = visible(disk_name(m), _NAME_WIDTH)
    whole = m.used_kib + m.avail_kib
    return (
        f"{pad(name, _NAME_WIDTH)} {bar(m.used_pct)} {m.used_pct:3.0f} %"
        f"  {_gib(m.used_kib)}/{_gib(whole)} GiB  {visible(m.fs_type, 16)}"
    )


def host_lines(h: HostStats | None) -> list[str]:
    """The host section of the node screen; one line when nothing was read."""
    if h is None:
        return [_("host: not read yet (CPU, memory, disks and network come with the GPUs)")]
    cpu = "?" if h.cpu_pct is None else f"{h.cpu_pct:.0f} %"
    cores = "?" if h.cpus is None else str(h.cpus)
    # Each figure on its own: a record may hold load1 without load5 (leases.core.host).
    loads = (h.load1, h.load5, h.load15)
    load = " ".join("?" if v is None else f"{v:.2f}" for v in loads)
    load = "?" if all(v is None for v in loads) else load
    lines = [_("CPU {cpu} of {cores} cores · load {load}").format(cpu=cpu, cores=cores, load=load)]
    if h.mem_total_kib and h.mem_available_kib is not None:
        used = h.mem_total_kib - h.mem_available_kib
        pct = h.mem_used_pct or 0.0
        swap = ""
        if h.swap_total_kib:
            free = h.swap_free_kib
            swapped = "?" if free is None else _gib(h.swap_total_kib - free)
            swap = " · " + _("swap {used} GiB used").format(used=swapped)
        label = _("memory (container limit)") if h.mem_cgroup else _("memory")
        lines.append(
            f"{pad(label, _NAME_WIDTH)}"
            f" {bar(pct)} {pct:3.0f} %"
            f"  {_gib(used)}/{_gib(h.mem_total_kib)} GiB{swap}"
        )
    else:
        lines.append(_("memory: ?"))
    order = {MountKind.DATA: 0, MountKind.ROOT: 1, MountKind.SHM: 2, MountKind.OTHER: 3}
    for m in sorted(h.mounts, key=lambda m: (order[m.kind], m.path)):
        lines.append(_disk_line(m))
    if not h.mounts:
        lines.append(_("disks: ?"))
    lines.append(
        _("network in {rx} · out {tx}").format(rx=rate(h.net_rx_bps), tx=rate(h.net_tx_bps))
    )
    if h.problems:
        lines.append(_("not read: {problems}").format(problems=visible("; ".join(h.problems), 300)))
    return lines
