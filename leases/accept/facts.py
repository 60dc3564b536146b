"""What the parsers in `leases.accept.parse` make of a node's tools' output: typed facts the
checks judge. A value the tool did not print, printed as N/A, or printed in a way the
parser could not read is None (or "") and named in `problems`: unknown, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leases.accept.parse._text import digits


@dataclass(frozen=True)
class QueryProcess:
    """A process `nvidia-smi -q` lists on a GPU."""

    pid: int | None
    type: str  # "C", "G", "C+G", "" when not printed
    name: str
    used_mib: int | None


@dataclass(frozen=True)
class GpuQuery:
    """One GPU of `nvidia-smi -q` (text) or `-q -x` (XML): what acceptance judges."""

    index: int | None = None  # position in the output (XML has no index: its order)
    name: str = ""  # "Product Name"
    bus_id: str = ""  # "00000000:18:00.0"
    pci_device_id: str = ""  # 4 lower-case hex digits of the device, "20b2" (from 0x20B210DE)
    uuid: str = ""
    serial: str = ""
    vbios: str = ""
    memory_total_mib: int | None = None  # FB Memory Usage / Total
    memory_used_mib: int | None = None
    memory_reserved_mib: int | None = None
    virtualization_mode: str = ""  # "None", "Pass-Through", "VGPU", "Host VGPU", ...
    vgpu_license: str = ""  # vGPU Software Licensed Product / License Status, if printed
    mig_current: str = ""  # "Enabled", "Disabled", "N/A"
    mig_pending: str = ""
    mig_devices: int = 0  # MIG devices listed under the GPU
    ecc_current: str = ""  # "Enabled", "Disabled", "N/A"
    ecc_uncorrected_volatile: int | None = None  # total uncorrectable since boot
    ecc_uncorrected_aggregate: int | None = None
    retired_sbe: int | None = None  # Retired Pages, single bit ECC
    retired_dbe: int | None = None  # double bit ECC
    retired_pending: str = ""  # "Yes"/"No"
    remapped_correctable: int | None = None  # Remapped Rows
    remapped_uncorrectable: int | None = None
    remap_pending: str = ""  # "Yes"/"No"
    remap_failure: str = ""  # "Yes"/"No"
    power_limit_w: float | None = None  # current (enforced) power limit
    default_power_limit_w: float | None = None
    max_power_limit_w: float | None = None
    # Clocks event (throttle) reasons reported Active, in the tool's words: "SW Power Cap"...
    throttle_active: tuple[str, ...] = ()
    pcie_gen_max: int | None = None
    pcie_gen_current: int | None = None
    pcie_width_max: int | None = None  # lanes: 16 for x16
    pcie_width_current: int | None = None
    persistence_mode: str = ""
    compute_mode: str = ""
    processes: tuple[QueryProcess, ...] = ()


@dataclass(frozen=True)
class SmiQuery:
    driver_version: str = ""
    cuda_version: str = ""
    attached_gpus: int | None = None
    gpus: tuple[GpuQuery, ...] = ()
    problems: tuple[str, ...] = ()  # what could not be read, in words (never raises)


@dataclass(frozen=True)
class Topology:
    """`nvidia-smi topo -m`: the matrix between devices (GPUs, NICs), their affinities."""

    devices: tuple[str, ...] = ()  # column order: "GPU0", ..., "NIC0", ... (as printed)
    # Cell (row device, column device) -> as printed, stripped: "X", "NV18", "PIX", "SYS"...
    cells: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)  # "GPU0" -> "0-47,96-143"
    numa_affinity: dict[str, str] = field(default_factory=dict)  # "GPU0" -> "0"
    nic_names: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_0"
    problems: tuple[str, ...] = ()

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d.startswith("GPU"))

    @property
    def nics(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if not d.startswith("GPU"))

    def nvlinks(self, a: str, b: str) -> int | None:
        """The number of bonded NVLinks between two devices (NV12 -> 12), None if the path
        is not NVLink or not printed."""
        cell = self.cells.get((a, b), "")
        if cell.startswith("NV") and digits(cell[2:]):
            return int(cell[2:])
        return None


@dataclass(frozen=True)
class NvLink:
    gpu: int
    link: int
    gbps: float | None  # GB/s as printed ("26.562 GB/s"); None when inactive
    active: bool


@dataclass(frozen=True)
class NvlinkStatus:
    """`nvidia-smi nvlink -s`: every link of every GPU."""

    links: tuple[NvLink, ...] = ()
    gpu_names: dict[int, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class IbPort:
    """One port of `ibstat`."""

    ca: str  # "mlx5_0"
    port: int
    state: str  # "Active", "Initializing", "Down"
    physical_state: str  # "LinkUp", "Polling", "Disabled"
    rate_gbps: int | None  # Rate: 400
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)


@dataclass(frozen=True)
class IbStat:
    ports: tuple[IbPort, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiagTest:
    name: str  # as dcgmi prints it: "Deployment", "PCIe", "Memory", "Diagnostic"...
    result: str  # "Pass", "Fail", "Warn", "Skip"
    detail: str = ""  # the Warning/Error lines under it


@dataclass(frozen=True)
class DcgmDiag:
    """`dcgmi diag -r N` (its table)."""

    tests: tuple[DiagTest, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Nvbandwidth:
    """nvbandwidth: for each testcase run, the per-GPU (or per-pair) figures and SUM."""

    # testcase name ("host_to_device_memcpy_ce") -> its "SUM" line in GB/s, if printed
    sums: dict[str, float] = field(default_factory=dict)
    # testcase name -> the smallest cell of its matrix in GB/s (the slowest GPU or pair)
    minimum: dict[str, float] = field(default_factory=dict)
    waived: tuple[str, ...] = ()  # testcases printed as "Waived"
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcclPerf:
    """nccl-tests' all_reduce_perf (or any *_perf): the rows and the average bus bandwidth."""

    # (size in bytes, out-of-place algbw GB/s, out-of-place busbw GB/s, #wrong)
    rows: tuple[tuple[int, float, float, int], ...] = ()
    avg_busbw_gbps: float | None = None  # "# Avg bus bandwidth    : 230.12"
    out_of_bounds: int | None = None  # "# Out of bounds values : 0 OK"
    problems: tuple[str, ...] = ()
