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

from leases.accept.words import DISCARDED
from leases.app.acceptance import Stored, told
from leases.app.acceptreport import returnable_words
from leases.core import fields
from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.core.i18n import N_, _, pgettext
from leases.core.textsafe import visible

TITLE_MAX = 60
COLUMNS = (N_("status"), N_("check"), N_("finding"))  # shown as _(label)
# Fixed widths (the finding's grows): a table cleared and refilled as a run goes keeps the
# widest cell it ever held, so the same verdict would otherwise look different by timing.
WIDTHS = (len("not checked"), TITLE_MAX // 2 + 4, None)
# The keys that choose the level before a run (quick by default).
LEVEL_KEYS = {"q": Level.QUICK, "s": Level.STANDARD, "b": Level.BURN}
LEVEL_WORDS = {  # shown as _(words)
    Level.QUICK: N_("quick: read-only, seconds"),
    Level.STANDARD: N_("standard: + short GPU work (torch matmul, dcgmi, nvbandwidth, nccl)"),
    Level.BURN: N_("burn: + a bounded burn-in (minutes, the GPUs at full load)"),
}
STATUS_WORDS = {
    Status.PASSED: N_("passed"),
    Status.WARNED: N_("warned"),
    Status.FAILED: N_("FAILED"),
    Status.SKIPPED: N_("skipped"),
    Status.NOT_CHECKED: N_("not checked"),
}
# Counts in this order: what fails a node first.
COUNT_ORDER = (Status.FAILED, Status.WARNED, Status.NOT_CHECKED, Status.PASSED, Status.SKIPPED)
RUNNING = N_("running…")
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
    return _(STATUS_WORDS[status])


def level_word(level: Level) -> str:
    """A level's name (stored in English: quick, standard, burn) in the language in use."""
    words = {
        Level.QUICK: pgettext("level", "quick"),
        Level.STANDARD: pgettext("level", "standard"),
        Level.BURN: pgettext("level", "burn"),
    }
    return words.get(level, level.value)


def rows(lines: Sequence[Line], running: str | None = None) -> list[tuple[str, ...]]:
    """One row per family begun (running while it is the one at work) and per finding."""
    out: list[tuple[str, ...]] = []
    for line in lines:
        if isinstance(line, Family):
            state = _(RUNNING) if line.id == running else ""
            out.append((state, f"▸ {visible(_(line.title), TITLE_MAX)}", ""))
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
    return _(", ").join(
        _("{count} {status}").format(count=counts[s], status=status_word(s)) for s in COUNT_ORDER
    )


def verdict_lines(stored: Stored) -> list[str]:
    """The verdict of a finished run: its status, level, counts and the return window."""
    v = stored.verdict
    lines = [
        _("verdict: {status} · level {level} · {counts}").format(
            status=status_word(v.status), level=level_word(v.level), counts=counts_text(v)
        ),
        returnable_words(stored),
    ]
    if not v.results:
        lines.insert(1, _("no check ran at this level: nothing was read from the node"))
    return lines


def summary_lines(stored: Stored | None, tz: str) -> list[str]:
    """The node screen's last verdict: status, level, when, counts, the failed and warned
    findings, the return window."""
    if stored is None:
        return []
    v = stored.verdict
    lines = [
        _("acceptance: {status} · level {level} · {time} · {counts}").format(
            status=status_word(v.status),
            level=level_word(v.level),
            time=fields.shown(v.finished, tz),
            counts=counts_text(v),
        ),
        returnable_words(stored),
    ]
    worth = [r for r in told(stored) if r.status in (Status.FAILED, Status.WARNED)]
    worth.sort(key=lambda r: r.status is not Status.FAILED)
    for r in worth[:LISTED_MAX]:
        title, words = visible(r.title, TITLE_MAX), visible(r.words, WORDS_MAX)
        lines.append(f"  {status_word(r.status)}: {title}: {words}")
    if len(worth) > LISTED_MAX:
        lines.append(
            "  " + _("… and {count} more (zuka accept --report md)").format(
                count=len(worth) - LISTED_MAX)
        )  # fmt: skip
    return lines


def _evidence_lines(ev: Evidence) -> list[str]:
    command = ev.command
    said = f" ({DISCARDED})"  # the timed transfer's words: in the language in use
    if command.endswith(said):
        command = command.removesuffix(said) + f" ({_(DISCARDED)})"
    lines = [f"$ {visible(command, 500)}"]
    if ev.failure:
        lines.append(_("did not run: {reason}").format(reason=visible(ev.failure, 300)))
    else:
        status = (
            _("no exit status")
            if ev.exit_status is None
            else _("exit {status}").format(status=ev.exit_status)
        )
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
        _("{status}: {title} ({check})").format(
            status=status_word(result.status), title=title, check=check
        ),
        visible(result.words, 2000),
    ]
    if result.expected:
        lines.append(_("expected: {value}").format(value=visible(result.expected, 1000)))
    if result.found:
        lines.append(_("found: {value}").format(value=visible(result.found, 1000)))
    by_key = {e.key: e for e in evidence}
    for key in result.evidence:
        ev = by_key.get(key)
        lines.append("")
        if ev is None:
            lines.append(_("evidence {key}: not kept").format(key=visible(key, 60)))
        else:
            lines += _evidence_lines(ev)
    if not result.evidence:
        lines.append(_("(no command's output: this finding rests on the ledger or the login)"))
    return lines


def report_name(node: str, finished: datetime) -> str:
    """The report's file name: the node's name made safe for a file, and the time."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in node)
    safe = safe.lstrip(".")[:60] or "node"
    return f"zuka-accept-{safe}-{finished.strftime('%Y%m%d-%H%M%S')}.md"
