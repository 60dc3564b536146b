"""Carry out a confirmed plan, resumably; skip a step; say a thing never existed. (Inspect
and recheck, which only read back: leases.offboard.readback.)

The rules a rerun after a kill relies on:
- a step's state and its evidence are written together (leases.offboard.evidence);
- "started" is written before a driver acts; a destructive step found started, done or
  failed is read back first, and only acted on again if it is not gone, so a deletion
  that happened is never repeated;
- the run stops at the first step that fails or asks consent, and a rerun continues at
  the first step not yet passed (verified, skipped, or gone on past with consent);
- preflight steps run again every time: credentials may have changed since;
- a step that deletes a ledger resource (or waits for the instance's release) acts only
  on a target seen to exist (now, in an earlier run, or by inspect): "not found" at first
  contact stops the run, never counts as gone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Node, NodeState, Resource
from leases.core.textsafe import visible
from leases.ledger import labfiles
from leases.ledger.paths import offboard_lock_path
from leases.ledger.store import Ledger
from leases.offboard import evidence
from leases.offboard.evidence import PASSED, State, StoredPlan
from leases.offboard.plan import Plan, facts_for, make_plan
from leases.offboard.steps import Driver, Outcome, Phase, Planner, Sighting, Step
from leases.telemetry.lock import PollerLock


@dataclass(frozen=True)
class Choices:
    """What the user said for this run."""

    go_on: bool = False  # go on past steps that ask consent (GPU processes still running)
    skip: Mapping[str, str] = field(default_factory=dict)  # step key -> reason
    # Run up to this step and stop after it (the dashboard's "run next step"); preflight
    # checks before it run as always. None: run to the end.
    stop_after: str | None = None


@dataclass(frozen=True)
class RunResult:
    stored: StoredPlan
    finished: bool
    stopped_at: str | None = None  # the key of the step the run stopped at
    reason: str = ""  # why, and what to do, for a person
    acted: tuple[str, ...] = ()  # keys whose driver ran this time


def replan(
    ledger: Ledger,
    node: Node,
    config: Config,
    planners: Iterable[Planner],
    *,
    include: Iterable[str] = (),
    keep: Mapping[str, str] | None = None,
) -> Plan:
    """The node's plan made now from the ledger, as `zuka offboard NODE` shows it: for
    a plan in force, against its own lease and resources (see facts_for), with the
    resources of other leases it included and those it keeps. `include` and `keep` name
    more of those (KIND:ID, as the plan lists them)."""
    assert node.id is not None
    stored = evidence.latest(ledger, node.id)
    if stored is None or (stored.finished_at is not None and node.state is not NodeState.RELEASED):
        # None yet, or the last one finished and the node was brought back: a new offboarding.
        facts = facts_for(ledger, node, config)
        wanted: set[int] = set()
        kept: dict[int, str] = {}
    else:
        facts = facts_for(
            ledger,
            node,
            config,
            lease_id=stored.plan.lease_id,
            own_resources=stored.plan.resource_ids,
        )
        wanted = set(stored.plan.included)
        kept = {x.resource_id: x.kept for x in stored.plan.left if x.kept}
    named = {f"{r.kind.value}:{r.native_id}": r for r, _le in facts.others}
    for ref in include:
        rid = _other(named, ref, "include", node.name)
        wanted.add(rid)
        kept.pop(rid, None)
    for ref, reason in (keep or {}).items():
        if not reason.strip():
            raise InputError(
                "reason", reason, _("--keep {ref} needs --reason TEXT").format(ref=ref)
            )
        rid = _other(named, ref, "keep", node.name)
        kept[rid] = f"{ledger.actor}: {reason.strip()}"
        wanted.discard(rid)
    if wanted or kept:
        facts = facts_for(
            ledger,
            node,
            config,
            lease_id=None if facts.lease is None else facts.lease.id,
            own_resources=() if stored is None else stored.plan.resource_ids,
            include=wanted,
            kept=kept,
        )
    _refuse_overlaps(ledger, facts.resources, node.name)
    return make_plan(facts, planners)


def _refuse_overlaps(ledger: Ledger, resources: Iterable[Resource], node: str) -> None:
    """A thing the plan would delete that another lease also claims (the same bucket, a
    bucket and a prefix in it, the same snapshot id...) blocks the plan: deleting it would
    delete the other lease's data, and the other's "gone" would prove nothing."""
    from leases.ledger import claims

    ours = {r.id for r in resources if r.id is not None}
    clashes = [
        o
        for o in claims.overlaps(claims.ledger_claims(ledger.conn))
        if o.first.resource_id in ours or o.second.resource_id in ours
    ]
    if clashes:
        shown = "; ".join(o.text() for o in clashes[:5])
        raise InputError(
            "plan",
            node,
            _(
                "two leases claim the same thing, so no plan is made: {clashes}. Put it right in"
                " the ledger first (zuka resource edit, or zuka lease delete of a lease recorded"
                " twice)"
            ).format(clashes=shown),
        )


def _other(named: Mapping[str, Resource], ref: str, flag: str, node: str) -> int:
    """The id of a resource of the node's other leases, named KIND:ID."""
    found = named.get(ref)
    if found is None or found.id is None:
        listed = ", ".join(sorted(named)[:8]) or _("none")
        raise InputError(
            flag,
            ref,
            _(
                "is not a resource of {node}'s other leases still to delete (KIND:ID, as the"
                " plan lists them; those: {listed})"
            ).format(node=node, listed=listed),
        )
    return found.id


