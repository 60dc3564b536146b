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
from leases.accept.words import N_, _, ngettext
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
    smi_ids = sorted({i for i, _name, _mib in gpus})
    torch_ids = sorted({g.index for g in run.gpus})
    unseen = [i for i in smi_ids if i not in torch_ids]
    extra = [i for i in torch_ids if i not in smi_ids]
    if len(torch_ids) == len(smi_ids) and not unseen and not extra:
        return []
    said = []
    if unseen:
        said.append(
            _("not measured (torch does not report them): GPU {ids}").format(ids=_ids(unseen))
        )
    if extra:
        said.append(_("torch reports GPUs nvidia-smi does not list: {ids}").format(ids=_ids(extra)))
    words = _("torch sees {torch} GPUs, nvidia-smi lists {smi}; {why}").format(
        torch=len(run.gpus), smi=len(smi_ids), why=_("; ").join(said)
    )
    expected = ngettext("{count} GPU", "{count} GPUs", len(smi_ids)).format(count=len(smi_ids))
    return [_r("torch.gpus", _("GPUs torch sees"), Status.FAILED, words, key,
               expected=expected, found=f"{len(run.gpus)}")]  # fmt: skip


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
    title = _("BF16 matmul and memory CUDA can hold (torch)")
    alloc, burned = _("Memory CUDA can hold"), _("Burn-in results")
    if run.torch is None:
        why = visible(run.error or "; ".join(run.problems), 200)
        if "No module named" in run.error:
            words = _("skipped, because torch is not installed in the node's python3 ({why})")
            return [_r("torch", title, Status.SKIPPED, words.format(why=why), key)]
        words = _("not checked: {why}").format(why=why)
        return [_r("torch", title, Status.NOT_CHECKED, words, key)]
    if not run.gpus:
        words = _("torch {version} sees no GPU: {why}").format(
            version=visible(run.torch, 20), why=visible(run.error, 200)
        )
        return [_r("torch", title, Status.WARNED, words, key)]
    totals = {i: mib for i, _name, mib in gpus}
    out: list[CheckResult] = torch_coverage(run, gpus, key)
    clean: list[str] = []  # burn-in: GPUs whose every result matched the first
    for g in run.gpus:
        gid = f"GPU {g.index}"
        if g.error:
            words = _("{gpu}: the matmul or allocation failed: {why}")
            words = words.format(gpu=gid, why=visible(g.error, 200))
            out.append(_r("torch", title, Status.FAILED, words, key))
            continue
        smi_mib = totals.get(g.index)
        total = smi_mib * 2**20 if smi_mib else g.total_bytes
        if g.allocated_bytes is None:
            words = _("not checked: {gpu}: torch's probe gave no allocated_bytes figure")
            out.append(_r("torch.alloc", alloc, Status.NOT_CHECKED, words.format(gpu=gid), key))
        elif total and g.allocated_bytes + ALLOC_MARGIN < ALLOC_SHARE * total:
            words = _("{gpu}: CUDA could hold {held} MiB of the {free} MiB nvidia-smi showed free:"
                      " the memory is shared, held by another process or not all real")  # fmt: skip
            words = words.format(gpu=gid, held=g.allocated_bytes // 2**20, free=total // 2**20)
            expected = _("at least {share:.0%} of the memory free (memory.total less memory.used),"
                         " less the 768 MiB zuka's script leaves")  # fmt: skip
            out.append(_r("torch.alloc", alloc, Status.FAILED, words, key,
                          expected=expected.format(share=ALLOC_SHARE)))  # fmt: skip
        if g.mismatches:
            words = _("{gpu}: {count} matmul results differed from the first on the same inputs"
                      " (silent data corruption)")  # fmt: skip
            words = words.format(gpu=gid, count=g.mismatches)
            out.append(_r("torch.burn", burned, Status.FAILED, words, key))
        elif burn and g.mismatches is None:
            words = _("not checked: {gpu}: the burn-in gave no count of differing results")
            out.append(_r("torch.burn", burned, Status.NOT_CHECKED, words.format(gpu=gid), key))
        elif burn:
            clean.append(gid)
        found_pci = (pci or {}).get(g.index, "")
        if sold is not None and sold.bf16_tflops is not None:
            figure: float | None = sold.tflops_for(found_pci)
            of = _("{model}, as sold").format(model=sold.model)
        else:
            figure, of = nominal_bf16_tflops(g.name, found_pci), visible(g.name, 60)
        if g.bf16_tflops is None:
            words = _("{gpu}: no TFLOPS figure").format(gpu=gid)
            out.append(_r("torch", title, Status.NOT_CHECKED, words, key))
        elif figure is None:
            words = _("skipped, because zuka has no nominal figure for {name}; {gpu} measured"
                      " {tflops:g} TFLOPS BF16")  # fmt: skip
            words = words.format(name=visible(g.name, 60), gpu=gid, tflops=g.bf16_tflops)
            out.append(_r("torch", title, Status.SKIPPED, words, key))
        else:
            bar = settings.matmul_pass * figure
            status = Status.PASSED if g.bf16_tflops >= bar else Status.FAILED
            words = _("{gpu} ({name}): {tflops:g} TFLOPS BF16, {share:.0%} of the nominal"
                      " {figure:g} ({of})")  # fmt: skip
            words = words.format(
                gpu=gid,
                name=visible(g.name, 60),
                tflops=g.bf16_tflops,
                share=g.bf16_tflops / figure,
                figure=figure,
                of=of,
            )
            expected = _(">= {bar:g} TFLOPS ({share:.0%})")
            expected = expected.format(bar=bar, share=settings.matmul_pass)
            out.append(_r("torch", title, status, words, key, expected=expected))
    if clean:
        words = _("{gpus}: every matmul result matched the first over the burn-in (bounded by"
                  " {seconds} s)")  # fmt: skip
        words = words.format(gpus=", ".join(clean), seconds=settings.burn_seconds)
        out.append(_r("torch.burn", burned, Status.PASSED, words, key))
    return out


def judge_pcie_load(run: TorchRun, rows: SmiRows | None, key: str) -> CheckResult:
    """Each GPU's PCIe link read under load (host -> GPU copies) against the most it can
    do (pcie.link.gen.max, width.max at idle): a link trained down (Gen3 where Gen4 is the
    most, x8 where x16) halves what every copy to the GPU can move."""
    title = _("PCIe link under load")
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
            line = _("GPU {gpu} ran at Gen{gen} x{width} under load, its most is Gen{max_gen}"
                     " x{max_width}")  # fmt: skip
            low.append(
                line.format(gpu=g.index, gen=gen, width=width, max_gen=max_gen, max_width=max_width)
            )
    want = _("the link at its most (pcie.link.gen.max, width.max) while copies run")
    if not read:
        words = _("not checked: the probe read no PCIe link under load (nvidia-smi not callable"
                  " from its python3?)")  # fmt: skip
        return _r("pcie", title, Status.NOT_CHECKED, words, key, expected=want)
    if low:
        words = _("{lines}: the link trained down").format(lines=said_once(low))
        return _r("pcie", title, Status.WARNED, words, key, expected=want, found=per_gpu(read))
    words = _("under load: {found}").format(found=per_gpu(read))
    return _r("pcie", title, Status.PASSED, words, key, expected=want, found=per_gpu(read))


def judge_dcgmi(diag: DcgmDiag, key: str) -> list[CheckResult]:
    title = _("DCGM diagnostic")
    if not diag.tests:
        why = visible("; ".join(diag.problems), 300)
        return [
            _r("dcgmi", title, Status.NOT_CHECKED, _("not checked: {why}").format(why=why), key)
        ]
    failed = [t for t in diag.tests if t.result == "Fail"]
    warned = [t for t in diag.tests if t.result == "Warn"]

    def said(ts: Sequence[DiagTest]) -> str:
        return _("; ").join(
            f"{visible(t.name, 40)}: {visible(t.detail, 200) or t.result}" for t in ts[:6]
        )

    if failed:
        words = _("dcgmi diag failed {count} tests: {tests}")
        words = words.format(count=len(failed), tests=said(failed))
        return [_r("dcgmi", title, Status.FAILED, words, key)]
    if warned:
        words = _("dcgmi diag warned: {tests}").format(tests=said(warned))
        return [_r("dcgmi", title, Status.WARNED, words, key)]
    passed = [t for t in diag.tests if t.result == "Pass"]
    idle = [t for t in diag.tests if t.result != "Pass"]
    names = ", ".join(f"{visible(t.name, 40)} ({t.result})" for t in idle[:20])
    if len(idle) > 20:
        names = _("{listed} and {count} more").format(listed=names, count=len(idle) - 20)
    if not passed:
        words = _("not checked: dcgmi diag passed no test; none of its {count} tests ran: {names}")
        words = words.format(count=len(idle), names=names)
        return [_r("dcgmi", title, Status.NOT_CHECKED, words, key)]
    if idle:
        words = _("{passed} tests passed; {idle} did not run (skipped by DCGM): {names}")
        words = words.format(passed=len(passed), idle=len(idle), names=names)
        return [_r("dcgmi", title, Status.PASSED, words, key)]
    words = _("all {count} tests passed").format(count=len(passed))
    return [_r("dcgmi", title, Status.PASSED, words, key)]


def judge_nvbandwidth(nvbw: Nvbandwidth, model: str, key: str) -> list[CheckResult]:
    title = _("Host <-> GPU copy bandwidth (nvbandwidth)")
    bar = _lookup(_NVBW_BAR, model)
    cases = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")
    got = {c: nvbw.minimum[c] for c in cases if c in nvbw.minimum}
    if not got:
        why = visible("; ".join(nvbw.problems) or _("no testcase ran"), 300)
        return [_r("nvbw", title, Status.NOT_CHECKED, _("not checked: {why}").format(why=why), key)]
    found = ", ".join(
        _("{case} slowest GPU {gbps:g} GB/s").format(case=c, gbps=v) for c, v in got.items()
    )
    if bar is None:
        words = _("skipped, because zuka has no bar for {model}; measured {found}")
        words = words.format(model=visible(model, 60) or _("this GPU"), found=found)
        return [_r("nvbw", title, Status.SKIPPED, words, key)]
    slow = {c: v for c, v in got.items() if v < bar}
    status = Status.FAILED if slow else Status.PASSED
    expected = _(">= {bar:g} GB/s per GPU").format(bar=bar)
    return [_r("nvbw", title, status, found, key, expected=expected)]


def judge_nccl(perf: NcclPerf, model: str, n: int, sold: Sold, key: str) -> list[CheckResult]:
    title = _("NCCL all-reduce bus bandwidth")
    if perf.out_of_bounds:
        words = _("all_reduce_perf found {count} wrong values (# Out of bounds values)")
        return [_r("nccl", title, Status.FAILED, words.format(count=perf.out_of_bounds), key)]
    if not perf.rows:
        why = visible("; ".join(perf.problems), 300)
        return [_r("nccl", title, Status.NOT_CHECKED, _("not checked: {why}").format(why=why), key)]
    size, _size, busbw, _time = max(perf.rows)
    found = _("{gbps:g} GB/s bus bandwidth at {mib:g} MiB on {count} GPUs")
    found = found.format(gbps=busbw, mib=size / 2**20, count=n)
    bar = _lookup(_NCCL_BAR, model) if n == 8 else None
    if bar is None or sold.interconnect is not Interconnect.NVLINK:
        words = _("skipped, because zuka has a bar only for 8 NVLink A100/H100/H200; measured"
                  " {found} (8 GPUs on PCIe only reach ~28)")  # fmt: skip
        return [_r("nccl", title, Status.SKIPPED, words.format(found=found), key)]
    expected = _(">= {bar:g} GB/s (Azure's bar for 8x{model})").format(bar=bar, model=model)
    status = (Status.PASSED if busbw >= bar
              else Status.WARNED if busbw >= NCCL_FAIL_SHARE * bar else Status.FAILED)  # fmt: skip
    return [_r("nccl", title, status, found, key, expected=expected)]


def _skip(name: str, title: str, tool: str, key: str) -> CheckResult:
    words = _("skipped, because {tool} is not installed on the node").format(tool=tool)
    return _r(name, title, Status.SKIPPED, words, key)


def _broken(ev: Evidence) -> str:
    return ev.failure or ("" if ev.exit_status is not None else _("no exit status came back"))


async def run(ctx: Context) -> list[CheckResult]:
    burn = ctx.level is Level.BURN
    tools_ev = await ctx.probe.run("tools", TOOLS_CMD, 15)
    if tools_ev.failure:
        words = _("not checked: {why}").format(why=tools_ev.failure)
        return [_r("tools", _("Tools on the node"), Status.NOT_CHECKED, words, "tools")]
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
        out.append(_skip("torch", _("BF16 matmul (torch)"), "python3", "tools"))
    else:
        # Only the JSON line carrying it is this run's; one per run, however often judged.
        nonce: str = ctx.memo.setdefault("nonce", new_nonce())
        key, script = ("burn", burn_script(ctx.settings.burn_seconds, nonce)) if burn else (
            "torch", torch_script(nonce))  # fmt: skip
        limit = 300.0 + (ctx.settings.burn_seconds * max(n, 1) if burn else 0)
        ev = await ctx.probe.run(key, command(script), limit)
        if why := _broken(ev):
            words = _("not checked: {why}").format(why=why)
            out.append(_r("torch", _("BF16 matmul (torch)"), Status.NOT_CHECKED, words, key))
        else:
            run_ = parse_torchrun(ev.stdout, nonce)
            sold = nominal.by_name(ctx.sold.gpu_model, ctx.sold.vram_gib).nominal
            out += judge_torch(run_, gpus, ctx.settings, key, pci, sold, burn)
            if run_.torch is not None and run_.gpus:
                out.append(judge_pcie_load(run_, read.rows, key))

    level = 3 if burn else 2
    if "dcgmi" not in have:
        out.append(_skip("dcgmi", _("DCGM diagnostic"), "dcgmi", "tools"))
    else:
        key = f"dcgmi-r{level}"
        ev = await ctx.probe.run(key, f"dcgmi diag -r {level}", 1800.0 if burn else 600.0)
        if why := _broken(ev):
            words = _("not checked: {why}").format(why=why)
            out.append(_r("dcgmi", _("DCGM diagnostic"), Status.NOT_CHECKED, words, key))
        else:
            out += judge_dcgmi(parse_dcgmi(ev.stdout + "\n" + ev.stderr), key)

    if "nvbandwidth" not in have:
        out.append(_skip("nvbw", _("Host <-> GPU copy bandwidth"), "nvbandwidth", "tools"))
    else:
        ev = await ctx.probe.run("nvbandwidth", NVBW_CMD, 300)
        if why := _broken(ev):
            words = _("not checked: {why}").format(why=why)
            title = _("Host <-> GPU copy bandwidth")
            out.append(_r("nvbw", title, Status.NOT_CHECKED, words, "nvbandwidth"))
        else:
            out += judge_nvbandwidth(parse_nvbandwidth(ev.stdout), model, "nvbandwidth")

    if "all_reduce_perf" not in have:
        out.append(_skip("nccl", _("NCCL all-reduce"), "all_reduce_perf", "tools"))
    elif n < 2:
        words = _("skipped, because an all-reduce needs two GPUs or more")
        out.append(_r("nccl", _("NCCL all-reduce"), Status.SKIPPED, words, "tools"))
    else:
        cmd = f"all_reduce_perf -b 8 -e 1G -f 2 -g {int(n)}"
        ev = await ctx.probe.run("nccl", cmd, 600)
        if why := _broken(ev):
            words = _("not checked: {why}").format(why=why)
            out.append(_r("nccl", _("NCCL all-reduce"), Status.NOT_CHECKED, words, "nccl"))
        else:
            out += judge_nccl(parse_nccl(ev.stdout), model, n, ctx.sold, "nccl")
    return out


CHECK = Check("heavy", N_("GPU work: matmul, DCGM, copies, NCCL"), Level.STANDARD, run, cost=50)
