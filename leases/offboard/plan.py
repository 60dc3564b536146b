"""The offboarding plan: from the ledger's facts, the ordered steps and their hash.

Pure but for `facts_for`, which reads the ledger. A plan is what the user reads and
confirms; its hash is over its canonical JSON body, so a plan made again from a ledger
that changed since (a resource added, a provider's account edited) hashes differently
and must be shown and confirmed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease, Node, Resource
from leases.core.textsafe import visible
from leases.ledger import auditchain, rowaudit
from leases.ledger.store import Ledger
from leases.money.renewals import in_effect
from leases.offboard.steps import Phase, PlanInput, Planner, Step

PLAN_VERSION = 1


@dataclass(frozen=True)
class Left:
    """A resource of the node, not yet verified gone, that the plan does NOT delete, and
    why: recorded on another lease (include it by id, or keep it with a reason), or no
    step of zuka's can delete it (by hand, then `zuka resource edit`)."""

    resource_id: int
    kind: str
    native_id: str
    region: str
    lease_id: int
    lease_start: str
    why: str  # "other-lease" | "no-step" | "unproven" (verified, by no chained entry)
    kept: str = ""  # the user's reason to keep it, if they said so

    @property
    def ref(self) -> str:
        """How the user names it: KIND:ID."""
        return f"{self.kind}:{self.native_id}"


@dataclass(frozen=True)
class Plan:
    node_id: int
    node: str
    lease_id: int | None
    steps: tuple[Step, ...]
    left: tuple[Left, ...] = ()
    # Resources of the node's other leases the user included by id (they have steps).
    included: tuple[int, ...] = ()

    def body(self) -> str:
        """Canonical JSON: the same plan gives the same bytes on every machine."""
        doc = {
            "version": PLAN_VERSION,
            "node_id": self.node_id,
            "node": self.node,
            "lease_id": self.lease_id,
            "steps": [step_json(s) for s in self.steps],
        }
        # Only when there is something: a plan with none hashes as it always did.
        if self.left:
            doc["left"] = [left_json(x) for x in self.left]
        if self.included:
            doc["included"] = list(self.included)
        return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.body().encode("utf-8", "surrogatepass")).hexdigest()

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.key == key:
                return s
        known = ", ".join(s.key for s in self.steps[:8])
        raise InputError(
            "step",
            key,
            _("no step of that key in the plan (its steps: {known}...)").format(known=known),
        )

    def not_deleted(self) -> list[str]:
        """What the plan looks at but will NOT delete, one line each: the shared storage
        of the node's platform that outlives the instance."""
        from leases.core.textsafe import visible
        from leases.offboard.presets import shared_note

        lines = [self._left_line(x) for x in self.left]
        for s in self.steps:
            if s.action == "fs-facts" and s.param("shared") == "yes":
                note = shared_note(s.target)
                said = (
                    N_(
                        "{path}: shared storage that outlives the instance ({note}); declare what"
                        " in it is this lease's with `zuka resource add {node} --kind"
                        " scratch_path --id PATH` to shred it"
                    )
                    if note
                    else N_(
                        "{path}: shared storage that outlives the instance; declare what in it is"
                        " this lease's with `zuka resource add {node} --kind scratch_path --id"
                        " PATH` to shred it"
                    )
                )
                lines.append(
                    said.format(path=visible(s.target), note=note, node=visible(self.node))
                )
        return lines

    def _left_line(self, x: Left) -> str:
        from leases.core.textsafe import visible

        n, ref = visible(self.node), visible(x.ref)
        what = (
            N_("{ref} (region {region})").format(ref=ref, region=visible(x.region))
            if x.region
            else ref
        )
        if x.kept:
            return N_("{what}: kept, as {reason}").format(what=what, reason=visible(x.kept, 200))
        if x.why == "unproven":
            return N_(
                "{what}: the ledger says it was verified gone, but no entry of the"
                " audit log says so (edited outside zuka, or imported): check it; to delete"
                " it with this offboarding: zuka offboard {node} --include {ref}"
            ).format(what=what, node=n, ref=ref)
        if x.why == "no-step":
            return N_(
                "{what}: no step of zuka's can delete it (no API for it here): delete"
                " it by hand, then record it: zuka resource edit {node} --kind {kind}"
                " --id {id} --deleted --verified --notes HOW"
            ).format(what=what, node=n, kind=visible(x.kind), id=visible(x.native_id))
        return N_(
            "{what}: recorded on the node's lease from {start}, not"
            " this one; to delete it with this offboarding: zuka offboard {node} --include"
            " {ref}; to keep it: zuka offboard {node} --keep {ref} --reason TEXT"
        ).format(what=what, start=visible(x.lease_start), node=n, ref=ref)

    @property
    def resource_ids(self) -> frozenset[int]:
        return frozenset(s.resource_id for s in self.steps if s.resource_id is not None)