def account_alias(ledger: Ledger, node: Node) -> str:
    """The alias of the account the node's provider bills (`provider edit --account-alias`):
    when it is set, it is typed at confirmation too, so a lab with a test and a production
    account reads which one it is about to delete in."""
    if node.provider is None:
        return ""
    found = next((p for p in ledger.providers() if p.name == node.provider), None)
    return "" if found is None else found.account_alias


def confirmed(
    ledger: Ledger, node: Node, fresh: Plan, confirm: str | None, account: str | None = None
) -> StoredPlan:
    """The stored plan a run may carry out: the user typed the node's name (and the
    account's alias, when one is recorded), a plan was made and shown, and the ledger
    still gives that very plan."""
    assert node.id is not None
    if confirm != node.name:
        raise InputError(
            "confirm",
            confirm,
            _("type the node's name, {node}, to confirm: --confirm {node}").format(node=node.name),
        )
    alias = account_alias(ledger, node)
    if alias and account != alias:
        raise InputError(
            "account",
            account,
            _(
                "{node}'s provider {provider} bills the account '{alias}': type its alias too,"
                " to confirm which account this deletes in: --account {alias}"
            ).format(node=node.name, provider=node.provider, alias=alias),
        )
    stored = evidence.latest(ledger, node.id)
    if stored is None:
        raise InputError(
            "plan",
            node.name,
            _(
                "no offboarding plan stored: make one and read it first: zuka offboard {node}"
            ).format(node=node.name),
        )
    if stored.hash != fresh.hash or stored.plan.body() != fresh.body():
        raise InputError(
            "plan",
            stored.hash[:12],
            _(
                "the ledger changed since this plan was made (it no longer hashes the same, now"
                " {hash}): make it again and read it: zuka offboard {node}"
            ).format(hash=fresh.hash[:12], node=node.name),
        )
    return stored


class RunLock(PollerLock):
    """One offboarding run per ledger at a time: a step a live run has started looks just
    like one a killed run left, and a second run would read it back and act again. The
    kernel drops the lock when its holder dies, even by SIGKILL. In a lab only the
    offboarding group may write it (see labfiles.check_offboarder)."""

    denied_is_busy = False

    def __init__(self, ledger_path: Path) -> None:
        super().__init__(ledger_path)
        self.path = offboard_lock_path(ledger_path)


