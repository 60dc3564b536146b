"""The heavy tools on a simulated node: zuka's own torch script run by python3 (the
`# zuka-accept-torch v1` matmul, the `# zuka-accept-burn v1` burn-in), `dcgmi diag`,
`nvbandwidth` and nccl-tests' `all_reduce_perf`, in the real tools' formats: good, slow
(Trap.SLOW_GPU, a PCIe-only box) and failing (Trap.DCGM_FAIL, no BF16 on a V100)."""

from __future__ import annotations

import json
import random
import re
from datetime import datetime

from leases.sim.gpu import SimNode, readings
from leases.sim.hostcmds import has_tool
from leases.sim.output import Answer, not_found
from leases.sim.specs import MATMUL_SHARE, PCIE_BUSBW_GBS, SLOW_SHARE, SPECS
from leases.sim.traps import Trap

TORCH_MARK = "# zuka-accept-torch v1"
BURN_MARK = "# zuka-accept-burn v1"
TORCH, CUDA = "2.3.1", "12.1"
DCGM_VERSION = "3.3.8"
_NONCE = re.compile(r'NONCE = "([0-9a-f]{16,64})"$')
NO_BF16 = "bf16 matmul not supported on this GPU (compute capability 7.0)"


def _jitter(node: SimNode, what: str, index: int) -> float:
    """A seeded factor in [0.98, 1.02]: the same node answers the same figures."""
    return 0.98 + 0.04 * random.Random(f"{what}/{node.seed}/{index}").random()


def python3(node: SimNode, args: list[str], now: datetime) -> Answer:
    if len(args) != 2 or args[0] != "-c":
        return Answer("", "python3: the simulator runs only zuka's acceptance scripts\n", 2)
    script = args[1]
    first = script.split("\n", 1)[0].strip()
    if first not in (TORCH_MARK, BURN_MARK):
        return Answer("", "python3: the simulator runs only zuka's acceptance scripts\n", 2)
    # zuka's line 2 is NONCE = "hex": the JSON line carries it back, as the real script does.
    said = _NONCE.match(script.split("\n", 2)[1] if script.count("\n") >= 2 else "")
    nonce = said.group(1) if said else None
    if Trap.NO_TORCH in node.traps:
        out: dict[str, object] = {
            "torch": None, "cuda": None, "gpus": [], "error": "No module named 'torch'",
            "nonce": nonce,
        }  # fmt: skip
        return Answer(json.dumps(out) + "\n", "", 0)
    burn = first == BURN_MARK
    share = SLOW_SHARE if Trap.SLOW_GPU in node.traps else MATMUL_SHARE
    gpus = []
    for r in readings(node, now):
        total = r.gpu.memory_total_mib
        free = max(total - r.mem_used_mib, 0)
        nominal = SPECS[r.gpu.model.key].bf16_tflops
        gpu: dict[str, object] = {
            "index": r.gpu.index,
            "name": r.gpu.name,
            "total_bytes": total * 2**20,
            # As zuka's script does: 256 MiB blocks until 512 MiB are left free.
            "allocated_bytes": max(free - 512, 0) // 256 * 256 * 2**20,
            "bf16_tflops": None if nominal is None
            else round(nominal * share * _jitter(node, "mm", r.gpu.index), 1),
            "error": NO_BF16 if nominal is None else "",
            # The link under the copies the script makes: at its most, as on a healthy box.
            "pcie_load": f"{SPECS[r.gpu.model.key].pcie_gen}, 16",
        }  # fmt: skip
        if burn:
            gpu["mismatches"] = 0
        gpus.append(gpu)
    done: dict[str, object] = {
        "torch": TORCH, "cuda": CUDA, "gpus": gpus, "error": "", "nonce": nonce
    }  # fmt: skip
    return Answer(json.dumps(done) + "\n", "", 0)


_DEPLOYMENT = (
    "Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
    "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
    "Graphics Processes", "Inforom",
)  # fmt: skip
_BORDER = "+---------------------------+------------------------------------------------+"


def _row(name: str, result: str) -> str:
    return f"| {name:<25} | {result:<46} |"


def _section(name: str) -> str:
    return f"+-----  {name}  " + "-" * (18 - len(name)) + "+" + "-" * 48 + "+"


def dcgmi(node: SimNode, args: list[str]) -> Answer:
    """`dcgmi diag -r 1|2|3`: the table DCGM 3.3 prints."""
    level = args[2] if len(args) == 3 and args[:2] in (["diag", "-r"], ["diag", "--run"]) else ""
    if level not in ("1", "2", "3"):
        return Answer("", "dcgmi: the simulator answers only dcgmi diag -r 1|2|3\n", 2)
    ids = ",".join(SPECS[g.model.key].device_id.lower() for g in node.gpus)
    fail = Trap.DCGM_FAIL in node.traps
    lines = [
        "Successfully ran diagnostic for group.",
        _BORDER,
        _row("Diagnostic", "Result"),
        "+===========================+================================================+",
        "|-----  Metadata  ----------+------------------------------------------------|",
        _row("DCGM Version", DCGM_VERSION),
        _row("Driver Version Detected", node.gpus[0].model.driver),
        _row("GPU Device IDs Detected", ids[:46]),
        "|-----  Deployment  --------+------------------------------------------------|",
    ]
    lines += [_row(name, "Pass") for name in _DEPLOYMENT]
    if level in ("2", "3"):
        lines += [_section("Integration"), _row("PCIe", "Pass - All"), _section("Hardware")]
        if fail:
            lines += [
                _row("GPU Memory", "Fail - GPU: 2"),
                _row("Warning: GPU 2", "Error using CUDA API cudaMalloc: out of"),
                _row("", "memory. Check DCGM and system logs for errors."),
            ]
        else:
            lines.append(_row("GPU Memory", "Pass - All"))
    if level == "3":
        lines += [
            _row("Diagnostic", "Pass - All"),
            _section("Stress"),
            _row("Targeted Stress", "Pass - All"),
            _row("Targeted Power", "Pass - All"),
            _row("Memory Bandwidth", "Pass - All"),
        ]
    if level == "1" and fail:
        lines[-3] = _row("Page Retirement/Row Remap", "Fail")
        lines.insert(-2, _row("Error", "GPU 2 had uncorrectable memory errors and"))
        lines.insert(-2, _row("", "row remapping failed"))
    lines.append(_BORDER)
    return Answer("\n".join(lines) + "\n", "", 0)


