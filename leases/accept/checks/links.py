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
from leases.accept.words import N_, _, interconnect_words
from leases.core.acceptance import CheckResult, Level, Status
from leases.core.models import Interconnect
from leases.core.textsafe import visible

QUERY_GPU_KEY = "query-gpu"
TOPO = N_("GPU-to-GPU paths (topo -m)")
NVLINK = N_("NVLink links (nvlink -s)")
IB = N_("InfiniBand (ibstat)")
PCIE = N_("PCIe link (max generation and width)")
SHOWN = 8  # pairs or links named in one finding before "and N more"

# GB/s per NVLink as `nvlink -s` prints it, by generation (ACCEPTANCE-FACTS).
LINK_RATE = (("A100", 25.0), ("A800", 25.0), ("H100", 26.562), ("H200", 26.562),
             ("H800", 26.562), ("H20", 26.562))  # fmt: skip


def _listed(items: Sequence[str]) -> str:
    listed = _(", ").join(items[:SHOWN])
    if len(items) > SHOWN:
        return _("{listed} and {count} more").format(listed=listed, count=len(items) - SHOWN)
    return listed


def _r(name: str, title: str, status: Status, words: str, key: str, **kw: str) -> CheckResult:
    return CheckResult(f"links.{name}", _(title), status, words, evidence=(key,), **kw)


def judge_topology(topo: Topology, sold: Sold) -> list[CheckResult]:
    title = TOPO
    gpus = topo.gpus
    if not gpus:
        why = "; ".join(topo.problems) or _("no GPUs in the matrix")
        words = _("not checked: {why}").format(why=why)
        return [_r("topo", title, Status.NOT_CHECKED, words, "topo")]
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    n = len(pairs)
    cells = sorted({topo.cells.get(p, "?") for p in pairs})
    found = _("{count} GPUs; cells between them: {cells}").format(
        count=len(gpus), cells=", ".join(visible(c, 8) for c in cells)
    )
    if sold.interconnect is not Interconnect.NVLINK:
        words = (
            _("sold as {interconnect}; found {found}").format(
                interconnect=interconnect_words(sold.interconnect), found=found
            )
            if sold.interconnect is Interconnect.PCIE
            else _("the lease records no interconnect to compare; found {found}").format(
                found=found
            )
        )
        status = Status.PASSED if sold.interconnect is Interconnect.PCIE else Status.SKIPPED
        return [_r("topo", title, status, words, "topo", found=found)]
    want = sold.nvlinks
    if not pairs:
        words = _("skipped, because one GPU has no pair to compare; {found}").format(found=found)
        return [_r("topo", title, Status.SKIPPED, words, "topo", found=found)]
    if want:
        # A number of NVLinks sold (NV18) is an NVSwitch board's: every pair joined so.
        expected = _("NV{links} between every GPU pair").format(links=want)
        no_nvlink = [f"{a}-{b} {visible(topo.cells.get((a, b), '?'), 8)}" for a, b in pairs
                     if topo.nvlinks(a, b) is None]  # fmt: skip
        fewer = [f"{a}-{b} {topo.cells[(a, b)]}" for a, b in pairs
                 if (topo.nvlinks(a, b) or want) < want]  # fmt: skip
        if no_nvlink:
            words = _("sold with NV{links} between every pair, but {bad} of {pairs} GPU pairs are"
                      " joined by PCIe only (topo -m): {listed}")  # fmt: skip
            words = words.format(links=want, bad=len(no_nvlink), pairs=n, listed=_listed(no_nvlink))
            return [_r("topo", title, Status.FAILED, words, "topo", expected=expected,
                       found=found)]  # fmt: skip
        if fewer:
            words = _("fewer NVLinks than sold (NV{links}) between {bad} pairs: {listed}")
            words = words.format(links=want, bad=len(fewer), listed=_listed(fewer))
            return [_r("topo", title, Status.FAILED, words, "topo", expected=expected,
                       found=found)]  # fmt: skip
        words = _("NV{links} or more between all {pairs} GPU pairs; {found}")
        words = words.format(links=want, pairs=n, found=found)
        return [_r("topo", title, Status.PASSED, words, "topo", expected=expected, found=found)]
    # NVLink sold without a count: a DGX-1's hybrid cube mesh joins each GPU to four peers,
    # bridged PCIe cards join them in pairs; a GPU with no NVLink peer at all fails.
    expected = _("an NVLink to at least one other GPU, for every GPU")
    alone = [g for g in gpus if not any(topo.nvlinks(g, o) for o in gpus if o != g)]
    if alone:
        words = _("sold with NVLink, but {bad} of {count} GPUs have no NVLink to any other GPU"
                  " (topo -m): {listed}")  # fmt: skip
        words = words.format(bad=len(alone), count=len(gpus), listed=_listed(list(alone)))
        return [_r("topo", title, Status.FAILED, words, "topo", expected=expected, found=found)]
    joined = sum(1 for a, b in pairs if topo.nvlinks(a, b))
    words = _("every GPU has an NVLink peer ({joined} of {pairs} pairs joined by NVLink); {found}")
    words = words.format(joined=joined, pairs=n, found=found)
    return [_r("topo", title, Status.PASSED, words, "topo", expected=expected, found=found)]


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
    title = NVLINK
    nvlink_sold = sold.interconnect is Interconnect.NVLINK
    if not status.links:
        if nvlink_sold:
            why = "; ".join(status.problems)
            if why:
                words = _("sold with NVLink, but nvidia-smi nvlink -s reports no links ({why})")
            else:
                words = _("sold with NVLink, but nvidia-smi nvlink -s reports no links")
            return [_r("nvlink", title, Status.FAILED, words.format(why=why), "nvlink")]
        words = _("skipped, because the GPUs report no NVLink (none was sold)")
        return [_r("nvlink", title, Status.SKIPPED, words, "nvlink")]
    bad: list[str] = []
    judged = sorted({lk.gpu for lk in status.links} | set(status.gpu_names))
    if nvlink_sold and query_gpus is not None:
        absent = sorted(set(query_gpus) - set(judged))
        if absent:
            line = _("nvidia-smi --query-gpu lists {query} GPUs, nvlink -s {nvlink} (not in"
                     " nvlink -s: GPU {absent})")  # fmt: skip
            bad.append(
                line.format(
                    query=len(query_gpus),
                    nvlink=len(judged),
                    absent=", ".join(str(g) for g in absent),
                )
            )
    elif nvlink_sold and sold.gpu_count and len(judged) < sold.gpu_count:
        line = _("nvlink -s lists {count} GPUs, the lease says {sold}")
        bad.append(line.format(count=len(judged), sold=sold.gpu_count))
    for gpu in judged:
        name = status.gpu_names.get(gpu, "")
        rate = link_rate(name)
        links = [lk for lk in status.links if lk.gpu == gpu]
        active = [lk for lk in links if lk.active]
        pcie_card = "PCIE" in name.upper()  # bridged PCIe cards leave some links unused
        if not links:
            if nvlink_sold:
                bad.append(
                    _("GPU {gpu} reports no NVLink links (sold with NVLink)").format(gpu=gpu)
                )
            continue
        for lk in links:
            if not lk.active and not pcie_card:
                bad.append(_("GPU {gpu} link {link} inactive").format(gpu=gpu, link=lk.link))
            elif lk.active and rate is not None and (lk.gbps or 0) < rate - 0.01:
                line = _("GPU {gpu} link {link} at {gbps:g} GB/s (expected {rate:g})")
                bad.append(line.format(gpu=gpu, link=lk.link, gbps=lk.gbps, rate=rate))
        if sold.nvlinks and len(active) < sold.nvlinks:
            line = _("GPU {gpu} has {count} active links (sold NV{links})")
            bad.append(line.format(gpu=gpu, count=len(active), links=sold.nvlinks))
    total = len(status.links)
    if bad:
        words = _("{count} NVLink faults (nvidia-smi nvlink -s): {listed}")
        words = words.format(count=len(bad), listed=_listed(bad))
        return [_r("nvlink", title, Status.FAILED, words, "nvlink")]
    words = _("all {active} active links of {total} at their rate")
    words = words.format(active=sum(lk.active for lk in status.links), total=total)
    return [_r("nvlink", title, Status.PASSED, words, "nvlink")]


