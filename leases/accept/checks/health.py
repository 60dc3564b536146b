"""Memory and power health: remapped rows, retired pages, uncorrectable ECC, Xid lines in
the kernel log (where readable), the power limit against its default, clocks event
(throttle) reasons active at idle.

Thresholds: DCGM (retired pages ≥ 63 fail, 15 soft; uncorrectable row remaps ≥ 512 fail),
Azure azurehpc-health-checks (its Xid list fails; throttle reasons other than idle / none /
SW power cap warn); power below 90 % of default fails *(ours)*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leases.accept.checks.smi import gpu_label, read_q, said_once, unread
from leases.accept.engine import Check, Context
from leases.accept.facts import SmiQuery
from leases.accept.probe import missing_tool
from leases.accept.words import N_, _
from leases.core.acceptance import CheckResult, Evidence, Level, Status, worse
from leases.core.textsafe import visible

TITLE = N_("Memory and power health")
DMESG_COMMAND = "dmesg"
JOURNAL_COMMAND = "journalctl -k -b --no-pager -q"

REMAP_UNCORRECTABLE_FAIL = 512
RETIRED_FAIL = 63
RETIRED_WARN = 15
POWER_FAIL_SHARE = 0.90
# Azure azurehpc-health-checks: Xids in the kernel log that fail a node.
AZURE_XIDS = frozenset({48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120})
# Clocks event reasons that say nothing bad at idle.
IDLE_REASONS = frozenset({"idle", "gpu idle", "none", "sw power cap"})

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]{1,20})\): (\d{1,4})\b([^\n]{0,160})")


@dataclass
class _Tally:
    status: Status = Status.PASSED

    def see(self, status: Status) -> None:
        self.status = worse(self.status, status)


def judge_memory(facts: SmiQuery, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "health.memory", _("Remapped rows, retired pages, ECC")
    tally = _Tally()
    lines: list[str] = []
    for i, g in enumerate(facts.gpus):
        name = gpu_label(g.index, i)
        unc = g.remapped_uncorrectable
        if (unc is not None and unc >= REMAP_UNCORRECTABLE_FAIL) or g.remap_failure == "Yes":
            tally.see(Status.FAILED)
            line = _(
                "{gpu}: {count} uncorrectable remapped rows, remapping failure {failure}"
                " (DCGM fails at {limit})"
            )
            lines.append(
                line.format(
                    gpu=name,
                    count=unc,
                    failure=g.remap_failure or _("unknown"),
                    limit=REMAP_UNCORRECTABLE_FAIL,
                )
            )
        elif g.remap_pending == "Yes":
            tally.see(Status.WARNED)
            lines.append(
                _("{gpu}: a row remap is pending (the GPU needs a reset)").format(gpu=name)
            )
        retired = (g.retired_sbe or 0) + (g.retired_dbe or 0)
        if retired >= RETIRED_FAIL:
            tally.see(Status.FAILED)
            line = _("{gpu}: {count} retired pages (DCGM fails at {limit})")
            lines.append(line.format(gpu=name, count=retired, limit=RETIRED_FAIL))
        elif retired >= RETIRED_WARN:
            tally.see(Status.WARNED)
            line = _("{gpu}: {count} retired pages (DCGM warns at {limit})")
            lines.append(line.format(gpu=name, count=retired, limit=RETIRED_WARN))
        if g.retired_pending == "Yes":
            tally.see(Status.WARNED)
            line = _("{gpu}: a page retirement is pending (the GPU needs a reset)")
            lines.append(line.format(gpu=name))
        if g.ecc_uncorrected_volatile:
            tally.see(Status.WARNED)
            line = _("{gpu}: {count} uncorrectable ECC errors since boot")
            lines.append(line.format(gpu=name, count=g.ecc_uncorrected_volatile))
    expected = _(
        "uncorrectable remapped rows < {remaps}, no remap failure or pending,"
        " retired pages < {retired}, no uncorrectable ECC errors"
    ).format(remaps=REMAP_UNCORRECTABLE_FAIL, retired=RETIRED_WARN)
    if lines:
        words = said_once(lines) + " (nvidia-smi -q)"
        found = _("; ").join(lines[:16])
        return CheckResult(cid, title, tally.status, words, expected, found, keys)
    return CheckResult(
        cid,
        title,
        Status.PASSED,
        _("no remapped-row, retired-page or ECC trouble"),
        expected,
        _("none"),
        keys,
    )


def judge_power(facts: SmiQuery, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "health.power", _("Power limit")
    tally = _Tally()
    lines: list[str] = []
    known = 0
    for i, g in enumerate(facts.gpus):
        limit, default = g.power_limit_w, g.default_power_limit_w
        if limit is None or not default:
            continue
        known += 1
        if limit < default * POWER_FAIL_SHARE:
            tally.see(Status.FAILED)
        elif limit < default:
            tally.see(Status.WARNED)
        else:
            continue
        line = _("{gpu}: power limit {limit:g} W, default {default:g} W ({share:.0f} %)")
        share = limit / default * 100
        lines.append(
            line.format(gpu=gpu_label(g.index, i), limit=limit, default=default, share=share)
        )
    expected = _("power limit at its default (below 90 % fails)")
    if lines:
        words = _("{lines}: the GPUs are power-capped (nvidia-smi -q)").format(
            lines=said_once(lines)
        )
        found = _("; ").join(lines[:16])
        return CheckResult(cid, title, tally.status, words, expected, found, keys)
    if not known:
        return CheckResult(
            cid,
            title,
            Status.SKIPPED,
            _("skipped, because nvidia-smi printed no power limits (N/A)"),
            expected,
            "",
            keys,
        )
    return CheckResult(
        cid,
        title,
        Status.PASSED,
        _("every GPU runs at its default power limit"),
        expected,
        _("at default"),
        keys,
    )


def judge_throttle(facts: SmiQuery, keys: tuple[str, ...]) -> CheckResult:
    cid, title = "health.throttle", _("Clocks event reasons at idle")
    lines = [
        f"{gpu_label(g.index, i)}: {', '.join(visible(r, 40) for r in bad)}"
        for i, g in enumerate(facts.gpus)
        if (bad := [r for r in g.throttle_active if r.strip().lower() not in IDLE_REASONS])
    ]
    expected = _("none active but idle or SW power cap")
    if lines:
        words = _("{lines}: clocks held down at idle (nvidia-smi -q Clocks Event Reasons)")
        words = words.format(lines=said_once(lines))
        found = _("; ").join(lines[:16])
        return CheckResult(cid, title, Status.WARNED, words, expected, found, keys)
    words = _("no clocks event reason active but idle")
    return CheckResult(cid, title, Status.PASSED, words, expected, _("none"), keys)


@dataclass(frozen=True)
class Xid:
    bus: str
    code: int
    rest: str


def xid_lines(log: str) -> list[Xid]:
    """The NVRM Xid lines of a kernel log (bounded: the first 1,000)."""
    found: list[Xid] = []
    for m in _XID.finditer(log):
        found.append(Xid(m.group(1), int(m.group(2)), m.group(3).strip()))
        if len(found) >= 1000:
            break
    return found


def judge_xids(xids: list[Xid], keys: tuple[str, ...], source: str) -> CheckResult:
    cid, title = "health.xid", _("Xid errors in the kernel log")
    if not xids:
        return CheckResult(
            cid,
            title,
            Status.PASSED,
            _("no Xid line in the kernel log ({source})").format(source=source),
            _("no Xid"),
            _("none"),
            keys,
        )
    codes = sorted({x.code for x in xids})
    fatal = [x for x in xids if x.code in AZURE_XIDS]
    shown = [
        _("Xid {code} on PCI:{bus}").format(code=x.code, bus=visible(x.bus, 20))
        + (f" ({visible(x.rest.lstrip(', '), 80)})" if x.rest.lstrip(", ") else "")
        for x in (fatal or xids)[:6]
    ]
    found = _("{count} Xid lines, codes {codes}").format(
        count=len(xids), codes=", ".join(map(str, codes[:20]))
    )
    listed = _("; ").join(shown)
    if fatal:
        words = _("{xids}: Xids that Azure's health checks fail a node for ({source})")
        words = words.format(xids=listed, source=source)
        return CheckResult(cid, title, Status.FAILED, words, _("no Xid"), found, keys)
    words = _("{xids} ({source}): worth a look, not on Azure's failing list")
    words = words.format(xids=listed, source=source)
    return CheckResult(cid, title, Status.WARNED, words, _("no Xid"), found, keys)


def _unreadable(ev: Evidence) -> str:
    said = visible((ev.stderr or ev.stdout).strip(), 120)
    if ev.failure:
        return _("`{command}` could not run ({why})").format(command=ev.command, why=ev.failure)
    if missing_tool(ev):
        return _("`{command}` is not on the node").format(command=ev.command)
    if "not permitted" in said.lower() or "permission" in said.lower():
        return _("`{command}` needs root here ({said})").format(command=ev.command, said=said)
    return _("`{command}` exited {status} ({said})").format(
        command=ev.command, status=ev.exit_status, said=said
    )


async def kernel_log(ctx: Context) -> tuple[str | None, tuple[str, ...], str]:
    """The kernel log (dmesg, else journalctl -k), the evidence keys, and the source's
    name or why it could not be read."""
    dmesg = await ctx.probe.run("dmesg", DMESG_COMMAND, 30.0)
    if dmesg.exit_status == 0 and not dmesg.failure:
        return dmesg.stdout, (dmesg.key,), "dmesg"
    journal = await ctx.probe.run("journal-k", JOURNAL_COMMAND, 30.0)
    keys = (dmesg.key, journal.key)
    if journal.exit_status == 0 and not journal.failure:
        return journal.stdout, keys, "journalctl -k"
    both = _("{first} and {second}")
    return None, keys, both.format(first=_unreadable(dmesg), second=_unreadable(journal))


async def run(ctx: Context) -> list[CheckResult]:
    results: list[CheckResult] = []
    q = await read_q(ctx)
    if q.facts is None:
        results.append(unread("health.query", TITLE, q))
    else:
        results += [
            judge_memory(q.facts, q.keys),
            judge_power(q.facts, q.keys),
            judge_throttle(q.facts, q.keys),
        ]
    log, keys, source = await kernel_log(ctx)
    if log is None:
        words = _("skipped, because {why}").format(why=source)
        title = _("Xid errors in the kernel log")
        results.append(CheckResult("health.xid", title, Status.SKIPPED, words, evidence=keys))
    else:
        results.append(judge_xids(xid_lines(log), keys, source))
    return results


CHECK = Check("health", TITLE, Level.QUICK, run, cost=2)
