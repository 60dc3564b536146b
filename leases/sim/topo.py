"""`nvidia-smi topo -m` as a real box of each kind prints it (tab-separated, legend below)."""

from __future__ import annotations

from leases.sim.gpu import SimNode
from leases.sim.specs import SPECS
from leases.sim.traps import Trap

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""  # noqa: E501

# DGX-1 with V100: the hybrid cube mesh, some pairs with two links, some with one, some none.
_DGX1 = (
    "X NV1 NV1 NV2 NV2 SYS SYS SYS",
    "NV1 X NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X NV2 SYS SYS NV1 SYS",
    "NV2 NV1 NV2 X SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X NV1 NV1 NV2",
    "SYS NV2 SYS SYS NV1 X NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X NV2",
    "SYS SYS SYS NV1 NV2 NV1 NV2 X",
)

# Two sockets: host CPUs per NUMA node, by GPU model (what such boxes usually carry).
_CPUS = {
    "H100": ("0-47,96-143", "48-95,144-191"),
    "H800": ("0-47,96-143", "48-95,144-191"),
    "A100": ("0-31,64-95", "32-63,96-127"),
    "A800": ("0-31,64-95", "32-63,96-127"),
    "RTX 4090": ("0-27,56-83", "28-55,84-111"),
    "A10": ("0-15,32-47", "16-31,48-63"),
    "V100": ("0-19,40-59", "20-39,60-79"),
}


def _pcie(a: int, b: int) -> str:
    """PCIe distance between two devices numbered in slot order, two per switch."""
    if a // 2 == b // 2:
        return "PIX"
    return "NODE" if a // 4 == b // 4 else "SYS"


def topo_matrix(node: SimNode) -> str:
    model = node.model
    n = node.count
    # A box sold with NVLink that has PCIe only (Trap.PCIE_ONLY) has no NVLink and no NICs.
    nvlink = "" if Trap.PCIE_ONLY in node.traps else model.nvlink
    # Only SXM boxes carry the InfiniBand cards, one per two GPUs.
    nics = n // 2 if nvlink and n == 8 else 0
    # Trap.DEAD_LINK: GPU 0 has one link down, so its bonds count one fewer.
    dead = Trap.DEAD_LINK in node.traps and nvlink.startswith("NV") and nvlink[2:].isdigit()
    cpus = _CPUS[model.key]
    two_sockets = n >= 4

    def gpu_link(a: int, b: int) -> str:
        if a == b:
            return " X "
        if nvlink == "DGX1" and n == 8:
            return _DGX1[a].split()[b]
        if dead and 0 in (a, b):
            return f"NV{SPECS[model.key].nvlinks - 1}"
        if nvlink and nvlink != "DGX1":
            return nvlink
        return _pcie(a, b) if two_sockets else "PHB"

    def nic_link(gpu: int, nic: int) -> str:
        return "PIX" if gpu // 2 == nic else ("NODE" if gpu // 4 == nic // 2 else "SYS")

    header = [f"GPU{i}" for i in range(n)] + [f"NIC{i}" for i in range(nics)]
    lines = ["\t" + "\t".join([*header, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for a in range(n):
        numa = a // 4 if two_sockets else 0
        cells = [gpu_link(a, b) for b in range(n)] + [nic_link(a, c) for c in range(nics)]
        lines.append("\t".join([f"GPU{a}", *cells, cpus[numa], str(numa), "", "N/A"]))
    for c in range(nics):
        cells = [nic_link(g, c) for g in range(n)]
        cells += [" X " if c == d else ("NODE" if c // 2 == d // 2 else "SYS") for d in range(nics)]
        lines.append("\t".join([f"NIC{c}", *cells]))
    out = "\n".join(lines) + "\n" + LEGEND
    if nics:
        out += "\nNIC Legend:\n\n" + "".join(f"  NIC{i}: mlx5_{i}\n" for i in range(nics))
    return out
