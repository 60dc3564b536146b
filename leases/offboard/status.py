"""Where a node's offboarding stands, in words: the fleet's short column and the phrase
the lease-end alert uses. Pure: evidence.progress(ledger) reads the Progress these take.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from leases.textsafe import visible

if TYPE_CHECKING:
    from leases.offboard.evidence import Progress

NOT_PLANNED = "—"
# A stopped step's key is shown cut to this (a path may be long): the fleet column's width.
KEY_MAX = 28


def short(progress: Progress | None, key_max: int = KEY_MAX) -> str:
    """The fleet column: "—" (never planned), "planned", "3/12", "stopped: gpu-processes",
    "done". Safe to show: the step key passed through visible()."""
    if progress is None:
        return NOT_PLANNED
    if progress.finished:
        return "done"
    if progress.stopped:
        return f"stopped: {visible(progress.stopped, key_max)}"
    if progress.passed == 0:
        return "planned"
    return f"{progress.passed}/{progress.steps}"


def phrase(progress: Progress | None) -> str:
    """What the lease-end alert says of the offboarding ("" when none was planned: the
    rule speaks of the node's state then)."""
    if progress is None:
        return ""
    if progress.finished:
        return "offboarded"
    count = f"{progress.passed}/{progress.steps} steps"
    if progress.stopped:
        return f"offboarding stopped at {visible(progress.stopped, 80)} ({count})"
    if progress.passed == 0:
        return f"offboarding planned, not started (0/{progress.steps} steps)"
    return f"offboarding in progress ({count})"