def step_json(s: Step) -> dict[str, Any]:
    return {
        "key": s.key,
        "phase": int(s.phase),
        "driver": s.driver,
        "action": s.action,
        "target": s.target,
        "destructive": s.destructive,
        "describe": s.describe,
        "params": [list(p) for p in s.params],
        "resource_id": s.resource_id,
    }


def left_json(x: Left) -> dict[str, Any]:
    return {
        "resource_id": x.resource_id,
        "kind": x.kind,
        "native_id": x.native_id,
        "region": x.region,
        "lease_id": x.lease_id,
        "lease_start": x.lease_start,
        "why": x.why,
        "kept": x.kept,
    }


def left_from(d: Mapping[str, Any]) -> Left:
    return Left(
        resource_id=int(d["resource_id"]),
        kind=str(d["kind"]),
        native_id=str(d["native_id"]),
        region=str(d["region"]),
        lease_id=int(d["lease_id"]),
        lease_start=str(d["lease_start"]),
        why=str(d["why"]),
        kept=str(d.get("kept", "")),
    )


def step_from(d: Mapping[str, Any]) -> Step:
    return Step(
        key=str(d["key"]),
        phase=Phase(int(d["phase"])),
        driver=str(d["driver"]),
        action=str(d["action"]),
        target=str(d["target"]),
        destructive=bool(d["destructive"]),
        describe=str(d["describe"]),
        params=tuple((str(k), str(v)) for k, v in d["params"]),
        resource_id=None if d.get("resource_id") is None else int(d["resource_id"]),
    )


def plan_from_body(body: str) -> Plan:
    doc = json.loads(body)
    return Plan(
        node_id=int(doc["node_id"]),
        node=str(doc["node"]),
        lease_id=None if doc.get("lease_id") is None else int(doc["lease_id"]),
        steps=tuple(step_from(s) for s in doc["steps"]),
        left=tuple(left_from(x) for x in doc.get("left", ())),
        included=tuple(int(i) for i in doc.get("included", ())),
    )


def make_plan(facts: PlanInput, planners: Iterable[Planner]) -> Plan:
    """Every planner's steps, the identity checks their cloud drivers need, in phase order
    (planners' own order kept within a phase). Keys must be unique: a step's state and
    evidence are found by its key."""
    from leases.offboard.preflight import identity_steps

    steps = [s for planner in planners for s in planner(facts)]
    steps += identity_steps(steps, facts)
    seen: set[str] = set()
    for s in steps:
        if s.key in seen:
            raise ValueError(f"two offboarding steps have the key {s.key!r}")
        seen.add(s.key)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in s.params):
            raise ValueError(f"step {s.key!r}: params must be strings (they are hashed)")
    assert facts.node.id is not None
    stepped = {s.resource_id for s in steps if s.resource_id is not None}
    lease_id = None if facts.lease is None else facts.lease.id
    left = [
        _left(
            r,
            le,
            "unproven" if r.verified_at is not None else "other-lease",
            facts.kept.get(r.id or 0, ""),
        )
        for r, le in facts.others
        if r.id not in stepped
    ]
    if facts.lease is not None:
        left += [_left(r, facts.lease, "no-step") for r in facts.resources if r.id not in stepped]
    return Plan(
        node_id=facts.node.id,
        node=facts.node.name,
        lease_id=lease_id,
        steps=tuple(sorted(steps, key=lambda s: s.phase)),
        left=tuple(sorted(left, key=lambda x: x.resource_id)),
        included=tuple(sorted(facts.included)),
    )


def _left(r: Resource, lease: Lease, why: str, kept: str = "") -> Left:
    assert r.id is not None and lease.id is not None
    return Left(
        resource_id=r.id,
        kind=r.kind.value,
        native_id=r.native_id,
        region=r.region,
        lease_id=lease.id,
        lease_start=lease.start.isoformat(),
        why=why,
        kept=kept,
    )


