"""`dcgmi diag -r N` (its table) -> DcgmDiag.

Rows are "| name | result |" between "+-----  Section  ---+" (or "|-----  Section  ---|")
lines; the Metadata section (DCGM 3.1+) holds versions, not tests. A result is "Pass",
"Pass - All", "Fail - GPU 3", "Warn", "Skip", "Not Run"; rows named "Error" or "Warning",
rows without a name (DCGM 4: "GPU0: Pass") and wrapped text go to the test above them.
"""

from __future__ import annotations

import re

from leases.accept.facts import DcgmDiag, DiagTest
from leases.accept.parse._text import Problems, lines_of
from leases.accept.words import _

MAX_TESTS = 200
MAX_DETAIL = 2000
_SECTION = re.compile(r"^[|+]-+\s+([A-Za-z][A-Za-z ]{0,40}?)\s+-+[+|]")
_RESULTS = ("Pass", "Fail", "Warn", "Skip", "Not Run")


def _result(cell: str) -> str:
    for word in _RESULTS:
        if cell == word or cell.startswith(word + " "):
            return word
    return ""


def parse_dcgmi(text: str) -> DcgmDiag:
    problems = Problems()
    tests: list[DiagTest] = []
    details: list[list[str]] = []
    section = ""
    for line in lines_of(text):
        stripped = line.strip()
        m = _SECTION.match(stripped)
        if m:
            section = m.group(1).strip()
            continue
        if stripped.startswith("Error") and not stripped.startswith("|"):
            problems.add(_("dcgmi said"), stripped)
            continue
        if not stripped.startswith("|") or stripped.count("|") < 3:
            continue
        name, cell = (p.strip() for p in stripped.strip("|").split("|", 1))
        cell = cell.strip("| ")
        if (name == "Diagnostic" and cell == "Result") or section == "Metadata":
            continue
        result = _result(cell)
        if name and name not in ("Error", "Warning", "Info") and result:
            if len(tests) < MAX_TESTS:
                tests.append(DiagTest(name[:64], result))
                details.append([cell] if cell != result else [])
            continue
        if tests and cell:
            label = f"{name}: " if name in ("Error", "Warning", "Info") else ""
            details[-1].append(label + cell)
        elif cell or name:
            problems.add(_("a row not read"), stripped)
    out = tuple(
        DiagTest(t.name, t.result, " ".join(d)[:MAX_DETAIL])
        for t, d in zip(tests, details, strict=True)
    )
    if not out and not problems.result():
        problems.add(_("no diagnostic table was found in the output"))
    return DcgmDiag(out, problems.result())
