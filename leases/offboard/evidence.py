"""The offboarding's records in the ledger: stored plans, where each step stands, and the
evidence of every step (command, output, result, time) as audit entries on the ledger's
hash chain, so that `zuka audit verify` detects an edited byte of it.

A step's state and its evidence entry are written in one transaction: a run killed at
any moment leaves either both or neither. "started" is written before a driver acts, so
a rerun knows to read the thing back before acting again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from leases.core import fields
from leases.core.auditentry import AuditEntry
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger import auditchain, records
from leases.ledger.audit import audit_entry
from leases.ledger.store import Ledger
from leases.offboard.plan import Plan, plan_from_body
from leases.offboard.steps import Outcome, Step

ENTITY = "offboard"
# Evidence is kept as it came, but bounded: a node may answer a 100 MB line.
OUTPUT_MAX = 64 * 1024


class State(StrEnum):
    PENDING = "pending"
    STARTED = "started"  # written before the driver acts
    DONE = "done"  # the driver acted (or found it gone); not yet read back
    VERIFIED = "verified"  # read back: gone / checked
    FAILED = "failed"
    SKIPPED = "skipped"  # by the user, with a reason
    CONSENT = "consent"  # stopped: the step asks the user's consent to go on
    CONSENTED = "consented"  # the user said go on
    # Never seen to exist, and the user says it never did, with a reason: not "verified".
    ABSENT = "absent"


# Evidence entries that belong to the plan, not to one step's state.
_NOT_STEP = frozenset({"offboard.plan", "offboard.finish", "offboard.recheck", "offboard.inspect"})

# A rerun goes past these.
PASSED = frozenset({State.VERIFIED, State.SKIPPED, State.CONSENTED, State.ABSENT})


@dataclass(frozen=True)
class StepState:
    state: State = State.PENDING
    at: datetime | None = None
    detail: str = ""


@dataclass(frozen=True)
class StoredPlan:
    id: int
    plan: Plan
    hash: str
    created_at: datetime
    finished_at: datetime | None
    states: Mapping[str, StepState]

    def state(self, key: str) -> StepState:
        return self.states.get(key, StepState())

    @property
    def finished(self) -> bool:
        return all(self.state(s.key).state in PASSED for s in self.plan.steps)


class Conflict(RuntimeError):
    """Another run changed the step first (two runs of one plan at once)."""


def _now(ledger: Ledger) -> str:
    return ledger.clock().astimezone(UTC).isoformat(timespec="microseconds")


class Tampered(InputError):
    """A stored plan or a step's state that its evidence on the audit chain does not bear
    out: the ledger was edited behind zuka's back. Nothing is run from it."""

    def __init__(self, plan_id: int, reason: str) -> None:
        super().__init__(
            "plan",
            plan_id,
            _(
                "offboarding plan {id} does not match its evidence on the audit chain:"
                " {reason}. The ledger was edited outside zuka; nothing is run from it. Check"
                " `zuka audit verify`, then make the plan again: zuka offboard NODE"
            ).format(id=plan_id, reason=reason),
        )


