"""Offboarding's use cases, each once, for `zuka offboard` and the dashboard's offboard screen
alike: make the plan (a dry run, stored with its hash), confirm it (the node's name typed,
and the account's alias when the provider records one), run it, skip a step, say a thing
never existed, inspect, recheck a finished one, where it stands, the report.

Each returns its result with the words both front ends show (`said`, `ok`); the front ends
parse what the user gave and show what comes back. The engine is leases.offboard; its real
planners and drivers come from leases.offboard.wiring, injected (tests give their own).
The use cases take a ledger and a node's name: the dashboard runs them on a connection of
its own in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.core.i18n import EN, _, speaking, speaking_now
from leases.core.retold import shown
from leases.core.textsafe import visible
from leases.ledger import labfiles
from leases.ledger.store import Ledger
from leases.offboard import evidence, manual, readback, report, runner, status, wiring
from leases.offboard.evidence import PASSED, State, StoredPlan
from leases.offboard.steps import Driver, Outcome, Phase, Planner, Sighting, Step
from leases.offboard.words import fact_word

DriversFactory = Callable[[wiring.RunContext], Mapping[str, Driver]]
# A recheck's or an inspection's line: (step key, verdict, what was said); verdict None: the
# step cannot be read again (such as after the key went), or nothing to clear there.
Line = tuple[str, bool | None, str]


@dataclass(frozen=True)
class Done:
    """What a use case came to, in words."""

    stored: StoredPlan | None
    said: str
    ok: bool = True
    confirmed: bool = False  # the typed name was accepted for this plan
    lines: tuple[Line, ...] = ()  # a recheck's, or an inspection's
    heading: str = "recheck"  # what the lines are
    alias: str | None = None  # the provider's account alias, typed at confirmation (a plan's)


@dataclass(frozen=True, kw_only=True)
class Planned(Done):
    new: bool  # stored now; False: the ledger gives the plan stored already


@dataclass(frozen=True, kw_only=True)
class Ran(Done):
    result: runner.RunResult


@dataclass(frozen=True, kw_only=True)
class Inspected(Done):
    result: readback.Inspection


@dataclass(frozen=True, kw_only=True)
class Rechecked(Done):
    result: readback.Recheck
    unproven: int  # steps read back that were never verified (skipped, gone on past)


# -- where it stands ----------------------------------------------------------------------------


def passed(stored: StoredPlan) -> int:
    return sum(stored.state(s.key).state in PASSED for s in stored.plan.steps)


def next_step(stored: StoredPlan) -> Step | None:
    """The step a run is for: the first not passed. Preflight checks run at the start of
    every run, so one not run yet is no step of its own; one that failed is."""
    for s in stored.plan.steps:
        st = stored.state(s.key).state
        if st not in PASSED and not (s.phase is Phase.PREFLIGHT and st is State.PENDING):
            return s
    return None


def waiting(stored: StoredPlan, key: str) -> bool:
    """A console step whose last word is "do it by hand, then --did": it waits for the
    user; it did not fail."""
    st = stored.state(key)
    return st.state is State.FAILED and st.detail.startswith(manual.WAITING)


def typed_confirmation(typed: str) -> tuple[str, str | None]:
    """What was typed in one field: the node's name and, after a space, the account's
    alias (node names hold no space)."""
    name, _sep, alias = typed.strip().partition(" ")
    return name, alias.strip() or None


# -- the use cases ------------------------------------------------------------------------------


def _offboarder(ledger: Ledger) -> None:
    """In a lab, offboarding (its plan stored, a run, a skip, a look at the node) is the
    offboarding group's: refused to anyone else before anything is written or touched."""
    labfiles.check_offboarder(ledger.lab, ledger.path, "zuka offboard")


def plan(
    ledger: Ledger,
    name: str,
    config: Config,
    planners: Sequence[Planner],
    *,
    include: Sequence[str] = (),
    keep: Mapping[str, str] | None = None,
) -> Planned:
    """The node's plan made from the ledger now and stored (a dry run); `include` and
    `keep` name resources of the node's other leases (KIND:ID)."""
    _offboarder(ledger)
    node = ledger.node(name)
    fresh = runner.replan(ledger, node, config, planners, include=include, keep=keep)
    stored, new = evidence.store(ledger, fresh)
    said = (
        _("plan made and stored (a dry run: nothing was touched)")
        if new
        else _("plan unchanged since it was stored (a dry run: nothing was touched)")
    )
    alias = runner.account_alias(ledger, node)
    return Planned(stored, said, alias=alias, new=new)


