"""The heavy checks (standard and burn): zuka's torch probe (BF16 matmul against the
nominal figure, how much memory CUDA can really hold), `dcgmi diag`, nvbandwidth host <->
device copies and nccl-tests' all_reduce_perf, each only where its tool is on the node.

What is not installed is "skipped, because X is not installed on the node"; what ran out
of time is "not checked"; nothing here passes on a skip. Judges are pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leases.accept import nominal
from leases.accept.checks import smi
from leases.accept.checks.smi import per_gpu, said_once
from leases.accept.engine import Check, Context, Settings, Sold
from leases.accept.facts import DcgmDiag, DiagTest, NcclPerf, Nvbandwidth
from leases.accept.parse.dcgmi import parse_dcgmi
from leases.accept.parse.nccl import parse_nccl
from leases.accept.parse.nvbandwidth import parse_nvbandwidth
from leases.accept.parse.smiquery import SmiRow, SmiRows
from leases.accept.parse.torchrun import TorchRun, parse_torchrun
from leases.accept.torchprobe import burn_script, command, new_nonce, torch_script
from leases.core.acceptance import CheckResult, Evidence, Level, Status
from leases.core.models import Interconnect
from leases.core.textsafe import visible

TOOLS = ("python3", "dcgmi", "nvbandwidth", "all_reduce_perf", "gpu_burn")
TOOLS_CMD = "command -v " + " ".join(TOOLS)
NVBW_CMD = "nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce"
ALLOC_SHARE = 0.90  # CUDA must hold this share of the memory free, else shared or fake VRAM
# What zuka's script leaves unallocated by design: 512 MiB kept free, a 256 MiB block that
# did not fit (leases.accept.torchprobe). Without it, a GPU with 4 GiB free holds 3.5 GiB
# (87 %) and would read as fake.
ALLOC_MARGIN = (512 + 256) * 2**20
NCCL_FAIL_SHARE = 0.90  # (ours) below this share of the bar fails; between it and the bar warns

# Host <-> device copy bars, GB/s per GPU (Azure's health checks).
# The export parts (ours): the host link is the same PCIe as their full parts' (A800 Gen4
# like the A100, H800 Gen5 like the H100), so are the bars; only NVLink was cut.
_NVBW_BAR = (("A100", 24.0), ("A800", 24.0), ("H100", 52.0), ("H800", 52.0), ("H200", 48.0))
# all_reduce bus bandwidth bars for 8 NVLink GPUs, GB/s (Azure's health checks).
_NCCL_BAR = (("A100", 228.0), ("H100", 460.0), ("H200", 431.0))


def _lookup(table: Sequence[tuple[str, float]], name: str) -> float | None:
    upper = name.upper().replace("-", " ")
    for model, value in table:
        if model in upper:
            return value
    return None


def nominal_bf16_tflops(gpu_name: str, pci_id: str = "") -> float | None:
    """The dense BF16 TFLOPS of a card (leases.accept.nominal), by its PCI device id where
    known (an H100 PCIe and SXM differ), else by its name."""
    card = nominal.by_pci(pci_id) if pci_id else None
    if card is not None:
        return card.tflops_for(pci_id)
    found = nominal.by_name(gpu_name).nominal
    return None if found is None else found.bf16_tflops


def _r(name: str, title: str, status: Status, words: str, key: str, **kw: str) -> CheckResult:
    return CheckResult(f"heavy.{name}", title, status, words, evidence=(key,), **kw)


def tools_present(ev: Evidence) -> set[str]:
    """The tools `command -v` found (it prints one path or name per tool found)."""
    found = set()
    for line in ev.stdout.splitlines()[:64]:
        base = line.strip().rsplit("/", 1)[-1]
        if base in TOOLS:
            found.add(base)
    return found


def gpu_rows(rows: SmiRows) -> list[tuple[int, str, int | None]]:
    """(index, name, MiB free) per GPU of the query: memory.total less memory.used when
    both were read (what CUDA may take when the run starts; a node already running the
    lab's jobs holds the rest), else memory.total."""

    def free(r: SmiRow) -> int | None:
        if r.memory_total_mib is None or r.memory_used_mib is None:
            return r.memory_total_mib
        return max(r.memory_total_mib - r.memory_used_mib, 0)

    return [(r.index, r.name, free(r)) for r in rows.rows if r.index is not None]


def torch_coverage(
    run: TorchRun, gpus: Sequence[tuple[int, str, int | None]], key: str
) -> list[CheckResult]:
    """Fails when torch's GPUs are not nvidia-smi's (CUDA_VISIBLE_DEVICES, a container
    that shows torch fewer cards): the GPUs torch did not report were not measured."""
    if not gpus:
        return []
    smi_ids = sorted({i for i, _, _ in gpus})
    torch_ids = sorted({g.index for g in run.gpus})
    unseen = [i for i in smi_ids if i not in torch_ids]
    extra = [i for i in torch_ids if i not in smi_ids]
    if len(torch_ids) == len(smi_ids) and not unseen and not extra:
        return []
    said = []
    if unseen:
        said.append(f"not measured (torch does not report them): GPU {_ids(unseen)}")
    if extra:
        said.append(f"torch reports GPUs nvidia-smi does not list: {_ids(extra)}")
    return [_r("torch.gpus", "GPUs torch sees", Status.FAILED, f"torch sees {len(run.gpus)} "
               f"GPUs, nvidia-smi lists {len(smi_ids)}; " + "; ".join(said), key,
               expected=f"{len(smi_ids)} GPUs", found=f"{len(run.gpus)}")]  # fmt: skip


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids[:64])


