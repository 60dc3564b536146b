"""The links and heavy check families: their judges on hand-made facts (each trap), and
each CHECK.run on canned outputs through a tiny fake runner."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from leases.accept import nominal
from leases.accept.checks import heavy, links, smi
from leases.accept.engine import Settings, Sold, new_context
from leases.accept.facts import (
    DcgmDiag,
    DiagTest,
    IbPort,
    IbStat,
    NcclPerf,
    Nvbandwidth,
    NvLink,
    NvlinkStatus,
    Topology,
)
from leases.accept.parse.nvlink import parse_nvlink
from leases.accept.parse.torchrun import TorchGpu, TorchRun, parse_torchrun
from leases.core.acceptance import Evidence, Level, Status
from leases.core.models import Interconnect
from leases.ssh.stream import CommandResult

DATA = Path(__file__).parent / "data"
NV = Sold("n1", "H100", 8, 80, Interconnect.NVLINK, nvlinks=18)


def topo_of(cell: str, n: int = 4, odd: dict[tuple[str, str], str] | None = None) -> Topology:
    gpus = tuple(f"GPU{i}" for i in range(n))
    cells = {(a, b): ("X" if a == b else cell) for a in gpus for b in gpus}
    cells.update(odd or {})
    return Topology(devices=gpus, cells=cells)


# --- links judges ----------------------------------------------------------------------


def test_pcie_matrix_on_a_node_sold_nvlink_fails_naming_pairs() -> None:
    (r,) = links.judge_topology(topo_of("SYS"), NV)
    assert r.status is Status.FAILED
    assert "6 of 6 GPU pairs" in r.words and "GPU0-GPU1 SYS" in r.words
    assert r.expected == "NV18 between every GPU pair"


def test_one_pair_without_nvlink_and_fewer_links_fail() -> None:
    (r,) = links.judge_topology(topo_of("NV18", odd={("GPU1", "GPU3"): "PXB"}), NV)
    assert r.status is Status.FAILED and "1 of 6" in r.words and "GPU1-GPU3 PXB" in r.words
    (f,) = links.judge_topology(topo_of("NV12"), NV)
    assert f.status is Status.FAILED and "fewer NVLinks than sold (NV18) between 6 pairs" in f.words


def test_nv18_everywhere_passes_and_pcie_sold_pcie_passes() -> None:
    assert links.judge_topology(topo_of("NV18"), NV)[0].status is Status.PASSED
    pcie = Sold("n2", "4090", 8, 24, Interconnect.PCIE)
    (r,) = links.judge_topology(topo_of("SYS"), pcie)
    assert r.status is Status.PASSED and "sold as pcie" in r.words
    assert links.judge_topology(topo_of("SYS"), Sold("n3"))[0].status is Status.SKIPPED
    assert links.judge_topology(Topology(problems=("x",)), NV)[0].status is Status.NOT_CHECKED


def h100_links(rate: float = 26.562, dead: int | None = None) -> NvlinkStatus:
    ls = tuple(NvLink(g, k, None if k == dead else rate, k != dead)
               for g in range(2) for k in range(18))  # fmt: skip
    return NvlinkStatus(ls, {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3"})


def test_nvlink_dead_or_slow_link_fails() -> None:
    assert links.judge_nvlink(h100_links(), NV, [0, 1])[0].status is Status.PASSED
    (dead,) = links.judge_nvlink(h100_links(dead=5), NV, [0, 1])
    assert dead.status is Status.FAILED and "GPU 0 link 5 inactive" in dead.words
    assert "GPU 1 has 17 active links (sold NV18)" in dead.words
    (slow,) = links.judge_nvlink(h100_links(rate=25.0), NV, [0, 1])
    assert slow.status is Status.FAILED and "at 25 GB/s (expected 26.562)" in slow.words
    (none,) = links.judge_nvlink(NvlinkStatus(), NV)
    assert none.status is Status.FAILED
    assert links.judge_nvlink(NvlinkStatus(), Sold("p"))[0].status is Status.SKIPPED


def test_nvlink_a_gpu_printed_without_links_fails_when_nvlink_was_sold() -> None:
    # 7 GPUs of 18 links at 26.562 GB/s, then a bare "GPU 7:" header (NVLink off on it).
    text = (
        "".join(
            f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g})\n"
            + "".join(f"\t Link {k}: 26.562 GB/s\n" for k in range(18))
            for g in range(7)
        )
        + "GPU 7: NVIDIA H100 80GB HBM3 (UUID: GPU-7)\n"
    )
    status = parse_nvlink(text)
    (bare,) = links.judge_nvlink(status, NV, list(range(8)))
    assert bare.status is Status.FAILED
    assert bare.words == (
        "1 NVLink faults (nvidia-smi nvlink -s): GPU 7 reports no NVLink links (sold with NVLink)"
    )
    # Not sold with NVLink: a GPU without links is no fault.
    plain = Sold("n1", "H100", 8, 80)
    assert links.judge_nvlink(status, plain, list(range(8)))[0].status is Status.PASSED


def test_nvlink_a_gpu_the_query_lists_but_nvlink_omits_fails() -> None:
    two = h100_links()  # GPUs 0 and 1, 18 links each
    (short,) = links.judge_nvlink(two, NV, [0, 1, 2])
    assert short.status is Status.FAILED
    assert "nvidia-smi --query-gpu lists 3 GPUs, nvlink -s 2 (not in nvlink -s: GPU 2)" in (
        short.words
    )
    assert links.judge_nvlink(two, NV, [0, 1])[0].status is Status.PASSED
    # The query not read: the lease's count instead (NV says 8 GPUs).
    (count,) = links.judge_nvlink(two, NV)
    assert count.status is Status.FAILED and "nvlink -s lists 2 GPUs, the lease says 8" in (
        count.words
    )


def test_link_rate_by_generation() -> None:
    assert links.link_rate("NVIDIA A100-SXM4-80GB") == 25.0
    assert links.link_rate("NVIDIA H200") == 26.562
    assert links.link_rate("NVIDIA H20") == 26.562
    assert links.link_rate("NVIDIA GeForce RTX 3090") is None


IB_SOLD = Sold("n1", "H100", 8, interconnect=Interconnect.NVLINK, ib_gbps=400)


def test_infiniband_traps() -> None:
    up = IbStat((IbPort("mlx5_0", 1, "Active", "LinkUp", 400, "InfiniBand"),))
    assert links.judge_ib(up, IB_SOLD)[0].status is Status.PASSED
    down = IbStat((IbPort("mlx5_0", 1, "Initializing", "LinkUp", 200, "InfiniBand"),))
    (r,) = links.judge_ib(down, IB_SOLD)
    assert r.status is Status.FAILED and "(no subnet manager)" in r.words
    assert "Rate 200 Gb/s (sold 400)" in r.words
    roce = IbStat((IbPort("rdma0", 1, "Active", "LinkUp", 400, "Ethernet"),))
    (e,) = links.judge_ib(roce, IB_SOLD)
    assert e.status is Status.FAILED and "Ethernet (RoCE)" in e.words
    (missing,) = links.judge_ib(None, IB_SOLD)
    assert missing.status is Status.FAILED and "no InfiniBand tools or devices" in missing.words
    (skip,) = links.judge_ib(None, NV)
    assert skip.status is Status.SKIPPED and "ibstat is not installed" in skip.words


def test_pcie_max_link() -> None:
    good = [("0", 4, 16, "1", "16"), ("1", 5, 16, "5", "16")]
    (r,) = links.judge_pcie(good)
    assert r.status is Status.PASSED and "compared under load, at --level standard" in r.words
    (w,) = links.judge_pcie([("0", 4, 16, "4", "16"), ("3", 3, 8, "3", "8")])
    assert w.status is Status.WARNED and "GPU 3 Gen3 x8" in w.words
    assert links.judge_pcie([])[0].status is Status.NOT_CHECKED


# --- heavy judges ----------------------------------------------------------------------

GIB = 2**30
H100 = [(i, "NVIDIA H100 80GB HBM3", 81559) for i in range(2)]


def tgpu(i: int, tflops: float, alloc_gib: float, mism: int | None = None) -> TorchGpu:
    return TorchGpu(i, "NVIDIA H100 80GB HBM3", 81559 * 2**20, int(alloc_gib * GIB), tflops,
                    mism, "")  # fmt: skip


def test_torch_slow_matmul_fake_vram_and_burn_mismatch() -> None:
    good = TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 79.0), tgpu(1, 750.0, 79.0)))
    assert {r.status for r in heavy.judge_torch(good, H100, Settings(), "torch")} == {Status.PASSED}
    # 0.70 x 989 = 692.3: 650 is slow
    slow = heavy.judge_torch(TorchRun("2.3.1", "12.1", (tgpu(0, 650.0, 79.0),)), H100[:1],
                             Settings(), "torch")  # fmt: skip
    assert slow[0].status is Status.FAILED and "66% of the nominal 989" in slow[0].words
    # 90 % of 81559 MiB is 73403 MiB (71.7 GiB): 24 GiB held means shared or fake VRAM
    fake = heavy.judge_torch(TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 24.0),)), H100[:1],
                             Settings(), "torch")  # fmt: skip
    alloc = [r for r in fake if r.check == "heavy.torch.alloc"]
    assert alloc[0].status is Status.FAILED and "24576 MiB of the 81559 MiB" in alloc[0].words
    burn = heavy.judge_torch(TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 79.0, 3),)), H100[:1],
                             Settings(), "burn")  # fmt: skip
    assert any(r.check == "heavy.torch.burn" and r.status is Status.FAILED for r in burn)
    none = heavy.judge_torch(TorchRun(None, None, error="No module named 'torch'"), H100,
                             Settings(), "torch")  # fmt: skip
    assert none[0].status is Status.SKIPPED and "torch is not installed" in none[0].words


def test_torch_seeing_fewer_gpus_than_nvidia_smi_fails_naming_them() -> None:
    # CUDA_VISIBLE_DEVICES=0 in the login's environment: torch reports GPU 0 of 8.
    eight = [(i, "NVIDIA H100 80GB HBM3", 81559) for i in range(8)]
    one = TorchRun("2.4.0", "12.4", (tgpu(0, 700.0, 79.0),))
    out = heavy.judge_torch(one, eight, Settings(), "torch")
    assert out[0].check == "heavy.torch.gpus" and out[0].status is Status.FAILED
    assert out[0].words == (
        "torch sees 1 GPUs, nvidia-smi lists 8; not measured (torch does not report them):"
        " GPU 1, 2, 3, 4, 5, 6, 7"
    )
    # A GPU torch invents (index 9) is named too.
    odd = TorchRun("2.4.0", "12.4", (tgpu(0, 760.0, 79.0), tgpu(9, 760.0, 79.0)))
    (gpus,) = [r for r in heavy.judge_torch(odd, H100, Settings(), "torch")
               if r.check == "heavy.torch.gpus"]  # fmt: skip
    assert "GPU 1" in gpus.words and "nvidia-smi does not list: 9" in gpus.words
    # The same GPUs: no finding on the count.
    good = TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 79.0), tgpu(1, 750.0, 79.0)))
    assert all(
        r.check != "heavy.torch.gpus" for r in heavy.judge_torch(good, H100, Settings(), "t")
    )


def test_a_clean_burn_in_is_a_finding_of_its_own() -> None:
    clean = TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 79.0, 0), tgpu(1, 755.0, 79.0, 0)))
    out = heavy.judge_torch(clean, H100, Settings(burn_seconds=60), "burn", burn=True)
    (burn,) = [r for r in out if r.check == "heavy.torch.burn"]
    assert burn.status is Status.PASSED
    assert burn.words == (
        "GPU 0, GPU 1: every matmul result matched the first over the burn-in (bounded by 60 s)"
    )
    counted = TorchRun("2.3.1", "12.1", (tgpu(0, 760.0, 79.0, None),))
    (none,) = [r for r in heavy.judge_torch(counted, H100[:1], Settings(), "burn", burn=True)
               if r.check == "heavy.torch.burn"]  # fmt: skip
    assert none.status is Status.NOT_CHECKED
    # Not a burn-in: no such finding.
    assert all(r.check != "heavy.torch.burn" for r in heavy.judge_torch(clean, H100, Settings(),
                                                                         "torch"))  # fmt: skip


def test_the_matmul_is_held_to_the_card_sold() -> None:
    """An RTX 4090 (PCI 2684) rented as an A100 80GB: 132.9 TFLOPS is 80 % of the 4090's
    165.2 but 43 % of the A100's 312 (0.70 x 312 = 218.4): failed, naming the card."""
    gpu = TorchGpu(0, "NVIDIA GeForce RTX 4090", 24564 * 2**20, 23 * GIB, 132.9, None, "")
    run = TorchRun("2.3.1", "12.1", (gpu,))
    rows = [(0, "NVIDIA GeForce RTX 4090", 24564)]
    sold = nominal.by_name("A100 80GB").nominal
    assert sold is not None
    (r,) = heavy.judge_torch(run, rows, Settings(), "torch", {0: "2684"}, sold)
    assert r.status is Status.FAILED
    assert "43% of the nominal 312 (A100 80GB, as sold)" in r.words
    (unsold,) = heavy.judge_torch(run, rows, Settings(), "torch", {0: "2684"})
    assert unsold.status is Status.PASSED and "80% of the nominal 165.2" in unsold.words