def confirm(
    ledger: Ledger,
    name: str,
    config: Config,
    planners: Sequence[Planner],
    typed: str | None,
    account: str | None = None,
    *,
    hash_prefix: str | None = None,
    did: Collection[str] = (),
) -> StoredPlan:
    """The stored plan a run may carry out (runner.confirmed): the node's name typed (and
    the account's alias), the ledger still giving that very plan; `hash_prefix`, when
    given, is the stored plan's; each of `did` a manual step."""
    _offboarder(ledger)
    node = ledger.node(name)
    fresh = runner.replan(ledger, node, config, planners)
    stored = runner.confirmed(ledger, node, fresh, typed, account)
    if hash_prefix is not None and (
        len(hash_prefix) < 8 or not stored.hash.startswith(hash_prefix)
    ):
        raise InputError(
            "hash",
            hash_prefix,
            # Not the right prefix: it would invite copying it without reading the plan.
            _(
                "is not the stored plan's hash (8 characters or more): read the plan again:"
                " zuka offboard {node}"
            ).format(node=node.name),
        )
    for key in did:
        if stored.plan.step(key).driver != "manual":  # an unknown key: InputError
            raise InputError("did", key, _("is not a manual step: --did names one done by hand"))
    return stored


class Watched:
    """A driver that says which step is about to run (the screen's live update)."""

    def __init__(self, inner: Driver, tell: Callable[[Step], None]) -> None:
        self.inner = inner
        self.name = inner.name
        self.tell = tell

    async def run(self, step: Step) -> Outcome:
        self.tell(step)
        return await self.inner.run(step)

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        self.tell(step)
        return await self.inner.verify(step, patient=patient)

    async def inspect(self, step: Step) -> Sighting:
        self.tell(step)
        return await self.inner.inspect(step)


async def run(
    ledger: Ledger,
    stored: StoredPlan,
    config: Config,
    factory: DriversFactory,
    choices: runner.Choices,
    did: Collection[str] = (),
    tell: Callable[[StoredPlan, str], None] | None = None,
) -> Ran:
    """Carry out a confirmed plan (see confirm) from its first step not passed, its SSH
    sessions closed whatever happens; tell, when given, hears of each step as it begins
    (its states up to date)."""
    _offboarder(ledger)
    node = ledger.node_by_id(stored.plan.node_id)
    assert node is not None
    ctx = wiring.context_for(ledger, node, config, stored.plan, did=did)

    lang = speaking_now()

    def begins(step: Step) -> None:
        # This thread's own connection: the step before has been recorded by now. Told in
        # the reader's language, while the run itself speaks English.
        if tell is not None:
            with speaking(lang):
                tell(evidence.load(ledger, stored.id), step.key)

    try:
        table: Mapping[str, Driver] = factory(ctx)
        if tell is not None:
            table = {k: Watched(d, begins) for k, d in table.items()}
        try:
            with speaking(EN):  # what the steps store (details, evidence) stays English
                result = await runner.execute(ledger, stored, table, choices)
        except InputError as exc:
            # The user's choices refused (a preflight skipped, a key not in the plan): said
            # in English inside the run, to them in their language.
            raise InputError(exc.field, exc.value, shown(exc.reason)) from None
    finally:
        await wiring.close(ctx)
    one = choices.stop_after
    if result.finished:
        said = _("offboarding finished: {outcome}").format(outcome=status.outcome(result.stored, _))
        ok = True
    elif one is not None and result.stored.state(one).state in PASSED:
        said = _("{key} passed; next: {next}").format(
            key=visible(one, 80), next=visible(result.stopped_at, 80)
        )
        ok = True
    else:
        said = _("stopped at {key}: {reason}").format(
            key=visible(result.stopped_at, 80), reason=visible(shown(result.reason), 300)
        )
        ok = False
    return Ran(result.stored, said, ok, confirmed=True, result=result)


