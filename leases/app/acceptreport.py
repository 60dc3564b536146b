"""The words of a stored acceptance run: JSON for scripts, and a markdown report a
provider accepts (node, provider, lease, what was sold, when, each finding with what was
expected and found, and the raw evidence of every failed or warned check).

Everything a node printed goes through visible() and sits in fenced blocks whose fence
is longer than any run of backticks inside, so no output can close it or become markup.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from zoneinfo import ZoneInfo

from leases.app.acceptance import Stored
from leases.core import fields
from leases.core.acceptance import CheckResult, Evidence, Status
from leases.core.textsafe import visible

# What one evidence block shows at most in the report (the ledger keeps more).
REPORT_EVIDENCE_MAX = 64 * 1024


def returnable_words(s: Stored) -> str:
    """ "returnable until 2026-12-09", or why it is not known."""
    if s.returnable_until is not None:
        # Judged on the day the run finished, in the lease's billing time zone: a report
        # read later still says what was true when the evidence was taken.
        on = s.verdict.finished.astimezone(ZoneInfo(s.lease_tz)).date()
        if on > s.returnable_until:
            return (
                f"the return window closed on {s.returnable_until.isoformat()} "
                f"(before this run, on {on.isoformat()})"
            )
        return f"returnable until {s.returnable_until.isoformat()}"
    if s.lease_start is None:
        return "no open lease: nothing to return"
    provider = shlex.quote(s.provider) if s.provider else "PROVIDER"
    return (
        "return window unknown (record it: zuka provider edit"
        f" {visible(provider, 100)} --return-days N)"
    )


def to_json(s: Stored) -> dict[str, Any]:
    """The run as JSON: the verdict, each finding, the window, the evidence in full."""
    v = s.verdict
    return {
        "id": s.id,
        "node": s.node,
        "provider": s.provider,
        "lease_start": None if s.lease_start is None else s.lease_start.isoformat(),
        "level": v.level.value,
        "status": s.status.value,
        "started": v.started.isoformat(),
        "finished": v.finished.isoformat(),
        "returnable_until": None if s.returnable_until is None else s.returnable_until.isoformat(),
        "window_known": s.window_known,
        "results": [
            {
                "check": r.check,
                "title": r.title,
                "status": r.status.value,
                "words": r.words,
                "expected": r.expected,
                "found": r.found,
                "evidence": list(r.evidence),
            }
            for r in v.results
        ],
        "evidence": [
            {
                "key": e.key,
                "command": e.command,
                "exit_status": e.exit_status,
                "stdout": e.stdout,
                "stderr": e.stderr,
                "seconds": e.seconds,
                "failure": e.failure,
            }
            for e in v.evidence
        ],
    }


def fenced(text: str) -> str:
    """text in a fenced block it cannot close: the fence is longer than its longest run
    of backticks (at least three)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _cell(text: str, n: int = 400) -> str:
    """One line of a report made of a node's or the ledger's words: controls shown,
    markdown's table and emphasis characters escaped."""
    return re.sub(r"([\\`*_|<>\[\]#])", r"\\\1", visible(text, n))


def _evidence_block(ev: Evidence) -> str:
    lines = [f"- {_cell(ev.key, 80)}: {_cell(ev.command, 300)}"]
    if ev.failure:
        lines.append(f"  - could not run: {_cell(ev.failure)}")
    else:
        lines.append(f"  - exit status {ev.exit_status}, {ev.seconds:g} s")
    for name, body in (("stdout", ev.stdout), ("stderr", ev.stderr)):
        if body:
            shown = visible(body[:REPORT_EVIDENCE_MAX], keep_newlines=True)
            if len(body) > REPORT_EVIDENCE_MAX:
                shown += f"\n[zuka: the report shows the first {REPORT_EVIDENCE_MAX} characters]"
            lines.append(f"\n{name}:\n\n{fenced(shown)}\n")
    return "\n".join(lines)


def _finding(r: CheckResult) -> str:
    out = [
        f"- **{r.status.value}** {_cell(r.title, 120)} ({_cell(r.check, 80)}):"
        f" {_cell(r.words, 1000)}"
    ]
    if r.expected:
        out.append(f"  - expected: {_cell(r.expected, 500)}")
    if r.found:
        out.append(f"  - found: {_cell(r.found, 500)}")
    return "\n".join(out)


def report_md(s: Stored) -> str:
    """The markdown report of one run."""
    v = s.verdict
    tz = s.lease_tz
    sold = s.sold
    head = [
        f"# Hand-over acceptance of {_cell(s.node, 100)}",
        "",
        f"- provider: {_cell(s.provider or 'not recorded', 100)}",
        "- lease: "
        + ("none open" if s.lease_start is None else f"started {fields.shown(s.lease_start, tz)}"),
        f"- checked: {fields.shown(v.started, tz)} to {fields.shown(v.finished, tz)}"
        f" ({_cell(tz, 60)}; level {v.level.value}, run {s.id})",
        f"- verdict: **{s.status.value}**; {returnable_words(s)}",
    ]
    if sold is not None:
        vram = "not recorded" if sold.vram_gib is None else f"{sold.vram_gib} GiB per GPU"
        head += [
            "",
            "## As sold (the ledger)",
            "",
            f"- GPU model: {_cell(sold.gpu_model or 'not recorded', 100)}",
            f"- GPUs: {sold.gpu_count or 'not recorded'}",
            f"- VRAM: {vram}",
            f"- interconnect: {sold.interconnect.value}"
            + ("" if sold.nvlinks is None else f", {sold.nvlinks} NVLinks per GPU pair")
            + ("" if sold.ib_gbps is None else f", InfiniBand {sold.ib_gbps} Gb/s"),
        ]
    head += ["", "## Findings", ""]
    head += [_finding(r) for r in v.results] or ["(none)"]
    bad = [r for r in v.results if r.status in (Status.FAILED, Status.WARNED)]
    keys = list(dict.fromkeys(k for r in bad for k in r.evidence))
    by_key = {e.key: e for e in v.evidence}
    if keys:
        head += ["", "## Evidence of the failed and warned checks", ""]
        for key in keys:
            ev = by_key.get(key)
            head.append(_evidence_block(ev) if ev else f"- {_cell(key, 80)}: no evidence kept")
    return "\n".join(head) + "\n"
