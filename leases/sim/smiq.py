"""`nvidia-smi -q` (text) and `-q -x` (XML), `nvlink -s`, `-L` with MIG devices, and the
extra `--query-gpu` fields acceptance reads, as driver 550 prints them.

One tree per GPU is rendered both ways: each entry is (text label, XML tag, value or
children); an empty label is XML only, an empty tag text only, a tag with "/" nests.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from xml.sax.saxutils import escape

from leases.sim.gpu import GpuReading, SimGpu, SimNode, readings
from leases.sim.output import NA, Answer
from leases.sim.specs import SPECS, ModelSpec
from leases.sim.traps import Trap

_NODE_TZ = timezone(timedelta(hours=8))
CUDA_VERSION = "12.4"
LICENSE = "NVIDIA Virtual Compute Server"
UNLICENSED = "Unlicensed (Restricted)"
_MIG_PROFILE = "3g.40gb"
_MIG_SLICE_MIB = 40192

Entry = tuple[str, str, "str | list[Entry]"]
_Getter = Callable[[GpuReading, SimNode, datetime], str]


def spec(gpu: SimGpu) -> ModelSpec:
    return SPECS[gpu.model.key]


def mig_on(node: SimNode) -> bool:
    return Trap.MIG in node.traps and node.model.mig_capable


def pcie_gen(r: GpuReading) -> int:
    """The link trains down at idle (`pcie.link.gen.gpucurrent`); max under load."""
    return spec(r.gpu).pcie_gen if r.pstate == "P0" else 1


# Fields of `--query-gpu` beyond the poller's (commands._FIELDS takes these in).
EXTRA_FIELDS: dict[str, tuple[str, _Getter]] = {
    "pci.device_id": ("", lambda r, n, t: f"0x{spec(r.gpu).device_id}10DE"),
    "power.default_limit": ("W", lambda r, n, t: f"{r.gpu.model.power_limit_w:.2f}"),
    "pcie.link.gen.max": ("", lambda r, n, t: str(spec(r.gpu).pcie_gen)),
    "pcie.link.gen.gpucurrent": ("", lambda r, n, t: str(pcie_gen(r))),
    "pcie.link.gen.current": ("", lambda r, n, t: str(pcie_gen(r))),
    "pcie.link.width.max": ("", lambda r, n, t: "16"),
    "pcie.link.width.current": ("", lambda r, n, t: "16"),
    "ecc.mode.current": ("", lambda r, n, t: "Enabled" if r.gpu.model.ecc else NA),
    "mig.mode.current": (
        "",
        lambda r, n, t: ("Enabled" if mig_on(n) else "Disabled") if r.gpu.model.mig_capable else NA,
    ),
}


def _mig_uuid(gpu: SimGpu, i: int) -> str:
    rng = random.Random(f"mig/{gpu.uuid}/{i}")
    return f"MIG-{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def list_gpus(node: SimNode, reads: tuple[GpuReading, ...]) -> str:
    lines = []
    for r in reads:
        lines.append(f"GPU {r.gpu.index}: {r.gpu.name} (UUID: {r.gpu.uuid})")
        if mig_on(node):
            lines += [f"  MIG {_MIG_PROFILE}     Device  {i}: (UUID: {_mig_uuid(r.gpu, i)})"
                      for i in range(2)]  # fmt: skip
    return "".join(line + "\n" for line in lines)


def nvlink_status(node: SimNode, reads: tuple[GpuReading, ...]) -> str:
    """`nvidia-smi nvlink -s`: each GPU, then each link's speed or <inactive>."""
    lines = []
    for r in reads:
        lines.append(f"GPU {r.gpu.index}: {r.gpu.name} (UUID: {r.gpu.uuid})")
        s = spec(r.gpu)
        if Trap.PCIE_ONLY in node.traps or not s.nvlinks:
            continue
        for link in range(s.nvlinks):
            speed = f"{s.link_gbs:.3f} GB/s"
            if Trap.DEAD_LINK in node.traps and r.gpu.index == 0 and link == 3:
                speed = "<inactive>"
            elif Trap.DEAD_LINK in node.traps and r.gpu.index == 0 and link == 5:
                speed = f"{s.link_gbs / 2:.3f} GB/s"
            lines.append(f"\t Link {link}: {speed}")
    return "".join(line + "\n" for line in lines)