def judge_torch(
    run: TorchRun,
    gpus: Sequence[tuple[int, str, int | None]],
    settings: Settings,
    key: str,
    pci: Mapping[int, str] | None = None,
    sold: nominal.Nominal | None = None,
    burn: bool = False,
) -> list[CheckResult]:
    """sold: the card the lease names. Its figure is the bar (what was paid for), the
    figure of the card found only where the lease names none zuka knows. burn: the run
    was the burn-in, whose verdict is a finding of its own, clean or not."""
    title = "BF16 matmul and memory CUDA can hold (torch)"
    if run.torch is None:
        why = visible(run.error or "; ".join(run.problems), 200)
        if "No module named" in run.error:
            return [_r("torch", title, Status.SKIPPED, "skipped, because torch is not installed "
                       f"in the node's python3 ({why})", key)]  # fmt: skip
        return [_r("torch", title, Status.NOT_CHECKED, f"not checked: {why}", key)]
    if not run.gpus:
        return [_r("torch", title, Status.WARNED, f"torch {visible(run.torch, 20)} sees no "
                   f"GPU: {visible(run.error, 200)}", key)]  # fmt: skip
    totals = {i: mib for i, _, mib in gpus}
    out: list[CheckResult] = torch_coverage(run, gpus, key)
    clean: list[str] = []  # burn-in: GPUs whose every result matched the first
    for g in run.gpus:
        gid = f"GPU {g.index}"
        if g.error:
            out.append(_r("torch", title, Status.FAILED, f"{gid}: the matmul or allocation "
                          f"failed: {visible(g.error, 200)}", key))  # fmt: skip
            continue
        smi_mib = totals.get(g.index)
        total = smi_mib * 2**20 if smi_mib else g.total_bytes
        if g.allocated_bytes is None:
            out.append(_r("torch.alloc", "Memory CUDA can hold", Status.NOT_CHECKED,
                          f"not checked: {gid}: torch's probe gave no allocated_bytes figure",
                          key))  # fmt: skip
        elif total and g.allocated_bytes + ALLOC_MARGIN < ALLOC_SHARE * total:
            out.append(_r("torch.alloc", "Memory CUDA can hold", Status.FAILED,
                          f"{gid}: CUDA could hold {g.allocated_bytes // 2**20} MiB of the "
                          f"{total // 2**20} MiB nvidia-smi showed free: the memory is "
                          "shared, held by another process or not all real", key,
                          expected=f"at least {ALLOC_SHARE:.0%} of the memory free "
                          "(memory.total less memory.used), less the 768 MiB zuka's script "
                          "leaves"))  # fmt: skip
        if g.mismatches:
            out.append(_r("torch.burn", "Burn-in results", Status.FAILED, f"{gid}: "
                          f"{g.mismatches} matmul results differed from the first on the same "
                          "inputs (silent data corruption)", key))  # fmt: skip
        elif burn and g.mismatches is None:
            out.append(_r("torch.burn", "Burn-in results", Status.NOT_CHECKED,
                          f"not checked: {gid}: the burn-in gave no count of differing "
                          "results", key))  # fmt: skip
        elif burn:
            clean.append(gid)
        found_pci = (pci or {}).get(g.index, "")
        if sold is not None and sold.bf16_tflops is not None:
            figure: float | None = sold.tflops_for(found_pci)
            of = f"{sold.model}, as sold"
        else:
            figure, of = nominal_bf16_tflops(g.name, found_pci), visible(g.name, 60)
        if g.bf16_tflops is None:
            out.append(_r("torch", title, Status.NOT_CHECKED, f"{gid}: no TFLOPS figure", key))
        elif figure is None:
            out.append(_r("torch", title, Status.SKIPPED, f"skipped, because zuka has no nominal "
                          f"figure for {visible(g.name, 60)}; {gid} measured "
                          f"{g.bf16_tflops:g} TFLOPS BF16", key))  # fmt: skip
        else:
            bar = settings.matmul_pass * figure
            status = Status.PASSED if g.bf16_tflops >= bar else Status.FAILED
            out.append(_r("torch", title, status, f"{gid} ({visible(g.name, 60)}): "
                          f"{g.bf16_tflops:g} TFLOPS BF16, {g.bf16_tflops / figure:.0%} of "
                          f"the nominal {figure:g} ({of})", key,
                          expected=f">= {bar:g} TFLOPS ({settings.matmul_pass:.0%})"))  # fmt: skip
    if clean:
        out.append(_r("torch.burn", "Burn-in results", Status.PASSED, f"{', '.join(clean)}: "
                      f"every matmul result matched the first over the burn-in (bounded by "
                      f"{settings.burn_seconds} s)", key))  # fmt: skip
    return out


