"""Reading nvidia-smi for the checks: `-q -x` (XML) first, `-q` text where the XML fails or
says nothing, the acceptance query CSV, and the words for a run that failed. Each command
runs once per acceptance run (the probe keeps it), so the families share what one read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from leases.accept.engine import Context
from leases.accept.facts import SmiQuery
from leases.accept.parse.smiq import parse_q
from leases.accept.parse.smiquery import QUERY_GPU_COMMAND, SmiRows, parse_query_gpu
from leases.accept.parse.smixml import parse_xml
from leases.accept.words import _
from leases.core.acceptance import CheckResult, Evidence, Status
from leases.core.textsafe import visible
from leases.ssh.faults import said_again
from leases.telemetry.nvsmi import classify_failure, human_reason

XML_COMMAND = "nvidia-smi -q -x"
TEXT_COMMAND = "nvidia-smi -q"
# Drivers before 535 know the clocks event reasons only by their older name.
QUERY_GPU_OLD_COMMAND = QUERY_GPU_COMMAND.replace(
    "clocks_event_reasons.active", "clocks_throttle_reasons.active"
)


@dataclass(frozen=True)
class Read:
    """What one read of nvidia-smi gave: facts, or why there are none (and whether that is
    the node being unreachable, so "not checked")."""

    keys: tuple[str, ...]  # evidence keys it rests on
    why: str = ""  # words when nothing could be read
    status: Status = Status.NOT_CHECKED  # of a finding made from `why`


@dataclass(frozen=True)
class QRead(Read):
    facts: SmiQuery | None = None


@dataclass(frozen=True)
class RowsRead(Read):
    rows: SmiRows | None = None


def gpu_label(index: int | None, position: int) -> str:
    """ "GPU 3": the index nvidia-smi printed, else the GPU's position in its output (the
    XML prints none)."""
    return f"GPU {index if index is not None else position}"


def per_gpu(values: Sequence[tuple[str, str]], shown: int = 16) -> str:
    """(label, value) per GPU in words: "all 8 GPUs: 81920 MiB" when every value is the same,
    else "GPU 0 81920 MiB, GPU 1 24564 MiB, ..." (the first `shown`)."""
    if len(values) > 1 and len({v for _label, v in values}) == 1:
        return _("all {count} GPUs: {value}").format(count=len(values), value=values[0][1])
    listed = _(", ").join(f"{label} {value}" for label, value in values[:shown])
    if len(values) > shown:
        return _("{listed} and {count} more").format(listed=listed, count=len(values) - shown)
    return listed


_GPU_LINE = re.compile(r"GPU (\d{1,4})(\b.*)", re.S)


def said_once(lines: Sequence[str], shown: int = 8) -> str:
    """Findings per GPU, joined by "; ", each said once for every GPU it is true of: eight
    "GPU n reports 24564 MiB ..." become "GPU 0, 1, 2, 3, 4, 5, 6, 7 reports 24564 MiB ..."
    (a line that names no GPU stands alone). The first `shown` groups, then how many more."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        found = _GPU_LINE.fullmatch(line)
        rest, gpu = (found.group(2), found.group(1)) if found else (line, "")
        groups.setdefault(rest, []).append(gpu)
    said = [(f"GPU {', '.join(gpus)}{rest}" if gpus[0] else rest) for rest, gpus in groups.items()]
    joined = _("; ").join(said[:shown])
    if len(said) > shown:
        return _("{listed}; and {count} more").format(listed=joined, count=len(said) - shown)
    return joined


def failure_words(ev: Evidence) -> str:
    """Why a command gave nothing usable, in words (never the node's words raw)."""
    if ev.failure:
        why = said_again(ev.failure)
        return _("`{command}` could not run: {why}").format(command=ev.command, why=why)
    if ev.exit_status is None:
        return _("`{command}` gave no exit status: the connection ended before it did").format(
            command=ev.command
        )
    if ev.exit_status == 0:
        return _("`{command}` printed nothing zuka could read").format(command=ev.command)
    health = classify_failure(ev.exit_status, ev.stdout, ev.stderr)
    said = visible((ev.stderr or ev.stdout).strip(), 160)
    return _("`{command}` exited {status}: {reason} ({said})").format(
        command=ev.command, status=ev.exit_status, reason=_(human_reason(health)), said=said
    )


async def read_q(ctx: Context) -> QRead:
    """`nvidia-smi -q -x`, else `nvidia-smi -q`, as facts."""
    xml = await ctx.probe.run("smi-q-x", XML_COMMAND, 60.0)
    if xml.failure:
        return QRead((xml.key,), failure_words(xml))
    if xml.exit_status == 0:
        facts = parse_xml(xml.stdout)
        if facts.gpus:
            return QRead((xml.key,), facts=facts)
    text = await ctx.probe.run("smi-q", TEXT_COMMAND, 60.0)
    if text.exit_status == 0 and not text.failure:
        facts = parse_q(text.stdout)
        if facts.gpus:
            return QRead((xml.key, text.key), facts=facts)
    first = xml if xml.exit_status != 0 else text
    return QRead((xml.key, text.key), failure_words(first))


async def read_rows(ctx: Context) -> RowsRead:
    """The acceptance query CSV (retried with the older field name on drivers before 535)."""
    ev = await ctx.probe.run("query-gpu", QUERY_GPU_COMMAND, 30.0)
    keys: tuple[str, ...] = (ev.key,)
    if not ev.failure and ev.exit_status != 0 and "not a valid field" in ev.stdout + ev.stderr:
        ev = await ctx.probe.run("query-gpu-old", QUERY_GPU_OLD_COMMAND, 30.0)
        keys = (*keys, ev.key)
    if ev.failure or ev.exit_status != 0:
        return RowsRead(keys, failure_words(ev))
    rows = parse_query_gpu(ev.stdout)
    if not rows.rows:
        problems = "; ".join(rows.problems)[:200]
        return RowsRead(keys, f"{failure_words(ev)}: {problems}")
    return RowsRead(keys, rows=rows)


def unread(check: str, title: str, read: Read) -> CheckResult:
    """The finding of a check that could not read what it judges."""
    words = _("not checked: {why}").format(why=read.why)
    return CheckResult(check, _(title), read.status, words, evidence=read.keys)