def nvbandwidth(node: SimNode, args: list[str]) -> Answer:
    """`nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce` (v0.5 layout)."""
    tests = [a for a in args if a not in ("-t", "--testcase")]
    known = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")
    if not tests or any(t not in known for t in tests):
        return Answer("", "ERROR: the simulator answers only the host<->device CE testcases\n", 1)
    spec = SPECS[node.gpu_model]
    slow = 0.35 if Trap.SLOW_GPU in node.traps else 1.0
    n = node.count
    lines = [
        "nvbandwidth Version: v0.5",
        "Built from Git version: v0.5",
        "",
        "CUDA Runtime Version: 12040",
        "CUDA Driver Version: 12040",
        f"Driver Version: {node.gpus[0].model.driver}",
        "",
    ]
    lines += [f"Device {g.index}: {g.name} ({g.bus_id[4:-2]})" for g in node.gpus]
    for test in tests:
        arrow = "->" if test.startswith("host") else "<-"
        cells = [spec.h2d_gbs * slow * _jitter(node, test, i) for i in range(n)]
        lines += [
            "",
            f"Running {test}.",
            f"memcpy CE CPU(row) {arrow} GPU(column) bandwidth (GB/s)",
            "          " + "".join(f"{i:>10}" for i in range(n)),
            " 0        " + "".join(f"{c:>10.2f}" for c in cells),
            "",
            f"SUM {test} {sum(cells):.2f}",
        ]
    lines += ["", *_NVB_NOTE]
    return Answer("\n".join(lines) + "\n", "", 0)


_NVB_NOTE = (
    "NOTE: The reported results may not reflect the full capabilities of the platform.",
    "Performance can vary with software drivers, hardware clocks, and system topology.",
)
_NCCL_HEAD = """\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
"""  # noqa: E501, W291


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def all_reduce_perf(node: SimNode, args: list[str]) -> Answer:
    """nccl-tests `all_reduce_perf -b 8 -e 1G -f 2 -g N` (float sum, out-of-place and in-place)."""
    opts = dict(zip(args[::2], args[1::2], strict=False))
    try:
        lo, hi = _size(opts.get("-b", "8")), _size(opts.get("-e", "1G"))
        factor, n = int(opts.get("-f", "2")), int(opts.get("-g", "1"))
    except ValueError:
        return Answer("", "Invalid arguments\n", 1)
    if not 1 <= n <= node.count or factor < 2 or lo < 4 or hi < lo:
        return Answer("", f"Error: requested {n} GPUs, {node.count} available\n", 1)
    spec = SPECS[node.gpu_model]
    peak = PCIE_BUSBW_GBS if Trap.PCIE_ONLY in node.traps or not spec.nvlinks else spec.busbw_gbs
    peak *= 0.3 if Trap.SLOW_GPU in node.traps else 1.0
    ratio = 2 * (n - 1) / n
    lines = [
        f"# nThread 1 nGpus {n} minBytes {lo} maxBytes {hi} step: {factor}(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    host = node.name[:10]
    lines += [
        f"#  Rank {g.index:>2} Group  0 Pid  41822 on {host:>10} device {g.index:>2} "
        f"[0x{g.bus_id[9:11].lower()}] {g.name}"
        for g in node.gpus[:n]
    ]
    lines += ["#", *_NCCL_HEAD.splitlines()]
    size, total_bus, rows = lo, 0.0, 0
    while size <= hi:
        # Latency-bound at small sizes, the box's bus bandwidth at large ones.
        bus = peak * size / (size + 8 * 2**20) if n > 1 else 0.0
        algbw = bus / ratio if n > 1 else size / 1e3 / 12.0
        t = 12.0 + size / (algbw * 1e3) if algbw else 12.0
        cells = []
        for k in range(2):
            j = _jitter(node, f"ar{k}", rows)
            cells.append(f"{t * j:>8.2f} {algbw / j / 1e0:>7.2f} {bus / j:>7.2f} {0:>6}")
            total_bus += bus / j / 2
        lines.append(f"{size:>12} {size // 4:>13}     float     sum      -1 " + "   ".join(cells))
        size *= factor
        rows += 1
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total_bus / max(rows, 1):.4f} ",
        "#",
        "",
    ]
    return Answer("\n".join(lines), "", 0)


def answer_tool(node: SimNode, argv: list[str], now: datetime) -> Answer | None:
    """The heavy tools; None for any other command. A tool the node lacks is not found."""
    cmd, args = argv[0], argv[1:]
    name = cmd.rsplit("/", 1)[-1]
    runs = {"python3": python3, "dcgmi": None, "nvbandwidth": None, "all_reduce_perf": None}
    if name not in runs:
        return None
    if not has_tool(node, name):
        return not_found(cmd)
    if name == "python3":
        return python3(node, args, now)
    if name == "dcgmi":
        return dcgmi(node, args)
    return nvbandwidth(node, args) if name == "nvbandwidth" else all_reduce_perf(node, args)