def judge_pcie_load(run: TorchRun, rows: SmiRows | None, key: str) -> CheckResult:
    """Each GPU's PCIe link read under load (host -> GPU copies) against the most it can
    do (pcie.link.gen.max, width.max at idle): a link trained down (Gen3 where Gen4 is the
    most, x8 where x16) halves what every copy to the GPU can move."""
    title = "PCIe link under load"
    most = {r.index: (r.pcie_gen_max, r.pcie_width_max) for r in (rows.rows if rows else ())}
    low: list[str] = []
    read: list[tuple[str, str]] = []
    for g in run.gpus:
        if g.pcie_load is None:
            continue
        gen, width = g.pcie_load
        read.append((f"GPU {g.index}", f"Gen{gen} x{width}"))
        max_gen, max_width = most.get(g.index, (None, None))
        if (max_gen is not None and gen < max_gen) or (max_width is not None and width < max_width):
            low.append(f"GPU {g.index} ran at Gen{gen} x{width} under load, its most is "
                       f"Gen{max_gen} x{max_width}")  # fmt: skip
    want = "the link at its most (pcie.link.gen.max, width.max) while copies run"
    if not read:
        return _r("pcie", title, Status.NOT_CHECKED, "not checked: the probe read no PCIe "
                  "link under load (nvidia-smi not callable from its python3?)", key,
                  expected=want)  # fmt: skip
    if low:
        return _r("pcie", title, Status.WARNED, said_once(low) + ": the link trained down",
                  key, expected=want, found=per_gpu(read))  # fmt: skip
    return _r("pcie", title, Status.PASSED, f"under load: {per_gpu(read)}", key,
              expected=want, found=per_gpu(read))  # fmt: skip


