"""The interconnect and heavy-tool parsers on real outputs found in public sources
(tests/accept/data/SOURCES-links.md), values read by eye from each file, and on
hypothesis-made text: they never raise and stay bounded in time."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from leases.accept.parse.dcgmi import parse_dcgmi
from leases.accept.parse.ibstat import parse_ibstat
from leases.accept.parse.nccl import parse_nccl
from leases.accept.parse.nvbandwidth import parse_nvbandwidth
from leases.accept.parse.nvlink import parse_nvlink
from leases.accept.parse.topo import parse_topo
from leases.accept.parse.torchrun import parse_torchrun

DATA = Path(__file__).parent / "data"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- topo -m ---------------------------------------------------------------------------


def test_topo_h100_nv18_with_nic_columns_and_gpu_numa_id() -> None:
    t = parse_topo(read("topo-h100-nv18-nic-gpu-numa-id.txt"))
    assert t.gpus == tuple(f"GPU{i}" for i in range(8))
    assert t.nics == tuple(f"NIC{i}" for i in range(12))
    assert all(t.nvlinks(a, b) == 18 for a in t.gpus for b in t.gpus if a != b)
    assert t.cells[("GPU0", "GPU0")] == "X"
    assert t.cells[("GPU0", "NIC0")] == "PXB"
    assert t.cells[("NIC3", "GPU1")] == "PXB"
    assert t.cpu_affinity["GPU4"] == "56-111,168-223"
    assert t.numa_affinity["GPU0"] == "0" and t.numa_affinity["GPU7"] == "1"
    assert "NIC0" not in t.cpu_affinity  # NIC rows leave the affinity cells empty
    assert t.problems == ()  # NIC6..NIC11 have no rows: only GPU rows are required


def test_topo_dgx_a100_nv12_with_mlx5_columns() -> None:
    t = parse_topo(read("topo-dgx-a100-nv12-mlx5.txt"))
    assert len(t.gpus) == 8 and len(t.nics) == 12
    assert t.nics[0] == "mlx5_0" and t.nics[-1] == "mlx5_11"
    assert t.nvlinks("GPU3", "GPU6") == 12
    assert t.cells[("mlx5_10", "mlx5_11")] == "PIX"
    assert t.cpu_affinity["GPU2"] == "16-31,144-159" and t.numa_affinity["GPU2"] == "1"
    assert t.problems == ()


def test_topo_dgx1_mixes_nv1_nv2_and_sys() -> None:
    t = parse_topo(read("topo-dgx1-v100-nv1-nv2-mlx5.txt"))
    assert t.nvlinks("GPU0", "GPU1") == 1
    assert t.nvlinks("GPU0", "GPU3") == 2
    assert t.nvlinks("GPU0", "GPU5") is None and t.cells[("GPU0", "GPU5")] == "SYS"
    assert t.cpu_affinity["GPU7"] == "20-39,60-79"
    assert t.numa_affinity == {}  # that driver printed no NUMA column
    assert t.problems == ()


def test_topo_old_driver_soc_cells() -> None:
    t = parse_topo(read("topo-p40-pcie-soc-old-driver.txt"))
    assert t.cells[("GPU0", "mlx5_0")] == "SOC"
    assert t.cells[("GPU0", "GPU4")] == "PXB" and t.cells[("GPU0", "GPU1")] == "PIX"
    assert t.nvlinks("GPU0", "GPU1") is None
    assert t.problems == ()


def test_topo_space_aligned_with_nic_legend() -> None:
    t = parse_topo(read("topo-8x4090-pcie-spaces-nic-legend.txt"))
    assert len(t.gpus) == 8
    assert t.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"}
    assert t.cells[("GPU6", "NIC0")] == "PHB" and t.cells[("GPU0", "GPU1")] == "SYS"
    assert t.cpu_affinity["GPU2"] == "8-15,72-79" and t.numa_affinity["GPU2"] == "1"
    assert t.problems == ()


def test_topo_ragged_hand_aligned_tabs() -> None:
    t = parse_topo(read("topo-v100-ragged-tabs.txt"))
    assert t.nvlinks("GPU0", "GPU7") == 2 and t.nvlinks("GPU3", "GPU4") == 1
    assert t.cells[("GPU6", "mlx5_1")] == "PIX"
    assert t.cpu_affinity["GPU5"] == "24-47,72-95" and t.numa_affinity["GPU5"] == "1"
    assert t.problems == ()


def test_topo_pcie_only_and_two_card_bridge() -> None:
    t = parse_topo(read("topo-8gpu-pcie-sys-gpu-numa-id.txt"))
    assert {t.cells[(a, b)] for a in t.gpus for b in t.gpus if a != b} == {"SYS"}
    two = parse_topo(read("topo-2x3090-nv4.txt"))
    assert two.nvlinks("GPU0", "GPU1") == 4 and two.numa_affinity["GPU1"] == "0"


def test_topo_names_what_it_cannot_read() -> None:
    assert parse_topo("").problems
    assert parse_topo("NVIDIA-SMI has failed because it couldn't communicate").gpus == ()
    cut = parse_topo("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-23\n")
    assert cut.nvlinks("GPU0", "GPU1") == 4
    assert any("GPU1" in p for p in cut.problems)  # GPU1's row is missing
    odd = parse_topo("\tGPU0\tGPU1\nGPU0\t X \tZZZ\nGPU1\tZZZ\t X \n")
    assert any("unknown cell" in p for p in odd.problems)


# --- nvlink -s -------------------------------------------------------------------------


def test_nvlink_h100_pcie_bridged_some_inactive() -> None:
    s = parse_nvlink(read("nvlink-h100pcie-bridge-inactive.txt"))
    assert s.gpu_names == {0: "NVIDIA H100 PCIe"}
    assert len(s.links) == 18
    assert [lk.link for lk in s.links if not lk.active] == [4, 5, 10, 11, 16, 17]
    assert {lk.gbps for lk in s.links if lk.active} == {26.562}
    assert s.problems == ()


def test_nvlink_3090_and_snipped_dgx1() -> None:
    s = parse_nvlink(read("nvlink-2x3090.txt"))
    assert len(s.links) == 8 and all(lk.gbps == 14.062 for lk in s.links)
    d = parse_nvlink(read("nvlink-dgx1-v100-snipped.txt"))
    assert sorted(d.gpu_names) == [0, 7] and len(d.links) == 12
    assert d.links[0].gbps == 25.781
    assert any("[snip]" in p for p in d.problems)


def test_nvlink_zero_rate_is_not_active() -> None:
    s = parse_nvlink("GPU 0: NVIDIA H100 80GB HBM3\n    Link 11: 0 GB/s\n")
    assert s.links[0].active is False and s.links[0].gbps == 0.0


# --- ibstat ----------------------------------------------------------------------------


def test_ibstat_real_ports() -> None:
    (p,) = parse_ibstat(read("ibstat-mlx5-hdr200-active.txt")).ports
    assert (p.ca, p.port, p.state, p.physical_state, p.rate_gbps, p.link_layer) == (
        "mlx5_0", 1, "Active", "LinkUp", 200, "InfiniBand")  # fmt: skip
    (q,) = parse_ibstat(read("ibstat-initializing-no-sm.txt")).ports
    assert q.state == "Initializing" and q.rate_gbps == 100
    (r,) = parse_ibstat(read("ibstat-roce-ethernet.txt")).ports
    assert r.ca == "rdma0" and r.link_layer == "Ethernet"
    (s,) = parse_ibstat(read("ibstat-soft-roce-rate-2.5.txt")).ports
    assert s.ca == "rxe0" and s.rate_gbps == 2
    (m,) = parse_ibstat(read("ibstat-mlx4-qdr40.txt")).ports
    assert m.rate_gbps == 40


def test_ibstat_without_devices_and_two_ports() -> None:
    none = parse_ibstat(read("ibstat-no-device.txt"))
    assert none.ports == () and "ibpanic" in none.problems[0]
    two = parse_ibstat(
        "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Polling\n\t\tRate: 10\n"
        "\tPort 2:\n\t\tState: Active\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n"
    )
    assert [(p.port, p.state, p.rate_gbps) for p in two.ports] == [
        (1, "Down", 10),
        (2, "Active", 400),
    ]


# --- dcgmi diag ------------------------------------------------------------------------


def test_dcgmi_r1_fail_with_wrapped_error() -> None:
    d = parse_dcgmi(read("dcgmi-r1-h200-persistence-fail.txt"))
    names = [t.name for t in d.tests]
    assert names == ["Denylist", "NVML Library", "CUDA Main Library",
                     "Permissions and OS Blocks", "Persistence Mode", "Environment Variables",
                     "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]  # fmt: skip
    fail = d.tests[4]
    assert fail.result == "Fail"
    assert fail.detail.startswith("Error: Persistence mode for GPU 0 is currently disab")
    assert all(t.result == "Pass" for t in d.tests if t is not fail)
    assert "DCGM Version" not in names  # the Metadata section is not a test


def test_dcgmi_4_lower_case_with_gpu_lines() -> None:
    d = parse_dcgmi(read("dcgmi-r2-dcgm4-pass.txt"))
    assert [(t.name, t.result, t.detail) for t in d.tests] == [
        ("software", "Pass", "GPU0: Pass"), ("memory", "Pass", "GPU0: Pass"),
        ("pcie", "Pass", "GPU0: Pass")]  # fmt: skip


def test_dcgmi_pass_all_warn_and_error_line() -> None:
    d = parse_dcgmi(
        "+-----  Integration  -------+------------+\n| PCIe | Pass - All |\n"
        "+-----  Hardware  ----------+------------+\n| GPU Memory | Fail - GPU 3 |\n"
        "|   GPU 3 | Memory error |\n| Diagnostic | Warn |\n| Warning | clocks low |\n"
    )
    assert [(t.name, t.result) for t in d.tests] == [
        ("PCIe", "Pass"), ("GPU Memory", "Fail"), ("Diagnostic", "Warn")]  # fmt: skip
    assert d.tests[1].detail == "Fail - GPU 3 Memory error"
    assert d.tests[2].detail == "Warning: clocks low"
    err = parse_dcgmi("Error: unable to establish a connection to the specified host: localhost")
    assert err.tests == () and "unable to establish" in err.problems[0]


# --- nvbandwidth -----------------------------------------------------------------------


def test_nvbandwidth_real_outputs() -> None:
    a10 = parse_nvbandwidth(read("nvbandwidth-a10-v0.5.txt"))
    assert a10.sums == {"host_to_device_memcpy_ce": 25.17}
    assert a10.minimum == {"host_to_device_memcpy_ce": 25.17} and a10.problems == ()
    seven = parse_nvbandwidth(read("nvbandwidth-7gpu-v0.10.txt"))
    assert seven.sums["device_to_host_memcpy_ce"] == 399.86
    assert seven.minimum == {"host_to_device_memcpy_ce": 55.58, "device_to_host_memcpy_ce": 56.92}
    gh = parse_nvbandwidth(read("nvbandwidth-gh200-waived.txt"))
    assert gh.minimum["device_to_host_memcpy_ce"] == 241.2
    assert gh.waived == ("host_to_device_bidirectional_memcpy_ce",)


# --- nccl-tests ------------------------------------------------------------------------


def test_nccl_real_outputs() -> None:
    h100 = parse_nccl(read("nccl-8xh100-indented.txt"))
    assert h100.avg_busbw_gbps == 448.212 and h100.out_of_bounds == 0
    assert h100.rows[-1] == (2147483648, 268.99, 470.73, 0) and len(h100.rows) == 4
    h200 = parse_nccl(read("nccl-8xh200-one-size.txt"))
    assert h200.rows == ((8589934592, 272.55, 476.96, 0),) and h200.avg_busbw_gbps == 476.967
    efa = parse_nccl(read("nccl-mpi-prefixed-efa.txt"))
    assert len(efa.rows) == 5 and efa.avg_busbw_gbps == 1.15327 and efa.problems == ()


def test_nccl_unfinished_and_wrong_values() -> None:
    cut = parse_nccl("#  Rank  0 Group  0\n        8   2  float  sum  -1  38.8  0.00  0.00  0\n")
    assert cut.avg_busbw_gbps is None and any("did not finish" in p for p in cut.problems)
    bad = parse_nccl("# Out of bounds values : 12 FAILED\n# Avg bus bandwidth    : 100.5 \n")
    assert bad.out_of_bounds == 12 and bad.avg_busbw_gbps == 100.5
    unchecked = parse_nccl(
        "  1024  256  float  sum  -1  40.1  0.03  0.04  N/A  40.0  0.03  0.04  N/A\n"
    )
    assert unchecked.rows == ((1024, 0.03, 0.04, -1),)


# --- zuka's torch probe ----------------------------------------------------------------


def test_torchrun_json_lines() -> None:
    none = parse_torchrun(
        '{"torch": null, "cuda": null, "gpus": [], "error": "No module named \'torch\'"}'
    )
    assert none.torch is None and "No module named" in none.error
    ok = parse_torchrun(
        "UserWarning: something\n"
        '{"torch": "2.3.1", "cuda": "12.1", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3",'
        ' "total_bytes": 85520809984, "allocated_bytes": 84000000000, "bf16_tflops": 650.2,'
        ' "error": "", "mismatches": 0}], "error": ""}\n'
    )
    (g,) = ok.gpus
    assert ok.torch == "2.3.1" and g.bf16_tflops == 650.2 and g.mismatches == 0
    assert g.allocated_bytes == 84000000000
    junk = parse_torchrun('{"gpus": [1, {"index": true, "bf16_tflops": "fast"}]}')
    assert junk.gpus[0].index == 1 and junk.gpus[0].bf16_tflops is None and junk.problems
    assert parse_torchrun("Segmentation fault").problems


# --- hostile text ----------------------------------------------------------------------

PARSERS = (parse_topo, parse_nvlink, parse_ibstat, parse_dcgmi, parse_nvbandwidth, parse_nccl,
           parse_torchrun)  # fmt: skip
PIECES = st.sampled_from(
    ["GPU0", "GPU1", "NIC0", " X ", "NV18", "SYS", "\t", " ", "\n", "CPU Affinity",
     "NUMA Affinity", "GPU NUMA ID", "NIC Legend:", "  NIC0: mlx5_0", "GPU 0: A100 (UUID: x)",
     "Link 0: 25 GB/s", "<inactive>", "CA 'mlx5_0'", "Port 1:", "Rate: 1e999", "State: Active",
     "| Memory | Fail |", "+-----  Hardware  ---+---+", "Running a.", "bandwidth (GB/s)",
     "SUM a nan", "Waived", "# Avg bus bandwidth : x", "# Out of bounds values : 9", "{",
     '{"gpus": [', "]}", "\x1b[31m", "\u202e", "-1", "8 2 float sum -1 1 2 3 0", "99999999999999999999"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=20)), max_size=60))
def test_parsers_never_raise_on_made_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    for parse in PARSERS:
        parse(text)


def test_parsers_bounded_on_a_huge_line() -> None:
    text = ("GPU0\t" + "NV18\t" * 200_000 + "\n") * 3 + "x" * 2_000_000
    for parse in PARSERS:
        began = time.monotonic()
        result = parse(text)
        assert time.monotonic() - began < 5.0, parse.__name__
        assert len(getattr(result, "problems", ())) <= 21


def test_digits_int_refuses_are_never_read_as_numbers() -> None:
    """str.isdigit() takes "²" (and int() then raises) and "٣" (read as 3): found by the
    hypothesis test below; every parser reads ASCII digits only."""
    assert parse_nccl("² 2 3 4 5 6 7 8").rows == ()
    assert parse_nccl("       ٣   1   float   sum   -1   1.0   0.1   0.1   0").rows == ()
