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

from leases.accept.words import interconnect_words
from leases.app.acceptance import Stored, told
from leases.core import fields
from leases.core.acceptance import CheckResult, Evidence, Level, Status
from leases.core.i18n import _, pgettext
from leases.core.textsafe import visible

# What one evidence block shows at most in the report (the ledger keeps more).
REPORT_EVIDENCE_MAX = 64 * 1024


def status_words(status: Status) -> str:
    """ "not checked", "未检查": a status as a person reads it (JSON keeps the value)."""
    words = {
        Status.PASSED: pgettext("acceptance", "passed"),
        Status.WARNED: pgettext("acceptance", "warned"),
        Status.FAILED: pgettext("acceptance", "failed"),
        Status.SKIPPED: pgettext("acceptance", "skipped"),
        Status.NOT_CHECKED: pgettext("acceptance", "not checked"),
    }
    return words[status]


def level_words(level: Level) -> str:
    words = {
        Level.QUICK: pgettext("acceptance level", "quick"),
        Level.STANDARD: pgettext("acceptance level", "standard"),
        Level.BURN: pgettext("acceptance level", "burn"),
    }
    return words[level]


def returnable_words(s: Stored) -> str:
    """ "returnable until 2026-12-09", or why it is not known."""
    if s.returnable_until is not None:
        # Judged on the day the run finished, in the lease's billing time zone: a report
        # read later still says what was true when the evidence was taken.
        on = s.verdict.finished.astimezone(ZoneInfo(s.lease_tz)).date()
        if on > s.returnable_until:
            words = _("the return window closed on {closed} (before this run, on {run})")
            return words.format(closed=s.returnable_until.isoformat(), run=on.isoformat())
        return _("returnable until {day}").format(day=s.returnable_until.isoformat())
    if s.lease_start is None:
        return _("no open lease: nothing to return")
    provider = shlex.quote(s.provider) if s.provider else "PROVIDER"
    words = _("return window unknown (record it: zuka provider edit {provider} --return-days N)")
    return words.format(provider=visible(provider, 100))


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
        lines.append("  - " + _("could not run: {why}").format(why=_cell(ev.failure)))
    else:
        words = _("exit status {status}, {seconds:g} s")
        lines.append("  - " + words.format(status=ev.exit_status, seconds=ev.seconds))
    for name, body in (("stdout", ev.stdout), ("stderr", ev.stderr)):
        if body:
            shown = visible(body[:REPORT_EVIDENCE_MAX], keep_newlines=True)
            if len(body) > REPORT_EVIDENCE_MAX:
                cut = _("[zuka: the report shows the first {count} characters]")
                shown += "\n" + cut.format(count=REPORT_EVIDENCE_MAX)
            lines.append(f"\n{name}:\n\n{fenced(shown)}\n")
    return "\n".join(lines)


def _finding(r: CheckResult) -> str:
    words = _("- **{status}** {title} ({check}): {words}")
    out = [
        words.format(
            status=status_words(r.status),
            title=_cell(r.title, 120),
            check=_cell(r.check, 80),
            words=_cell(r.words, 1000),
        )
    ]
    if r.expected:
        out.append("  - " + _("expected: {expected}").format(expected=_cell(r.expected, 500)))
    if r.found:
        out.append("  - " + _("found: {found}").format(found=_cell(r.found, 500)))
    return "\n".join(out)


def report_md(s: Stored) -> str:
    """The markdown report of one run, in the language in use."""
    v = s.verdict
    tz = s.lease_tz
    sold = s.sold
    results = told(s)
    lease = (
        _("none open")
        if s.lease_start is None
        else _("started {when}").format(when=fields.shown(s.lease_start, tz))
    )
    checked = _("{start} to {end} ({tz}; level {level}, run {run})").format(
        start=fields.shown(v.started, tz),
        end=fields.shown(v.finished, tz),
        tz=_cell(tz, 60),
        level=level_words(v.level),
        run=s.id,
    )
    head = [
        _("# Hand-over acceptance of {node}").format(node=_cell(s.node, 100)),
        "",
        _("- provider: {provider}").format(provider=_cell(s.provider or _("not recorded"), 100)),
        _("- lease: {lease}").format(lease=lease),
        _("- checked: {checked}").format(checked=checked),
        _("- verdict: **{status}**; {window}").format(
            status=status_words(s.status), window=returnable_words(s)
        ),
    ]
    if sold is not None:
        unknown = _("not recorded")
        vram = (
            unknown if sold.vram_gib is None else _("{gib} GiB per GPU").format(gib=sold.vram_gib)
        )
        links = interconnect_words(sold.interconnect)
        if sold.nvlinks is not None:
            links = _("{links}, {count} NVLinks per GPU pair").format(
                links=links, count=sold.nvlinks
            )
        if sold.ib_gbps is not None:
            links = _("{links}, InfiniBand {gbps} Gb/s").format(links=links, gbps=sold.ib_gbps)
        head += [
            "",
            _("## As sold (the ledger)"),
            "",
            _("- GPU model: {model}").format(model=_cell(sold.gpu_model or unknown, 100)),
            _("- GPUs: {count}").format(count=sold.gpu_count or unknown),
            _("- VRAM: {vram}").format(vram=vram),
            _("- interconnect: {links}").format(links=links),
        ]
    head += ["", _("## Findings"), ""]
    head += [_finding(r) for r in results] or [_("(none)")]
    bad = [r for r in v.results if r.status in (Status.FAILED, Status.WARNED)]
    keys = list(dict.fromkeys(k for r in bad for k in r.evidence))
    by_key = {e.key: e for e in v.evidence}
    if keys:
        head += ["", _("## Evidence of the failed and warned checks"), ""]
        for key in keys:
            ev = by_key.get(key)
            if ev:
                head.append(_evidence_block(ev))
            else:
                head.append(_("- {key}: no evidence kept").format(key=_cell(key, 80)))
    return "\n".join(head) + "\n"