def _reasons(throttle: str) -> list[Entry]:
    bits = int(throttle, 16)

    def on(mask: int) -> str:
        return "Active" if bits & mask else "Not Active"

    t = "clocks_event_reason_"
    return [
        ("Idle", t + "gpu_idle", on(0x1)),
        ("Applications Clocks Setting", t + "applications_clocks_setting", on(0x2)),
        ("SW Power Cap", t + "sw_power_cap", on(0x4)),
        ("HW Slowdown", t + "hw_slowdown", on(0x8)),
        ("    HW Thermal Slowdown", t + "hw_thermal_slowdown", on(0x40)),
        ("    HW Power Brake Slowdown", t + "hw_power_brake_slowdown", on(0x80)),
        ("Sync Boost", t + "sync_boost", on(0x10)),
        ("SW Thermal Slowdown", t + "sw_thermal_slowdown", on(0x20)),
        ("Display Clock Setting", t + "display_clocks_setting", on(0x100)),
    ]


def _memory_health(node: SimNode, r: GpuReading) -> list[Entry]:
    m, bad = r.gpu.model, Trap.REMAPPED_ROWS in node.traps and r.gpu.index == 0
    ecc = "0" if m.ecc else "N/A"
    counts: list[Entry] = [
        ("SRAM Correctable", "sram_correctable", ecc),
        ("SRAM Uncorrectable Parity", "sram_uncorrectable_parity", ecc),
        ("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded", ecc),
        ("DRAM Correctable", "dram_correctable", ecc),
        ("DRAM Uncorrectable", "dram_uncorrectable", "7" if bad else ecc),
    ]
    pages = m.key == "V100"  # Volta retires pages; Ampere and later remap rows
    dbe = "64" if bad and pages else ("0" if pages else "N/A")
    pending = ("Yes" if bad else "No") if pages else "N/A"
    retired: list[Entry] = [
        ("Single Bit ECC", "multiple_single_bit_retirement/retired_count", "0" if pages else "N/A"),
        ("Double Bit ECC", "double_bit_retirement/retired_count", dbe),
        ("Pending Page Blacklist", "pending_blacklist", pending),
    ]  # fmt: skip
    remaps: str | list[Entry] = "N/A"
    if m.ecc and not pages:
        hist = ("0", "0", "0", "0", "640") if bad else ("640", "0", "0", "0", "0")
        remaps = [
            ("Correctable Error", "remapped_row_corr", "0"),
            ("Uncorrectable Error", "remapped_row_unc", "512" if bad else "0"),
            ("Pending", "remapped_row_pending", "No"),
            ("Remapping Failure Occurred", "remapped_row_failure", "Yes" if bad else "No"),
            ("Bank Remap Availability Histogram", "row_remapper_histogram", [
                (label, f"row_remapper_histogram_{label.lower()}", f"{n} bank(s)")
                for label, n in zip(("Max", "High", "Partial", "Low", "None"), hist, strict=True)
            ]),
        ]  # fmt: skip
    return [
        ("ECC Mode", "ecc_mode", [
            ("Current", "current_ecc", "Enabled" if m.ecc else "N/A"),
            ("Pending", "pending_ecc", "Enabled" if m.ecc else "N/A"),
        ]),
        ("ECC Errors", "ecc_errors", [("Volatile", "volatile", counts),
                                      ("Aggregate", "aggregate", counts)]),
        ("Retired Pages", "retired_pages", retired),
        ("Remapped Rows", "remapped_rows", remaps),
    ]  # fmt: skip


def _mig(node: SimNode, r: GpuReading) -> list[Entry]:
    capable = r.gpu.model.mig_capable
    mode = ("Enabled" if mig_on(node) else "Disabled") if capable else "N/A"
    devices: str | list[Entry] = "None"
    if mig_on(node):
        devices = [("MIG Device", "mig_device", [
            ("Index", "index", str(i)),
            ("GPU Instance ID", "gpu_instance_id", str(1 + i)),
            ("Compute Instance ID", "compute_instance_id", "0"),
            ("FB Memory Usage", "fb_memory_usage", [
                ("Total", "total", f"{_MIG_SLICE_MIB} MiB"),
                ("Reserved", "reserved", "0 MiB"),
                ("Used", "used", "37 MiB"),
                ("Free", "free", f"{_MIG_SLICE_MIB - 37} MiB"),
            ]),
        ]) for i in range(2)]  # fmt: skip
    return [
        ("MIG Mode", "mig_mode", [("Current", "current_mig", mode),
                                  ("Pending", "pending_mig", mode)]),
        ("MIG Devices", "mig_devices", devices),
    ]  # fmt: skip


