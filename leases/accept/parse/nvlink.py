"""`nvidia-smi nvlink -s` -> NvlinkStatus.

"GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)" starts a GPU; each "Link N: 25 GB/s" or
"Link N: <inactive>" under it is one link. "0 GB/s" counts as not active. Other lines
(elisions such as "[...]", error counters of `nvlink -e`) are named in problems.
"""

from __future__ import annotations

import re

from leases.accept.facts import NvLink, NvlinkStatus
from leases.accept.parse._text import Problems, lines_of, to_float
from leases.accept.words import _

MAX_LINKS = 4096
_GPU = re.compile(r"^\s*GPU (\d{1,4}): (.{0,120}?)(?:\s*\(UUID: [^)]{0,80}\))?\s*$")
_LINK = re.compile(r"^\s*Link (\d{1,3}): (.*?)\s*$")
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?) GB/s$")


def parse_nvlink(text: str) -> NvlinkStatus:
    problems = Problems()
    links: list[NvLink] = []
    names: dict[int, str] = {}
    gpu: int | None = None
    for line in lines_of(text):
        if not line.strip():
            continue
        m = _GPU.match(line)
        if m:
            gpu = int(m.group(1))
            names[gpu] = m.group(2).strip()
            continue
        m = _LINK.match(line)
        if m and gpu is not None and len(links) < MAX_LINKS:
            value = m.group(2)
            if value == "<inactive>":
                links.append(NvLink(gpu, int(m.group(1)), None, False))
                continue
            rate = _RATE.match(value)
            gbps = to_float(rate.group(1)) if rate else None
            if gbps is not None:
                links.append(NvLink(gpu, int(m.group(1)), gbps, gbps > 0))
                continue
        problems.add(_("a line not read"), line)
    return NvlinkStatus(tuple(links), names, problems.result())