@contextmanager
def run_lock(ledger: Ledger, node: str) -> Iterator[None]:
    """Hold the ledger's offboarding lock (none for a ledger in memory); a step found
    changed under us after all is refused in words."""
    try:
        if ledger.path is None:
            yield
            return
        labfiles.check_offboarder(ledger.lab, ledger.path, "zuka offboard")
        with RunLock(ledger.path) as lock:
            if not lock.acquire():
                raise InputError(
                    "execute",
                    node,
                    _(
                        "another offboarding run (pid {pid}) is at work on this ledger:"
                        " let it finish, then run again"
                    ).format(pid=lock.holder()),
                )
            yield
    except evidence.Conflict as exc:
        raise InputError("execute", node, str(exc)) from None


async def execute(
    ledger: Ledger,
    stored: StoredPlan,
    drivers: Mapping[str, Driver],
    choices: Choices = Choices(),
) -> RunResult:
    """Run the plan from its first step not passed; see the module's rules. Refused while
    another run holds the ledger's offboarding lock."""
    with run_lock(ledger, stored.plan.node):
        return await _execute(ledger, stored, drivers, choices)


def skip_now(ledger: Ledger, stored: StoredPlan, key: str, reason: str) -> StoredPlan:
    """skip, outside a run: under the lock, so that no run is at the step meanwhile."""
    with run_lock(ledger, stored.plan.node):
        return skip(ledger, evidence.load(ledger, stored.id), key, reason)


async def _execute(
    ledger: Ledger, stored: StoredPlan, drivers: Mapping[str, Driver], choices: Choices
) -> RunResult:
    # What the ledger says now, not what a caller loaded before taking the lock.
    stored = evidence.load(ledger, stored.id)
    for key in choices.skip:
        stored = skip(ledger, stored, key, choices.skip[key])
    node = ledger.node_by_id(stored.plan.node_id)
    if node is not None and node.state is NodeState.ACTIVE:
        ledger.update_node(node.name, {"state": NodeState.OFFBOARDING.value})
    acted: list[str] = []
    reached = False  # the step of choices.stop_after was dealt with
    for step in stored.plan.steps:
        now = stored.state(step.key).state
        if now in PASSED and step.phase is not Phase.PREFLIGHT:
            continue
        if reached and step.phase is not Phase.PREFLIGHT:
            said = N_("stopped before {key}, as asked: the next run continues here").format(
                key=step.key
            )
            return RunResult(stored, False, step.key, said, tuple(acted))
        reached = reached or step.key == choices.stop_after
        driver = drivers.get(step.driver)
        if driver is None:
            detail = N_("no '{driver}' driver in this zuka: nothing was done for this step").format(
                driver=step.driver
            )
            stored = evidence.record(ledger, stored, step, "fail", State.FAILED, detail=detail)
            return RunResult(stored, False, step.key, detail, tuple(acted))
        if must_be_seen(step) and evidence.sighting(ledger, stored, step) is None:
            # Never seen yet: look first. "Not found" now is a typo, a wrong region or
            # another account as often as a thing already gone, and proves nothing.
            look = await look_at(driver, step)
            if look.exists is not True:
                reason = _unseen(stored.plan.node, step, look)
                unseen = Outcome(False, look.output, reason, facts=look.facts)
                stored = evidence.record(ledger, stored, step, "look", State.FAILED, outcome=unseen)
                return RunResult(stored, False, step.key, reason, tuple(acted))
            stored = evidence.record(ledger, stored, step, "seen", now, outcome=seen_outcome(look))
        if step.destructive and now in (State.STARTED, State.DONE, State.FAILED):
            # It may have run already (a killed run): read it back before acting again.
            check = await call_driver(partial(driver.verify, patient=False), step)
            if check.done:
                stored = evidence.record(
                    ledger, stored, step, "verify", State.VERIFIED, outcome=check
                )
                continue
            stored = evidence.record(ledger, stored, step, "verify", now, outcome=check)
        stored = evidence.record(
            ledger,
            stored,
            step,
            "start",
            State.STARTED,
            detail=step.describe,
            expect=frozenset({now}),
        )
        acted.append(step.key)
        outcome = await call_driver(driver.run, step)
        if outcome.needs_consent:
            if choices.go_on:
                stored = evidence.record(
                    ledger,
                    stored,
                    step,
                    "consent",
                    State.CONSENTED,
                    outcome=outcome,
                    detail=N_("{actor} went on past it: {detail}").format(
                        actor=ledger.actor, detail=outcome.detail
                    ),
                )
                continue
            stored = evidence.record(ledger, stored, step, "run", State.CONSENT, outcome=outcome)
            reason = N_("{detail}: to go on anyway, add --go-on").format(
                detail=outcome.detail or N_("this step asks you to decide")
            )
            return RunResult(stored, False, step.key, reason, tuple(acted))
        if not outcome.done:
            stored = evidence.record(ledger, stored, step, "run", State.FAILED, outcome=outcome)
            return RunResult(stored, False, step.key, _why(outcome), tuple(acted))
        stored = evidence.record(ledger, stored, step, "run", State.DONE, outcome=outcome)
        check = await call_driver(driver.verify, step)
        if not check.done:
            stored = evidence.record(ledger, stored, step, "verify", State.FAILED, outcome=check)
            return RunResult(stored, False, step.key, _why(check, N_("not verified")), tuple(acted))
        stored = evidence.record(ledger, stored, step, "verify", State.VERIFIED, outcome=check)
    if stored.finished_at is None:
        stored = evidence.finish(ledger, stored)
    return RunResult(stored, True, acted=tuple(acted))