def test_the_allocation_bar_leaves_what_zukas_script_keeps_free() -> None:
    """A GPU with 4096 MiB free (the lab's job holds the rest): the script stops 512 MiB
    short and in 256 MiB blocks, so it holds 3584 MiB, 87.5 %. 3584 + 768 = 4352 is more
    than 90 % of 4096 (3686.4): passed. 2816 MiB held: 2816 + 768 = 3584 < 3686.4: failed."""
    busy = [(0, "NVIDIA H100 80GB HBM3", 4096)]

    def held(mib: int) -> list[Status]:
        gpu = TorchGpu(0, "NVIDIA H100 80GB HBM3", 81559 * 2**20, mib * 2**20, 760.0, None, "")
        run = TorchRun("2.3.1", "12.1", (gpu,))
        return [r.status for r in heavy.judge_torch(run, busy, Settings(), "torch")
                if r.check == "heavy.torch.alloc"]  # fmt: skip

    assert held(3584) == []
    assert held(2816) == [Status.FAILED]


def test_torch_without_an_allocation_figure_is_not_checked_for_it() -> None:
    gpus = tuple(TorchGpu(i, "NVIDIA H100 80GB HBM3", 81559 * 2**20, None, 760.0, None, "")
                 for i in range(2))  # fmt: skip
    out = heavy.judge_torch(TorchRun("2.3.1", "12.1", gpus), H100, Settings(), "torch")
    alloc = [r for r in out if r.check == "heavy.torch.alloc"]
    assert [r.status for r in alloc] == [Status.NOT_CHECKED, Status.NOT_CHECKED]
    assert alloc[1].words == "not checked: GPU 1: torch's probe gave no allocated_bytes figure"


