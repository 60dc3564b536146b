"""What the offboard screen shows (tui.screens.offboard), computed without Textual: the
checklist's rows, the selected step's detail, the hint of what comes next. Pure; where the
offboarding stands is leases.app.offboarding's.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from leases.app import offboarding
from leases.core.i18n import N_, _
from leases.core.retold import shown
from leases.core.textsafe import visible
from leases.offboard import words as offboardwords
from leases.offboard.evidence import State, StoredPlan
from leases.offboard.steps import Step

COLUMNS = ("#", N_("phase"), N_("step"), N_("del"), N_("state"), N_("what"))

# A recheck line's verdict (None: the step cannot be read again, such as after the key went).
RECHECKED = {True: "ok  ", False: "FAIL", None: "n/a "}


def state_words(state: State) -> str:
    """A step's stored state (English in the evidence) in the language in use, as
    `zuka offboard` says it (leases.offboard.words)."""
    return offboardwords.state_word(state.value)


def phase_words(name: str) -> str:
    """A phase (leases.offboard.steps.Phase) by its lower-case name, in words, as
    `zuka offboard` says it."""
    return offboardwords.phase_word(name)


def state_text(stored: StoredPlan, step: Step, running: str | None) -> str:
    if step.key == running:
        return _("running…")
    st = stored.state(step.key)
    if st.state is State.STARTED:
        # Left so by a run that was killed or failed mid-step: the next run reads it back.
        return _("started (interrupted)")
    if st.state is State.CONSENT:
        return _("asks you (g)")
    if offboarding.waiting(stored, step.key):
        return _("waiting for you (d)")  # a console step not yet done by hand: not a failure
    return state_words(st.state)


def checklist_rows(stored: StoredPlan, running: str | None = None) -> list[tuple[str, ...]]:
    return [
        (
            str(i),
            phase_words(s.phase.name.lower()),
            visible(s.key, 40),
            _("yes") if s.destructive else "",
            state_text(stored, s, running),
            visible(shown(s.describe), 160),
        )
        for i, s in enumerate(stored.plan.steps, 1)
    ]


def step_detail(stored: StoredPlan, step: Step, tz: str) -> list[str]:
    st = stored.state(step.key)
    said = (
        _("state: {state}").format(state=state_words(st.state))
        if st.at is None
        else _("state: {state} at {time}").format(
            state=state_words(st.state), time=_local(st.at, tz)
        )
    )
    phase = step.phase.name.lower()
    # How the step is carried out, in words; left out where the phase says it (preflight).
    how = [] if step.driver == phase else [offboardwords.driver_word(visible(step.driver, 40))]
    said_first = [visible(step.key, 120), phase_words(phase), *how]
    lines = [
        " · ".join([*said_first, *([_("deletes")] if step.destructive else [])]),
        visible(shown(step.describe), 400),
        said,
    ]
    if st.detail and st.state is not State.VERIFIED:
        lines.append(visible(shown(st.detail), 400))
    if st.state is State.STARTED:
        lines.append(_("a run stopped inside this step: the next run reads it back before acting"))
    return lines


def _local(at: datetime, tz: str) -> str:
    return f"{at.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M:%S}"


def hint(stored: StoredPlan | None) -> str:
    """The status line when nothing was said: what comes next, and the key for it."""
    if stored is None:
        return ""
    nxt = offboarding.next_step(stored)
    if nxt is None:
        return _("every step passed: c rechecks that all is still gone")
    st = stored.state(nxt.key).state
    key = visible(nxt.key, 60)
    if st is State.CONSENT:
        return _("{step} asks you: g to go on anyway").format(step=key)
    if nxt.driver == "manual":
        return _("next: {step}, by hand: when done, select it and press d").format(step=key)
    return _("next: {step} · n runs it, a runs all (typed confirmation)").format(step=key)


def confirm_lines(
    stored: StoredPlan, node: str, alias: str, left: int, deletes: int, done: int
) -> list[str]:
    """What the typed confirmation of a run asks: the plan, what is left, what to type."""
    said = (
        _("Carry out offboarding plan {id} (hash {hash}) on {name}: {left} steps left,"
          " {deletes} of them delete ({done} passed already).")
        if done
        else _("Carry out offboarding plan {id} (hash {hash}) on {name}: {left} steps left,"
               " {deletes} of them delete.")
    )  # fmt: skip
    first = said.format(id=stored.id, hash=stored.hash[:12], name=visible(node, 60), left=left,
                        deletes=deletes, done=done)  # fmt: skip
    if alias:
        return [first, _("Type the node's name, a space and the account's alias ({alias}) to"
                         " confirm:").format(alias=visible(alias, 60))]  # fmt: skip
    return [first, _("Type the node's name to confirm:")]


def not_next_words(step: Step, nxt: Step | None, *, retry: bool) -> str:
    """Why the selected step cannot be retried (or marked done) now: another comes first."""
    if nxt is None:
        said = (_("cannot retry {step} now: the steps before it must pass first") if retry else
                _("cannot mark done {step} now: the steps before it must pass first"))  # fmt: skip
    else:
        said = (_("cannot retry {step} now: the steps before it must pass first ({next} comes"
                  " first)") if retry else
                _("cannot mark done {step} now: the steps before it must pass first ({next}"
                  " comes first)"))  # fmt: skip
    return said.format(step=visible(step.key, 60), next=visible(nxt.key, 60) if nxt else "")