def _verified_on_chain(ledger: Ledger, verified: list[Resource]) -> set[int]:
    """The ids of these resources whose "verified" the audit chain bears out: the entry
    that last changed the resource's verified_at (its edit by hand or by an offboarding,
    an undo or a redo of one) is intact, changed a record that was there before, and set
    the very verified_at the row holds. A row marked verified in SQLite behind zuka's back,
    or recorded so when it was added (an imported file's word, `resource.add`), is not."""
    if not verified:
        return set()
    want = {r.id: r.verified_at for r in verified if r.id is not None}
    marks = ", ".join("?" * len(want))
    rows = ledger.rows(
        f"SELECT * FROM audit WHERE entity = 'resource' AND entity_id IN ({marks}) ORDER BY id",
        list(want),
    )
    proof: dict[int, datetime | None] = {}
    for row in rows:
        rid = int(row["entity_id"])
        try:
            before = json.loads(row["before"] or "null")
            after = json.loads(row["after"] or "null")
            now = None if after is None else after["verified_at"]
            then = None if before is None else before["verified_at"]
        except (ValueError, TypeError, KeyError):
            proof[rid] = None
            continue
        intact = row["hash"] == auditchain.entry_hash(row, str(row["prev_hash"]))
        # A row taken as it was found (`zuka audit accept`) is somebody's acceptance of an
        # edit made outside zuka, not evidence that the thing is gone.
        if before is None or not intact or row["action"] == rowaudit.ACCEPT:
            # Added (or put back) as it came: whatever verified_at it holds is its word.
            proof[rid] = None
        elif now != then:
            try:
                proof[rid] = None if now is None else datetime.fromisoformat(str(now))
            except ValueError:
                proof[rid] = None
    return {rid for rid, at in proof.items() if at is not None and want.get(rid) == at}


def facts_for(
    ledger: Ledger,
    node: Node,
    config: Config,
    *,
    lease_id: int | None = None,
    own_resources: Iterable[int] = (),
    include: Iterable[int] = (),
    kept: Mapping[int, str] | None = None,
) -> PlanInput:
    """The ledger's facts about one node: its provider, the lease billing now (else the
    latest), that lease's resources not yet verified deleted, and those of the node's
    other leases (listed, or deleted too when their id is in `include`; `kept`: the
    user's reasons to keep some). To compare with a plan stored earlier, give that plan's
    lease and the resources its steps named (own_resources): what the offboarding itself
    ended and verified must not make its own plan look changed."""
    leases = ledger.leases(node)
    lease = None
    if lease_id is not None:
        lease = next((le for le in leases if le.id == lease_id), None)
    elif leases:
        lease = in_effect(leases, ledger.clock()) or leases[-1]
    provider = None
    if node.provider is not None:
        provider = next((p for p in ledger.providers() if p.name == node.provider), None)
    own = frozenset(own_resources)
    wanted = frozenset(include)
    resources: list[Resource] = []
    others: list[tuple[Resource, Lease]] = []
    by_id = {le.id: le for le in leases}
    if by_id:
        # By the node's leases, not by name: a released node's name may belong to a new node.
        marks = ", ".join("?" * len(by_id))
        rows = ledger.resource_rows(f" WHERE r.lease_id IN ({marks})", list(by_id))
        proven = _verified_on_chain(ledger, [r for r, _n in rows if r.verified_at is not None])
        for r, _n in rows:
            if r.verified_at is not None and r.id not in own and r.id not in wanted:
                if r.id not in proven:
                    # Verified by no chained entry: listed, never taken as gone.
                    others.append((r, by_id[r.lease_id]))
                continue
            if (lease is not None and r.lease_id == lease.id) or r.id in wanted:
                resources.append(r)
            else:
                others.append((r, by_id[r.lease_id]))
    # What the plan deletes and where it logs in rest on these rows: one changed outside
    # zuka (a bucket's name, the node's SSH host, a stop) refuses the plan, naming it.
    rowaudit.refuse(
        rowaudit.concerning(
            rowaudit.drifted_since(ledger),
            node.name,
            [("node", node.id), ("provider", None if provider is None else provider.id),
             *(("lease", le.id) for le in leases),
             *(("resource", r.id) for r in [*resources, *(o for o, _le in others)])],
        ),
        _("the offboarding of {node}").format(node=visible(node.name, 80)),
    )  # fmt: skip
    return PlanInput(
        node=node,
        provider=provider,
        lease=lease,
        resources=resources,
        config=config,
        others=others,
        kept=dict(kept or {}),
        included=frozenset(r.id for r in resources if r.id is not None and r.id in wanted),
    )