def test_torch_json_without_this_runs_nonce_is_not_read() -> None:
    line = json.dumps({"torch": "2.3.1", "cuda": "12.1", "error": "", "gpus": [
        {"index": 0, "name": "x", "allocated_bytes": 1, "bf16_tflops": 999.0}]})  # fmt: skip
    canned = parse_torchrun(line + "\n", "ab" * 16)
    assert canned.torch is None and "this run's nonce" in canned.problems[0]
    (r,) = heavy.judge_torch(canned, H100, Settings(), "torch")
    assert r.status is Status.NOT_CHECKED
    # A planted line after the real one does not replace it either.
    real = json.dumps({"torch": "2.3.1", "cuda": "12.1", "error": "", "gpus": [],
                       "nonce": "ab" * 16})  # fmt: skip
    planted = json.dumps({"torch": "9", "cuda": "9", "error": "", "gpus": [], "nonce": "cd" * 16})
    assert parse_torchrun(f"{real}\n{planted}\n", "ab" * 16).torch == "2.3.1"


def test_dcgmi_with_every_test_skipped_is_not_checked() -> None:
    idle = DcgmDiag((DiagTest("Denylist", "Skip"), DiagTest("PCIe", "Not Run")))
    (r,) = heavy.judge_dcgmi(idle, "k")
    assert r.status is Status.NOT_CHECKED
    assert r.words == (
        "not checked: dcgmi diag passed no test; none of its 2 tests ran: Denylist (Skip),"
        " PCIe (Not Run)"
    )
    some = DcgmDiag((DiagTest("Memory", "Pass"), DiagTest("PCIe", "Not Run")))
    (p,) = heavy.judge_dcgmi(some, "k")
    assert p.status is Status.PASSED and "1 did not run (skipped by DCGM): PCIe (Not Run)" in (
        p.words
    )


