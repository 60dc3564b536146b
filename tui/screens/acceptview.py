"""What the acceptance screen (tui.screens.acceptance) and the node screen's "Checks &
alerts" tab show of a hand-over check, computed without Textual: the rows of a run as its
check families begin and its findings come, a finding's detail with the raw evidence it
rests on, the verdict's lines. Pure; every string a node printed goes through `visible`.

A stored run is leases.app.acceptance's `Stored`; the return window is said in the words
of leases.app.acceptreport (the report and `zuka accept` say the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from leases.app.acceptance import Stored
from leases.app.acceptreport import returnable_words
from leases.core import fields
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.core.textsafe import visible

TITLE_MAX = 60
COLUMNS = ("status", "check", "finding")
# Fixed widths (the finding's grows): a table cleared and refilled as a run goes keeps the
# widest cell it ever held, so the same verdict would otherwise look different by timing.
WIDTHS = (len("not checked"), TITLE_MAX // 2 + 4, None)
# The keys that choose the level before a run (quick by default).
LEVEL_KEYS = {"q": Level.QUICK, "s": Level.STANDARD, "b": Level.BURN}
LEVEL_WORDS = {
    Level.QUICK: "quick: read-only, seconds",
    Level.STANDARD: "standard: + short GPU work (torch matmul, dcgmi, nvbandwidth, nccl)",
    Level.BURN: "burn: + a bounded burn-in (minutes, the GPUs at full load)",
}
STATUS_WORDS = {
    Status.PASSED: "passed",
    Status.WARNED: "warned",
    Status.FAILED: "FAILED",
    Status.SKIPPED: "skipped",
    Status.NOT_CHECKED: "not checked",
}
# Counts in this order: what fails a node first.
COUNT_ORDER = (Status.FAILED, Status.WARNED, Status.NOT_CHECKED, Status.PASSED, Status.SKIPPED)
RUNNING = "running…"
WORDS_MAX = 300  # a finding's words in its row
EVIDENCE_MAX = 20_000  # characters of one command's output shown in the detail
LISTED_MAX = 12  # failed and warned findings listed on the node screen


@dataclass(frozen=True)
class Family:
    """A check family as it begins: its id and title (leases.accept.engine.Check)."""

    id: str
    title: str


Line = Family | CheckResult


def status_word(status: Status) -> str:
    return STATUS_WORDS[status]


def rows(lines: Sequence[Line], running: str | None = None) -> list[tuple[str, ...]]:
    """One row per family begun (running while it is the one at work) and per finding."""
    out: list[tuple[str, ...]] = []
    for line in lines:
        if isinstance(line, Family):
            state = RUNNING if line.id == running else ""
            out.append((state, f"▸ {visible(line.title, TITLE_MAX)}", ""))
        else:
            out.append(
                (
                    status_word(line.status),
                    f"  {visible(line.title, TITLE_MAX)}",
                    visible(line.words, WORDS_MAX),
                )
            )
    return out


def counts_text(verdict: Verdict) -> str:
    counts = verdict.counts()
    return ", ".join(f"{counts[s]} {status_word(s)}" for s in COUNT_ORDER)


def verdict_lines(stored: Stored) -> list[str]:
    """The verdict of a finished run: its status, level, counts and the return window."""
    v = stored.verdict
    lines = [
        f"verdict: {status_word(v.status)} · level {v.level.value} · {counts_text(v)}",
        returnable_words(stored),
    ]
    if not v.results:
        lines.insert(1, "no check ran at this level: nothing was read from the node")
    return lines


def summary_lines(stored: Stored | None, tz: str) -> list[str]:
    """The node screen's last verdict: status, level, when, counts, the failed and warned
    findings, the return window."""
    if stored is None:
        return []
    v = stored.verdict
    lines = [
        f"acceptance: {status_word(v.status)} · level {v.level.value} ·"
        f" {fields.shown(v.finished, tz)} · {counts_text(v)}",
        returnable_words(stored),
    ]
    worth = [r for r in v.results if r.status in (Status.FAILED, Status.WARNED)]
    worth.sort(key=lambda r: r.status is not Status.FAILED)
    for r in worth[:LISTED_MAX]:
        title, words = visible(r.title, TITLE_MAX), visible(r.words, WORDS_MAX)
        lines.append(f"  {status_word(r.status)}: {title}: {words}")
    if len(worth) > LISTED_MAX:
        lines.append(f"  … and {len(worth) - LISTED_MAX} more (zuka accept --report md)")
    return lines


def _evidence_lines(ev: Evidence) -> list[str]:
    lines = [f"$ {visible(ev.command, 500)}"]
    if ev.failure:
        lines.append(f"did not run: {visible(ev.failure, 300)}")
    else:
        status = "no exit status" if ev.exit_status is None else f"exit {ev.exit_status}"
        # Under a second is noise (and would make the same run look different each time).
        lines.append(f"{status}, {ev.seconds:.1f} s" if ev.seconds >= 1 else status)
    for name, text in (("stdout", ev.stdout), ("stderr", ev.stderr)):
        if text:
            lines.append(f"{name}:")
            lines.append(visible(text, EVIDENCE_MAX, keep_newlines=True).rstrip("\n"))
    return lines


def detail_lines(result: CheckResult, evidence: Sequence[Evidence]) -> list[str]:
    """A finding in full: its words, expected and found, and each command it rests on with
    what came back, as it came (controls made visible, newlines kept)."""
    title, check = visible(result.title, TITLE_MAX), visible(result.check, 60)
    lines = [
        f"{status_word(result.status)}: {title} ({check})",
        visible(result.words, 2000),
    ]
    if result.expected:
        lines.append(f"expected: {visible(result.expected, 1000)}")
    if result.found:
        lines.append(f"found: {visible(result.found, 1000)}")
    by_key = {e.key: e for e in evidence}
    for key in result.evidence:
        ev = by_key.get(key)
        lines.append("")
        if ev is None:
            lines.append(f"evidence {visible(key, 60)}: not kept")
        else:
            lines += _evidence_lines(ev)
    if not result.evidence:
        lines.append("(no command's output: this finding rests on the ledger or the login)")
    return lines


def report_name(node: str, finished: datetime) -> str:
    """The report's file name: the node's name made safe for a file, and the time."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in node)
    safe = safe.lstrip(".")[:60] or "node"
    return f"zuka-accept-{safe}-{finished.strftime('%Y%m%d-%H%M%S')}.md"
