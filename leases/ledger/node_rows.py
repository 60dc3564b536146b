"""The nodes' rows: the rented machines, live or released (archived). A released node's
name may be given to a new node: a node is known by its id, its name finds the live one."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from leases.core import fields
from leases.core.errors import InputError, UnknownNode
from leases.core.i18n import _
from leases.core.models import Lease, Node, NodeState, Provider
from leases.ledger import records, release
from leases.ledger.books import BOOKS
from leases.ledger.provider_rows import ProviderRows
from leases.ledger.records import Record
from leases.ledger.wording import describe_counts

# The poller's tables that refer to a node by id (see leases/ledger/schema.py m002, m007).
HISTORY_TABLES = (
    "gpu_minute",
    "gpu_hour",
    "poll_gap",
    "node_latest",
    "gpu_owner_minute",
    "gpu_owner_hour",
)


class NodeRows(ProviderRows):
    """The nodes, a layer of a Ledger (see leases.ledger.store)."""

    if TYPE_CHECKING:  # LeaseRows', a later layer of the Ledger (leases.ledger.lease_rows)

        def leases(
            self,
            node: str | Node | None = None,
            *,
            open_only: bool = False,
            node_ids: Sequence[int] | None = None,
        ) -> list[Lease]: ...
        def lease_bundle(self, lease: Lease) -> Record: ...
        def lease_by_id(self, lease_id: int) -> Lease: ...

    _NODE_SELECT = (
        "SELECT n.*, p.name AS provider FROM nodes n LEFT JOIN providers p ON p.id = n.provider_id"
    )

    def nodes(
        self, states: Sequence[NodeState] | None = None, *, limit: int | None = None
    ) -> list[Node]:
        """Nodes by name; limit: the first `limit` of them in these states (read and
        checked alone: a first paint of a big fleet need not wait on every row)."""
        if limit is not None and states is not None:
            rows = self.rows(
                f"{self._NODE_SELECT} WHERE n.state IN ({', '.join('?' * len(states))})"
                " ORDER BY n.name LIMIT ?",
                [*(s.value for s in states), limit],
            )
            return [_node(r) for r in rows]
        rows = self.rows(f"{self._NODE_SELECT} ORDER BY n.name")
        found = [_node(r) for r in rows]
        return [n for n in found if states is None or n.state in states][:limit]

    def count_nodes(self, states: Sequence[NodeState]) -> int:
        row = self.conn.execute(
            f"SELECT count(*) FROM nodes WHERE state IN ({', '.join('?' * len(states))})",
            [s.value for s in states],
        ).fetchone()
        return int(row[0])

    def node(self, name: str) -> Node:
        """The live node of that name; else the latest archived one (a released node's
        name may be given to a new node: archived_nodes reaches the older ones)."""
        rows = self.rows(
            f"{self._NODE_SELECT} WHERE n.name = ?"
            " ORDER BY n.state = 'released', n.id DESC LIMIT 1",
            [name],
        )
        if not rows:
            raise UnknownNode(name)
        return _node(rows[0])

    def node_by_id(self, node_id: int) -> Node | None:
        rows = self.rows(f"{self._NODE_SELECT} WHERE n.id = ?", [node_id])
        return _node(rows[0]) if rows else None

    def archived_nodes(self, name: str) -> list[Node]:
        """The released nodes that had this name, the latest first."""
        rows = self.rows(
            f"{self._NODE_SELECT} WHERE n.name = ? AND n.state = 'released' ORDER BY n.id DESC",
            [name],
        )
        return [_node(r) for r in rows]

    def live_named(self, conn: sqlite3.Connection, name: str, other_than: int | None) -> bool:
        """Whether a live (not released) node other than other_than has this name."""
        row = conn.execute(
            "SELECT 1 FROM nodes WHERE name = ? AND state != 'released' AND id IS NOT ?",
            [name, other_than],
        ).fetchone()
        return row is not None

    def look_alike(self, conn: sqlite3.Connection, name: str, other_than: int | None) -> None:
        """Refuse a name a live node's already looks like (fields.name_skeleton: 'gpu一1'
        beside 'gpu-1'): an alert naming one would be read as the other."""
        skeleton = fields.name_skeleton(name)
        rows = conn.execute(
            "SELECT name FROM nodes WHERE state != 'released' AND id IS NOT ? AND name != ?",
            [other_than, name],
        ).fetchall()
        for (other,) in rows:
            if fields.name_skeleton(other) == skeleton:
                raise InputError(
                    "name",
                    name,
                    _("looks like the node {other} already in the ledger: choose a name that"
                      " reads differently").format(other=other),
                )  # fmt: skip

    def add_node(self, node: Node, new_provider: Provider | None = None) -> Node:
        """Add a node, and in the same transaction the provider it names if that is new."""
        with self.transaction() as conn:
            if new_provider is not None:
                self._insert_provider(conn, new_provider)
            return self._insert_node(conn, node)

    def _insert_node(self, conn: sqlite3.Connection, node: Node) -> Node:
        if node.state is not NodeState.RELEASED and self.live_named(conn, node.name, None):
            raise InputError("name", node.name, _("a node of that name already exists"))
        if node.state is not NodeState.RELEASED:
            self.look_alike(conn, node.name, None)
        rec = records.node_record(node)
        row = node_row(rec, self.provider_id(conn, node.provider))
        cur = conn.execute(
            f"INSERT INTO nodes ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self.audit(conn, "node.add", "node", cur.lastrowid, node.name, None, rec)
        return _node({**row, "provider": node.provider, "id": cur.lastrowid})

    def update_node(
        self, name: str, changes: Mapping[str, Any], new_provider: Provider | None = None
    ) -> Node:
        """Change some fields of a node; the result is validated as a whole."""
        unknown = set(changes) - set(records.NODE_KEYS)
        if unknown:
            field = sorted(unknown)[0]
            raise InputError(field, changes[field], _("not a node field"))
        with self.transaction() as conn:
            if new_provider is not None:
                self._insert_provider(conn, new_provider)
            current = self.node(name)
            before = records.node_record(current)
            after_node = records.node_from({**before, **changes})
            after = records.node_record(after_node)
            if after == before:
                return current
            if after_node.state is NodeState.RELEASED and current.state is not NodeState.RELEASED:
                release.check_release(name, self.leases(name), self.clock())
            if current.gpu_count and not after_node.gpu_count:
                # A card-hour lease without --cards bills the node's GPUs: they stay known.
                uncounted = [le for le in self.leases(current) if le.open and le.bills_node_gpus]
                if uncounted:
                    start = fields.shown(uncounted[0].start, uncounted[0].billing_tz)
                    raise InputError(
                        "gpu_count",
                        changes.get("gpu_count"),
                        _(
                            "its card_hour lease from {start} bills the node's GPUs (it has no"
                            " --cards): "
                            "give the lease its cards first (zuka lease edit {name} --start"
                            " '{start}' "
                            "--cards N)"
                        ).format(start=start, name=name),
                    )
            if after_node.state is not NodeState.RELEASED and self.live_named(
                conn, after_node.name, current.id
            ):
                raise InputError("name", after_node.name, _("a node of that name already exists"))
            if after_node.state is not NodeState.RELEASED and after_node.name != current.name:
                self.look_alike(conn, after_node.name, current.id)
            row = node_row(after, self.provider_id(conn, after_node.provider))
            conn.execute(
                f"UPDATE nodes SET {', '.join(f'{k} = ?' for k in row)} WHERE id = ?",
                [*row.values(), current.id],
            )
            self.audit(conn, "node.edit", "node", current.id, after_node.name, before, after)
            return _node({**row, "provider": after_node.provider, "id": current.id})

    def archive_node(self, name: str) -> Node:
        """Mark a node released. Its leases must all have ended (see leases.ledger.release)."""
        return self.update_node(name, {"state": NodeState.RELEASED.value})

    def restore_node(self, name: str) -> Node:
        """Bring back the latest archived node of this name (state active)."""
        with self.transaction() as conn:
            archived = self.archived_nodes(name)
            if not archived:
                raise InputError("name", name, _("no archived node of that name"))
            node = archived[0]
            if self.live_named(conn, name, node.id):
                raise InputError(
                    "name",
                    name,
                    _(
                        "a live node {name} has this name: rename it first (`zuka node edit {name} "
                        "--rename NEW_NAME`)"
                    ).format(name=name),
                )
            self.look_alike(conn, name, node.id)
            before = records.node_record(node)
            after = {**before, "state": NodeState.ACTIVE.value}
            conn.execute("UPDATE nodes SET state = ? WHERE id = ?", [after["state"], node.id])
            self.audit(conn, "node.restore", "node", node.id, name, before, after)
            return replace(node, state=NodeState.ACTIVE)

    def delete_node(self, name: str, *, force: bool = False) -> dict[str, int]:
        """Delete a node recorded by mistake; with force, everything that refers to it
        (leases, their resources, GPU history) goes in the same transaction. A node with
        an open lease is refused even so: that lease still bills. Returns what went."""
        with self.transaction() as conn:
            node = self.node(name)
            assert node.id is not None
            open_leases = [le for le in self.leases(name) if le.ended_at is None]
            if open_leases:
                last = open_leases[-1]
                start = fields.shown(last.start, last.billing_tz)
                raise InputError(
                    "node",
                    name,
                    _(
                        "has an open lease (from {start}): end it first (`zuka lease end"
                        " {name}`), or if "
                        "it was recorded by mistake, delete it (`zuka lease delete {name} --start "
                        "'{start}'`)"
                    ).format(start=start, name=name),
                )
            bundle = self.node_bundle(node)
            counts = {
                "leases": len(bundle["leases"]),
                "resources": sum(len(le["resources"]) for le in bundle["leases"]),
                **bundle["gpu_history"],
            }
            if any(counts.values()) and not force:
                raise InputError(
                    "node",
                    name,
                    _(
                        "is still referred to by {counts}: give --force to delete them with it"
                    ).format(counts=describe_counts(counts)),
                )
            ids = [le["id"] for le in bundle["leases"]]
            booked = [
                f"{n} {spec.entity.replace('_', ' ')}(s)"
                for spec in BOOKS.values()
                if "lease_id" in spec.columns
                and (n := len(self.rows(
                    f"SELECT 1 FROM {spec.table} WHERE lease_id IN"
                    " (SELECT value FROM json_each(?))", [json.dumps(ids)])))
            ]  # fmt: skip
            if booked:
                raise InputError(
                    "node",
                    name,
                    _(
                        "the books refer to its leases: {join}; a node the accountant's rows rest"
                        " on is "
                        "not deleted, even with --force (undo or delete those first; or keep it:"
                        " zuka "
                        "node archive)"
                    ).format(join=", ".join(booked)),
                )
            for le in bundle["leases"]:
                conn.execute("DELETE FROM resources WHERE lease_id = ?", [le["id"]])
            conn.execute("DELETE FROM stops WHERE node_id = ?", [node.id])
            conn.execute("DELETE FROM leases WHERE node_id = ?", [node.id])
            for table in HISTORY_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE node_id = ?", [node.id])
            conn.execute("DELETE FROM nodes WHERE id = ?", [node.id])
            self.audit(conn, "node.delete", "node", node.id, name, bundle, None)
            return counts

    def node_bundle(self, node: Node) -> Record:
        """A node's record with its leases and their resources (with ids, so that an undo
        puts them back as they were) and the count of its GPU history rows."""
        assert node.id is not None
        leases = self.rows("SELECT id FROM leases WHERE node_id = ? ORDER BY start", [node.id])
        return {
            **records.node_record(node),
            "leases": [self.lease_bundle(self.lease_by_id(r["id"])) for r in leases],
            "gpu_history": {
                table: self.conn.execute(
                    f"SELECT count(*) FROM {table} WHERE node_id = ?", [node.id]
                ).fetchone()[0]
                for table in HISTORY_TABLES
            },
        }


def node_row(rec: Record, provider_id: int | None) -> Record:
    """A node's row in the nodes table from its record (tags and tunnels as JSON, its
    provider by id)."""
    row = {k: v for k, v in rec.items() if k != "provider"}
    row["tags"] = json.dumps(rec["tags"], ensure_ascii=False)
    row["ssh_tunnels"] = json.dumps(rec.get("ssh_tunnels") or [], ensure_ascii=False)
    row["provider_id"] = provider_id
    return row


def _node(row: Mapping[str, Any]) -> Node:
    rec = dict(row)
    # Not JSON: left as stored, refused (and said) by stored_node.
    with suppress(TypeError, ValueError):
        rec["tags"] = json.loads(row["tags"])
    with suppress(TypeError, ValueError, KeyError):
        rec["ssh_tunnels"] = json.loads(row["ssh_tunnels"])
    return replace(records.stored_node(rec), id=row["id"])