def test_dcgmi_fail_warn_pass() -> None:
    fail = DcgmDiag((DiagTest("PCIe", "Fail", "Fail - All"), DiagTest("Memory", "Pass")))
    (f,) = heavy.judge_dcgmi(fail, "dcgmi-r2")
    assert f.status is Status.FAILED and "PCIe: Fail - All" in f.words
    warn = heavy.judge_dcgmi(DcgmDiag((DiagTest("Diagnostic", "Warn", "Warning: x"),)), "k")
    assert warn[0].status is Status.WARNED
    ok = DcgmDiag((DiagTest("Memory", "Pass"), DiagTest("Inforom", "Skip")))
    assert heavy.judge_dcgmi(ok, "k")[0].status is Status.PASSED
    assert heavy.judge_dcgmi(DcgmDiag(problems=("no table",)), "k")[0].status is Status.NOT_CHECKED


def test_nvbandwidth_against_azure_bars() -> None:
    fast = Nvbandwidth({}, {"host_to_device_memcpy_ce": 55.4, "device_to_host_memcpy_ce": 55.2})
    assert heavy.judge_nvbandwidth(fast, "NVIDIA H100 80GB HBM3", "k")[0].status is Status.PASSED
    slow = Nvbandwidth({}, {"host_to_device_memcpy_ce": 25.2, "device_to_host_memcpy_ce": 26.0})
    (r,) = heavy.judge_nvbandwidth(slow, "NVIDIA H100 80GB HBM3", "k")
    assert r.status is Status.FAILED and r.expected == ">= 52 GB/s per GPU"
    assert heavy.judge_nvbandwidth(slow, "NVIDIA A100-SXM4-80GB", "k")[0].status is Status.PASSED
    assert heavy.judge_nvbandwidth(slow, "NVIDIA A10", "k")[0].status is Status.SKIPPED
    # The export parts have their full parts' PCIe link, so their bar.
    assert heavy.judge_nvbandwidth(fast, "NVIDIA H800", "k")[0].status is Status.PASSED
    assert heavy.judge_nvbandwidth(slow, "NVIDIA H800", "k")[0].status is Status.FAILED
    assert heavy.judge_nvbandwidth(slow, "NVIDIA A800-SXM4-80GB", "k")[0].status is Status.PASSED