def _gpu(node: SimNode, r: GpuReading) -> list[Entry]:
    g, m, s = r.gpu, r.gpu.model, spec(r.gpu)
    vgpu = Trap.VGPU in node.traps
    bus = g.bus_id.split(":")[1]
    total, used = g.memory_total_mib, r.mem_used_mib
    reserved = 0 if Trap.HAMI in node.traps else 328
    gen = str(pcie_gen(r))
    procs = [(p, "C") for p in (*r.processes, *r.foreign)]
    virt: list[Entry] = [
        ("Virtualization Mode", "virtualization_mode", "VGPU" if vgpu else "None"),
        ("Host VGPU Mode", "host_vgpu_mode", "N/A"),
        ("vGPU Heterogeneous Mode", "vgpu_heterogeneous_mode", "N/A"),
    ]
    out: list[Entry] = [
        ("Product Name", "product_name", g.name),
        ("Product Brand", "product_brand", "GeForce" if not m.datacenter else "NVIDIA"),
        ("Product Architecture", "product_architecture", s.architecture),
        ("Display Mode", "display_mode", "Disabled"),
        ("Persistence Mode", "persistence_mode", "Enabled" if m.datacenter else "Disabled"),
        ("Addressing Mode", "addressing_mode", "None"),
        *_mig(node, r),
        ("Accounting Mode", "accounting_mode", "Disabled"),
        ("GPU UUID", "uuid", g.uuid),
        ("Minor Number", "minor_number", str(g.index)),
        ("VBIOS Version", "vbios_version", s.vbios),
        ("MultiGPU Board", "multigpu_board", "No"),
        ("GPU Virtualization Mode", "gpu_virtualization_mode", virt),
    ]
    if vgpu:
        out.append(("vGPU Software Licensed Product", "vgpu_software_licensed_product", [
            ("Product Name", "licensed_product_name", LICENSE),
            ("License Status", "license_status", UNLICENSED),
        ]))  # fmt: skip
    out += [
        ("PCI", "pci", [
            ("Bus", "pci_bus", f"0x{bus}"),
            ("Device", "pci_device", "0x00"),
            ("Domain", "pci_domain", "0x0000"),
            ("Device Id", "pci_device_id", f"0x{s.device_id}10DE"),
            ("Bus Id", "pci_bus_id", g.bus_id),
            ("GPU Link Info", "pci_gpu_link_info", [
                ("PCIe Generation", "pcie_gen", [
                    ("Max", "max_link_gen", str(s.pcie_gen)),
                    ("Current", "current_link_gen", gen),
                    ("Device Current", "device_current_link_gen", gen),
                    ("Device Max", "max_device_link_gen", str(s.pcie_gen)),
                    ("Host Max", "max_host_link_gen", str(s.pcie_gen)),
                ]),
                ("Link Width", "link_widths", [
                    ("Max", "max_link_width", "16x"),
                    ("Current", "current_link_width", "16x"),
                ]),
            ]),
            ("Replays Since Reset", "replay_counter", "0"),
            ("Replay Number Rollovers", "replay_rollover_counter", "0"),
        ]),
        ("Fan Speed", "fan_speed", "N/A" if r.fan_pct is None else f"{r.fan_pct} %"),
        ("Performance State", "performance_state", r.pstate),
        ("Clocks Event Reasons", "clocks_event_reasons", _reasons(r.throttle)),
        ("FB Memory Usage", "fb_memory_usage", [
            ("Total", "total", f"{total} MiB"),
            ("Reserved", "reserved", f"{reserved} MiB"),
            ("Used", "used", f"{used} MiB"),
            ("Free", "free", f"{max(total - reserved - used, 0)} MiB"),
        ]),
        ("Compute Mode", "compute_mode", "Default"),
        ("Utilization", "utilization", [
            ("Gpu", "gpu_util", f"{r.util_gpu} %"),
            ("Memory", "memory_util", f"{r.util_mem} %"),
        ]),
        *_memory_health(node, r),
        ("Temperature", "temperature", [("GPU Current Temp", "gpu_temp", f"{r.temp_c} C")]),
        ("GPU Power Readings", "gpu_power_readings", [
            ("Power Draw", "power_draw", f"{r.power_w:.2f} W"),
            ("Current Power Limit", "current_power_limit", f"{g.power_limit_w:.2f} W"),
            ("Requested Power Limit", "requested_power_limit", f"{g.power_limit_w:.2f} W"),
            ("Default Power Limit", "default_power_limit", f"{m.power_limit_w:.2f} W"),
            ("Min Power Limit", "min_power_limit", f"{s.min_power_w:.2f} W"),
            ("Max Power Limit", "max_power_limit", f"{m.power_limit_w:.2f} W"),
        ]),
        ("Clocks", "clocks", [
            ("Graphics", "graphics_clock", f"{r.sm_clock_mhz} MHz"),
            ("SM", "sm_clock", f"{r.sm_clock_mhz} MHz"),
        ]),
        ("Max Clocks", "max_clocks", [("SM", "sm_clock", f"{m.max_sm_mhz} MHz")]),
        ("Processes", "processes", [("", "process_info", [
            ("GPU instance ID", "gpu_instance_id", "N/A"),
            ("Compute instance ID", "compute_instance_id", "N/A"),
            ("Process ID", "pid", str(pid)),
            ("Type", "type", kind),
            ("Name", "process_name", name),
            ("Used GPU Memory", "used_memory", f"{mib} MiB"),
        ]) for (pid, name, mib), kind in procs] or "None"),
    ]  # fmt: skip
    return out