def load(ledger: Ledger, plan_id: int) -> StoredPlan:
    """The stored plan as its evidence on the audit chain has it, never as the tables say
    alone: the body is hashed again and must be the very body the chained `offboard.plan`
    entry holds, and each step's state is the one its last chained evidence entry gives
    (a state set by hand in offboard_steps is refused: Tampered)."""
    rows = ledger.rows("SELECT * FROM offboard_plans WHERE id = ?", [plan_id])
    if not rows:
        raise LookupError(_("no offboarding plan {id}").format(id=plan_id))
    row = rows[0]
    body = row["body"]
    if not isinstance(body, str) or _sha256(body) != row["hash"]:
        raise Tampered(plan_id, _("its body no longer hashes to its stored hash"))
    chain = _chain(ledger, plan_id)
    planned, states, finished = _derived(ledger, plan_id, chain)
    if planned.get("hash") != row["hash"] or planned.get("body") != _json(body):
        raise Tampered(plan_id, _("its body is not the body the chained plan entry holds"))
    try:
        plan = plan_from_body(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise Tampered(
            plan_id, _("its body cannot be read ({error})").format(error=type(exc).__name__)
        ) from None
    table = {
        r["key"]: r["state"]
        for r in ledger.rows("SELECT key, state FROM offboard_steps WHERE plan_id = ?", [plan_id])
    }
    for step in plan.steps:
        said = states.get(step.key, StepState()).state.value
        if table.get(step.key) != said:
            raise Tampered(
                plan_id,
                _("step {key} is {state} in offboard_steps, but its evidence says {said}").format(
                    key=visible(step.key, 200),
                    state=visible(str(table.get(step.key)), 40),
                    said=said,
                ),
            )
    if (row["finished_at"] is None) != (finished is None):
        raise Tampered(plan_id, _("its finish is not the one its evidence records"))
    if row["node_id"] != plan.node_id or row["lease_id"] != plan.lease_id:
        raise Tampered(plan_id, _("its node or lease is not the one its body names"))
    # Which plan is in force is the table's superseded_by (latest()): an older plan put
    # back in force (its successor's superseded_by set, its own cleared) would run what
    # the user later changed, and the ledger still gives that older plan again.
    if row["superseded_by"] != _superseder(ledger, plan_id):
        raise Tampered(
            plan_id, _("the plan that superseded it is not the one its evidence records")
        )
    return StoredPlan(
        id=row["id"],
        plan=plan,
        hash=row["hash"],
        created_at=datetime.fromisoformat(row["created_at"]),
        finished_at=finished,
        states=states,
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _chain(ledger: Ledger, plan_id: int) -> list[dict[str, Any]]:
    """The plan's evidence entries, each checked to be a link of the audit chain: its hash
    is over its content, and the entries on either side link to it. Rewriting one means
    rewriting the whole chain after it, which `zuka audit verify --anchor` catches."""
    rows = ledger.rows(
        "SELECT * FROM audit WHERE entity = ? AND entity_id = ? ORDER BY id", [ENTITY, plan_id]
    )
    if not rows:
        return rows
    ids = sorted({r["id"] - 1 for r in rows} | {r["id"] + 1 for r in rows})
    marks = ", ".join("?" * len(ids))
    near = {
        int(i): (prev, digest)
        for i, prev, digest in ledger.conn.execute(
            f"SELECT id, prev_hash, hash FROM audit WHERE id IN ({marks})", ids
        )
    }
    for r in rows:
        if r["hash"] != auditchain.entry_hash(r, str(r["prev_hash"])):
            raise Tampered(plan_id, _("audit entry {entry} was changed").format(entry=r["id"]))
        before, after = near.get(r["id"] - 1), near.get(r["id"] + 1)
        if r["id"] > 1 and (before is None or before[1] != r["prev_hash"]):
            raise Tampered(
                plan_id,
                _("audit entry {entry} does not link to the one before").format(entry=r["id"]),
            )
        if after is not None and after[0] != r["hash"]:
            raise Tampered(
                plan_id,
                _("audit entry {entry} does not link to the one after").format(entry=r["id"]),
            )
    return rows


def _superseder(ledger: Ledger, plan_id: int) -> int | None:
    """The plan whose chained plan entry says it superseded this one, if any (that entry
    checked to be a link of the chain)."""
    found = [
        int(i)
        for (i,) in ledger.conn.execute(
            "SELECT entity_id FROM audit WHERE entity = ? AND action = 'offboard.plan'"
            " AND json_valid(after) AND json_extract(after, '$.supersedes') = ?",
            [ENTITY, plan_id],
        )
    ]
    if len(found) > 1:
        raise Tampered(plan_id, _("plans {found} each say they superseded it").format(found=found))
    if not found:
        return None
    _chain(ledger, found[0])
    return found[0]


def _derived(
    ledger: Ledger, plan_id: int, chain: list[dict[str, Any]], upto: int | None = None
) -> tuple[dict[str, Any], dict[str, StepState], datetime | None]:
    """What the chain says of a plan: its plan entry's content, each step's state (its
    last evidence entry's, or, for a step carried from the plan it superseded, that plan's
    as it stood then) and when it finished. `upto`: only entries before that id."""
    chain = [r for r in chain if upto is None or r["id"] < upto]
    first = next((r for r in chain if r["action"] == "offboard.plan"), None)
    after = None if first is None else _json(first["after"] or "")
    if not isinstance(after, dict) or after.get("plan") != plan_id:
        raise Tampered(plan_id, _("no chained entry records this plan"))
    states: dict[str, StepState] = {}
    old = after.get("supersedes")
    carried = after.get("carried") or []
    if carried:
        if not isinstance(old, int) or not isinstance(carried, list):
            raise Tampered(plan_id, _("its chained entry carries states from no plan"))
        assert first is not None
        _planned, before, _done = _derived(ledger, old, _chain(ledger, old), upto=int(first["id"]))
        states.update({k: before[k] for k in carried if isinstance(k, str) and k in before})
    finished: datetime | None = None
    for r in chain:
        doc = _json(r["after"] or "")
        if not isinstance(doc, dict) or doc.get("plan") != plan_id:
            continue
        if r["action"] == "offboard.finish":
            finished = datetime.fromisoformat(r["at"])
        key, state = doc.get("step"), doc.get("state")
        if isinstance(key, str) and isinstance(state, str) and r["action"] not in _NOT_STEP:
            try:
                states[key] = StepState(
                    State(state), datetime.fromisoformat(r["at"]), str(doc.get("detail", ""))[:2000]
                )
            except ValueError:
                raise Tampered(
                    plan_id, _("audit entry {entry} holds no known state").format(entry=r["id"])
                ) from None
    return after, states, finished


def problems(ledger: Ledger) -> list[str]:
    """Every stored plan read as load reads it, for `zuka audit verify`: one line per plan
    whose body or step states its chained evidence does not bear out."""
    found = []
    for (plan_id,) in ledger.conn.execute("SELECT id FROM offboard_plans ORDER BY id"):
        try:
            load(ledger, int(plan_id))
        except Tampered as exc:
            found.append(exc.reason)
    return found


def latest(ledger: Ledger, node_id: int) -> StoredPlan | None:
    """The node's plan in force (not superseded by a newer one), if any."""
    row = ledger.conn.execute(
        "SELECT id FROM offboard_plans WHERE node_id = ? AND superseded_by IS NULL"
        " ORDER BY id DESC LIMIT 1",
        [node_id],
    ).fetchone()
    return None if row is None else load(ledger, int(row[0]))


def store(ledger: Ledger, plan: Plan) -> tuple[StoredPlan, bool]:
    """Store the plan (an audit entry holds its whole body); returns it and whether it is
    new. The same plan as the one in force is not stored twice. A new plan supersedes
    the old one and, unless that one finished (a new offboarding of a node brought
    back), takes over the state of every step it has unchanged, so a step that ran (a
    deletion started, say) is never taken for one that did not."""
    digest = plan.hash
    with ledger.transaction() as conn:
        old = latest(ledger, plan.node_id)
        if old is not None and old.hash == digest:
            return old, False
        at = _now(ledger)
        cur = conn.execute(
            "INSERT INTO offboard_plans (node_id, lease_id, hash, body, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            [plan.node_id, plan.lease_id, digest, plan.body(), at],
        )
        plan_id = int(cur.lastrowid or 0)
        carried: list[str] = []
        for seq, s in enumerate(plan.steps):
            st = StepState()
            if old is not None and old.finished_at is None:
                before = next((o for o in old.plan.steps if o.key == s.key), None)
                if before == s and old.state(s.key).state is not State.PENDING:
                    st = old.state(s.key)
                    carried.append(s.key)
            conn.execute(
                "INSERT INTO offboard_steps (plan_id, key, seq, state, updated_at, detail)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    plan_id,
                    s.key,
                    seq,
                    st.state.value,
                    None if st.at is None else st.at.isoformat(),
                    st.detail,
                ],
            )
        if old is not None:
            conn.execute(
                "UPDATE offboard_plans SET superseded_by = ? WHERE id = ?", [plan_id, old.id]
            )
        after = {
            "plan": plan_id,
            "hash": digest,
            "supersedes": None if old is None else old.id,
            "carried": carried,
            "body": json.loads(plan.body()),
        }
        ledger.audit(conn, "offboard.plan", ENTITY, plan_id, plan.node, None, after)
    return load(ledger, plan_id), True


def record(
    ledger: Ledger,
    stored: StoredPlan,
    step: Step,
    event: str,
    state: State,
    *,
    outcome: Outcome | None = None,
    detail: str = "",
    expect: frozenset[State] | None = None,
) -> StoredPlan:
    """One piece of evidence and the step's new state, in one transaction. `expect`: the
    states the step may be in now (else Conflict: another run got there first). A
    verified step that deletes a ledger resource marks that resource deleted and
    verified, with the evidence's entry id in its notes."""
    note = detail or (outcome.detail if outcome is not None else "")
    with ledger.transaction() as conn:
        row = conn.execute(
            "SELECT state FROM offboard_steps WHERE plan_id = ? AND key = ?",
            [stored.id, step.key],
        ).fetchone()
        if row is None:
            raise LookupError(f"plan {stored.id} has no step {step.key!r}")
        if expect is not None and State(row[0]) not in expect:
            raise Conflict(
                _("step {key} of plan {id} is {state} now: another run is at it").format(
                    key=step.key, id=stored.id, state=row[0]
                )
            )
        at = _now(ledger)
        conn.execute(
            "UPDATE offboard_steps SET state = ?, updated_at = ?, detail = ?"
            " WHERE plan_id = ? AND key = ?",
            [state.value, at, storable(note[:2000]), stored.id, step.key],
        )
        after = evidence(stored, step, state, outcome, note)
        ledger.audit(conn, f"offboard.{event}", ENTITY, stored.id, stored.plan.node, None, after)
        if state is State.VERIFIED and step.resource_id is not None and step.destructive:
            entry = conn.execute("SELECT max(id) FROM audit").fetchone()[0]
            _mark_resource(ledger, conn, step.resource_id, stored, step, int(entry))
    states = dict(stored.states)
    states[step.key] = StepState(state, datetime.fromisoformat(at), note[:2000])
    return replace(stored, states=states)


def note(ledger: Ledger, stored: StoredPlan, event: str, after: Mapping[str, Any]) -> None:
    """Evidence that belongs to the plan, not a step (a recheck's verdict, the end)."""
    with ledger.transaction() as conn:
        body = {"plan": stored.id, "hash": stored.hash, **after}
        ledger.audit(conn, f"offboard.{event}", ENTITY, stored.id, stored.plan.node, None, body)


def finish(ledger: Ledger, stored: StoredPlan) -> StoredPlan:
    with ledger.transaction() as conn:
        at = _now(ledger)
        conn.execute(
            "UPDATE offboard_plans SET finished_at = ? WHERE id = ? AND finished_at IS NULL",
            [at, stored.id],
        )
        body = {"plan": stored.id, "hash": stored.hash, "steps": len(stored.plan.steps)}
        ledger.audit(conn, "offboard.finish", ENTITY, stored.id, stored.plan.node, None, body)
    return replace(stored, finished_at=datetime.fromisoformat(at))


def evidence(
    stored: StoredPlan, step: Step, state: State, outcome: Outcome | None, note: str
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "plan": stored.id,
        "hash": stored.hash,
        "step": step.key,
        "step_hash": step_hash(step),
        "driver": step.driver,
        "action": step.action,
        "target": step.target,
        "command": step.describe,
        "destructive": step.destructive,
        "state": state.value,
        "detail": storable(note),
    }
    if outcome is not None:
        text = outcome.output
        if len(text) > OUTPUT_MAX:
            text = text[:OUTPUT_MAX]
            out["output_cut"] = len(outcome.output)
        out["output"] = storable(text)
        out["done"] = outcome.done
        out["facts"] = {storable(str(k)): storable(str(v)) for k, v in outcome.facts.items()}
        if outcome.needs_consent:
            out["needs_consent"] = True
    return out


def step_hash(step: Step) -> str:
    """One step's own hash: a sighting counts for a step of a later plan only if that step
    is the very same (same target, same account, region and endpoint)."""
    from leases.offboard.plan import step_json

    doc = json.dumps(step_json(step), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return _sha256(doc)


def sighting(ledger: Ledger, stored: StoredPlan, step: Step) -> AuditEntry | None:
    """The chained entry in which this offboarding saw the step's target exist (its
    `seen` evidence, in this plan or one it superseded), if any."""
    digest = step_hash(step)
    for plan_id in reversed(plan_ids(ledger, stored)):
        for row in reversed(_chain(ledger, plan_id)):
            doc = _json(row["after"] or "")
            if (
                row["action"] == "offboard.seen"
                and isinstance(doc, dict)
                and doc.get("step_hash") == digest
                and doc.get("plan") == plan_id
            ):
                return audit_entry(row)
    return None


def storable(text: str) -> str:
    """Text as SQLite can store it: a node's bytes decoded with surrogateescape carry lone
    surrogates, which UTF-8 cannot encode; they are kept as visible escapes (\\udcff)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def entries(ledger: Ledger, plan_ids: list[int]) -> list[AuditEntry]:
    """The evidence of these plans (a node's plans, superseded ones included), in order."""
    marks = ", ".join("?" * len(plan_ids))
    rows = ledger.rows(
        f"SELECT * FROM audit WHERE entity = ? AND entity_id IN ({marks}) ORDER BY id",
        [ENTITY, *plan_ids],
    )
    return [audit_entry(r) for r in rows]


def plan_ids(ledger: Ledger, stored: StoredPlan) -> list[int]:
    """The plans of this offboarding: `stored` and those it superseded, back to the last
    one that finished (an earlier offboarding of the same node)."""
    rows = ledger.conn.execute(
        "SELECT id, finished_at FROM offboard_plans WHERE node_id = ? AND id <= ? ORDER BY id",
        [stored.plan.node_id, stored.id],
    ).fetchall()
    ids: list[int] = []
    for plan_id, finished in rows:
        # Each as its chained evidence has it: a finish cleared in SQLite would let an
        # earlier offboarding's sightings count again.
        load(ledger, int(plan_id))
        if finished is not None and plan_id != stored.id:
            ids = []
        else:
            ids.append(int(plan_id))
    return ids


@dataclass(frozen=True)
class Progress:
    """Where a node's offboarding stands, for the dashboard and the lease-end alert."""

    plan_id: int
    steps: int
    passed: int
    finished: bool
    stopped: str = ""  # the key of a step that failed or asks consent


def progress(ledger: Ledger) -> dict[int, Progress]:
    """Each node's plan in force, by node id, in one read. A node absent: never planned."""
    rows = ledger.conn.execute(
        "SELECT p.node_id, p.id, p.finished_at, s.key, s.state, s.seq FROM offboard_plans p"
        " JOIN offboard_steps s ON s.plan_id = p.id WHERE p.superseded_by IS NULL"
        " ORDER BY p.id, s.seq"
    ).fetchall()
    found: dict[int, Progress] = {}
    passed = {s.value for s in PASSED}
    for node_id, plan_id, finished, key, state, _at in rows:
        now = found.get(node_id)
        if now is None or now.plan_id != plan_id:
            now = Progress(plan_id, 0, 0, finished is not None)
        stopped = now.stopped or (key if state in ("failed", "consent") else "")
        found[node_id] = replace(
            now, steps=now.steps + 1, passed=now.passed + (state in passed), stopped=stopped
        )
    return found


# What names a resource: a change to any of these is a correction, not a mark.
_IDENTITY = ("kind", "native_id", "region", "endpoint")


def _corrected_since(conn: sqlite3.Connection, resource_id: int, plan_id: int) -> bool:
    """Whether the resource's record changed what it names (kind, id, region, endpoint)
    after the plan's own chained entry: the plan was made from what it named before."""
    planned = conn.execute(
        "SELECT min(id) FROM audit WHERE entity = ? AND entity_id = ? AND action = 'offboard.plan'",
        [ENTITY, plan_id],
    ).fetchone()[0]
    for before, after in conn.execute(
        "SELECT before, after FROM audit WHERE entity = 'resource' AND entity_id = ? AND id > ?",
        [resource_id, planned or 0],
    ):
        old, new = _json(before or "null"), _json(after or "null")
        if not isinstance(old, dict) or not isinstance(new, dict):
            return True  # added or deleted since: not the row the plan named
        if any(old.get(k) != new.get(k) for k in _IDENTITY):
            return True
    return False


def _mark_resource(
    ledger: Ledger,
    conn: sqlite3.Connection,
    resource_id: int,
    stored: StoredPlan,
    step: Step,
    entry: int,
) -> None:
    """The ledger's resource marked deleted and verified, as `zuka resource edit` would,
    with a note that points at the evidence."""
    found = ledger.resource_rows(" WHERE r.id = ?", [resource_id])
    if not found:
        return  # deleted from the ledger since: the evidence stands on its own
    res, before = found[0]
    if res.verified_at is not None or _corrected_since(conn, resource_id, stored.id):
        # A correction (resource edit --new-id/--region/--endpoint) made after this plan
        # was: the row names another thing now, which this step neither deleted nor read
        # back. The evidence stands on its own; the row is not marked.
        return
    tz = fields.timezone(
        ledger.conn.execute(
            "SELECT billing_tz FROM leases WHERE id = ?", [res.lease_id]
        ).fetchone()[0],
        "billing_tz",
    )
    now = ledger.clock().replace(microsecond=0).astimezone(tz).isoformat()
    after = dict(before)
    after["deleted_at"] = before["deleted_at"] or now
    after["verified_at"] = now
    said = f"offboarding plan {stored.id}, step {step.key}: verified gone (audit entry {entry})"
    after["notes"] = f"{before['notes']}; {said}" if before["notes"] else said
    row = {k: v for k, v in after.items() if k not in ("node", "lease_start")}
    # Checked as any resource record is before it is written.
    records.resource_from(after, res.lease_id, str(tz))
    conn.execute(
        f"UPDATE resources SET {', '.join(f'{k} = ?' for k in row)} WHERE id = ?",
        [*row.values(), resource_id],
    )
    ledger.audit(conn, "resource.edit", "resource", resource_id, before["node"], before, after)