def test_nccl_slow_wrong_and_pcie() -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    good = NcclPerf(((2**30, 266.6, 466.6, 0),), 300.0, 0)
    assert heavy.judge_nccl(good, h100, 8, NV, "k")[0].status is Status.PASSED
    near = NcclPerf(((2**30, 250.0, 430.0, 0),), 300.0, 0)  # 430 >= 0.9 x 460 = 414
    assert heavy.judge_nccl(near, h100, 8, NV, "k")[0].status is Status.WARNED
    slow = NcclPerf(((2**30, 100.0, 190.0, 0),), 100.0, 0)
    assert heavy.judge_nccl(slow, h100, 8, NV, "k")[0].status is Status.FAILED
    wrong = NcclPerf(((2**30, 266.6, 466.6, 4),), 300.0, 4)
    (w,) = heavy.judge_nccl(wrong, h100, 8, NV, "k")
    assert w.status is Status.FAILED and "4 wrong values" in w.words
    pcie = Sold("p", "4090", 8, interconnect=Interconnect.PCIE)
    assert heavy.judge_nccl(slow, "RTX 4090", 8, pcie, "k")[0].status is Status.SKIPPED


# --- CHECK.run through a fake runner ---------------------------------------------------


Answer = CommandResult | Callable[[str], CommandResult]
TORCH_CMD = "env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=PCI_BUS_ID python3 -c "


class FakeRunner:
    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.sent: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.sent.append(cmd)
        for prefix, answer in self.answers.items():
            if cmd.startswith(prefix):
                return answer if isinstance(answer, CommandResult) else answer(cmd)
        return CommandResult(127, "", f"sh: 1: {cmd.split()[0]}: not found\n")


def ok(text: str) -> CommandResult:
    return CommandResult(0, text, "")


def echoing(doc: dict[str, object]) -> Callable[[str], CommandResult]:
    """The probe's JSON line carrying the nonce zuka put in the script it sent."""

    def answer(cmd: str) -> CommandResult:
        m = re.search(r'NONCE = "([0-9a-f]+)"', cmd)
        assert m, cmd
        return ok(json.dumps({**doc, "nonce": m.group(1)}) + "\n")

    return answer


QUERY = "".join(
    f"{i}, NVIDIA H100 80GB HBM3, 0x233010DE, 81559, 0, 550.54.15, Enabled, Disabled, 700.00, "
    f"700.00, 5, 16, 1, 16, 0x0000000000000001, GPU-{i}, 00000000:{i:02x}:00.0\n"
    for i in range(8)
)


async def test_a_node_without_nvidia_smi_is_not_checked_for_links() -> None:
    """A machine where nvidia-smi is not found reads nothing: never "the GPUs report no
    NVLink", never a pass or a skip that sounds like one."""
    for sold in (IB_SOLD, Sold("local", interconnect=Interconnect.PCIE)):
        out = {r.check: r for r in await links.CHECK.run(new_context(sold, FakeRunner({}),
                                                                      Level.QUICK))}  # fmt: skip
        for check in ("links.topo", "links.nvlink", "links.pcie"):
            assert out[check].status is Status.NOT_CHECKED, (check, out[check].words)
        assert "nvidia-smi: not found" in out["links.nvlink"].words


