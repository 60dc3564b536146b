"""The offboarding's report for a data-compliance reviewer: the plan and its hash, every
step's state, and the evidence (command, output, result, time, who) as the audit log
holds it, with the audit chain's own verdict, as Markdown or JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from leases.core.i18n import EN, N_, _, language
from leases.core.origin import who
from leases.core.retold import shown
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.offboard import evidence, status
from leases.offboard.evidence import StoredPlan
from leases.offboard.words import event_word, fact_value, fact_word, phase_word, state_word

SHRED_CAVEAT = N_(
    "Overwriting files (shred) is best effort: on SSDs and flash, journaling file systems"
    " (ext3/ext4 with data=journal), copy-on-write and log-structured file systems (btrfs,"
    " zfs, xfs reflinks), network storage and cloud disks, the old blocks may survive it"
    " (GNU shred manual). Deleting the cloud disk and its snapshots is the real control."
)
# Only where the plan read them: a plan without a facts step has none to point at.
FACTS_CAVEAT = N_(" Each file system's type and mount options are in the evidence below.")


def build(ledger: Ledger, stored: StoredPlan) -> dict[str, Any]:
    """The report as plain data (what --format json prints)."""
    chain = ledger.verify_audit()
    ids = evidence.plan_ids(ledger, stored)
    items = []
    for e in evidence.entries(ledger, ids):
        after = e.after or {}
        items.append(
            {
                "entry": e.id,
                "at": e.at.isoformat(),
                "actor": e.actor,
                "origin": e.origin,
                "event": e.action.removeprefix("offboard."),
                "plan": after.get("plan"),
                "hash": after.get("hash"),
                "step": after.get("step"),
                "command": after.get("command"),
                "state": after.get("state"),
                "done": after.get("done"),
                "output": after.get("output"),
                "detail": after.get("detail"),
                "facts": after.get("facts") or {},
                "problem": e.problem,
            }
        )
    steps = []
    for s in stored.plan.steps:
        st = stored.state(s.key)
        steps.append(
            {
                "key": s.key,
                "phase": s.phase.name.lower(),
                "driver": s.driver,
                "action": s.action,
                "target": s.target,
                "destructive": s.destructive,
                "command": s.describe,
                "state": st.state.value,
                "at": None if st.at is None else st.at.isoformat(),
                "detail": st.detail,
            }
        )
    return {
        "node": stored.plan.node,
        "plan": stored.id,
        "hash": stored.hash,
        "created_at": stored.created_at.isoformat(),
        "finished_at": None if stored.finished_at is None else stored.finished_at.isoformat(),
        "finished": stored.finished,
        "outcome": status.outcome(stored),
        "counts": status.counts(stored),
        "not_deleted": stored.plan.not_deleted(),
        "skipped": [{"key": k, "reason": why} for k, why in status.skipped(stored)],
        "steps": steps,
        "evidence": items,
        "audit_chain": {
            "ok": chain.ok,
            "entries": chain.entries,
            "head_id": chain.head_id,
            "head_hash": chain.head_hash,
            "broken_at": chain.broken_at,
            "reason": chain.reason,
        },
        "caveat": SHRED_CAVEAT
        + (FACTS_CAVEAT if any(s.action == "fs-facts" for s in stored.plan.steps) else ""),
    }


def markdown(report: Mapping[str, Any]) -> str:
    """The report as Markdown. Everything from a node, a cloud or the ledger passes through
    visible() and sits in a table cell (pipes escaped) or an indented block: no value can
    become markup, a heading or a terminal escape."""
    v = inert

    def t(value: object) -> str:
        """Stored English (a detail, a command's description), shown, inert."""
        return inert(shown(str(value)))

    chain = report["audit_chain"]
    outcome = ", ".join(shown(part) for part in str(report["outcome"]).split(", "))
    if report["finished"] and report["finished_at"]:
        state = _("finished at {at}: {outcome}")
    elif report["finished"]:
        state = _("finished: {outcome}")
    else:
        state = _("not finished: {outcome}")
    lines = [
        "# " + _("Offboarding of {node}").format(node=v(report["node"])),
        "",
        "- "
        + _("plan {id}, hash `{hash}`, made {at}").format(
            id=report["plan"], hash=report["hash"], at=v(report["created_at"])
        ),
        "- " + state.format(at=v(report["finished_at"] or ""), outcome=v(outcome)),
        "- "
        + (
            _("audit chain: intact, {entries} entries, head {head}").format(
                entries=chain["entries"], head=f"{chain['head_id']}:{chain['head_hash']}"
            )
            if chain["ok"]
            else _("audit chain: BROKEN at entry {entry}: {reason}").format(
                entry=chain["broken_at"], reason=t(chain["reason"])
            )
        ),
        *("- " + _("NOT deleted: {what}").format(what=t(line)) for line in report["not_deleted"]),
        *(
            ["", "## " + _("Skipped"), ""]
            + [f"- {v(s['key'])}: {t(s['reason'])}" for s in report["skipped"]]
            if report["skipped"]
            else []
        ),
        "",
        "## " + _("Steps"),
        "",
        "| # | "
        + " | ".join((_("phase"), _("step"), _("command"), _("destructive"), _("state"), _("when")))
        + " | "
        + _("detail")
        + " |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(report["steps"], 1):
        deletes = _("yes") if s["destructive"] else _("no")
        lines.append(
            f"| {i} | {phase_word(s['phase'])} | {v(s['key'])} | {t(s['command'])} | "
            f"{deletes} | {state_word(s['state'])} | "
            f"{v(s['at'] or '')} | {t(s['detail'])} |"
        )
    lines += ["", "## " + _("Evidence"), ""]
    for e in report["evidence"]:
        result = "" if e["done"] is None else " — " + (_("done") if e["done"] else _("not done"))
        if e["step"]:
            head = _("entry {entry}: {event} of {step}").format(
                entry=e["entry"], event=v(event_word(str(e["event"]))), step=v(e["step"])
            )
        else:
            head = _("entry {entry}: {event}").format(
                entry=e["entry"], event=v(event_word(str(e["event"])))
            )
        lines += [
            "### " + head + result,
            "",
            "- "
            + _("at {at} by {who}").format(
                at=v(e["at"]), who=v(who(e["actor"], e.get("origin") or ""))
            ),
        ]
        if e["event"] == "plan":
            lines.append(
                "- " + _("plan {id}, hash `{hash}`").format(id=v(e["plan"]), hash=v(e["hash"]))
            )
        if e["command"]:
            lines.append("- " + _("command: {command}").format(command=t(e["command"])))
        if e["state"]:
            lines.append("- " + _("state: {state}").format(state=v(state_word(str(e["state"])))))
        if e["detail"]:
            lines.append("- " + _("detail: {detail}").format(detail=t(e["detail"])))
        for k, val in sorted(e["facts"].items()):
            said = fact_value(str(k), str(val))
            value = v(said) if said != str(val) else t(val)
            # "- NAME: VALUE", an ASCII colon: a fact is a field of data, not a sentence.
            lines.append(f"- {v(fact_word(str(k)))}: {value}")
        if e["problem"]:
            lines.append("- " + _("UNREADABLE ENTRY: {problem}").format(problem=t(e["problem"])))
        if e["output"]:
            lines += ["- " + _("output:"), ""]
            text = visible(str(e["output"]), 20000, keep_newlines=True)
            lines += [f"        {_output_line(e, line)}" for line in text.splitlines()]
        lines.append("")
    caveat = str(report["caveat"])
    if caveat.startswith(SHRED_CAVEAT):
        caveat = _(SHRED_CAVEAT) + (_(FACTS_CAVEAT) if caveat != SHRED_CAVEAT else "")
    lines += ["## " + _("What shred cannot promise"), "", caveat, ""]
    return "\n".join(lines)


def _output_line(e: Mapping[str, Any], line: str) -> str:
    """A line of a step's stored output as the report shows it: the preflight's lines of
    lease facts ("billing: monthly 50000 CNY", as stored) said as its facts are
    ("计费: 包月 ¥50,000.00") in Chinese; English and any other line as stored."""
    facts = e.get("facts") or {}
    if language() == EN or not str(e.get("step") or "").startswith("preflight:"):
        return line
    name, sep, value = line.partition(": ")
    if not sep or name not in facts or fact_word(name) == name:
        return line
    return f"{fact_word(name)}: {fact_value(name, value)}"


# Markdown's specials, backslash-escaped (CommonMark takes a backslash before any ASCII
# punctuation as the character itself): code, emphasis, links and images (no "[", no
# link), strike-through (pairs of ~); "_" only where it could open or close emphasis (not in a
# word: paths and keys stay searchable). HTML's specials as entities; a pipe keeps a table
# cell a cell. "://", "www." and "@" are broken up so that no renderer's autolinks (GitHub's
# turn a bare http://x into a link) make a link of node text.
_INERT = str.maketrans(
    {c: "\\" + c for c in "\\`*[]|"}
    | {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "@": "&#64;"}
)
_UNDERSCORE_RE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# Tildes strike through in pairs: a lone tilde (a home's "~/") stays as it is.
_AUTOLINK_RE = re.compile(r"(?i)(:)(//)|(www)(\.)")


def inert(value: object) -> str:
    """Text from a node, a cloud or the ledger, inert in Markdown and in the HTML a renderer
    makes of it (newlines and controls shown by visible, never obeyed)."""
    text = _UNDERSCORE_RE.sub(r"\\_", visible(str(value), 1000).translate(_INERT))
    if text.count("~") > 1:
        text = text.replace("~", "\\~")
    text = _AUTOLINK_RE.sub(lambda m: "\\".join(g for g in m.groups() if g), text)
    return "\\-" + text[1:] if text.startswith(("-", "=")) else text
