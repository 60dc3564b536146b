"""The resources' rows: what a lease leaves behind in a cloud (a disk, a snapshot, a bucket
or a prefix in one), marked deleted and verified by hand or by an offboarding. One the
ledger still holds for another lease is refused (leases.ledger.claims)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from leases.core import fields, valuewords
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Lease, Node, Resource, ResourceKind
from leases.core.textsafe import visible
from leases.ledger import claims, records
from leases.ledger.records import Record, readable
from leases.ledger.stop_rows import StopRows

# What `resource edit` may correct in how a resource was recorded (new_id: its id).
_CORRECTIONS = ("new_id", "region", "endpoint")


class ResourceRows(StopRows):
    """The resources, a layer of a Ledger (see leases.ledger.store)."""

    def add_resource(self, node: str, rec: Mapping[str, Any]) -> Resource:
        """Attach a resource to a lease of the node, ended ones included (see lease_for).
        A priced one (a storage line) created before its lease began is refused: its
        storage would be billed to the lease from then, years before it, say."""
        with self.transaction() as conn:
            res = self._insert_resource(conn, node, rec)
            lease = self.lease_by_id(res.lease_id)
            if res.created is not None and res.created > self.clock() + timedelta(minutes=5):
                raise InputError(
                    "created",
                    fields.shown(res.created, lease.billing_tz),
                    _("is in the future: record when it was created"),
                )
            if res.price is not None and res.created is not None and res.created < lease.start:
                tz = lease.billing_tz
                raise InputError(
                    "created",
                    fields.shown(res.created, tz),
                    _(
                        "is before its lease's start ({shown}): its storage would be billed to"
                        " this "
                        "lease from then; give when it began billing for this lease, or record it"
                        " on the "
                        "lease it was created in (--lease-start)"
                    ).format(shown=fields.shown(lease.start, tz)),
                )
            return res

    def _insert_resource(
        self,
        conn: sqlite3.Connection,
        node: str,
        rec: Mapping[str, Any],
        target: Node | None = None,
    ) -> Resource:
        lease = self.lease_for(node, rec.get("lease_start"), target)
        assert lease.id is not None
        res = records.resource_from(rec, lease.id, lease.billing_tz)
        if conn.execute(
            "SELECT 1 FROM resources WHERE lease_id = ? AND kind = ? AND native_id = ?",
            [lease.id, res.kind.value, res.native_id],
        ).fetchone():
            raise InputError(
                "native_id",
                res.native_id,
                _("this {value} is already recorded").format(value=valuewords.word(res.kind)),
            )
        self._refuse_overlap(conn, res, lease)
        out = records.resource_record(res, node, lease.start)
        row = {k: v for k, v in out.items() if k not in ("node", "lease_start")}
        row["lease_id"] = lease.id
        cur = conn.execute(
            f"INSERT INTO resources ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self.audit(conn, "resource.add", "resource", cur.lastrowid, node, None, out)
        return replace(res, id=cur.lastrowid)

    def _check_correction(self, conn: sqlite3.Connection, res: Resource, fixed: Resource) -> None:
        """A corrected resource is checked as a new one would be, but against the others."""
        if (
            fixed.native_id != res.native_id
            and conn.execute(
                "SELECT 1 FROM resources WHERE lease_id = ? AND kind = ? AND native_id = ?",
                [res.lease_id, fixed.kind.value, fixed.native_id],
            ).fetchone()
        ):
            raise InputError(
                "new_id",
                fixed.native_id,
                _("this {value} is already recorded").format(value=valuewords.word(fixed.kind)),
            )
        self._refuse_overlap(conn, fixed, self.lease_by_id(res.lease_id), apart=res.id)

    def _refuse_overlap(
        self, conn: sqlite3.Connection, res: Resource, lease: Lease, apart: int | None = None
    ) -> None:
        """A cloud resource another lease still claims (the same bucket, a bucket and a
        prefix in it, the same snapshot id in the same region and account...) is refused,
        naming both leases: one offboarding would delete the other's data."""
        cur = conn.execute(
            "SELECT n.name AS node, p.region AS provider_region, p.account_id FROM leases l"
            " JOIN nodes n ON n.id = l.node_id LEFT JOIN providers p ON p.id = n.provider_id"
            " WHERE l.id = ?",
            [lease.id],
        )
        names = [d[0] for d in cur.description]
        owner = dict(zip(names, cur.fetchone() or (None,) * len(names), strict=True))
        new = claims.claim_from(
            {**owner, "lease_id": lease.id, "kind": res.kind.value, "native_id": res.native_id,
             "region": res.region, "endpoint": res.endpoint}
        )  # fmt: skip
        if new is None:
            return
        cur = conn.execute(claims.CLAIMS_SQL)
        names = [d[0] for d in cur.description]
        live = [claims.claim_from(dict(zip(names, row, strict=True))) for row in cur]
        others = [c for c in live if c is not None and (apart is None or c.resource_id != apart)]
        found = claims.overlaps_with(new, others)
        if found:
            first = found[0]
            raise InputError(
                "native_id",
                res.native_id,
                _(
                    "{shown} is still recorded ({why}): offboarding one lease would delete the "
                    "other's; mark the old one deleted and verified first (zuka resource edit ... "
                    "--deleted --verified --notes ...)"
                ).format(shown=first.first.shown(), why=first.why),
            )

    def resources(self, node: str | None = None) -> list[tuple[str, datetime, Resource]]:
        """(node name, lease start, resource) for every recorded resource."""
        params: list[Any] = []
        clause = ""
        if node is not None:
            clause = " WHERE n.id = ?"
            params.append(self.node(node).id)
        return [
            (rec["node"], _moment(rec["lease_start"]), res)
            for res, rec in self.resource_rows(clause, params)
        ]

    def readable_resources(self) -> tuple[list[tuple[str, datetime, Resource]], list[str]]:
        """As resources(), of every row that reads; in words, each one that does not."""

        def read(r: dict[str, Any]) -> tuple[str, datetime, Resource]:
            res = replace(records.resource_from(r, r["lease_id"], r["tz"]), id=r["id"])
            return r["node"], _moment(r["lease_start"]), res

        rows = self._resource_row_dicts("", [])
        return readable(
            rows,
            read,
            lambda r: _("resource {id} of node {node}").format(id=r["id"], node=_named(r["node"])),
        )

    def _resource_row_dicts(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT r.*, n.name AS node, l.start AS lease_start, l.billing_tz AS tz"
            " FROM resources r JOIN leases l ON l.id = r.lease_id JOIN nodes n ON n.id = l.node_id"
            f"{clause} ORDER BY n.name, l.start, r.kind, r.native_id",
            params,
        )

    def resource_rows(self, clause: str, params: Sequence[Any]) -> list[tuple[Resource, Record]]:
        """(resource, its record) of the rows a clause over resources r, leases l and nodes n
        picks (" WHERE r.id = ?"), by node, lease start, kind and id."""
        out = []
        for r in self._resource_row_dicts(clause, params):
            res = replace(records.resource_from(r, r["lease_id"], r["tz"]), id=r["id"])
            out.append((res, records.resource_record(res, r["node"], _moment(r["lease_start"]))))
        return out

    def update_resource(
        self,
        node: str,
        kind: str,
        native_id: str,
        changes: Mapping[str, Any],
        lease_start: Any = None,
    ) -> Record:
        """Mark a resource deleted or verified by hand (any lease of the node, ended ones
        too). `changes` holds deleted_at, verified_at ("now" or a time) and notes; a
        resource marked verified by hand needs a note: it is the evidence. Or correct how
        it was recorded (a typo in its id, the wrong region or endpoint): new_id, region,
        endpoint, while it is not marked deleted; checked as when it is added (the same
        lease holding it twice, another lease claiming it)."""
        unknown = set(changes) - {
            "deleted_at", "verified_at", "notes", *_CORRECTIONS
        }  # fmt: skip
        if unknown:
            field = sorted(unknown)[0]
            raise InputError(field, changes[field], _("cannot be changed by resource edit"))
        if not changes:
            raise InputError("resource edit", native_id, _("nothing to change: give an option"))
        with self.transaction() as conn:
            node_id = self.node(node).id
            clause = " WHERE n.id = ? AND r.kind = ? AND r.native_id = ?"
            params: list[Any] = [node_id, kind, native_id]
            if lease_start not in (None, ""):
                clause += " AND r.lease_id = ?"
                params.append(self.lease_for(node, lease_start).id)
            found = self.resource_rows(clause, params)
            if not found:
                raise InputError(
                    "native_id",
                    native_id,
                    _("no {kind} {native_id} recorded on {node}").format(
                        kind=valuewords.word(kind, ResourceKind), native_id=native_id, node=node
                    ),
                )
            if len(found) > 1:
                starts = ", ".join(rec["lease_start"] for _res, rec in found)
                raise InputError(
                    "native_id",
                    native_id,
                    _("recorded on several leases of {node} ({starts}): give --lease-start").format(
                        node=node, starts=starts
                    ),
                )
            res, before = found[0]
            tz = self.lease_by_id(res.lease_id).billing_tz
            now = self.clock().replace(microsecond=0)
            after = dict(before)
            for key in ("deleted_at", "verified_at"):
                if key in changes:
                    value = changes[key]
                    when = now if value == "now" else fields.moment(key, value, tz)
                    if when > now + timedelta(minutes=5):
                        raise InputError(key, fields.shown(when, tz), _("is in the future"))
                    after[key] = when.astimezone(fields.timezone(tz, "billing_tz")).isoformat()
            if "notes" in changes:
                after["notes"] = changes["notes"]
            fixed = {k: v for k, v in changes.items() if k in _CORRECTIONS}
            if fixed and (res.deleted_at is not None or res.verified_at is not None):
                raise InputError(
                    sorted(fixed)[0],
                    next(iter(fixed.values())),
                    _(
                        "{kind} {native_id} is marked deleted: its record is evidence now, not "
                        "corrected; record the right one with zuka resource add"
                    ).format(kind=valuewords.word(kind, ResourceKind), native_id=native_id),
                )
            for key, value in fixed.items():
                after["native_id" if key == "new_id" else key] = value
            checked = records.resource_from(after, res.lease_id, tz)
            if fixed:
                self._check_correction(conn, res, checked)
            after = records.resource_record(checked, before["node"], _moment(before["lease_start"]))
            _check_marks(before, after, changes)
            if after == before:
                return before
            row = {k: v for k, v in after.items() if k not in ("node", "lease_start")}
            conn.execute(
                f"UPDATE resources SET {', '.join(f'{k} = ?' for k in row)} WHERE id = ?",
                [*row.values(), res.id],
            )
            self.audit(conn, "resource.edit", "resource", res.id, before["node"], before, after)
            return after