def test_no_exit_status_is_said_as_a_lost_connection() -> None:
    ev = Evidence("q", "nvidia-smi -q", None, "0, Tesla V100", "")
    assert smi.failure_words(ev) == (
        "`nvidia-smi -q` gave no exit status: the connection ended before it did"
    )


async def test_links_run_on_a_pcie_node_sold_as_nvlink() -> None:
    runner = FakeRunner({
        "nvidia-smi topo -m": ok((DATA / "topo-8x4090-pcie-spaces-nic-legend.txt").read_text()),
        "nvidia-smi nvlink -s": ok(""),
        "nvidia-smi --query-gpu": ok(QUERY),
    })  # fmt: skip
    ctx = new_context(IB_SOLD, runner, Level.QUICK)
    out = {r.check: r for r in await links.CHECK.run(ctx)}
    assert out["links.topo"].status is Status.FAILED and "8 of 8 GPUs" in out["links.topo"].words
    assert out["links.nvlink"].status is Status.FAILED
    assert out["links.ib"].status is Status.FAILED  # ibstat missing, IB sold
    assert out["links.pcie"].status is Status.PASSED
    assert {e.key for e in ctx.probe.evidence} == {"topo", "nvlink", "ibstat", "query-gpu"}


async def test_links_run_on_a_good_h100() -> None:
    nvl = "".join(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g})\n"
                  + "".join(f"\t Link {k}: 26.562 GB/s\n" for k in range(18)) for g in range(8))  # fmt: skip
    ib = (DATA / "ibstat-mlx5-hdr200-active.txt").read_text()
    runner = FakeRunner({
        "nvidia-smi topo -m": ok((DATA / "topo-h100-nv18-nic-gpu-numa-id.txt").read_text()),
        "nvidia-smi nvlink -s": ok(nvl), "ibstat": ok(ib), "nvidia-smi --query-gpu": ok(QUERY),
    })  # fmt: skip
    sold = Sold("n1", "H100", 8, 80, Interconnect.NVLINK, nvlinks=18, ib_gbps=200)
    out = await links.CHECK.run(new_context(sold, runner, Level.QUICK))
    assert {r.status for r in out} == {Status.PASSED}, [r.words for r in out]


async def test_heavy_run_skips_what_is_missing() -> None:
    runner = FakeRunner({"command -v": CommandResult(1, "/usr/bin/python3\n", ""),
                         "nvidia-smi --query-gpu": ok(QUERY),
                         TORCH_CMD: echoing({"torch": None, "cuda": None, "gpus": [],
                                             "error": "No module named 'torch'"})})  # fmt: skip
    out = {r.check: r for r in await heavy.CHECK.run(new_context(NV, runner, Level.STANDARD))}
    assert out["heavy.torch"].status is Status.SKIPPED
    for name, tool in (("dcgmi", "dcgmi"), ("nvbw", "nvbandwidth"), ("nccl", "all_reduce_perf")):
        assert out[f"heavy.{name}"].status is Status.SKIPPED
        assert f"{tool} is not installed on the node" in out[f"heavy.{name}"].words
    script = next(c for c in runner.sent if c.startswith(TORCH_CMD))
    assert "# zuka-accept-torch v1" in script


async def test_heavy_run_refuses_a_canned_json_line_and_draws_a_fresh_nonce() -> None:
    eight = {"torch": "2.3.1", "cuda": "12.1", "error": "", "gpus": [
        {"index": i, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85520809984,
         "allocated_bytes": 84 * 10**9, "bf16_tflops": 900.0, "error": ""} for i in range(8)]}  # fmt: skip
    canned = {"command -v": ok("/usr/bin/python3\n"), "nvidia-smi --query-gpu": ok(QUERY),
              TORCH_CMD: ok(json.dumps(eight) + "\n")}  # fmt: skip
    runner = FakeRunner(canned)  # type: ignore[arg-type]
    out = {r.check: r for r in await heavy.CHECK.run(new_context(NV, runner, Level.STANDARD))}
    assert out["heavy.torch"].status is Status.NOT_CHECKED
    assert "this run's nonce" in out["heavy.torch"].words
    echo = FakeRunner({**canned, TORCH_CMD: echoing(eight)})
    first = await heavy.CHECK.run(new_context(NV, echo, Level.STANDARD))
    assert {r.status for r in first if r.check == "heavy.torch"} == {Status.PASSED}
    await heavy.CHECK.run(new_context(NV, echo, Level.STANDARD))
    nonces = [re.findall(r'NONCE = "([0-9a-f]+)"', c) for c in echo.sent if c.startswith(TORCH_CMD)]
    assert len(nonces) == 2 and nonces[0] != nonces[1] and len(nonces[0][0]) == 32


