"""nccl-tests `*_perf` output -> NcclPerf.

A row: size count type redop root time algbw busbw #wrong [time algbw busbw #wrong]; the
out-of-place figures are kept. #wrong printed "N/A" (run with -c 0) is kept as -1: not
validated. mpirun's "[1,0]<stdout>:" prefixes are dropped. "# Avg bus bandwidth : X" and
"# Out of bounds values : N OK|FAILED" are the summary.
"""

from __future__ import annotations

import re

from leases.accept.facts import NcclPerf
from leases.accept.parse._text import Problems, lines_of, to_float, to_int
from leases.accept.words import _

MAX_ROWS = 1000
_PREFIX = re.compile(r"^\[\d{1,6},\d{1,6}\]<std(?:out|err)>:")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d{1,12})")


def parse_nccl(text: str) -> NcclPerf:
    problems = Problems()
    rows: list[tuple[int, float, float, int]] = []
    avg: float | None = None
    oob: int | None = None
    for raw in lines_of(text):
        line = _PREFIX.sub("", raw).strip()
        if not line:
            continue
        m = _AVG.match(line)
        if m:
            avg = to_float(m.group(1))
            if avg is None:
                problems.add(_("the average bus bandwidth not read"), line)
            continue
        m = _OOB.match(line)
        if m:
            oob = int(m.group(1))
            continue
        if line.startswith("#"):
            continue
        words = line.split()
        size = to_int(words[0])
        if size is None:
            if "failure" in line.lower() or "error" in line.lower():
                problems.add(_("the test said"), line)
            continue
        algbw = to_float(words[6]) if len(words) >= 9 else None
        busbw = to_float(words[7]) if len(words) >= 9 else None
        wrong = (-1 if words[8] == "N/A" else to_int(words[8])) if len(words) >= 9 else None
        if algbw is None or busbw is None or wrong is None:
            problems.add(_("a row not read"), line)
            continue
        if len(rows) < MAX_ROWS:
            rows.append((size, algbw, busbw, wrong))
    if avg is None:
        problems.add(_("no '# Avg bus bandwidth' line: the test did not finish"))
    return NcclPerf(tuple(rows), avg, oob, problems.result())
