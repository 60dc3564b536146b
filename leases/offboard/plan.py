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
from typing import Any

from leases.config import Config
from leases.errors import InputError
from leases.ledger import Ledger
from leases.models import Node
from leases.offboard.steps import Phase, PlanInput, Planner, Step
from leases.renewals import in_effect

PLAN_VERSION = 1


@dataclass(frozen=True)
class Plan:
    node_id: int
    node: str
    lease_id: int | None
    steps: tuple[Step, ...]

    def body(self) -> str:
        """Canonical JSON: the same plan gives the same bytes on every machine."""
        doc = {
            "version": PLAN_VERSION,
            "node_id": self.node_id,
            "node": self.node,
            "lease_id": self.lease_id,
            "steps": [step_json(s) for s in self.steps],
        }
        return json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.body().encode("utf-8", "surrogatepass")).hexdigest()

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.key == key:
                return s
        known = ", ".join(s.key for s in self.steps[:8])
        raise InputError("step", key, f"no step of that key in the plan (its steps: {known}...)")

    def not_deleted(self) -> list[str]:
        """What the plan looks at but will NOT delete, one line each: the shared storage
        of the node's platform that outlives the instance."""
        from leases.offboard.presets import shared_note
        from leases.textsafe import visible

        lines = []
        for s in self.steps:
            if s.action == "fs-facts" and s.param("shared") == "yes":
                note = shared_note(s.target)
                lines.append(
                    f"{visible(s.target)}: shared storage that outlives the instance"
                    + (f" ({note})" if note else "")
                    + "; declare what in it is this lease's with `zuka resource add"
                    f" {visible(self.node)} --kind scratch_path --id PATH` to shred it"
                )
        return lines

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
    return Plan(
        node_id=facts.node.id,
        node=facts.node.name,
        lease_id=None if facts.lease is None else facts.lease.id,
        steps=tuple(sorted(steps, key=lambda s: s.phase)),
    )


def facts_for(
    ledger: Ledger,
    node: Node,
    config: Config,
    *,
    lease_id: int | None = None,
    own_resources: Iterable[int] = (),
) -> PlanInput:
    """The ledger's facts about one node: its provider, the lease billing now (else the
    latest), and that lease's resources not yet verified deleted. To compare with a plan
    stored earlier, give that plan's lease and the resources its steps named
    (own_resources): what the offboarding itself ended and verified must not make its
    own plan look changed."""
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
    resources = []
    if lease is not None:
        # By the lease, not by name: a released node's name may belong to a new node.
        rows = ledger._resource_rows(" WHERE r.lease_id = ?", [lease.id])
        resources = [r for r, _ in rows if r.verified_at is None or r.id in own]
    return PlanInput(node=node, provider=provider, lease=lease, resources=resources, config=config)
