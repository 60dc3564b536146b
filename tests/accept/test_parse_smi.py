"""The nvidia-smi parsers on real outputs found in public sources (tests/accept/data,
SOURCES.md names each), across driver generations 418–595, with MIG, vGPU and GeForce
cards; the values asserted were read in the files by eye. Plus the hostile-XML refusals
and the acceptance query CSV.
"""

from __future__ import annotations

from pathlib import Path

from leases.accept.facts import QueryProcess
from leases.accept.parse.smiq import parse_q
from leases.accept.parse.smiquery import QUERY_GPU_FIELDS, parse_query_gpu
from leases.accept.parse.smixml import parse_xml
from leases.accept.parse.values import device_id

DATA = Path(__file__).parent / "data"


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- nvidia-smi -q (text) ---


def test_h100_565_eight_gpus() -> None:
    q = parse_q(_read("thamada-H100SXMx8-q.txt"))
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("565.57.01", "12.7", 8)
    assert len(q.gpus) == 8 and q.problems == ()
    g = q.gpus[0]
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.bus_id == "00000000:18:00.0"
    assert g.pci_device_id == "2330"
    assert g.uuid == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert (g.memory_total_mib, g.memory_used_mib, g.memory_reserved_mib) == (81559, 1, 454)
    assert (g.virtualization_mode, g.mig_current, g.mig_devices) == ("None", "Disabled", 0)
    assert g.ecc_current == "Enabled"
    assert (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) == (0, 0)
    assert (g.remapped_correctable, g.remapped_uncorrectable) == (0, 0)
    assert (g.remap_pending, g.remap_failure) == ("No", "No")
    assert (g.retired_sbe, g.retired_dbe) == (None, None)  # "N/A" on Hopper
    assert (g.power_limit_w, g.default_power_limit_w, g.max_power_limit_w) == (700, 700, 700)
    assert g.throttle_active == ("Idle",)  # "Clocks Event Reasons", driver 565
    assert (g.pcie_gen_max, g.pcie_gen_current, g.pcie_width_max) == (5, 5, 16)
    assert g.processes == ()  # "Processes : None"
    assert q.gpus[7].bus_id == "00000000:DB:00.0"
    assert [x.index for x in q.gpus] == list(range(8))


def test_v100_470_old_names() -> None:
    q = parse_q(_read("v100-pcie-470-q.txt"))
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("470.129.06", "11.4", 8)
    g = q.gpus[0]  # `-q -i 1`: one of the eight
    assert g.name == "Tesla V100-PCIE-32GB" and g.pci_device_id == "1db6"
    assert (g.memory_total_mib, g.memory_reserved_mib) == (32510, None)
    assert g.ecc_current == "Enabled"  # "Ecc Mode", the older spelling
    # Single Bit / Double Bit layout: volatile double-bit total 0; aggregate too.
    assert (g.ecc_uncorrected_volatile, g.ecc_uncorrected_aggregate) == (0, 0)
    assert (g.retired_sbe, g.retired_dbe, g.retired_pending) == (1, 0, "No")
    assert g.remapped_uncorrectable is None  # "Remapped Rows : N/A" on Volta
    assert g.throttle_active == ("Idle",)  # "Clocks Throttle Reasons"
    assert (g.power_limit_w, g.default_power_limit_w) == (250, 250)  # "Power Readings"
    assert (g.pcie_gen_max, g.pcie_width_current) == (3, 16)


def test_vgpu_guest_unlicensed() -> None:
    q = parse_q(_read("cudaerror4vgpu-RTXA6000-24Q-q.txt"))
    assert q.driver_version == "535.183.06"
    g = q.gpus[0]
    assert g.name == "NVIDIA RTXA6000-24Q"
    assert g.bus_id == "00000000:00:10.0"  # a bus id with colons, on the GPU line
    assert g.pci_device_id == "2230"  # the physical RTX A6000's id
    assert (g.virtualization_mode, g.vgpu_license) == ("VGPU", "Unlicensed")
    assert (g.memory_total_mib, g.memory_used_mib) == (24576, 47)
    assert g.throttle_active == ()  # "Clocks Event Reasons : N/A"
    assert g.power_limit_w is None and g.pcie_gen_max is None
    assert g.processes == (
        QueryProcess(1117, "G", "/usr/lib/xorg/Xorg", 23),
        QueryProcess(1717, "G", "/usr/lib/xorg/Xorg", 23),
    )


