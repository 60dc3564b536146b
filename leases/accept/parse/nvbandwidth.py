"""nvbandwidth output -> Nvbandwidth.

Each "Running <testcase>." starts a testcase; the line ending "bandwidth (GB/s)" is
followed by a column header and the matrix rows ("N/A" cells skipped); "SUM <testcase>
<GB/s>" closes it. "Waived" under a testcase that printed no SUM marks it waived.
"""

from __future__ import annotations

import re

from leases.accept.facts import Nvbandwidth
from leases.accept.parse._text import Problems, digits, lines_of, to_float
from leases.accept.words import _

_RUNNING = re.compile(r"^Running ([a-z0-9_]{1,80})\.$")
_SUM = re.compile(r"^SUM ([a-z0-9_]{1,80}) (\S+)$")
MAX_TESTCASES = 100


def parse_nvbandwidth(text: str) -> Nvbandwidth:
    problems = Problems()
    sums: dict[str, float] = {}
    minimum: dict[str, float] = {}
    waived: list[str] = []
    current = ""
    header_next = False
    in_matrix = False
    for raw in lines_of(text):
        line = raw.strip()
        if not line:
            in_matrix = False
            continue
        m = _RUNNING.match(line)
        if m and len(sums) + len(waived) < MAX_TESTCASES:
            current, in_matrix, header_next = m.group(1), False, False
            continue
        m = _SUM.match(line)
        if m:
            value = to_float(m.group(2))
            if value is None:
                problems.add(_("a SUM not read"), line)
            else:
                sums[m.group(1)] = value
            in_matrix = False
            continue
        if line.startswith("Waived"):
            if current and current not in sums and current not in waived:
                waived.append(current)
            continue
        if line.endswith("bandwidth (GB/s)"):
            header_next = True
            continue
        if header_next:
            header_next, in_matrix = False, True
            continue
        if in_matrix and current:
            words = line.split()
            cells = [to_float(w) for w in words[1:] if w != "N/A"]
            if not digits(words[0]) or any(c is None for c in cells):
                problems.add(_("a row of {case} not read").format(case=current), line)
                continue
            values = [c for c in cells if c is not None]
            if values:
                low = min(values)
                minimum[current] = min(low, minimum.get(current, low))
    for name in minimum:
        if name not in sums and name not in waived:
            problems.add(_("{case} printed no SUM line").format(case=name))
    if not sums and not waived and not problems.result():
        problems.add(_("no nvbandwidth testcase was found in the output"))
    return Nvbandwidth(sums, minimum, tuple(waived), problems.result())