def judge_ib(ib: IbStat | None, sold: Sold) -> list[CheckResult]:
    """ib None: ibstat is not installed."""
    title = IB
    if sold.ib_gbps is None:
        if ib is None:
            words = _("skipped, because ibstat is not installed (no InfiniBand was sold)")
            return [_r("ib", title, Status.SKIPPED, words, "ibstat")]
        found = ", ".join(f"{p.ca}/{p.port} {p.state} {p.rate_gbps} {p.link_layer}"
                          for p in ib.ports[:SHOWN]) or _("no ports")  # fmt: skip
        words = _("skipped, because no InfiniBand was sold; found {found}")
        words = words.format(found=visible(found, 300))
        return [_r("ib", title, Status.SKIPPED, words, "ibstat")]
    gbps = sold.ib_gbps
    expected = _("an Active, LinkUp InfiniBand port at {gbps} Gb/s or more").format(gbps=gbps)
    if ib is None or not ib.ports:
        why = _("ibstat is not installed") if ib is None else "; ".join(ib.problems)
        words = _("InfiniBand at {gbps} Gb/s was sold, but no InfiniBand tools or devices were"
                  " found ({why})").format(gbps=gbps, why=visible(why, 200))  # fmt: skip
        return [_r("ib", title, Status.FAILED, words, "ibstat", expected=expected)]
    ib_ports = [p for p in ib.ports if p.link_layer == "InfiniBand"]
    if not ib_ports:
        found = ", ".join(f"{p.ca} {p.link_layer}" for p in ib.ports[:SHOWN])
        words = _("InfiniBand was sold, but every port's link layer is Ethernet (RoCE), not"
                  " InfiniBand: {found}").format(found=visible(found, 300))  # fmt: skip
        return [_r("ib", title, Status.FAILED, words, "ibstat", expected=expected)]
    bad: list[str] = []
    for p in ib_ports:
        where = visible(_("{ca} port {port}").format(ca=p.ca, port=p.port), 80)
        if p.state != "Active":
            if p.state == "Initializing":
                line = _("{where} State {state} (no subnet manager)")
            else:
                line = _("{where} State {state}")
            bad.append(line.format(where=where, state=visible(p.state, 32)))
        if p.physical_state != "LinkUp":
            line = _("{where} Physical state {state}")
            bad.append(line.format(where=where, state=visible(p.physical_state, 32)))
        if p.rate_gbps is None or p.rate_gbps < gbps:
            line = _("{where} Rate {rate} Gb/s (sold {gbps})")
            bad.append(line.format(where=where, rate=p.rate_gbps, gbps=gbps))
    if bad:
        words = _("InfiniBand ports short of what was sold: {listed}").format(listed=_listed(bad))
        return [_r("ib", title, Status.FAILED, words, "ibstat", expected=expected)]
    words = _("{count} InfiniBand ports Active, LinkUp, at {gbps} Gb/s or more")
    words = words.format(count=len(ib_ports), gbps=gbps)
    return [_r("ib", title, Status.PASSED, words, "ibstat", expected=expected)]


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
    title = PCIE
    if not rows:
        words = _("not checked: nvidia-smi --query-gpu gave no PCIe fields")
        return [_r("pcie", title, Status.NOT_CHECKED, words, QUERY_GPU_KEY)]
    low = [f"GPU {i} Gen{g} x{w}" for i, g, w, _g, _w in rows
           if g is None or w is None or g < 3 or w < 16]  # fmt: skip
    now = ", ".join(
        f"GPU {i} Gen{visible(gc, 8)} x{visible(wc, 8)}" for i, _g, _w, gc, wc in rows[:4]
    )
    if len(rows) > 4:
        now += "..."
    note = _("current links ({links}) drop at idle and are compared under load, at --level"
             " standard").format(links=now)  # fmt: skip
    want = _("Gen3 x16 or better")
    if low:
        words = _("PCIe below Gen3 x16 (DCGM's minimum) or not read: {listed}; {note}")
        words = words.format(listed=_listed(low), note=note)
        return [_r("pcie", title, Status.WARNED, words, QUERY_GPU_KEY, expected=want)]
    best = max(g or 0 for _i, g, _w, _gc, _wc in rows)
    words = _("all {count} GPUs at Gen{gen}-capable x16 or better; {note}")
    words = words.format(count=len(rows), gen=best, note=note)
    return [_r("pcie", title, Status.PASSED, words, QUERY_GPU_KEY, expected=want)]


