"""`nvidia-smi -q` (text) -> `SmiQuery`.

The text is a tree drawn by indentation: a line "Key : value" or a section header "Key",
children indented further ("GPU 00000000:18:00.0" at the margin starts a GPU). Field names
changed across driver generations ("Clocks Throttle Reasons" became "Clocks Event Reasons"
in 535/550, "Power Readings" became "GPU Power Readings", "Ecc Mode" became "ECC Mode"):
names are compared without case and each fact is looked for under every name it had.
Never raises: what could not be read is None or "" and, where it matters, in `problems`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from leases.accept.facts import GpuQuery, QueryProcess, SmiQuery
from leases.accept.parse import values as v
from leases.accept.words import _

# Bounds on what is read: a real 8-GPU `-q` is ~85 KB and 2,000 lines.
MAX_CHARS = 4 * 1024 * 1024
MAX_LINES = 100_000
MAX_LINE = 1000
_GPU = re.compile(r"GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")


@dataclass
class Node:
    key: str  # as printed, stripped
    value: str | None  # None for a section header
    children: list[Node] = field(default_factory=list)

    def child(self, *names: str) -> Node | None:
        """The first child named any of `names` (without case)."""
        wanted = {n.lower() for n in names}
        for c in self.children:
            if c.key.lower() in wanted:
                return c
        return None

    def get(self, *path: str) -> str | None:
        """The value at a path of names; a name may list alternatives with "|"."""
        node: Node | None = self
        for step in path:
            if node is None:
                return None
            node = node.child(*step.split("|"))
        return None if node is None else node.value

    def walk(self) -> Iterator[Node]:
        """Every node below, in document order (iterative: a hostile node may nest a
        thousand levels deep)."""
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def _split(line: str) -> tuple[str, str | None]:
    if ":" not in line:
        return line.strip(), None
    key, _sep, value = line.partition(":")
    return key.strip(), value.strip()


def tree(text: str) -> tuple[Node, list[str]]:
    """The indentation tree of the text, and problems met building it."""
    problems: list[str] = []
    if len(text) > MAX_CHARS:
        problems.append(
            _("output longer than {count} characters: the rest was not read").format(
                count=MAX_CHARS
            )
        )
        text = text[:MAX_CHARS]
    root = Node("", None)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for number, raw in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            problems.append(
                _("more than {count} lines: the rest was not read").format(count=MAX_LINES)
            )
            break
        line = raw[:MAX_LINE].replace("\t", "    ").rstrip()
        if not line.strip() or line.lstrip().startswith("==="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        gpu = _GPU.fullmatch(line.strip()) if indent == 0 else None
        # "GPU 00000000:18:00.0" starts a GPU: its bus id is the section's value.
        key, value = ("GPU", gpu.group(1)) if gpu else _split(line)
        while stack[-1][0] >= indent:
            stack.pop()
        node = Node(key, value)
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root, problems


def _throttle(gpu: Node) -> tuple[str, ...]:
    section = gpu.child("Clocks Event Reasons", "Clocks Throttle Reasons", "Clocks Throttle")
    if section is None:
        return ()
    return tuple(
        v.text(n.key, 64)
        for n in section.walk()
        if n.value is not None and n.value.strip().lower() == "active"
    )[:32]


def _mig_devices(gpu: Node) -> int:
    section = gpu.child("MIG Devices")
    if section is None:
        return 0
    devices = [c for c in section.children if c.key.lower().startswith("mig device")]
    if devices:
        return len(devices)
    # Some layouts list each device's fields directly: one "Index" line per device.
    return sum(1 for c in section.walk() if c.key.lower() == "index")


def _uncorrectable(section: Node | None) -> int | None:
    """Uncorrectable ECC errors of one period (Volatile or Aggregate), any generation."""
    if section is None:
        return None
    double = section.child("Double Bit")
    if double is not None:  # up to 470: Single Bit / Double Bit, each with a Total
        return v.whole(double.get("Total"))
    found = [
        v.whole(c.value)
        for c in section.children
        if "uncorrectable" in c.key.lower() and c.value is not None
    ]
    return v.add(*found)


def _processes(gpu: Node) -> tuple[QueryProcess, ...]:
    section = gpu.child("Processes")
    if section is None:
        return ()
    out: list[dict[str, str]] = []
    for node in section.walk():
        key = node.key.lower()
        if key == "process id":
            out.append({"pid": node.value or ""})
        elif out and key in ("type", "name", "process name", "used gpu memory"):
            out[-1].setdefault(key, node.value or "")
        if len(out) > v.MAX_PROCESSES:
            break
    return tuple(
        QueryProcess(
            pid=v.whole(p["pid"]),
            type=v.text(p.get("type"), 8),
            name=v.text(p.get("name") or p.get("process name"), 4096),
            used_mib=v.whole(p.get("used gpu memory")),
        )
        for p in out[: v.MAX_PROCESSES]
    )


def _retired_pending(section: Node | None) -> str:
    if section is None:
        return ""
    for c in section.children:
        if c.key.lower().startswith("pending"):
            return v.yes_no(c.value)
    return ""


def gpu_of(gpu: Node, index: int) -> GpuQuery:
    """One "GPU ..." section as facts."""
    fb = gpu.child("FB Memory Usage")
    pci = gpu.child("PCI")
    link = pci.child("GPU Link Info") if pci else None
    power = gpu.child("GPU Power Readings", "Power Readings")
    ecc = gpu.child("ECC Errors")
    retired = gpu.child("Retired Pages")
    remap = gpu.child("Remapped Rows")
    licence = gpu.child("vGPU Software Licensed Product")
    limit = None
    if power is not None:
        limit = power.get("Current Power Limit") or power.get("Enforced Power Limit")
        limit = limit or power.get("Power Limit")
    return GpuQuery(
        index=index,
        name=v.text(gpu.get("Product Name")),
        bus_id=v.text(gpu.value) or v.text(pci.get("Bus Id") if pci else None),
        pci_device_id=v.device_id(pci.get("Device Id") if pci else None),
        uuid=v.text(gpu.get("GPU UUID")),
        serial=v.text(gpu.get("Serial Number")),
        vbios=v.text(gpu.get("VBIOS Version")),
        memory_total_mib=v.whole(fb.get("Total")) if fb else None,
        memory_used_mib=v.whole(fb.get("Used")) if fb else None,
        memory_reserved_mib=v.whole(fb.get("Reserved")) if fb else None,
        virtualization_mode=v.state(gpu.get("GPU Virtualization Mode", "Virtualization Mode")),
        vgpu_license=v.text(
            (licence.get("License Status") or licence.value or "") if licence else ""
        ),
        mig_current=v.state(gpu.get("MIG Mode", "Current")),
        mig_pending=v.state(gpu.get("MIG Mode", "Pending")),
        mig_devices=_mig_devices(gpu),
        ecc_current=v.state(gpu.get("ECC Mode|Ecc Mode", "Current")),
        ecc_uncorrected_volatile=_uncorrectable(ecc.child("Volatile") if ecc else None),
        ecc_uncorrected_aggregate=_uncorrectable(ecc.child("Aggregate") if ecc else None),
        retired_sbe=v.whole(retired.get("Single Bit ECC")) if retired else None,
        retired_dbe=v.whole(retired.get("Double Bit ECC")) if retired else None,
        retired_pending=_retired_pending(retired),
        remapped_correctable=v.whole(remap.get("Correctable Error")) if remap else None,
        remapped_uncorrectable=v.whole(remap.get("Uncorrectable Error")) if remap else None,
        remap_pending=v.yes_no(remap.get("Pending")) if remap else "",
        remap_failure=v.yes_no(remap.get("Remapping Failure Occurred")) if remap else "",
        power_limit_w=v.number(limit),
        default_power_limit_w=v.number(power.get("Default Power Limit")) if power else None,
        max_power_limit_w=v.number(power.get("Max Power Limit")) if power else None,
        throttle_active=_throttle(gpu),
        pcie_gen_max=v.whole(link.get("PCIe Generation", "Max")) if link else None,
        pcie_gen_current=v.whole(link.get("PCIe Generation", "Current")) if link else None,
        pcie_width_max=v.whole(link.get("Link Width", "Max")) if link else None,
        pcie_width_current=v.whole(link.get("Link Width", "Current")) if link else None,
        persistence_mode=v.state(gpu.get("Persistence Mode")),
        compute_mode=v.state(gpu.get("Compute Mode")),
        processes=_processes(gpu),
    )


def parse_q(text: str) -> SmiQuery:
    """`nvidia-smi -q` output as facts; never raises."""
    root, problems = tree(text)
    gpus = [c for c in root.children if c.key == "GPU"]
    if len(gpus) > v.MAX_GPUS:
        problems.append(
            _("more than {count} GPUs listed: the rest were not read").format(count=v.MAX_GPUS)
        )
        gpus = gpus[: v.MAX_GPUS]
    facts = tuple(gpu_of(g, i) for i, g in enumerate(gpus))
    attached = v.whole(root.get("Attached GPUs"))
    if not facts:
        problems.append(_("no GPU section found in the output of nvidia-smi -q"))
    for g in facts:
        if g.memory_total_mib is None:
            problems.append(
                _("GPU {gpu}: no FB Memory Usage total could be read").format(gpu=g.index)
            )
    return SmiQuery(
        driver_version=v.text(root.get("Driver Version"), 64),
        cuda_version=v.text(root.get("CUDA Version"), 64),
        attached_gpus=attached,
        gpus=facts,
        problems=tuple(problems),
    )
