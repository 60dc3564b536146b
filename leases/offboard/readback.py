"""Read back, changing nothing: inspect (look before you leap: every thing a plan deletes,
seen where it will be deleted) and recheck (a finished offboarding read back again: is it all
still gone?). Both hold the ledger's offboarding lock or run after the run (leases.offboard.runner)
and keep what they read as evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from leases.core.i18n import N_
from leases.ledger.store import Ledger
from leases.offboard import evidence
from leases.offboard.evidence import PASSED, State, StoredPlan
from leases.offboard.runner import call_driver, look_at, must_be_seen, run_lock, seen_outcome
from leases.offboard.steps import Driver, Outcome, Phase, Sighting, Step


@dataclass(frozen=True)
class Look:
    step: Step
    sighting: Sighting
    remarks: tuple[str, ...] = ()  # what a person should weigh: created before the lease...


@dataclass(frozen=True)
class Inspection:
    stored: StoredPlan
    ok: bool  # preflight passed and every target not yet passed was seen to exist
    preflight: tuple[tuple[str, bool, str], ...]
    looks: tuple[Look, ...]


async def inspect(ledger: Ledger, stored: StoredPlan, drivers: Mapping[str, Driver]) -> Inspection:
    """Look before you leap: preflight (who the credentials act as, at every place), then
    every destructive step not yet passed, read without changing anything: exists, size,
    versions, created time. What was seen is chained evidence (a later run need not look
    again); nothing is deleted."""
    with run_lock(ledger, stored.plan.node):
        stored = evidence.load(ledger, stored.id)
        checks: list[tuple[str, bool, str]] = []
        for step in stored.plan.steps:
            if step.phase is not Phase.PREFLIGHT:
                continue
            driver = drivers.get(step.driver)
            out = (
                Outcome(False, "", N_("no '{driver}' driver").format(driver=step.driver))
                if driver is None
                else await call_driver(driver.run, step)
            )
            checks.append((step.key, out.done, out.detail or _first(out.output)))
            if not out.done:
                evidence.note(ledger, stored, "inspect", _said(step, out))
                return Inspection(stored, False, tuple(checks), ())
        lease = stored.plan.lease_id
        start = next(
            (le.start for le in ledger.leases() if lease is not None and le.id == lease), None
        )
        looks: list[Look] = []
        for step in stored.plan.steps:
            if not step.destructive or stored.state(step.key).state in PASSED:
                continue
            driver = drivers.get(step.driver)
            look = (
                Sighting(None, "", N_("no '{driver}' driver").format(driver=step.driver))
                if driver is None
                else await look_at(driver, step)
            )
            looks.append(Look(step, look, _remarks(look, start)))
            if look.exists is True and must_be_seen(step):
                state = stored.state(step.key).state
                stored = evidence.record(
                    ledger, stored, step, "seen", state, outcome=seen_outcome(look)
                )
            else:
                said = Outcome(look.exists is True, look.output, look.detail, facts=look.facts)
                evidence.note(ledger, stored, "inspect", _said(step, said))
        ok = all(lk.sighting.exists is True for lk in looks if must_be_seen(lk.step))
        return Inspection(stored, ok, tuple(checks), tuple(looks))


def _remarks(look: Sighting, lease_start: datetime | None) -> tuple[str, ...]:
    out = []
    created = look.facts.get("created", "")
    if created and lease_start is not None:
        try:
            when = datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None and when.tzinfo is not None and when < lease_start:
            out.append(
                N_(
                    "created {created}, before this lease began ({start}): is it really this"
                    " lease's?"
                ).format(created=when.isoformat(), start=lease_start.isoformat())
            )
    return tuple(out)


def _first(text: str) -> str:
    return text.splitlines()[0] if text else N_("checked")


@dataclass(frozen=True)
class Recheck:
    ok: bool  # nothing came back (a step that cannot be read again does not count)
    # (step key, still gone / checked (None: cannot be read again), what it said)
    lines: tuple[tuple[str, bool | None, str], ...]


# After the lab's key was revoked nothing on the node can be read with it: the node's
# steps are not read again, except the refused login itself (the key put back shows there).
_REVOKE, _PROVE = "revoke-key", "prove-refused"
_NOT_REREAD = N_(
    "not read again: the lab's key was revoked by this offboarding, nothing on the node"
    " can be read with it (see the login check)"
)


def _revoked(stored: StoredPlan) -> bool:
    return any(
        s.action == _REVOKE and stored.state(s.key).state is State.VERIFIED
        for s in stored.plan.steps
    )


async def recheck(ledger: Ledger, stored: StoredPlan, drivers: Mapping[str, Driver]) -> Recheck:
    """Read back, again, every step that was verified: a day later, is it all still gone?
    Preflight runs first: a "not found" read in another account proves nothing. Once the
    key is revoked, the node's steps are not read again, and a refused login is proven or
    the node no longer answers at all (released)."""
    lines: list[tuple[str, bool | None, str]] = []
    revoked = _revoked(stored)
    for step in stored.plan.steps:
        if step.phase is Phase.PREFLIGHT:
            driver = drivers.get(step.driver)
            out = (
                Outcome(False, "", N_("no '{driver}' driver").format(driver=step.driver))
                if driver is None
                else await call_driver(driver.run, step)
            )
            first = out.output.splitlines()[0] if out.output else N_("checked")
            lines.append((step.key, out.done, out.detail or first))
            if not out.done:
                evidence.note(ledger, stored, "recheck", _said(step, out))
                return Recheck(False, tuple(lines))
            continue
        st = stored.state(step.key)
        if st.state is not State.VERIFIED:
            # Listed, not left out: a skipped step was never proven gone.
            if st.state is not State.PENDING:
                said = N_("{state}, not read again: {detail}").format(
                    state=st.state.value, detail=st.detail
                )
                lines.append((step.key, None, said))
            continue
        if revoked and step.driver == "ssh" and step.action != _PROVE:
            lines.append((step.key, None, _NOT_REREAD))
            continue
        driver = drivers.get(step.driver)
        out = (
            Outcome(False, "", N_("no '{driver}' driver").format(driver=step.driver))
            if driver is None
            else await call_driver(partial(driver.verify, patient=False), step)
        )
        ok: bool | None = out.done
        said = out.detail or out.output
        if not out.done and step.action == _PROVE and not await _answers(drivers, stored):
            said = N_("the node no longer answers (released): no login to try; {said}").format(
                said=said
            )
            ok = None
        lines.append((step.key, ok, said))
        evidence.note(ledger, stored, "recheck", _said(step, out))
    return Recheck(all(ok is not False for _, ok, _ in lines), tuple(lines))


async def _answers(drivers: Mapping[str, Driver], stored: StoredPlan) -> bool:
    """Whether the node still answers at its address, as the manual release step reads it
    (True when there is no such step: then a failed login proves nothing)."""
    for step in stored.plan.steps:
        driver = drivers.get(step.driver)
        if step.driver == "manual" and step.action == "release-instance" and driver is not None:
            return not (await call_driver(partial(driver.verify, patient=False), step)).done
    return True


def _said(step: Step, out: Outcome) -> dict[str, object]:
    return {
        "step": step.key,
        "command": step.describe,
        "done": out.done,
        "output": evidence.storable(out.output[: evidence.OUTPUT_MAX]),
        "detail": evidence.storable(out.detail),
    }
