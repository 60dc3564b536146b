"""What the offboard screen shows (tui.screens.offboard), computed without Textual: the
checklist's rows, the selected step's detail, the hint of what comes next. Pure; where the
offboarding stands is leases.app.offboarding's.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from leases.app import offboarding
from leases.core.textsafe import visible
from leases.offboard.evidence import State, StoredPlan
from leases.offboard.steps import Step

COLUMNS = ("#", "phase", "step", "del", "state", "what")

# A recheck line's verdict (None: the step cannot be read again, such as after the key went).
RECHECKED = {True: "ok  ", False: "FAIL", None: "n/a "}


def state_text(stored: StoredPlan, step: Step, running: str | None) -> str:
    if step.key == running:
        return "running…"
    st = stored.state(step.key)
    if st.state is State.STARTED:
        # Left so by a run that was killed or failed mid-step: the next run reads it back.
        return "started (interrupted)"
    if st.state is State.CONSENT:
        return "asks you (g)"
    if offboarding.waiting(stored, step.key):
        return "waiting for you (d)"  # a console step not yet done by hand: not a failure
    return st.state.value


def checklist_rows(stored: StoredPlan, running: str | None = None) -> list[tuple[str, ...]]:
    return [
        (
            str(i),
            s.phase.name.lower(),
            visible(s.key, 40),
            "yes" if s.destructive else "",
            state_text(stored, s, running),
            visible(s.describe, 160),
        )
        for i, s in enumerate(stored.plan.steps, 1)
    ]


def step_detail(stored: StoredPlan, step: Step, tz: str) -> list[str]:
    st = stored.state(step.key)
    when = "" if st.at is None else f" at {_local(st.at, tz)}"
    lines = [
        f"{visible(step.key, 120)} · {step.phase.name.lower()} · {step.driver}"
        + (" · deletes" if step.destructive else ""),
        visible(step.describe, 400),
        f"state: {st.state.value}{when}",
    ]
    if st.detail and st.state is not State.VERIFIED:
        lines.append(visible(st.detail, 400))
    if st.state is State.STARTED:
        lines.append("a run stopped inside this step: the next run reads it back before acting")
    return lines


def _local(at: datetime, tz: str) -> str:
    return f"{at.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M:%S}"


def hint(stored: StoredPlan | None) -> str:
    """The status line when nothing was said: what comes next, and the key for it."""
    if stored is None:
        return ""
    nxt = offboarding.next_step(stored)
    if nxt is None:
        return "every step passed: c rechecks that all is still gone"
    st = stored.state(nxt.key).state
    if st is State.CONSENT:
        return f"{visible(nxt.key, 60)} asks you: g to go on anyway"
    if nxt.driver == "manual":
        return f"next: {visible(nxt.key, 60)}, by hand: when done, select it and press d"
    return f"next: {visible(nxt.key, 60)} · n runs it, a runs all (typed confirmation)"