def skip(ledger: Ledger, stored: StoredPlan, key: str, reason: str) -> Done:
    """Skip a step of a confirmed plan, with the user's reason (kept in the evidence)."""
    _offboarder(ledger)
    stored = runner.skip_now(ledger, stored, key, reason)
    said = _("skipped {key}: {reason}").format(
        key=visible(key, 80), reason=visible(reason.strip(), 200)
    )
    return Done(stored, said, confirmed=True)


def never_existed(ledger: Ledger, stored: StoredPlan, key: str, reason: str) -> Done:
    """The user's word that a step's target never existed (runner.never_existed)."""
    _offboarder(ledger)
    stored = runner.never_existed(ledger, stored, key, reason)
    return Done(
        stored,
        _("recorded as absent (never existed, by your word; not verified): {key}: {reason}").format(
            key=visible(key), reason=visible(reason)
        ),
        confirmed=True,
    )


async def inspect(
    ledger: Ledger,
    name: str,
    config: Config,
    planners: Sequence[Planner],
    factory: DriversFactory,
    *,
    include: Sequence[str] = (),
    keep: Mapping[str, str] | None = None,
) -> Inspected:
    """`zuka offboard --inspect`: the plan as the ledger gives it now (stored), preflight,
    then every thing it deletes looked at where it will be deleted; nothing changes."""
    _offboarder(ledger)
    node = ledger.node(name)
    fresh = runner.replan(ledger, node, config, planners, include=include, keep=keep)
    stored, _new = evidence.store(ledger, fresh)
    ctx = wiring.context_for(ledger, node, config, stored.plan)
    try:
        with speaking(EN):  # what it sees is stored: in English, shown below
            result = await readback.inspect(ledger, stored, factory(ctx))
    finally:
        await wiring.close(ctx)
    lines: list[Line] = [(k, ok, said) for k, ok, said in result.preflight if not ok]
    for lk in result.looks:
        seen = lk.sighting
        what = (
            ", ".join(f"{fact_word(k)} {shown(v)}" for k, v in seen.facts.items())
            or shown(seen.detail)
            or seen.output
        )
        verdict = seen.exists
        if verdict is False and not runner.must_be_seen(lk.step):
            # A usual cache or history that is simply not there: nothing to clear, no fault.
            verdict, what = None, _("not there: nothing to clear")
        lines.append((lk.step.key, verdict, " · ".join([what, *map(shown, lk.remarks)])))
    said = (
        _("inspection: everything the plan deletes was seen (nothing was changed)")
        if result.ok
        else _(
            "inspection: NOT everything was seen: a typo, another region or account? (nothing"
            " was changed)"
        )
    )
    return Inspected(
        result.stored, said, result.ok, lines=tuple(lines), heading=_("inspection"), result=result
    )


async def recheck(ledger: Ledger, name: str, config: Config, factory: DriversFactory) -> Rechecked:
    """Read back every verified step of the node's finished offboarding again."""
    _offboarder(ledger)
    node = ledger.node(name)
    assert node.id is not None
    stored = evidence.latest(ledger, node.id)
    if stored is None or stored.finished_at is None:
        raise InputError(
            "recheck", node.name, _("no finished offboarding to recheck: run it first")
        )
    ctx = wiring.context_for(ledger, node, config, stored.plan)
    try:
        with speaking(EN):  # what it sees is stored: in English, shown below
            result = await readback.recheck(ledger, stored, factory(ctx))
    finally:
        await wiring.close(ctx)
    unproven = sum(stored.state(k).state is not State.VERIFIED for k, _ok, _s in result.lines)
    said = (
        _("recheck: NOT everything is gone")
        if not result.ok
        else _("recheck: everything verified is still gone; {count} step(s) never verified").format(
            count=unproven
        )
        if unproven
        else _("recheck: everything is still gone")
    )
    return Rechecked(
        evidence.load(ledger, stored.id),
        said,
        result.ok,
        heading=_("recheck"),
        lines=tuple((k, ok, shown(x)) for k, ok, x in result.lines),
        result=result,
        unproven=unproven,
    )


def report_of(ledger: Ledger, name: str) -> dict[str, Any]:
    """The reviewer's report of the node's latest offboarding (report.build)."""
    node = ledger.node(name)
    assert node.id is not None
    stored = evidence.latest(ledger, node.id)
    if stored is None:
        raise InputError(
            "report",
            node.name,
            _("no offboarding plan: zuka offboard {node}").format(node=node.name),
        )
    return report.build(ledger, stored)