def judge_dcgmi(diag: DcgmDiag, key: str) -> list[CheckResult]:
    title = "DCGM diagnostic"
    if not diag.tests:
        why = visible("; ".join(diag.problems), 300)
        return [_r("dcgmi", title, Status.NOT_CHECKED, f"not checked: {why}", key)]
    failed = [t for t in diag.tests if t.result == "Fail"]
    warned = [t for t in diag.tests if t.result == "Warn"]

    def said(ts: Sequence[DiagTest]) -> str:
        return "; ".join(
            f"{visible(t.name, 40)}: {visible(t.detail, 200) or t.result}" for t in ts[:6]
        )

    if failed:
        return [_r("dcgmi", title, Status.FAILED, f"dcgmi diag failed {len(failed)} tests: "
                   f"{said(failed)}", key)]  # fmt: skip
    if warned:
        return [_r("dcgmi", title, Status.WARNED, f"dcgmi diag warned: {said(warned)}", key)]
    passed = [t for t in diag.tests if t.result == "Pass"]
    idle = [t for t in diag.tests if t.result != "Pass"]
    names = ", ".join(f"{visible(t.name, 40)} ({t.result})" for t in idle[:20]) + (
        f" and {len(idle) - 20} more" if len(idle) > 20 else ""
    )
    if not passed:
        return [_r("dcgmi", title, Status.NOT_CHECKED, f"not checked: dcgmi diag passed no "
                   f"test; none of its {len(idle)} tests ran: {names}", key)]  # fmt: skip
    if idle:
        return [_r("dcgmi", title, Status.PASSED, f"{len(passed)} tests passed; {len(idle)} "
                   f"did not run (skipped by DCGM): {names}", key)]  # fmt: skip
    return [_r("dcgmi", title, Status.PASSED, f"all {len(passed)} tests passed", key)]


def judge_nvbandwidth(nvbw: Nvbandwidth, model: str, key: str) -> list[CheckResult]:
    title = "Host <-> GPU copy bandwidth (nvbandwidth)"
    bar = _lookup(_NVBW_BAR, model)
    cases = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")
    got = {c: nvbw.minimum[c] for c in cases if c in nvbw.minimum}
    if not got:
        why = visible("; ".join(nvbw.problems) or "no testcase ran", 300)
        return [_r("nvbw", title, Status.NOT_CHECKED, f"not checked: {why}", key)]
    found = ", ".join(f"{c} slowest GPU {v:g} GB/s" for c, v in got.items())
    if bar is None:
        return [_r("nvbw", title, Status.SKIPPED, f"skipped, because zuka has no bar for "
                   f"{visible(model, 60) or 'this GPU'}; measured {found}", key)]  # fmt: skip
    slow = {c: v for c, v in got.items() if v < bar}
    status = Status.FAILED if slow else Status.PASSED
    return [_r("nvbw", title, status, found, key, expected=f">= {bar:g} GB/s per GPU")]


def judge_nccl(perf: NcclPerf, model: str, n: int, sold: Sold, key: str) -> list[CheckResult]:
    title = "NCCL all-reduce bus bandwidth"
    if perf.out_of_bounds:
        return [_r("nccl", title, Status.FAILED, f"all_reduce_perf found {perf.out_of_bounds} "
                   "wrong values (# Out of bounds values)", key)]  # fmt: skip
    if not perf.rows:
        why = visible("; ".join(perf.problems), 300)
        return [_r("nccl", title, Status.NOT_CHECKED, f"not checked: {why}", key)]
    size, _, busbw, _ = max(perf.rows)
    found = f"{busbw:g} GB/s bus bandwidth at {size / 2**20:g} MiB on {n} GPUs"
    bar = _lookup(_NCCL_BAR, model) if n == 8 else None
    if bar is None or sold.interconnect is not Interconnect.NVLINK:
        return [_r("nccl", title, Status.SKIPPED, f"skipped, because zuka has a bar only for 8 "
                   f"NVLink A100/H100/H200; measured {found} (8 GPUs on PCIe only reach ~28)",
                   key)]  # fmt: skip
    expected = f">= {bar:g} GB/s (Azure's bar for 8x{model})"
    status = (Status.PASSED if busbw >= bar
              else Status.WARNED if busbw >= NCCL_FAIL_SHARE * bar else Status.FAILED)  # fmt: skip
    return [_r("nccl", title, status, found, key, expected=expected)]


def _skip(name: str, title: str, tool: str, key: str) -> CheckResult:
    return _r(name, title, Status.SKIPPED, f"skipped, because {tool} is not installed on the "
              "node", key)  # fmt: skip


def _broken(ev: Evidence) -> str:
    return ev.failure or ("" if ev.exit_status is not None else "no exit status came back")