def _moment(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def _named(name: object) -> str:
    return repr(visible(name, 80))


def _shown(iso: str) -> str:
    """A stored time (ISO, in the lease's billing zone) as messages print it."""
    return fields.shown(_moment(iso).replace(tzinfo=None))  # already in the billing zone


def _check_marks(before: Record, after: Record, changes: Mapping[str, Any]) -> None:
    """The rules of marking a resource deleted and verified by hand."""
    if "deleted_at" in changes and after["deleted_at"] is not None:
        deleted = _moment(after["deleted_at"])
        for key, said in (
            ("lease_start", N_("is before its lease's start {at}")),
            ("created", N_("is before its creation {at}")),
        ):
            if after.get(key) and deleted < _moment(after[key]):
                raise InputError(
                    "deleted_at",
                    _shown(after["deleted_at"]),
                    _(said).format(at=_shown(after[key])),
                )
    if after["verified_at"] is None:
        return
    if after["deleted_at"] is None:
        raise InputError(
            "verified_at",
            _shown(after["verified_at"]),
            _("the resource is not marked deleted: give --deleted"),
        )
    if _moment(after["verified_at"]) < _moment(after["deleted_at"]):
        raise InputError(
            "verified_at",
            _shown(after["verified_at"]),
            _("is before its deletion {after}").format(after=_shown(after["deleted_at"])),
        )
    if (
        after["verified_at"] != before["verified_at"]
        and not str(changes.get("notes") or "").strip()
    ):
        raise InputError(
            "notes",
            None,
            _("marking a resource verified by hand needs a note saying how it was checked"),
        )