def test_geforce_cards_without_ecc() -> None:
    q4090 = parse_q(_read("thamada-RTX4090-q.txt"))
    assert q4090.driver_version == "550.127.05" and len(q4090.gpus) == 8
    g = q4090.gpus[0]
    assert (g.name, g.pci_device_id, g.memory_total_mib) == (
        "NVIDIA GeForce RTX 4090",
        "2684",
        24564,
    )
    assert g.ecc_current == "Disabled" and g.ecc_uncorrected_volatile is None
    assert g.power_limit_w == 450
    q3090 = parse_q(_read("thamada-RTX3090-q.txt"))
    assert q3090.driver_version == "560.35.03"
    assert [x.bus_id for x in q3090.gpus] == ["00000000:41:00.0", "00000000:81:00.0"]
    assert q3090.gpus[0].ecc_current == "N/A" and q3090.gpus[0].memory_total_mib == 24576
    assert q3090.gpus[0].pci_device_id == "2204"


def test_l40s_gddr_with_ecc_on() -> None:
    g = parse_q(_read("thamada-L40S-q.txt")).gpus[0]
    assert (g.name, g.pci_device_id, g.memory_total_mib) == ("NVIDIA L40S", "26b9", 46068)
    assert g.ecc_current == "Enabled"
    assert (g.pcie_gen_max, g.pcie_gen_current) == (4, 1)  # gen drops at idle


def test_text_mig_devices_and_active_reasons() -> None:
    # The text layout of MIG devices and of nested active reasons (hand-made: no real
    # text output with MIG devices was found, see SOURCES.md).
    text = (
        "Attached GPUs                             : 1\n"
        "GPU 00000000:07:00.0\n"
        "    Product Name                          : NVIDIA A100-SXM4-40GB\n"
        "    MIG Mode\n"
        "        Current                           : Enabled\n"
        "        Pending                           : Enabled\n"
        "    MIG devices\n"
        "        MIG Device\n"
        "            Index                         : 0\n"
        "        MIG Device\n"
        "            Index                         : 1\n"
        "    Clocks Event Reasons\n"
        "        Idle                              : Not Active\n"
        "        HW Slowdown                       : Active\n"
        "            HW Thermal Slowdown           : Active\n"
        "    FB Memory Usage\n"
        "        Total                             : 40960 MiB\n"
    )
    g = parse_q(text).gpus[0]
    assert (g.mig_current, g.mig_devices) == ("Enabled", 2)
    assert g.throttle_active == ("HW Slowdown", "HW Thermal Slowdown")
    assert g.memory_total_mib == 40960


def test_text_without_gpus_says_so() -> None:
    q = parse_q("No devices were found\n")
    assert q.gpus == () and "no GPU section" in q.problems[0]
    assert parse_q("").gpus == ()


# --- nvidia-smi -q -x (XML) ---


def test_a100_535_xml_with_mig() -> None:
    q = parse_xml(_read("telegraf-a100-sxm4-v12.xml"))  # DTD v12, accepted, not fetched
    assert q.problems == ()
    assert (q.driver_version, q.cuda_version, q.attached_gpus) == ("535.54.03", "12.2", 4)
    g = q.gpus[0]
    assert g.name == "NVIDIA A100-SXM4-80GB" and g.pci_device_id == "20b2"
    assert g.bus_id == "00000000:01:00.0"
    # The GPU's own FB memory, not its MIG devices' 19968 MiB.
    assert (g.memory_total_mib, g.memory_used_mib, g.memory_reserved_mib) == (81920, 50, 869)
    assert (g.mig_current, g.mig_pending, g.mig_devices) == ("Enabled", "Enabled", 4)
    assert g.virtualization_mode == "None"
    assert (g.power_limit_w, g.default_power_limit_w) == (500, 500)  # gpu_power_readings
    assert g.throttle_active == ()  # clocks_event_reasons, all Not Active
    assert g.remapped_uncorrectable is None  # <remapped_rows>N/A</remapped_rows>
    assert (g.pcie_gen_max, g.pcie_width_max) == (4, 16)


def test_t4_515_xml_older_names() -> None:
    q = parse_xml(_read("telegraf-tesla-t4.xml"))
    assert (q.driver_version, q.cuda_version) == ("515.105.01", "11.7")
    g = q.gpus[0]
    assert (g.name, g.pci_device_id, g.memory_total_mib) == ("Tesla T4", "1eb8", 15360)
    assert g.virtualization_mode == "Pass-Through"
    assert (g.power_limit_w, g.default_power_limit_w) == (70, 70)  # <power_readings>
    assert (g.retired_sbe, g.retired_dbe, g.retired_pending) == (0, 0, "No")
    assert (g.pcie_width_max, g.pcie_width_current) == (16, 8)
    assert QueryProcess(5762, "C", "python", 1005) in g.processes
    assert len(g.processes) == 2


