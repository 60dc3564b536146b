"""A stored run's findings in the language in use, from its stored evidence.

A run is stored in English. To show one read back from the ledger in another language,
the checks judge the run's own evidence again (nothing runs on the node: every command's
answer is in the evidence, the login attempt and the timed transfer too), in English and
in the language in use together. A finding is told in the language in use only where the
English judged again is the stored finding word for word; any other is shown as stored
(the settings changed since, a check changed since). The checks never wait on anything
here, so this runs without an event loop.
"""

from __future__ import annotations

import re
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any

from leases.accept import engine
from leases.accept.engine import Check, Context, LoginOffer, Settings, Sold
from leases.accept.probe import Probe
from leases.accept.words import _, speaking_now
from leases.core.acceptance import CheckResult, Evidence, Verdict
from leases.core.i18n import EN
from leases.ssh.faults import said_again
from leases.ssh.stream import CommandResult

_NONCE = re.compile(r'NONCE = "([0-9a-f]{16,64})"')
_UNREACHED = re.compile(r"not checked: the node could not be reached \((.*)\)", re.S)


class _Nothing:
    """A runner with no node behind it: a command not in the evidence was not run."""

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        raise LookupError("not in the stored evidence")


def _offer(ev: Evidence | None) -> LoginOffer | None:
    if ev is None:
        return None
    lines = dict(line.split(": ", 1) for line in ev.stdout.splitlines() if ": " in line)
    methods = tuple(m for m in lines.get("methods", "").split(",") if m)
    return LoginOffer(lines.get("refused") == "True", methods, ev.stderr)


def _rate(ev: Evidence | None) -> float | None:
    if ev is None or ev.failure or not ev.stdout.endswith(" bytes/s\n"):
        return None
    try:
        return float(ev.stdout.removesuffix(" bytes/s\n"))
    except ValueError:
        return None


def _context(verdict: Verdict, sold: Sold, settings: Settings) -> Context:
    probe = Probe(_Nothing())
    by_key = {ev.key: ev for ev in verdict.evidence}
    for ev in verdict.evidence:
        probe.record(ev)
    ctx = Context(sold, probe, verdict.level, settings)
    offer = _offer(by_key.get("password-proof"))
    if offer is not None:
        answer = offer

        async def proof() -> LoginOffer:
            return answer

        ctx.password_proof = proof
    rate = _rate(by_key.get("throughput"))
    if rate is not None:
        measured = rate

        async def throughput(nbytes: int) -> float:
            return measured

        ctx.throughput = throughput
    for key in ("burn", "torch"):
        found = _NONCE.search(by_key[key].command) if key in by_key else None
        if found:
            ctx.memo["nonce"] = found.group(1)
    return ctx


def _drive(coro: Coroutine[Any, Any, Verdict]) -> Verdict | None:
    """The coroutine's answer where it never waits (None where it would)."""
    try:
        coro.send(None)
    except StopIteration as done:
        answer: Verdict = done.value
        return answer
    except Exception:  # a check changed since cannot read this run's evidence
        return None
    coro.close()
    return None


def _unreached(r: CheckResult, titles: dict[str, str]) -> CheckResult | None:
    """The engine's "could not be reached" finding, told again."""
    found = _UNREACHED.fullmatch(r.words)
    family = r.check.removesuffix(".run")
    if found is None or not r.check.endswith(".run") or family not in titles:
        return None
    why = said_again(found.group(1))
    words = _("not checked: the node could not be reached ({why})").format(why=why)
    return CheckResult(r.check, _(titles[family]), r.status, words, r.expected, r.found,
                       r.evidence)  # fmt: skip


def retold(
    verdict: Verdict, sold: Sold | None, checks: Sequence[Check], settings: Settings | None = None
) -> tuple[CheckResult, ...]:
    """The verdict's findings in the language in use: each judged again from the stored
    evidence where the English judged again is the stored finding, else as stored."""
    if speaking_now() == EN or sold is None:
        return verdict.results
    ctx = _context(verdict, sold, settings or Settings())
    shown: list[CheckResult] = []

    def at() -> datetime:
        return verdict.started

    again = _drive(engine.run(checks, ctx, now=at, shown=shown))
    english = again.results if again is not None and len(shown) == len(again.results) else ()
    told: dict[CheckResult, CheckResult] = {}
    for before, after in zip(english, shown, strict=False):
        if before.check == after.check and before.status is after.status:
            told.setdefault(before, after)
    titles = {c.id: c.title for c in checks}
    out: list[CheckResult] = []
    for r in verdict.results:
        out.append(told.get(r) or _unreached(r, titles) or r)
    return tuple(out)
