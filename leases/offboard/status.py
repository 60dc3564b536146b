"""Where a node's offboarding stands, in words: the fleet's short column and the phrase
the lease-end alert uses. Pure: evidence.progress(ledger) reads the Progress these take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from leases.core.i18n import N_, _
from leases.core.textsafe import visible

if TYPE_CHECKING:
    from leases.offboard.evidence import Progress, StoredPlan

NOT_PLANNED = "—"
# A stopped step's key is shown cut to this (a path may be long): the fleet column's width.
KEY_MAX = 28


def short(progress: Progress | None, key_max: int = KEY_MAX) -> str:
    """The fleet column: "—" (never planned), "planned", "3/12", "stopped: gpu-processes",
    "done". Safe to show: the step key passed through visible()."""
    if progress is None:
        return NOT_PLANNED
    if progress.finished:
        return _("done")
    if progress.stopped:
        return _("stopped: {key}").format(key=visible(progress.stopped, key_max))
    if progress.passed == 0:
        return _("planned")
    return f"{progress.passed}/{progress.steps}"


def phrase(progress: Progress | None) -> str:
    """What the lease-end alert says of the offboarding ("" when none was planned: the
    rule speaks of the node's state then)."""
    if progress is None:
        return ""
    if progress.finished:
        return _("offboarded")
    if progress.stopped:
        return _("offboarding stopped at {key} ({passed}/{steps} steps)").format(
            key=visible(progress.stopped, 80), passed=progress.passed, steps=progress.steps
        )
    if progress.passed == 0:
        return _("offboarding planned, not started (0/{steps} steps)").format(steps=progress.steps)
    return _("offboarding in progress ({passed}/{steps} steps)").format(
        passed=progress.passed, steps=progress.steps
    )


def counts(stored: StoredPlan) -> dict[str, int]:
    """How many steps stand in each state: {"verified": 5, "skipped": 26, ...}, in the
    plan's order of first appearance."""
    out: dict[str, int] = {}
    for s in stored.plan.steps:
        state = stored.state(s.key).state.value
        out[state] = out.get(state, 0) + 1
    return out


def _same(text: str) -> str:
    return text


def outcome(stored: StoredPlan, say: Callable[[str], str] = _same) -> str:
    """What a run came to, in words that do not overstate it: "every step verified" only
    when that is so, else "5 verified, 26 skipped (with reasons), 1 gone on past GPU
    processes". In English (JSON, the evidence) unless `say` is `_`."""
    from leases.offboard.evidence import State
    from leases.offboard.words import state_word

    n = counts(stored)
    if n.get(State.VERIFIED.value, 0) == len(stored.plan.steps):
        return say(N_("every step verified"))
    consented = [s for s in stored.plan.steps if stored.state(s.key).state is State.CONSENTED]
    gpu = consented and all(s.action == "gpu-processes" for s in consented)
    words = {
        State.VERIFIED.value: N_("{count} verified"),
        State.SKIPPED.value: N_("{count} skipped (with reasons)"),
        State.CONSENTED.value: N_("{count} gone on past GPU processes")
        if gpu
        else N_("{count} gone on past with consent"),
        State.ABSENT.value: N_("{count} absent (never seen; never existed, by the user's word)"),
    }
    order = [*words, *(s for s in n if s not in words)]
    return ", ".join(
        say(words[s]).format(count=n[s])
        if s in words
        else f"{n[s]} {state_word(s) if say is not _same else s}"
        for s in order
        if n.get(s)
    )


def skipped(stored: StoredPlan) -> list[tuple[str, str]]:
    """The skipped steps and why (who skipped and their reason)."""
    from leases.offboard.evidence import State

    return [
        (s.key, stored.state(s.key).detail)
        for s in stored.plan.steps
        if stored.state(s.key).state is State.SKIPPED
    ]
