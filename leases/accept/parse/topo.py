"""`nvidia-smi topo -m` -> Topology.

Layouts differ by driver generation: tab-separated (with doubled tabs where people
re-aligned it), space-aligned (newer drivers), device columns named GPU0.., NIC0.. (with a
"NIC Legend" naming mlx5_0...) or mlx5_0.. directly (older drivers), then zero to three
affinity columns: "CPU Affinity", "NUMA Affinity", "GPU NUMA ID". NIC rows leave the
affinity cells empty. Cells: X, NV#, PIX, PXB, PHB, NODE, SYS, SOC (old drivers).
Cells are read by whitespace, which every layout above keeps between columns.
"""

from __future__ import annotations

import re

from leases.accept.facts import Topology
from leases.accept.parse._text import Problems, lines_of
from leases.accept.words import _

MAX_DEVICES = 256
_DEVICE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
_CELL = re.compile(r"^(X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC|C2C|NA|N/A)$")
_AFFINITY = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
_NIC_LEGEND = re.compile(r"^\s*(NIC\d{1,3})\s*:\s*([A-Za-z0-9_.-]{1,64})\s*$")


def _header(words: list[str]) -> tuple[list[str], list[str]] | None:
    """Device columns and affinity columns of a header line, or None if it is not one."""
    if not words or words[0] != "GPU0" or len(words) > MAX_DEVICES + 8:
        return None
    devices: list[str] = []
    i = 0
    while i < len(words):
        if any(tuple(words[i : i + len(a)]) == a for a in _AFFINITY):
            break
        devices.append(words[i])
        i += 1
    affinity: list[str] = []
    while i < len(words):
        for label in _AFFINITY:
            if tuple(words[i : i + len(label)]) == label:
                affinity.append(" ".join(label))
                i += len(label)
                break
        else:
            return None
    if not devices or devices[0] != "GPU0" or len(devices) > MAX_DEVICES:
        return None
    if len(set(devices)) != len(devices) or not all(_DEVICE.match(d) for d in devices):
        return None
    return devices, affinity


def parse_topo(text: str) -> Topology:
    """Read a `topo -m` matrix; never raises. Rows that do not fit are named in problems."""
    problems = Problems()
    lines = lines_of(text)
    devices: list[str] = []
    affinity: list[str] = []
    start = 0
    for n, line in enumerate(lines):
        found = _header(line.split())
        if found:
            devices, affinity = found
            start = n + 1
            break
    if not devices:
        problems.add(_("no topo -m header (a line of device columns starting GPU0) was found"))
        return Topology(problems=problems.result())
    cells: dict[tuple[str, str], str] = {}
    cpu: dict[str, str] = {}
    numa: dict[str, str] = {}
    nics: dict[str, str] = {}
    seen: set[str] = set()
    in_legend = False
    for line in lines[start:]:
        words = line.split(maxsplit=len(devices) + 8)
        if not words:
            continue
        if words[0] in ("Legend:", "NIC"):
            in_legend = words[0] == "NIC"  # "NIC Legend:"
            continue
        m = _NIC_LEGEND.match(line)
        if in_legend and m:
            nics[m.group(1)] = m.group(2)
            continue
        if words[0] not in devices or words[0] in seen:
            continue  # the legend's own lines, prose around a pasted matrix
        row = words[0]
        seen.add(row)
        values = words[1:]
        if len(values) < len(devices):
            said = _("row {row} has {cells} cells for {columns} columns")
            problems.add(said.format(row=row, cells=len(values), columns=len(devices)), line)
        for col, cell in zip(devices, values, strict=False):
            if not _CELL.match(cell):
                said = _("row {row}, column {column}: unknown cell")
                problems.add(said.format(row=row, column=col), cell)
            cells[(row, col)] = cell[:16]
        extra = values[len(devices) :]
        for label, value in zip(affinity, extra, strict=False):
            if label == "CPU Affinity":
                cpu[row] = value[:64]
            elif label == "NUMA Affinity":
                numa[row] = value[:16]
    for d in devices:
        if d.startswith("GPU") and d not in seen:
            problems.add(_("no row for {device}").format(device=d))
    return Topology(
        devices=tuple(devices),
        cells=cells,
        cpu_affinity=cpu,
        numa_affinity=numa,
        nic_names=nics,
        problems=problems.result(),
    )