async def test_heavy_run_with_every_tool_slow_and_failing() -> None:
    torch = {"torch": "2.3.1", "cuda": "12.1", "error": "", "gpus": [
        {"index": i, "name": "NVIDIA H100 80GB HBM3", "total_bytes": 85520809984,
         "allocated_bytes": 84 * 10**9, "bf16_tflops": 400.0, "error": ""} for i in range(8)]}  # fmt: skip
    runner = FakeRunner({
        "command -v": ok("/usr/bin/python3\n/usr/bin/dcgmi\n/usr/local/bin/nvbandwidth\n"
                         "/opt/nccl-tests/build/all_reduce_perf\n"),
        "nvidia-smi --query-gpu": ok(QUERY),
        TORCH_CMD: echoing(torch),
        "dcgmi diag -r 2": ok((DATA / "dcgmi-r1-h200-persistence-fail.txt").read_text()),
        "nvbandwidth": ok((DATA / "nvbandwidth-a10-v0.5.txt").read_text()),
        "all_reduce_perf -b 8 -e 1G -f 2 -g 8": ok((DATA / "nccl-mpi-prefixed-efa.txt").read_text()),
    })  # fmt: skip
    results = await heavy.CHECK.run(new_context(NV, runner, Level.STANDARD))
    by: dict[str, list[Status]] = {}
    for r in results:
        by.setdefault(r.check, []).append(r.status)
    assert set(by["heavy.torch"]) == {Status.FAILED}  # 400 < 0.7 x 989
    assert by["heavy.dcgmi"] == [Status.FAILED]
    assert by["heavy.nvbw"] == [Status.FAILED]  # 25.17 < 52
    assert by["heavy.nccl"] == [Status.FAILED]  # 3.11 GB/s at 1 GiB, bar 460


async def test_heavy_run_timeout_is_not_checked() -> None:
    class Slow(FakeRunner):
        async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
            if cmd.startswith("dcgmi"):
                self.sent.append(cmd)
                raise TimeoutError
            return await super().run(cmd, timeout)

    runner = Slow({"command -v": ok("/usr/bin/dcgmi\n"), "nvidia-smi --query-gpu": ok(QUERY)})
    out = {r.check: r for r in await heavy.CHECK.run(new_context(NV, runner, Level.BURN))}
    assert out["heavy.dcgmi"].status is Status.NOT_CHECKED
    assert "no answer within 1800 s" in out["heavy.dcgmi"].words
    assert "dcgmi diag -r 3" in runner.sent


def test_a_dgx1_hybrid_cube_mesh_sold_as_nvlink_passes_and_a_gpu_without_peers_fails() -> None:
    """A DGX-1 (8x V100 SXM2) joins each GPU to four peers by NVLink and the rest by SYS:
    sold as NVLink without a count, that is what it should be. Sold NV18 (an NVSwitch
    board's every-pair figure), it is not."""
    rows = ["X NV1 NV1 NV2 NV2 SYS SYS SYS", "NV1 X NV2 NV1 SYS NV2 SYS SYS",
            "NV1 NV2 X NV2 SYS SYS NV1 SYS", "NV2 NV1 NV2 X SYS SYS SYS NV1",
            "NV2 SYS SYS SYS X NV1 NV1 NV2", "SYS NV2 SYS SYS NV1 X NV2 NV1",
            "SYS SYS NV1 SYS NV1 NV2 X NV2", "SYS SYS SYS NV1 NV2 NV1 NV2 X"]  # fmt: skip
    gpus = [f"GPU{i}" for i in range(8)]
    cells = {(a, b): c for a, row in zip(gpus, rows, strict=True)
             for b, c in zip(gpus, row.split(), strict=True)}  # fmt: skip
    topo = Topology(devices=tuple(gpus), cells=cells)
    sold = Sold("v100", "V100 32GB", 8, 32, Interconnect.NVLINK)
    (r,) = links.judge_topology(topo, sold)
    assert r.status is Status.PASSED and "16 of 28 pairs" in r.words
    (nv18,) = links.judge_topology(topo, replace(sold, nvlinks=18))
    assert nv18.status is Status.FAILED and "12 of 28 GPU pairs" in nv18.words
    lonely = {k: ("SYS" if "GPU7" in k and k[0] != k[1] else v) for k, v in cells.items()}
    (one,) = links.judge_topology(Topology(devices=tuple(gpus), cells=lonely), sold)
    assert one.status is Status.FAILED and "1 of 8 GPUs" in one.words and "GPU7" in one.words