def _text(entries: list[Entry], depth: int) -> list[str]:
    lines = []
    pad = "    " * depth
    for label, _, value in entries:
        if not label:
            if isinstance(value, list):
                lines += _text(value, depth)
            continue
        if isinstance(value, str):
            lines.append(f"{pad + label:<42}: {value}")
        else:
            lines.append(pad + label)
            lines += _text(value, depth + 1)
    return lines


def _xml(entries: list[Entry], depth: int) -> list[str]:
    lines = []
    for _, tag, value in entries:
        if not tag:
            continue
        path = tag.split("/")
        tabs = "\t" * depth
        opened = [f"{tabs}{chr(9) * i}<{t}>" for i, t in enumerate(path[:-1])]
        inner = "\t" * (depth + len(path) - 1)
        if isinstance(value, str):
            body = [f"{inner}<{path[-1]}>{escape(value)}</{path[-1]}>"]
        else:
            body = [
                f"{inner}<{path[-1]}>",
                *_xml(value, depth + len(path)),
                f"{inner}</{path[-1]}>",
            ]
        closed = [f"{tabs}{chr(9) * i}</{t}>" for i, t in reversed(list(enumerate(path[:-1])))]
        lines += [*opened, *body, *closed]
    return lines


def query(node: SimNode, now: datetime, xml: bool) -> str:
    reads = readings(node, now)
    local = now.astimezone(_NODE_TZ)
    stamp = f"{local:%a %b} {local.day:>2} {local:%H:%M:%S %Y}"
    driver = node.gpus[0].model.driver
    if xml:
        lines = [
            '<?xml version="1.0" ?>',
            '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
            "<nvidia_smi_log>",
            f"\t<timestamp>{stamp}</timestamp>",
            f"\t<driver_version>{driver}</driver_version>",
            f"\t<cuda_version>{CUDA_VERSION}</cuda_version>",
            f"\t<attached_gpus>{len(reads)}</attached_gpus>",
        ]
        for r in reads:
            lines += [f'\t<gpu id="{r.gpu.bus_id}">', *_xml(_gpu(node, r), 2), "\t</gpu>"]
        return "\n".join([*lines, "</nvidia_smi_log>", ""])
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"{'Timestamp':<42}: {stamp}",
        f"{'Driver Version':<42}: {driver}",
        f"{'CUDA Version':<42}: {CUDA_VERSION}",
        "",
        f"{'Attached GPUs':<42}: {len(reads)}",
    ]
    for r in reads:
        lines += [f"GPU {r.gpu.bus_id}", *_text(_gpu(node, r), 1), ""]
    return "\n".join(lines) + "\n"


def smi_extra(node: SimNode, args: list[str], now: datetime) -> Answer | None:
    """The acceptance's nvidia-smi forms; None for any other (commands.py answers those)."""
    if args in (["-q"], ["--query"]):
        return Answer(query(node, now, xml=False), "", 0)
    if sorted(args) in (["-q", "-x"], ["--query", "-x"], ["--xml-format", "-q"]):
        return Answer(query(node, now, xml=True), "", 0)
    if args in (["nvlink", "-s"], ["nvlink", "--status"]):
        return Answer(nvlink_status(node, readings(node, now)), "", 0)
    if args in (["-L"], ["--list-gpus"]):
        return Answer(list_gpus(node, readings(node, now)), "", 0)
    return None