def must_be_seen(step: Step) -> bool:
    """Steps whose "gone" is a promise: deleting a thing the ledger records, and releasing
    the instance. zuka must see the thing exist before it may call it gone (the usual
    caches and histories of a preset may simply not be there: nothing is promised)."""
    return step.destructive and (step.resource_id is not None or step.driver == "manual")


def seen_outcome(look: Sighting) -> Outcome:
    return Outcome(True, look.output, look.detail or N_("seen to exist"), facts=look.facts)


def _unseen(node: str, step: Step, look: Sighting) -> str:
    where = ", ".join(f"{k} {look.facts[k]}" for k in _WHERE if look.facts.get(k))
    at = f" ({visible(where, 300)})" if where else ""
    if look.exists is None:
        said = visible(look.detail or look.output or N_("no answer"), 300)
        target = visible(step.target, 200)
        if step.driver == "manual":
            return N_(
                "zuka could not look at {target}{at}: {said}; nothing was done. Fix that and"
                " run again; a console step zuka cannot check: skip it with a reason"
            ).format(target=target, at=at, said=said)
        return N_(
            "zuka could not look at {target}{at}: {said}; nothing was done. Fix that and run again"
        ).format(target=target, at=at, said=said)
    n, k = visible(node), visible(step.key, 200)
    if step.driver == "manual":
        return N_(
            "NOT FOUND: the node never answered{at} when zuka looked, so its release cannot be"
            " told from a wrong address. Check the address; if it was released already:"
            " zuka offboard {node} --skip {key} --reason TEXT --confirm {node}"
        ).format(at=at, node=n, key=k)
    kind = _KINDS.get(step.action, "KIND")
    return N_(
        "NOT FOUND: {target} was never seen to exist{at}, so it cannot be"
        " called deleted. A typo, another region or endpoint? Correct the record (zuka"
        " resource edit {node} --kind {kind} --id {target} --new-id ID"
        " | --region REGION | --endpoint URL), then make the plan again. If it truly never"
        " existed: zuka offboard {node} --never-existed {key} --reason TEXT --confirm {node}"
    ).format(target=visible(step.target, 200), at=at, node=n, kind=kind, key=k)


