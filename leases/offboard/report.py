"""The offboarding's report for a data-compliance reviewer: the plan and its hash, every
step's state, and the evidence (command, output, result, time, who) as the audit log
holds it, with the audit chain's own verdict, as Markdown or JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from leases.core.origin import who
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.offboard import evidence, status
from leases.offboard.evidence import StoredPlan

SHRED_CAVEAT = (
    "Overwriting files (shred) is best effort: on SSDs and flash, journaling file systems"
    " (ext3/ext4 with data=journal), copy-on-write and log-structured file systems (btrfs,"
    " zfs, xfs reflinks), network storage and cloud disks, the old blocks may survive it"
    " (GNU shred manual). Deleting the cloud disk and its snapshots is the real control."
)
# Only where the plan read them: a plan without a facts step has none to point at.
FACTS_CAVEAT = " Each file system's type and mount options are in the evidence below."


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
    chain = report["audit_chain"]
    state = "finished" if report["finished"] else "not finished"
    lines = [
        f"# Offboarding of {v(report['node'])}",
        "",
        f"- plan {report['plan']}, hash `{report['hash']}`, made {v(report['created_at'])}",
        f"- {state}"
        + (f" at {v(report['finished_at'])}" if report["finished_at"] else "")
        + f": {v(report['outcome'])}",
        "- audit chain: "
        + (
            f"intact, {chain['entries']} entries, head {chain['head_id']}:{chain['head_hash']}"
            if chain["ok"]
            else f"BROKEN at entry {chain['broken_at']}: {v(chain['reason'])}"
        ),
        *(f"- NOT deleted: {v(line)}" for line in report["not_deleted"]),
        *(
            ["", "## Skipped", ""]
            + [f"- {v(s['key'])}: {v(s['reason'])}" for s in report["skipped"]]
            if report["skipped"]
            else []
        ),
        "",
        "## Steps",
        "",
        "| # | phase | step | command | destructive | state | when | detail |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(report["steps"], 1):
        lines.append(
            f"| {i} | {s['phase']} | {v(s['key'])} | {v(s['command'])} | "
            f"{'yes' if s['destructive'] else 'no'} | {s['state']} | {v(s['at'] or '')} | "
            f"{v(s['detail'])} |"
        )
    lines += ["", "## Evidence", ""]
    for e in report["evidence"]:
        result = "" if e["done"] is None else (" — done" if e["done"] else " — not done")
        head = f"### entry {e['entry']}: {v(e['event'])}"
        if e["step"]:
            head += f" of {v(e['step'])}"
        lines += [
            head + result,
            "",
            f"- at {v(e['at'])} by {v(who(e['actor'], e.get('origin') or ''))}",
        ]
        if e["event"] == "plan":
            lines.append(f"- plan {v(e['plan'])}, hash `{v(e['hash'])}`")
        if e["command"]:
            lines.append(f"- command: {v(e['command'])}")
        if e["state"]:
            lines.append(f"- state: {v(e['state'])}")
        if e["detail"]:
            lines.append(f"- detail: {v(e['detail'])}")
        for k, val in sorted(e["facts"].items()):
            lines.append(f"- {v(k)}: {v(val)}")
        if e["problem"]:
            lines.append(f"- UNREADABLE ENTRY: {v(e['problem'])}")
        if e["output"]:
            lines += ["- output:", ""]
            text = visible(str(e["output"]), 20000, keep_newlines=True)
            lines += [f"        {line}" for line in text.splitlines()]
        lines.append("")
    lines += ["## What shred cannot promise", "", report["caveat"], ""]
    return "\n".join(lines)


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
