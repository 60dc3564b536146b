"""Interconnect against the lease: `topo -m` (NVLink between every GPU pair when sold so),
`nvlink -s` (every link active at its generation's rate), InfiniBand via `ibstat` when it
was sold, and the PCIe link's maximum generation and width.

Judges are pure (facts and Sold in, CheckResults out); `run` gathers the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence

from leases.accept.checks import smi
from leases.accept.engine import Check, Context, Sold
from leases.accept.facts import IbStat, NvlinkStatus, Topology
from leases.accept.parse.ibstat import parse_ibstat
from leases.accept.parse.nvlink import parse_nvlink
from leases.accept.parse.smiquery import SmiRows
from leases.accept.parse.topo import parse_topo
from leases.accept.probe import missing_tool, why_unread
from leases.core.acceptance import CheckResult, Level, Status
from leases.core.models import Interconnect
from leases.core.textsafe import visible

QUERY_GPU_KEY = "query-gpu"
SHOWN = 8  # pairs or links named in one finding before "and N more"

# GB/s per NVLink as `nvlink -s` prints it, by generation (ACCEPTANCE-FACTS).
LINK_RATE = (("A100", 25.0), ("A800", 25.0), ("H100", 26.562), ("H200", 26.562),
             ("H800", 26.562), ("H20", 26.562))  # fmt: skip


def _listed(items: Sequence[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _r(name: str, title: str, status: Status, words: str, key: str, **kw: str) -> CheckResult:
    return CheckResult(f"links.{name}", title, status, words, evidence=(key,), **kw)


def judge_topology(topo: Topology, sold: Sold) -> list[CheckResult]:
    title = "GPU-to-GPU paths (topo -m)"
    gpus = topo.gpus
    if not gpus:
        why = "; ".join(topo.problems) or "no GPUs in the matrix"
        return [_r("topo", title, Status.NOT_CHECKED, f"not checked: {why}", "topo")]
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    cells = sorted({topo.cells.get(p, "?") for p in pairs})
    found = f"{len(gpus)} GPUs; cells between them: {', '.join(visible(c, 8) for c in cells)}"
    if sold.interconnect is not Interconnect.NVLINK:
        words = (
            f"sold as {sold.interconnect.value}; found {found}"
            if sold.interconnect is Interconnect.PCIE
            else f"the lease records no interconnect to compare; found {found}"
        )
        status = Status.PASSED if sold.interconnect is Interconnect.PCIE else Status.SKIPPED
        return [_r("topo", title, status, words, "topo", found=found)]
    want = sold.nvlinks
    if not pairs:
        return [_r("topo", title, Status.SKIPPED, f"skipped, because one GPU has no pair to "
                   f"compare; {found}", "topo", found=found)]  # fmt: skip
    if want:
        # A number of NVLinks sold (NV18) is an NVSwitch board's: every pair joined so.
        expected = f"NV{want} between every GPU pair"
        no_nvlink = [f"{a}-{b} {visible(topo.cells.get((a, b), '?'), 8)}" for a, b in pairs
                     if topo.nvlinks(a, b) is None]  # fmt: skip
        fewer = [f"{a}-{b} {topo.cells[(a, b)]}" for a, b in pairs
                 if (topo.nvlinks(a, b) or want) < want]  # fmt: skip
        if no_nvlink:
            words = (f"sold with NV{want} between every pair, but {len(no_nvlink)} of "
                     f"{len(pairs)} GPU pairs are joined by PCIe only (topo -m): "
                     f"{_listed(no_nvlink)}")  # fmt: skip
            return [_r("topo", title, Status.FAILED, words, "topo", expected=expected,
                       found=found)]  # fmt: skip
        if fewer:
            words = (
                f"fewer NVLinks than sold (NV{want}) between {len(fewer)} pairs: {_listed(fewer)}"
            )
            return [_r("topo", title, Status.FAILED, words, "topo", expected=expected,
                       found=found)]  # fmt: skip
        return [_r("topo", title, Status.PASSED, f"NV{want} or more between all {len(pairs)} "
                   f"GPU pairs; {found}", "topo", expected=expected, found=found)]  # fmt: skip
    # NVLink sold without a count: a DGX-1's hybrid cube mesh joins each GPU to four peers,
    # bridged PCIe cards join them in pairs; a GPU with no NVLink peer at all fails.
    expected = "an NVLink to at least one other GPU, for every GPU"
    alone = [g for g in gpus if not any(topo.nvlinks(g, o) for o in gpus if o != g)]
    if alone:
        words = (f"sold with NVLink, but {len(alone)} of {len(gpus)} GPUs have no NVLink to "
                 f"any other GPU (topo -m): {_listed(list(alone))}")  # fmt: skip
        return [_r("topo", title, Status.FAILED, words, "topo", expected=expected, found=found)]
    joined = sum(1 for a, b in pairs if topo.nvlinks(a, b))
    return [_r("topo", title, Status.PASSED, f"every GPU has an NVLink peer ({joined} of "
               f"{len(pairs)} pairs joined by NVLink); {found}", "topo", expected=expected,
               found=found)]  # fmt: skip


def link_rate(gpu_name: str) -> float | None:
    """The GB/s one NVLink of this model runs at, None when not known here."""
    upper = gpu_name.upper()
    for model, rate in LINK_RATE:
        if f"{model} " in upper + " " or f"{model}-" in upper:
            return rate
    return None


def judge_nvlink(
    status: NvlinkStatus, sold: Sold, query_gpus: Sequence[int] | None = None
) -> list[CheckResult]:
    """Every GPU nvlink -s prints is judged, one printed with no Link lines too (NVLink
    off on it fails when NVLink was sold); query_gpus, the indexes of the acceptance
    query's rows when it was read, are each expected in nvlink -s when NVLink was sold."""
    title = "NVLink links (nvlink -s)"
    nvlink_sold = sold.interconnect is Interconnect.NVLINK
    if not status.links:
        if nvlink_sold:
            why = "; ".join(status.problems)
            words = "sold with NVLink, but nvidia-smi nvlink -s reports no links" + (
                f" ({why})" if why else ""
            )
            return [_r("nvlink", title, Status.FAILED, words, "nvlink")]
        return [_r("nvlink", title, Status.SKIPPED, "skipped, because the GPUs report no NVLink "
                   "(none was sold)", "nvlink")]  # fmt: skip
    bad: list[str] = []
    judged = sorted({lk.gpu for lk in status.links} | set(status.gpu_names))
    if nvlink_sold and query_gpus is not None:
        absent = sorted(set(query_gpus) - set(judged))
        if absent:
            bad.append(
                f"nvidia-smi --query-gpu lists {len(query_gpus)} GPUs, nvlink -s {len(judged)}"
                f" (not in nvlink -s: GPU {', '.join(str(g) for g in absent)})"
            )
    elif nvlink_sold and sold.gpu_count and len(judged) < sold.gpu_count:
        bad.append(f"nvlink -s lists {len(judged)} GPUs, the lease says {sold.gpu_count}")
    for gpu in judged:
        name = status.gpu_names.get(gpu, "")
        rate = link_rate(name)
        links = [lk for lk in status.links if lk.gpu == gpu]
        active = [lk for lk in links if lk.active]
        pcie_card = "PCIE" in name.upper()  # bridged PCIe cards leave some links unused
        if not links:
            if nvlink_sold:
                bad.append(f"GPU {gpu} reports no NVLink links (sold with NVLink)")
            continue
        for lk in links:
            if not lk.active and not pcie_card:
                bad.append(f"GPU {gpu} link {lk.link} inactive")
            elif lk.active and rate is not None and (lk.gbps or 0) < rate - 0.01:
                bad.append(f"GPU {gpu} link {lk.link} at {lk.gbps:g} GB/s (expected {rate:g})")
        if sold.nvlinks and len(active) < sold.nvlinks:
            bad.append(f"GPU {gpu} has {len(active)} active links (sold NV{sold.nvlinks})")
    total = len(status.links)
    if bad:
        words = f"{len(bad)} NVLink faults (nvidia-smi nvlink -s): {_listed(bad)}"
        return [_r("nvlink", title, Status.FAILED, words, "nvlink")]
    return [_r("nvlink", title, Status.PASSED, f"all {sum(lk.active for lk in status.links)} "
               f"active links of {total} at their rate", "nvlink")]  # fmt: skip