_WHERE = ("account", "region", "endpoint", "host", "path")
# The ledger's resource kind a destructive action deletes, to name in a correction.
_KINDS = {
    "delete-image": "image",
    "delete-snapshot": "snapshot",
    "delete-disk": "disk",
    "delete-bucket": "bucket",
    "empty-prefix": "bucket_prefix",
    "shred": "scratch_path",
    "revoke-key": "ssh_key",
}


async def look_at(driver: Driver, step: Step) -> Sighting:
    try:
        return await driver.inspect(step)
    except Exception as exc:
        text = visible(f"{type(exc).__name__}: {exc}", 2000)
        return Sighting(
            None,
            text,
            N_("the {driver} driver failed: {error}").format(driver=step.driver, error=text),
        )


def never_existed(ledger: Ledger, stored: StoredPlan, key: str, reason: str) -> StoredPlan:
    """The user says a step's target never existed, with a reason: allowed only for a
    step zuka never saw exist (its last look said not found). Recorded as absent, never
    as verified; the evidence holds who said it and why."""
    with run_lock(ledger, stored.plan.node):
        stored = evidence.load(ledger, stored.id)
        step = stored.plan.step(key)
        if not must_be_seen(step) or step.resource_id is None:
            raise InputError(
                "never-existed", key, _("only a step that deletes a resource the ledger records"
                " can be said never to have existed (a console step zuka cannot see done is"
                " skipped, with a reason)"),
            )  # fmt: skip
        if not reason.strip():
            raise InputError(
                "reason", reason, _("--never-existed {key} needs --reason TEXT").format(key=key)
            )
        if evidence.sighting(ledger, stored, step) is not None:
            raise InputError(
                "never-existed", key, _("zuka saw it exist: it did exist; run the step instead"),
            )  # fmt: skip
        st = stored.state(key)
        if st.state is not State.FAILED or not st.detail.startswith("NOT FOUND"):
            raise InputError(
                "never-existed", key, _("zuka has not looked for it and found it missing yet:"
                " run the offboarding (or --inspect) first"),
            )  # fmt: skip
        return evidence.record(
            ledger,
            stored,
            step,
            "absent",
            State.ABSENT,
            detail=N_("{actor} says it never existed: {reason}").format(
                actor=ledger.actor, reason=reason.strip()
            ),
            expect=frozenset({State.FAILED}),
        )


def skip(ledger: Ledger, stored: StoredPlan, key: str, reason: str) -> StoredPlan:
    """Record that the user skips a step, with their reason (the evidence says who)."""
    step = stored.plan.step(key)
    if step.phase is Phase.PREFLIGHT:
        raise InputError(
            "skip",
            key,
            _(
                "a preflight check cannot be skipped: fix what it found (the ledger's provider"
                " record, the credentials, the blocklist)"
            ),
        )
    if not reason.strip():
        raise InputError(
            "reason", reason, _("skipping {key} needs a reason: --reason TEXT").format(key=key)
        )
    if stored.state(key).state in PASSED:
        return stored
    return evidence.record(
        ledger,
        stored,
        step,
        "skip",
        State.SKIPPED,
        detail=f"{ledger.actor}: {reason.strip()}",
        expect=frozenset({stored.state(key).state}),
    )


async def call_driver(method: Callable[[Step], Awaitable[Outcome]], step: Step) -> Outcome:
    """A driver's run or verify; whatever it raises is that step's failure, in words."""
    try:
        return await method(step)
    except Exception as exc:
        text = visible(f"{type(exc).__name__}: {exc}", 2000)
        return Outcome(
            False,
            text,
            N_("the {driver} driver failed: {error}").format(driver=step.driver, error=text),
        )


def _why(outcome: Outcome, default: str = N_("failed")) -> str:
    return visible(outcome.detail or outcome.output or default, 500)
