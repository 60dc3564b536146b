"""`nvidia-smi -q -x` (XML) -> `SmiQuery`.

Hostile XML: the size is bounded, and a document with an internal DTD subset or any
ENTITY declaration is refused before parsing (real output carries only
`<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`, which is accepted and never
fetched: the parser loads no external entity). Tag names changed across driver generations
(`<clocks_throttle_reasons>` became `<clocks_event_reasons>` in 550, `<power_readings>`
became `<gpu_power_readings>` in 535, ECC counts moved from single/double bit to SRAM/DRAM):
each fact is looked for under every name it had. Never raises on an unknown layout.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from leases.accept.facts import GpuQuery, QueryProcess, SmiQuery
from leases.accept.parse import values as v
from leases.accept.words import _

# A real 8-GPU `-q -x` is ~150 KB; the probe keeps at most 512 KiB of a stream.
MAX_CHARS = 4 * 1024 * 1024
_DOCTYPE = re.compile(r"<!DOCTYPE[^>\[]*(\[)?", re.IGNORECASE)
_DECLARATION = re.compile(r"<!(ENTITY|ELEMENT|ATTLIST|NOTATION)", re.IGNORECASE)

# Clocks event reason tags (after the clocks_event_reason_ / clocks_throttle_reason_
# prefix) in the words `nvidia-smi -q` prints for them, so both formats say the same.
THROTTLE_WORDS: dict[str, str] = {
    "gpu_idle": "Idle",
    "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
    "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "display_clocks_setting": "Display Clock Setting",
}


def _refusal(text: str) -> str:
    """Why the document is not parsed at all, or ""."""
    doctype = _DOCTYPE.search(text)
    if doctype is not None and doctype.group(1):
        return _("refused: the XML declares an internal DTD subset (nvidia-smi never does)")
    if _DECLARATION.search(text):
        return _("refused: the XML declares entities or elements (nvidia-smi never does)")
    return ""


def _text(el: ET.Element | None, *path: str) -> str | None:
    """The text at a path of tags below `el`; a step may list alternatives with "|"."""
    node = el
    for step in path:
        if node is None:
            return None
        found = None
        for tag in step.split("|"):
            found = node.find(tag)
            if found is not None:
                break
        node = found
    if node is None:
        return None
    return node.text or ""


def _throttle(gpu: ET.Element) -> tuple[str, ...]:
    section = gpu.find("clocks_event_reasons")
    if section is None:
        section = gpu.find("clocks_throttle_reasons")
    if section is None:
        return ()
    out: list[str] = []
    for el in section.iter():
        if el is section or (el.text or "").strip().lower() != "active":
            continue
        tag = re.sub(r"^clocks_(?:event|throttle)_reasons?_", "", el.tag)
        out.append(THROTTLE_WORDS.get(tag, v.text(tag.replace("_", " "), 64)))
    return tuple(out[:32])


def _uncorrectable(period: ET.Element | None) -> int | None:
    if period is None:
        return None
    double = period.find("double_bit")
    if double is not None:  # up to 470
        return v.whole(_text(double, "total"))
    return v.add(*(v.whole(el.text) for el in period if "uncorrectable" in el.tag))


def _processes(gpu: ET.Element) -> tuple[QueryProcess, ...]:
    section = gpu.find("processes")
    if section is None:
        return ()
    out: list[QueryProcess] = []
    for info in section.iter("process_info"):
        if len(out) >= v.MAX_PROCESSES:
            break
        out.append(
            QueryProcess(
                pid=v.whole(_text(info, "pid")),
                type=v.text(_text(info, "type"), 8),
                name=v.text(_text(info, "process_name"), 4096),
                used_mib=v.whole(_text(info, "used_memory")),
            )
        )
    return tuple(out)


def _licence(gpu: ET.Element) -> str:
    for el in gpu.iter():
        if "license_status" in el.tag or el.tag == "licensed_product_state":
            return v.text(el.text)
    return ""


def gpu_of(gpu: ET.Element, index: int) -> GpuQuery:
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    limit = _text(power, "current_power_limit|enforced_power_limit|power_limit")
    link = gpu.find("pci/pci_gpu_link_info")
    ecc = gpu.find("ecc_errors")
    mig = gpu.find("mig_devices")
    return GpuQuery(
        index=index,
        name=v.text(_text(gpu, "product_name")),
        bus_id=v.text(gpu.get("id")) or v.text(_text(gpu, "pci", "pci_bus_id")),
        pci_device_id=v.device_id(_text(gpu, "pci", "pci_device_id")),
        uuid=v.text(_text(gpu, "uuid")),
        serial=v.text(_text(gpu, "serial")),
        vbios=v.text(_text(gpu, "vbios_version")),
        memory_total_mib=v.whole(_text(gpu, "fb_memory_usage", "total")),
        memory_used_mib=v.whole(_text(gpu, "fb_memory_usage", "used")),
        memory_reserved_mib=v.whole(_text(gpu, "fb_memory_usage", "reserved")),
        virtualization_mode=v.state(_text(gpu, "gpu_virtualization_mode", "virtualization_mode")),
        vgpu_license=_licence(gpu),
        mig_current=v.state(_text(gpu, "mig_mode", "current_mig")),
        mig_pending=v.state(_text(gpu, "mig_mode", "pending_mig")),
        mig_devices=0 if mig is None else len(mig.findall("mig_device")),
        ecc_current=v.state(_text(gpu, "ecc_mode", "current_ecc")),
        ecc_uncorrected_volatile=_uncorrectable(None if ecc is None else ecc.find("volatile")),
        ecc_uncorrected_aggregate=_uncorrectable(None if ecc is None else ecc.find("aggregate")),
        retired_sbe=v.whole(
            _text(gpu, "retired_pages", "multiple_single_bit_retirement", "retired_count")
        ),
        retired_dbe=v.whole(_text(gpu, "retired_pages", "double_bit_retirement", "retired_count")),
        retired_pending=v.yes_no(
            _text(gpu, "retired_pages", "pending_retirement|pending_blacklist")
        ),
        remapped_correctable=v.whole(_text(gpu, "remapped_rows", "remapped_row_corr")),
        remapped_uncorrectable=v.whole(_text(gpu, "remapped_rows", "remapped_row_unc")),
        remap_pending=v.yes_no(_text(gpu, "remapped_rows", "remapped_row_pending")),
        remap_failure=v.yes_no(_text(gpu, "remapped_rows", "remapped_row_failure")),
        power_limit_w=v.number(limit),
        default_power_limit_w=v.number(_text(power, "default_power_limit")),
        max_power_limit_w=v.number(_text(power, "max_power_limit")),
        throttle_active=_throttle(gpu),
        pcie_gen_max=v.whole(_text(link, "pcie_gen", "max_link_gen")),
        pcie_gen_current=v.whole(_text(link, "pcie_gen", "current_link_gen")),
        pcie_width_max=v.whole(_text(link, "link_widths", "max_link_width")),
        pcie_width_current=v.whole(_text(link, "link_widths", "current_link_width")),
        persistence_mode=v.state(_text(gpu, "persistence_mode")),
        compute_mode=v.state(_text(gpu, "compute_mode")),
        processes=_processes(gpu),
    )


def parse_xml(text: str) -> SmiQuery:
    """`nvidia-smi -q -x` output as facts; never raises."""
    problems: list[str] = []
    if len(text) > MAX_CHARS:
        words = _("refused: XML longer than {count} characters").format(count=MAX_CHARS)
        return SmiQuery(problems=(words,))
    refusal = _refusal(text)
    if refusal:
        return SmiQuery(problems=(refusal,))
    try:
        parser = ET.XMLParser()
        parser.feed(text)
        root = parser.close()
    except (ET.ParseError, ValueError, RecursionError) as exc:
        words = str(exc)[:200]
        said = _("the XML of nvidia-smi -q -x could not be read ({why})").format(why=words)
        return SmiQuery(problems=(said,))
    if root.tag != "nvidia_smi_log":
        problems.append(_("unexpected root element {tag!r}").format(tag=v.text(root.tag, 40)))
    gpus = root.findall("gpu")
    if len(gpus) > v.MAX_GPUS:
        problems.append(
            _("more than {count} GPUs listed: the rest were not read").format(count=v.MAX_GPUS)
        )
        gpus = gpus[: v.MAX_GPUS]
    facts = tuple(gpu_of(g, i) for i, g in enumerate(gpus))
    if not facts:
        problems.append(_("no <gpu> element found in the output of nvidia-smi -q -x"))
    for g in facts:
        if g.memory_total_mib is None:
            problems.append(
                _("GPU {gpu}: no fb_memory_usage total could be read").format(gpu=g.index)
            )
    return SmiQuery(
        driver_version=v.text(_text(root, "driver_version"), 64),
        cuda_version=v.text(_text(root, "cuda_version"), 64),
        attached_gpus=v.whole(_text(root, "attached_gpus")),
        gpus=facts,
        problems=tuple(problems),
    )
