"""The nvidia-smi parsers on hypothesis-made text and XML: they never raise, keep to their
bounds, and finish in bounded time, whatever the node prints."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import fields
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from leases.accept.facts import GpuQuery, SmiQuery
from leases.accept.parse.smiq import parse_q
from leases.accept.parse.smiquery import parse_query_gpu
from leases.accept.parse.smixml import parse_xml

DATA = Path(__file__).parent / "data"
H100 = (DATA / "thamada-H100SXMx8-q.txt").read_text(encoding="utf-8")
A100_XML = (DATA / "telegraf-a100-sxm4-v12.xml").read_text(encoding="utf-8")
# CPU seconds one parse may take (a quadratic parse of these inputs takes minutes; real
# outputs take milliseconds). CPU time, not wall time: a loaded machine stretches the wall
# clock of a parse that is fine.
BOUND_S = 5.0

KEYS = [
    "GPU 00000000:18:00.0", "Product Name", "FB Memory Usage", "Total", "Used", "Reserved",
    "MIG Mode", "MIG Devices", "MIG Device", "Index", "Current", "Pending", "ECC Mode",
    "Ecc Mode", "ECC Errors", "Volatile", "Aggregate", "Double Bit", "DRAM Uncorrectable",
    "Retired Pages", "Single Bit ECC", "Double Bit ECC", "Pending Page Blacklist",
    "Remapped Rows", "Correctable Error", "Uncorrectable Error", "Remapping Failure Occurred",
    "GPU Power Readings", "Power Readings", "Current Power Limit", "Default Power Limit",
    "Clocks Event Reasons", "Clocks Throttle Reasons", "Idle", "SW Power Cap", "PCI",
    "Device Id", "GPU Link Info", "PCIe Generation", "Link Width", "Max", "Processes",
    "Process ID", "Type", "Name", "Used GPU Memory", "GPU Virtualization Mode",
    "Virtualization Mode", "vGPU Software Licensed Product", "License Status",
    "Driver Version", "CUDA Version", "Attached GPUs",
]  # fmt: skip
VALUES = [
    "", "N/A", "[Not Supported]", "Active", "Not Active", "Yes", "No", "Enabled", "VGPU",
    "81559 MiB", "-1 MiB", "1e400 W", "700.00 W", "16x", "0x233010DE", "None", "99999999999999999999",
    "\x1b[31mred\x1b[0m", "[b]markup[/b]", "0x" + "f" * 40,
]  # fmt: skip
TAGS = [
    "nvidia_smi_log", "gpu", "product_name", "fb_memory_usage", "total", "used", "mig_mode",
    "current_mig", "mig_devices", "mig_device", "ecc_errors", "volatile", "double_bit",
    "dram_uncorrectable", "retired_pages", "double_bit_retirement", "retired_count",
    "remapped_rows", "remapped_row_unc", "gpu_power_readings", "power_readings",
    "current_power_limit", "default_power_limit", "clocks_event_reasons",
    "clocks_throttle_reasons", "clocks_event_reason_hw_slowdown", "pci", "pci_device_id",
    "pci_gpu_link_info", "pcie_gen", "max_link_gen", "processes", "process_info", "pid",
    "used_memory", "gpu_virtualization_mode", "virtualization_mode", "license_status",
]  # fmt: skip


def _sane(q: SmiQuery) -> None:
    assert isinstance(q, SmiQuery)
    assert len(q.gpus) <= 128
    for g in q.gpus:
        assert isinstance(g, GpuQuery)
        for f in fields(g):
            value = getattr(g, f.name)
            if isinstance(value, str):
                assert len(value) <= 256
            elif isinstance(value, int) and f.name != "index":
                assert value >= 0
        assert len(g.processes) <= 4096


def _timed_q(text: str) -> SmiQuery:
    began = time.process_time()
    q = parse_q(text)
    assert time.process_time() - began < BOUND_S
    return q


def _timed_xml(text: str) -> SmiQuery:
    began = time.process_time()
    q = parse_xml(text)
    assert time.process_time() - began < BOUND_S
    return q


_line = st.tuples(
    st.integers(0, 24),
    st.one_of(st.sampled_from(KEYS), st.text(max_size=30)),
    st.one_of(st.none(), st.sampled_from(VALUES), st.text(max_size=30)),
).map(lambda t: " " * t[0] + t[1] + ("" if t[2] is None else f"  : {t[2]}"))


@given(st.lists(_line, max_size=200))
def test_text_made_of_real_keys_never_raises(lines: list[str]) -> None:
    _sane(_timed_q("\n".join(lines)))


@given(st.text(max_size=2000))
def test_any_text_never_raises(text: str) -> None:
    _sane(_timed_q(text))


@given(st.integers(0, len(H100)), st.integers(0, len(H100)), st.text(max_size=50))
def test_real_text_cut_and_spliced(a: int, b: int, insert: str) -> None:
    lo, hi = sorted((a, b))
    _sane(_timed_q(H100[:lo] + insert + H100[hi:]))


def _element(depth: int) -> st.SearchStrategy[ET.Element]:
    def build(tag: str, text: str | None, kids: list[ET.Element]) -> ET.Element:
        el = ET.Element(tag)
        el.text = text
        el.extend(kids)
        return el

    kids = st.lists(_element(depth - 1), max_size=4) if depth > 0 else st.just([])
    text = st.one_of(st.none(), st.sampled_from(VALUES), st.text(max_size=20))
    return st.builds(build, st.sampled_from(TAGS), text, kids)


@given(_element(4))
def test_xml_trees_of_real_tags_never_raise(tree: ET.Element) -> None:
    root = ET.Element("nvidia_smi_log")
    root.append(tree)
    _sane(_timed_xml(ET.tostring(root, encoding="unicode")))


@given(st.text(max_size=2000))
def test_any_text_as_xml_never_raises(text: str) -> None:
    _sane(_timed_xml(text))


@given(st.integers(0, len(A100_XML)), st.integers(0, len(A100_XML)), st.text(max_size=50))
def test_real_xml_cut_and_spliced(a: int, b: int, insert: str) -> None:
    lo, hi = sorted((a, b))
    _sane(_timed_xml(A100_XML[:lo] + insert + A100_XML[hi:]))


@given(st.lists(st.text(max_size=40), max_size=20))
def test_query_csv_never_raises(tokens: list[str]) -> None:
    rows = parse_query_gpu(",".join(tokens))
    assert len(rows.rows) <= 128


def test_huge_inputs_are_bounded() -> None:
    # 200,000 lines deep in indentation, a 10 MB line, 300 GPUs: cut, named, quick.
    deep = "\n".join(" " * (i % 20) + "Key : 1" for i in range(200_000))
    assert "more than 100000 lines" in " ".join(_timed_q(deep).problems)
    assert "longer than" in _timed_q("x" * 10_000_000).problems[0]
    many = "".join(f"GPU 00000000:{i % 256:02X}:00.0\n    Product Name : A\n" for i in range(300))
    q = _timed_q(many)
    assert len(q.gpus) == 128 and any("more than 128 GPUs" in p for p in q.problems)
    # A thousand levels of indentation under sections the parser walks.
    chain = "".join(" " * i + "Active : Active\n" for i in range(5, 999))
    for section in ("Clocks Event Reasons", "Processes", "MIG Devices"):
        text = f"GPU 00000000:01:00.0\n{section}\n{chain}"
        q = _timed_q(text.replace(section, "    " + section))
        _sane(q)
        assert len(q.gpus[0].throttle_active) == (32 if section.startswith("Clocks") else 0)
    nested = "<nvidia_smi_log>" + "<gpu>" * 100_000 + "</gpu>" * 100_000 + "</nvidia_smi_log>"
    _sane(_timed_xml(nested))
    assert "longer than" in _timed_xml("<a>" + "x" * 5_000_000 + "</a>").problems[0]