def test_595_xml_v13() -> None:
    g = parse_xml(_read("telegraf-rtx-4000-sff-ada-v13.xml")).gpus[0]
    assert g.name == "NVIDIA RTX 4000 SFF Ada Generation" and g.pci_device_id == "27b0"
    assert (g.memory_total_mib, g.memory_used_mib) == (20475, 3534)
    assert (g.remapped_correctable, g.remapped_uncorrectable) == (0, 0)
    assert (g.remap_pending, g.remap_failure) == ("No", "No")
    assert g.ecc_current == "Disabled" and g.ecc_uncorrected_volatile is None
    assert [p.type for p in g.processes] == ["G", "G", "C", "C+G"]
    assert g.processes[3] == QueryProcess(34626, "C+G", "/usr/lib/chromium/chromium", 183)


def test_old_and_odd_xml() -> None:
    p400 = parse_xml(_read("telegraf-quadro-p400.xml"))
    assert p400.driver_version == "418.43"
    g = p400.gpus[0]
    assert (g.name, g.pci_device_id, g.memory_total_mib) == ("Quadro P400", "1cb3", 1998)
    assert g.power_limit_w is None and g.ecc_current == "N/A"
    assert g.ecc_uncorrected_volatile is None  # single/double bit, all N/A
    gtx = parse_xml(_read("telegraf-gtx-1070-ti.xml")).gpus[0]  # DTD v10, trimmed layout
    assert (gtx.name, gtx.memory_total_mib, gtx.pcie_gen_current) == (
        "GeForce GTX 1070 Ti",
        4096,
        1,
    )
    assert gtx.pci_device_id == "" and gtx.virtualization_mode == ""
    a10g = parse_xml(_read("telegraf-a10g.xml")).gpus[0]
    assert a10g.pci_device_id == ""  # "000000DE": redacted, not NVIDIA's vendor id
    assert (a10g.memory_total_mib, a10g.virtualization_mode) == (23028, "Pass-Through")
    r3080 = parse_xml(_read("telegraf-rtx-3080-v12.xml")).gpus[0]
    assert (r3080.power_limit_w, r3080.default_power_limit_w) == (336, 320)


def test_xml_refuses_internal_subset_and_entities() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        '<!ENTITY lol2 "&lol;&lol;&lol;">]><nvidia_smi_log>&lol2;</nvidia_smi_log>'
    )
    q = parse_xml(laughs)
    assert q.gpus == () and q.problems[0].startswith("refused: the XML declares an internal")
    external = (
        '<?xml version="1.0"?><!DOCTYPE x SYSTEM "file:///etc/passwd">'
        '<!ENTITY xxe SYSTEM "file:///etc/passwd"><nvidia_smi_log/>'
    )
    assert parse_xml(external).problems[0].startswith("refused: the XML declares entities")


def test_xml_garbage_and_unknown_layout() -> None:
    assert "could not be read" in parse_xml("<nvidia_smi_log><gpu>").problems[0]
    assert "could not be read" in parse_xml("").problems[0]
    odd = parse_xml(
        "<other><gpu><fb_memory_usage><total>lots</total></fb_memory_usage></gpu></other>"
    )
    assert odd.gpus[0].memory_total_mib is None
    assert any("unexpected root" in p for p in odd.problems)
    assert any("no fb_memory_usage total" in p for p in odd.problems)


# --- the acceptance query CSV ---


def test_query_gpu_rows() -> None:
    assert len(QUERY_GPU_FIELDS) == 17
    text = (
        "0, NVIDIA A100-SXM4-80GB, 0x20B210DE, 81920, 4, 535.104.05, Enabled, Disabled, "
        "400.00, 400.00, 4, 16, 4, 16, 0x0000000000000001, GPU-a, 00000000:18:00.0\n"
        "1, NVIDIA GeForce RTX 4090, 0x268410DE, 24564, 2, 550.127.05, [N/A], [N/A], "
        "450.00, 450.00, 4, 16, 1, 16, 0x0000000000000004, GPU-b, 00000000:25:00.0\n"
    )
    rows = parse_query_gpu(text)
    assert rows.problems == ()
    a, b = rows.rows
    assert (a.index, a.pci_device_id, a.memory_total_mib, a.ecc_current) == (
        0,
        "20b2",
        81920,
        "Enabled",
    )
    assert (a.clocks_event_reasons, a.bus_id) == (1, "00000000:18:00.0")
    assert (b.pci_device_id, b.ecc_current, b.mig_current, b.clocks_event_reasons) == (
        "2684",
        "",
        "",
        4,
    )
    assert b.pcie_gen_current == 1


def test_query_gpu_bad_rows_named() -> None:
    rows = parse_query_gpu("0, x, y\n\n")
    assert rows.rows == () and rows.problems == (
        "line 1: expected 17 comma-separated values, got 3",
    )
    assert parse_query_gpu("").problems == ("nvidia-smi listed no GPU",)


def test_device_id() -> None:
    assert device_id("0x20B210DE") == "20b2"
    assert device_id("233010DE") == "2330"
    assert device_id("0x000010DF") == "" and device_id("[N/A]") == "" and device_id("") == ""