def judge_ib(ib: IbStat | None, sold: Sold) -> list[CheckResult]:
    """ib None: ibstat is not installed."""
    title = "InfiniBand (ibstat)"
    if sold.ib_gbps is None:
        if ib is None:
            return [_r("ib", title, Status.SKIPPED, "skipped, because ibstat is not installed "
                       "(no InfiniBand was sold)", "ibstat")]  # fmt: skip
        found = ", ".join(f"{p.ca}/{p.port} {p.state} {p.rate_gbps} {p.link_layer}"
                          for p in ib.ports[:SHOWN]) or "no ports"  # fmt: skip
        return [_r("ib", title, Status.SKIPPED, f"skipped, because no InfiniBand was sold; "
                   f"found {visible(found, 300)}", "ibstat")]  # fmt: skip
    expected = f"an Active, LinkUp InfiniBand port at {sold.ib_gbps} Gb/s or more"
    if ib is None or not ib.ports:
        why = "ibstat is not installed" if ib is None else "; ".join(ib.problems)
        return [_r("ib", title, Status.FAILED, f"InfiniBand at {sold.ib_gbps} Gb/s was sold, "
                   f"but no InfiniBand tools or devices were found ({visible(why, 200)})",
                   "ibstat", expected=expected)]  # fmt: skip
    ib_ports = [p for p in ib.ports if p.link_layer == "InfiniBand"]
    if not ib_ports:
        found = ", ".join(f"{p.ca} {p.link_layer}" for p in ib.ports[:SHOWN])
        return [_r("ib", title, Status.FAILED, "InfiniBand was sold, but every port's link "
                   f"layer is Ethernet (RoCE), not InfiniBand: {visible(found, 300)}", "ibstat",
                   expected=expected)]  # fmt: skip
    bad: list[str] = []
    for p in ib_ports:
        where = visible(f"{p.ca} port {p.port}", 80)
        if p.state != "Active":
            hint = " (no subnet manager)" if p.state == "Initializing" else ""
            bad.append(f"{where} State {visible(p.state, 32)}{hint}")
        if p.physical_state != "LinkUp":
            bad.append(f"{where} Physical state {visible(p.physical_state, 32)}")
        if p.rate_gbps is None or p.rate_gbps < sold.ib_gbps:
            bad.append(f"{where} Rate {p.rate_gbps} Gb/s (sold {sold.ib_gbps})")
    if bad:
        return [_r("ib", title, Status.FAILED, f"InfiniBand ports short of what was sold: "
                   f"{_listed(bad)}", "ibstat", expected=expected)]  # fmt: skip
    return [_r("ib", title, Status.PASSED, f"{len(ib_ports)} InfiniBand ports Active, LinkUp, "
               f"at {sold.ib_gbps} Gb/s or more", "ibstat", expected=expected)]  # fmt: skip