async def run(ctx: Context) -> list[CheckResult]:
    burn = ctx.level is Level.BURN
    tools_ev = await ctx.probe.run("tools", TOOLS_CMD, 15)
    if tools_ev.failure:
        return [_r("tools", "Tools on the node", Status.NOT_CHECKED,
                   f"not checked: {tools_ev.failure}", "tools")]  # fmt: skip
    have = tools_present(tools_ev)
    read = await smi.read_rows(ctx)
    gpus = [] if read.rows is None else gpu_rows(read.rows)
    pci = (
        {}
        if read.rows is None
        else {r.index: r.pci_device_id for r in read.rows.rows if r.index is not None}
    )
    model = gpus[0][1] if gpus else ctx.sold.gpu_model
    n = len(gpus) or ctx.sold.gpu_count
    out: list[CheckResult] = []

    if "python3" not in have:
        out.append(_skip("torch", "BF16 matmul (torch)", "python3", "tools"))
    else:
        nonce = new_nonce()  # only the JSON line carrying it is this run's
        key, script = ("burn", burn_script(ctx.settings.burn_seconds, nonce)) if burn else (
            "torch", torch_script(nonce))  # fmt: skip
        limit = 300.0 + (ctx.settings.burn_seconds * max(n, 1) if burn else 0)
        ev = await ctx.probe.run(key, command(script), limit)
        if why := _broken(ev):
            out.append(_r("torch", "BF16 matmul (torch)", Status.NOT_CHECKED,
                          f"not checked: {why}", key))  # fmt: skip
        else:
            run_ = parse_torchrun(ev.stdout, nonce)
            sold = nominal.by_name(ctx.sold.gpu_model, ctx.sold.vram_gib).nominal
            out += judge_torch(run_, gpus, ctx.settings, key, pci, sold, burn)
            if run_.torch is not None and run_.gpus:
                out.append(judge_pcie_load(run_, read.rows, key))

    level = 3 if burn else 2
    if "dcgmi" not in have:
        out.append(_skip("dcgmi", "DCGM diagnostic", "dcgmi", "tools"))
    else:
        key = f"dcgmi-r{level}"
        ev = await ctx.probe.run(key, f"dcgmi diag -r {level}", 1800.0 if burn else 600.0)
        if why := _broken(ev):
            out.append(_r("dcgmi", "DCGM diagnostic", Status.NOT_CHECKED, f"not checked: {why}",
                          key))  # fmt: skip
        else:
            out += judge_dcgmi(parse_dcgmi(ev.stdout + "\n" + ev.stderr), key)

    if "nvbandwidth" not in have:
        out.append(_skip("nvbw", "Host <-> GPU copy bandwidth", "nvbandwidth", "tools"))
    else:
        ev = await ctx.probe.run("nvbandwidth", NVBW_CMD, 300)
        if why := _broken(ev):
            out.append(_r("nvbw", "Host <-> GPU copy bandwidth", Status.NOT_CHECKED,
                          f"not checked: {why}", "nvbandwidth"))  # fmt: skip
        else:
            out += judge_nvbandwidth(parse_nvbandwidth(ev.stdout), model, "nvbandwidth")

    if "all_reduce_perf" not in have:
        out.append(_skip("nccl", "NCCL all-reduce", "all_reduce_perf", "tools"))
    elif n < 2:
        out.append(_r("nccl", "NCCL all-reduce", Status.SKIPPED, "skipped, because an "
                      "all-reduce needs two GPUs or more", "tools"))  # fmt: skip
    else:
        cmd = f"all_reduce_perf -b 8 -e 1G -f 2 -g {int(n)}"
        ev = await ctx.probe.run("nccl", cmd, 600)
        if why := _broken(ev):
            out.append(_r("nccl", "NCCL all-reduce", Status.NOT_CHECKED, f"not checked: {why}",
                          "nccl"))  # fmt: skip
        else:
            out += judge_nccl(parse_nccl(ev.stdout), model, n, ctx.sold, "nccl")
    return out


CHECK = Check("heavy", "GPU work: matmul, DCGM, copies, NCCL", Level.STANDARD, run, cost=50)