async def run(ctx: Context) -> list[CheckResult]:
    out: list[CheckResult] = []
    topo_ev = await ctx.probe.run("topo", "nvidia-smi topo -m", 30)
    if why := why_unread(topo_ev):
        words = _("not checked: nvidia-smi topo -m failed ({why})").format(why=why)
        out.append(_r("topo", TOPO, Status.NOT_CHECKED, words, "topo"))
    else:
        out += judge_topology(parse_topo(topo_ev.stdout), ctx.sold)
    nv_ev = await ctx.probe.run("nvlink", "nvidia-smi nvlink -s", 30)
    if why := why_unread(nv_ev):  # nothing read is no "GPUs report no NVLink"
        words = _("not checked: nvidia-smi nvlink -s failed ({why})").format(why=why)
        out.append(_r("nvlink", NVLINK, Status.NOT_CHECKED, words, "nvlink"))
    else:
        read = await smi.read_rows(ctx)
        indexes = None if read.rows is None else [r.index for r in read.rows.rows]
        query = None if indexes is None or None in indexes else [int(i or 0) for i in indexes]
        out += judge_nvlink(parse_nvlink(nv_ev.stdout), ctx.sold, query)
    ib_ev = await ctx.probe.run("ibstat", "ibstat", 30)
    if ib_ev.failure:
        words = _("not checked: {why}").format(why=ib_ev.failure)
        out.append(_r("ib", IB, Status.NOT_CHECKED, words, "ibstat"))
    else:
        ib = None if missing_tool(ib_ev) else parse_ibstat(ib_ev.stdout + "\n" + ib_ev.stderr)
        out += judge_ib(ib, ctx.sold)
    read = await smi.read_rows(ctx)
    if read.rows is None:
        out.append(smi.unread("links.pcie", PCIE, read))
    else:
        out += judge_pcie(pcie_rows(read.rows))
    return out


CHECK = Check("links", N_("Interconnect against the lease"), Level.QUICK, run, cost=3)