def pcie_rows(rows: SmiRows) -> list[tuple[str, int | None, int | None, str, str]]:
    """(index, gen max, width max, gen current, width current) per GPU of the query."""

    def shown(value: int | None) -> str:
        return "?" if value is None else str(value)

    return [
        (shown(r.index), r.pcie_gen_max, r.pcie_width_max, shown(r.pcie_gen_current),
         shown(r.pcie_width_current))
        for r in rows.rows
    ]  # fmt: skip


def judge_pcie(rows: Sequence[tuple[str, int | None, int | None, str, str]]) -> list[CheckResult]:
    title = "PCIe link (max generation and width)"
    if not rows:
        return [_r("pcie", title, Status.NOT_CHECKED, "not checked: nvidia-smi --query-gpu "
                   "gave no PCIe fields", QUERY_GPU_KEY)]  # fmt: skip
    low = [f"GPU {i} Gen{g} x{w}" for i, g, w, _, _ in rows
           if g is None or w is None or g < 3 or w < 16]  # fmt: skip
    now = ", ".join(
        f"GPU {i} Gen{visible(gc, 8)} x{visible(wc, 8)}" for i, _, _, gc, wc in rows[:4]
    )
    note = (f"; current links ({now}{'...' if len(rows) > 4 else ''}) drop at idle and are "
            "compared under load, at --level standard")  # fmt: skip
    if low:
        return [_r("pcie", title, Status.WARNED, f"PCIe below Gen3 x16 (DCGM's minimum) or not "
                   f"read: {_listed(low)}{note}", QUERY_GPU_KEY,
                   expected="Gen3 x16 or better")]  # fmt: skip
    best = max(g or 0 for _, g, _, _, _ in rows)
    return [_r("pcie", title, Status.PASSED, f"all {len(rows)} GPUs at Gen{best}-capable x16 "
               f"or better{note}", QUERY_GPU_KEY, expected="Gen3 x16 or better")]  # fmt: skip


async def run(ctx: Context) -> list[CheckResult]:
    out: list[CheckResult] = []
    topo_ev = await ctx.probe.run("topo", "nvidia-smi topo -m", 30)
    if why := why_unread(topo_ev):
        out.append(_r("topo", "GPU-to-GPU paths (topo -m)", Status.NOT_CHECKED,
                      f"not checked: nvidia-smi topo -m failed ({why})", "topo"))  # fmt: skip
    else:
        out += judge_topology(parse_topo(topo_ev.stdout), ctx.sold)
    nv_ev = await ctx.probe.run("nvlink", "nvidia-smi nvlink -s", 30)
    if why := why_unread(nv_ev):  # nothing read is no "GPUs report no NVLink"
        out.append(_r("nvlink", "NVLink links (nvlink -s)", Status.NOT_CHECKED,
                      f"not checked: nvidia-smi nvlink -s failed ({why})", "nvlink"))  # fmt: skip
    else:
        read = await smi.read_rows(ctx)
        indexes = None if read.rows is None else [r.index for r in read.rows.rows]
        query = None if indexes is None or None in indexes else [int(i or 0) for i in indexes]
        out += judge_nvlink(parse_nvlink(nv_ev.stdout), ctx.sold, query)
    ib_ev = await ctx.probe.run("ibstat", "ibstat", 30)
    if ib_ev.failure:
        out.append(_r("ib", "InfiniBand (ibstat)", Status.NOT_CHECKED,
                      f"not checked: {ib_ev.failure}", "ibstat"))  # fmt: skip
    else:
        ib = None if missing_tool(ib_ev) else parse_ibstat(ib_ev.stdout + "\n" + ib_ev.stderr)
        out += judge_ib(ib, ctx.sold)
    read = await smi.read_rows(ctx)
    if read.rows is None:
        out.append(smi.unread("links.pcie", "PCIe link (max generation and width)", read))
    else:
        out += judge_pcie(pcie_rows(read.rows))
    return out


CHECK = Check("links", "Interconnect against the lease", Level.QUICK, run, cost=3)