def test_per_gpu_words_say_a_value_every_gpu_shares_once() -> None:
    same = [(f"GPU {i}", "81920 MiB ECC Enabled") for i in range(8)]
    assert smi.per_gpu(same) == "all 8 GPUs: 81920 MiB ECC Enabled"
    mixed = [("GPU 0", "None"), ("GPU 1", "VGPU")]
    assert smi.per_gpu(mixed) == "GPU 0 None, GPU 1 VGPU"
    assert smi.per_gpu([("GPU 0", "None")]) == "GPU 0 None"
    many = [(f"GPU {i}", str(i)) for i in range(20)]
    assert smi.per_gpu(many).endswith("GPU 15 15 and 4 more")


def test_a_finding_true_of_many_gpus_is_said_once() -> None:
    lines = [f"GPU {i} reports 24564 MiB; the A100 80GB has 81920 MiB" for i in range(8)]
    lines.insert(3, "GPU 9: memory.total unreadable")
    assert smi.said_once(lines) == (
        "GPU 0, 1, 2, 3, 4, 5, 6, 7 reports 24564 MiB; the A100 80GB has 81920 MiB; "
        "GPU 9: memory.total unreadable"
    )
    assert smi.said_once(["no GPU named here", "GPU 12 x"]) == "no GPU named here; GPU 12 x"
    many = [f"GPU {i}: limit {i} W" for i in range(10)]
    assert smi.said_once(many, shown=2) == "GPU 0: limit 0 W; GPU 1: limit 1 W; and 8 more"


def test_the_pcie_link_is_judged_under_load_against_its_most() -> None:
    from leases.accept.parse.smiquery import parse_query_gpu

    rows = parse_query_gpu(QUERY)  # 8 GPUs, Gen5 x16 at most
    gpus = tuple(
        TorchGpu(i, "NVIDIA H100 80GB HBM3", None, None, 760.0, None, "", (5, 16)) for i in range(8)
    )
    ok_run = TorchRun("2.3.1", "12.1", gpus)
    passed = heavy.judge_pcie_load(ok_run, rows, "torch")
    assert passed.status is Status.PASSED and passed.words == "under load: all 8 GPUs: Gen5 x16"
    down = TorchRun("2.3.1", "12.1", (*gpus[:7], replace(gpus[7], pcie_load=(3, 8))))
    warned = heavy.judge_pcie_load(down, rows, "torch")
    assert warned.status is Status.WARNED
    assert warned.words.startswith("GPU 7 ran at Gen3 x8 under load, its most is Gen5 x16")
    none = TorchRun("2.3.1", "12.1", tuple(replace(g, pcie_load=None) for g in gpus))
    assert heavy.judge_pcie_load(none, rows, "torch").status is Status.NOT_CHECKED
    assert parse_torchrun('{"gpus": [{"index": 0, "pcie_load": "4, 16"}]}').gpus[0].pcie_load == (
        4,
        16,
    )
    assert parse_torchrun('{"gpus": [{"index": 0, "pcie_load": "4, ²"}]}').gpus[0].pcie_load is None


def test_the_probe_scripts_are_python_and_run_where_torch_is_missing(tmp_path: Path) -> None:
    """No GPU or torch here: the script still runs for real and says so in its JSON line,
    carrying this run's nonce (the GPU paths are checked by compiling them)."""
    import subprocess
    import sys

    from leases.accept.torchprobe import burn_script, new_nonce, torch_script

    nonce = new_nonce()
    for script in (torch_script(nonce), burn_script(60, nonce)):
        compile(script, "probe", "exec")
    (tmp_path / "torch.py").write_text("raise ImportError('No module named torch (test)')\n")
    done = subprocess.run(
        [sys.executable, "-c", torch_script(nonce)], capture_output=True, text=True,
        timeout=60, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = parse_torchrun(done.stdout, nonce)
    assert run.torch is None and "No module named torch (test)" in run.error
