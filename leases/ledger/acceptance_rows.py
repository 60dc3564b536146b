"""Hand-over acceptance runs as the ledger keeps them: one row per run (node, the lease it
had then, level, verdict, findings and raw evidence as JSON) and the digest of that row,
which the run's entry on the audit chain holds too, written in the same transaction.

Reading a run hashes its row again and compares it with its chained entry: a row changed
outside zuka is refused (RunChanged), never shown as the verdict zuka reached. Runs are
never edited; a deleted node's runs stay (they name the node as it was called then).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from leases.core.acceptance import CheckResult, Evidence, Level, Status, Verdict
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.ledger import auditchain
from leases.ledger.store import Ledger

ENTITY = "acceptance"
ACTION = "accept.run"
# The whole run's evidence kept at most (each stream is already cut at 512 KiB by the
# probe): a run of many commands on a node answering huge outputs stays bounded.
EVIDENCE_MAX = 4 * 1024 * 1024
NOT_KEPT = "\n[zuka: not kept: this run's evidence passed 4 MiB]\n"
_WORDS_MAX = 4000  # a finding's words, expected and found: zuka's own, bounded anyway


@dataclass(frozen=True)
class StoredRun:
    """One stored run as its chained entry bears it out."""

    id: int
    node_id: int
    node: str  # the node's name when it ran
    lease_id: int | None
    verdict: Verdict
    status: Status  # as stored (the verdict's status when it ran)


class RunChanged(InputError):
    """A stored run that its entry on the audit chain does not bear out."""

    def __init__(self, run_id: int, reason: str) -> None:
        super().__init__(
            "acceptance run",
            run_id,
            _(
                "acceptance run {id} was changed outside zuka ({reason}); it is not"
                " shown as zuka's verdict. Check `zuka audit verify`, then run the acceptance"
                " again: zuka accept NODE"
            ).format(id=run_id, reason=reason),
        )


# -- the row as JSON --------------------------------------------------------------------


def _result_doc(r: CheckResult) -> dict[str, Any]:
    return {
        "check": r.check[:200],
        "title": r.title[:200],
        "status": r.status.value,
        "words": r.words[:_WORDS_MAX],
        "expected": r.expected[:_WORDS_MAX],
        "found": r.found[:_WORDS_MAX],
        "evidence": [k[:200] for k in r.evidence[:50]],
    }


def _evidence_docs(evidence: tuple[Evidence, ...]) -> list[dict[str, Any]]:
    left = EVIDENCE_MAX
    docs = []
    for ev in evidence:
        streams = []
        for text in (ev.stdout, ev.stderr):
            kept = text if len(text) <= left else text[: max(left, 0)] + NOT_KEPT
            left -= len(text)
            streams.append(kept)
        docs.append(
            {
                "key": ev.key[:200],
                "command": ev.command[:8000],
                "exit_status": ev.exit_status,
                "stdout": streams[0],
                "stderr": streams[1],
                "seconds": ev.seconds,
                "failure": ev.failure[:2000],
            }
        )
    return docs


def _results_from(text: str) -> tuple[CheckResult, ...]:
    return tuple(
        CheckResult(
            check=str(d["check"]),
            title=str(d["title"]),
            status=Status(d["status"]),
            words=str(d["words"]),
            expected=str(d.get("expected", "")),
            found=str(d.get("found", "")),
            evidence=tuple(str(k) for k in d.get("evidence", [])),
        )
        for d in json.loads(text)
    )


def _evidence_from(text: str) -> tuple[Evidence, ...]:
    return tuple(
        Evidence(
            key=str(d["key"]),
            command=str(d["command"]),
            exit_status=None if d["exit_status"] is None else int(d["exit_status"]),
            stdout=str(d["stdout"]),
            stderr=str(d["stderr"]),
            seconds=float(d.get("seconds", 0.0)),
            failure=str(d.get("failure", "")),
        )
        for d in json.loads(text)
    )


_HASHED = ("node_id", "node", "lease_id", "level", "status", "started", "finished",
           "results", "evidence")  # fmt: skip


def digest(row: Mapping[str, Any]) -> str:
    """The sha256 of the row's stored columns, in a fixed order (JSON of a list)."""
    body = json.dumps([row.get(k) for k in _HASHED], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


# -- writing and reading ----------------------------------------------------------------


def store(ledger: Ledger, node_id: int, node: str, lease_id: int | None, v: Verdict) -> StoredRun:
    """Store one run and its digest on the audit chain, in one transaction."""
    row: dict[str, Any] = {
        "node_id": node_id,
        "node": node,
        "lease_id": lease_id,
        "level": v.level.value,
        "status": v.status.value,
        "started": _moment(v.started),
        "finished": _moment(v.finished),
        "results": json.dumps([_result_doc(r) for r in v.results], ensure_ascii=False),
        "evidence": json.dumps(_evidence_docs(v.evidence), ensure_ascii=False),
    }
    row["digest"] = digest(row)
    with ledger.transaction() as conn:
        cur = conn.execute(
            f"INSERT INTO acceptance_runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        run_id = int(cur.lastrowid or 0)
        after = {k: row[k] for k in ("node_id", "lease_id", "level", "status", "started",
                                     "finished", "digest")}  # fmt: skip
        ledger.audit(conn, ACTION, ENTITY, run_id, node, None, {"run": run_id, **after})
    return load(ledger, run_id)


def _entry(ledger: Ledger, run_id: int) -> dict[str, Any]:
    """The run's chained entry, checked to be a link of the chain (its hash over its
    content, the entries on either side linking to it)."""
    rows = ledger.rows(
        "SELECT * FROM audit WHERE entity = ? AND entity_id = ? AND action = ? ORDER BY id",
        [ENTITY, run_id, ACTION],
    )
    if len(rows) != 1:
        raise RunChanged(run_id, _("{rows} audit entries record it, not 1").format(rows=len(rows)))
    r = rows[0]
    if r["hash"] != auditchain.entry_hash(r, str(r["prev_hash"])):
        raise RunChanged(run_id, _("its audit entry {r} was changed").format(r=r["id"]))
    at = int(r["id"])
    near = {
        int(i): (prev, digest)
        for i, prev, digest in ledger.conn.execute(
            "SELECT id, prev_hash, hash FROM audit WHERE id IN (?, ?)", [at - 1, at + 1]
        )
    }
    before, after = near.get(at - 1), near.get(at + 1)
    if at > 1 and (before is None or before[1] != r["prev_hash"]):
        raise RunChanged(
            run_id, _("its audit entry {at} does not link to the one before").format(at=at)
        )
    if after is not None and after[0] != r["hash"]:
        raise RunChanged(
            run_id, _("its audit entry {at} does not link to the one after").format(at=at)
        )
    return r


def _recorded(ledger: Ledger, run_id: int) -> bool:
    return (
        ledger.conn.execute(
            "SELECT 1 FROM audit WHERE entity = ? AND entity_id = ? AND action = ? LIMIT 1",
            [ENTITY, run_id, ACTION],
        ).fetchone()
        is not None
    )


def load(ledger: Ledger, run_id: int) -> StoredRun:
    """The stored run, refused (RunChanged) unless its row hashes to the digest its
    chained entry holds; a run the chain records whose row is gone is refused too."""
    rows = ledger.rows("SELECT * FROM acceptance_runs WHERE id = ?", [run_id])
    if not rows:
        if _recorded(ledger, run_id):
            raise RunChanged(run_id, _("its row is gone, its audit entry is not"))
        raise LookupError(_("no acceptance run {run_id}").format(run_id=run_id))
    row = rows[0]
    entry = _entry(ledger, run_id)
    try:
        said = json.loads(entry["after"] or "")
    except ValueError:
        said = None
    if not isinstance(said, dict) or said.get("run") != run_id:
        raise RunChanged(run_id, _("its audit entry does not name it"))
    if digest(row) != said.get("digest") or row["digest"] != said.get("digest"):
        raise RunChanged(run_id, _("its row no longer hashes to the digest on the audit chain"))
    try:
        verdict = Verdict(
            node=str(row["node"]),
            level=Level(row["level"]),
            started=datetime.fromisoformat(row["started"]),
            finished=datetime.fromisoformat(row["finished"]),
            results=_results_from(row["results"]),
            evidence=_evidence_from(row["evidence"]),
        )
        status = Status(row["status"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunChanged(
            run_id, _("it cannot be read ({error})").format(error=type(exc).__name__)
        ) from None
    return StoredRun(int(row["id"]), int(row["node_id"]), str(row["node"]),
                     row["lease_id"], verdict, status)  # fmt: skip


# The runs the audit chain records of a node (its entries hold the node's id and lease):
# a row deleted with sqlite3 is still named here, and load refuses it.
_CHAINED = (
    "SELECT entity_id FROM audit WHERE entity = 'acceptance' AND action = 'accept.run'"
    " AND json_valid(after) AND json_extract(after, '$.node_id') = ?"
)


def run_ids(ledger: Ledger, node_id: int) -> list[int]:
    """The node's runs, oldest first: those the table holds and those the audit chain
    records (a row deleted outside zuka is listed, and load refuses it)."""
    ids = {
        int(i)
        for (i,) in ledger.conn.execute(
            "SELECT id FROM acceptance_runs WHERE node_id = ?", [node_id]
        )
    }
    ids |= {int(i) for (i,) in ledger.conn.execute(_CHAINED, [node_id]) if i is not None}
    return sorted(ids)


def last_id(ledger: Ledger, node_id: int, lease_id: int | None = None) -> int | None:
    """The node's latest run (of that lease, if given): the newer of the table's newest
    row and the audit chain's newest accept.run entry of the node, so that deleting the
    newest row makes load refuse (RunChanged) instead of showing the run before it."""
    sql = "SELECT max(id) FROM acceptance_runs WHERE node_id = ?"
    chained = f"SELECT max(entity_id) FROM ({_CHAINED}"
    params: list[Any] = [node_id]
    if lease_id is not None:
        sql += " AND lease_id = ?"
        chained += " AND json_extract(after, '$.lease_id') = ?"
        params.append(lease_id)
    found = [
        ledger.conn.execute(sql, params).fetchone()[0],
        ledger.conn.execute(chained + ")", params).fetchone()[0],
    ]
    ids = [int(i) for i in found if i is not None]
    return max(ids) if ids else None


def problems(ledger: Ledger) -> list[str]:
    """Every stored run read as load reads it, and every run the audit chain records:
    one line per run its chain does not bear out, or whose row is gone (for
    `zuka audit verify`)."""
    ids = {int(i) for (i,) in ledger.conn.execute("SELECT id FROM acceptance_runs")}
    ids |= {
        int(i)
        for (i,) in ledger.conn.execute(
            "SELECT entity_id FROM audit WHERE entity = ? AND action = ?", [ENTITY, ACTION]
        )
        if i is not None
    }
    found = []
    for run_id in sorted(ids):
        try:
            load(ledger, run_id)
        except RunChanged as exc:
            found.append(exc.reason)
    return found
