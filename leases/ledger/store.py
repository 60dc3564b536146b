"""The SQLite ledger: every rented node, its leases and the resources that belong to them,
with an append-only audit log of every change.

One writer transaction per change (BEGIN IMMEDIATE), WAL mode so that a dashboard and a
collector can share the file, mode 0600 because the file says where the lab's machines are.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from leases.core import fields
from leases.core.errors import READ_ONLY, InputError, LedgerError, UnknownNode, ledger_failure
from leases.core.models import AuditEntry, Lease, Node, NodeState, Provider, Resource
from leases.core.textsafe import visible
from leases.ledger import auditchain, nodelog, records, release, transfer
from leases.ledger.auditchain import AUDIT_TRIGGERS as AUDIT_TRIGGERS
from leases.ledger.records import UNREADABLE, Record, unreadable
from leases.money.renewals import (
    BillingNow,
    billing_now,
    cancelled_by_end,
    chain_of,
    in_effect,
    lapsed,
    overlaps,
    renewal_record,
    resource_default,
)
from leases.offboard import claims

if TYPE_CHECKING:
    from leases.ledger.stops import LeaseStop
    from leases.money.billing import Stop

Clock = Callable[[], datetime]
# How many migrations leases/ledger/schema.py holds; tests check the two agree. Kept here so that
# opening an up-to-date ledger needs neither sqlite-utils nor the schema (faster CLI).
SCHEMA_VERSION = 16
# What `resource edit` may correct in how a resource was recorded (new_id: its id).
_CORRECTIONS = ("new_id", "region", "endpoint")
# How long a write waits for another writer's transaction before it gives up.
BUSY_TIMEOUT_S = 15.0


# The poller's tables that refer to a node by id (see leases/ledger/schema.py m002, m007).
HISTORY_TABLES = (
    "gpu_minute",
    "gpu_hour",
    "poll_gap",
    "node_latest",
    "gpu_owner_minute",
    "gpu_owner_hour",
)


def utc_now() -> datetime:
    return datetime.now(UTC)


def default_ledger_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("zuka", appauthor=False)) / "ledger.db"


def resolve_ledger_path(cli_value: str | None, env: Mapping[str, str] = os.environ) -> Path:
    """--ledger wins over ZUKA_LEDGER, which wins over the platform's data directory."""
    if cli_value:
        path = Path(cli_value)
    elif env.get("ZUKA_LEDGER"):
        path = Path(env["ZUKA_LEDGER"])
    else:
        path = default_ledger_path()
    # Symlinks are resolved once, here: the lock, the trust store and the sim folder sit
    # beside the real file, whichever link a command was given.
    return path.expanduser().resolve()


def _create_private(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileNotFoundError, PermissionError, NotADirectoryError):
        # os_problem would say "no such file" of a directory that mkdir could not make.
        raise LedgerError(
            f"{path}: cannot create its directory {path.parent}: that place is not writable"
            " or not a place for a ledger (like /proc or /sys): give another path"
        ) from None
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


class Ledger:
    """Reads and writes of the ledger. Construct with Ledger.open()."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        clock: Clock = utc_now,
        actor: str | None = None,
        path: Path | None = None,
    ) -> None:
        self.conn = conn
        # Stored text that is not UTF-8 (a ledger edited by hand or tampered with) is read
        # with U+FFFD where it breaks: its row then fails its checks, or shows replaced,
        # instead of failing every read of the table (sqlite3's default raises).
        conn.text_factory = _text
        self.path = path  # None: in memory
        self.clock = clock
        self.actor = actor if actor is not None else _whoami()
        # The batch of the audit entries the open transaction writes (see _audit).
        self._batch: int | None = None
        self._held: tuple[int, int] | None = None  # the file's (device, inode), see _hold

    @classmethod
    def open(
        cls,
        path: str | Path | None,
        *,
        create: bool = True,
        readonly: bool = False,
        clock: Clock = utc_now,
        actor: str | None = None,
    ) -> Ledger:
        """Open (and if allowed, create) a ledger. path None means an in-memory ledger.

        With create=False a missing file is not created: an empty in-memory ledger stands
        in, so read-only commands never leave a file behind. With readonly=True (commands
        that only read) the file is opened read-only, so that a ledger this user cannot
        write still answers; it is upgraded first only where it can be written.
        Any OS or SQLite failure is a LedgerError of one line naming the file.
        """
        if path is None or ((readonly or not create) and not Path(path).exists()):
            conn = sqlite3.connect(":memory:")
            _prepare(conn)
            return cls(conn, clock=clock, actor=actor)
        path = Path(path)
        try:
            with _OPENING:
                conn = _connect_reading(path) if readonly else _connect(path, create=create)
                held = _hold(path)
        except (OSError, sqlite3.Error) as exc:
            raise ledger_failure(path, exc) from exc
        ledger = cls(conn, clock=clock, actor=actor, path=path)
        ledger._held = held
        return ledger

    def close(self) -> None:
        with _OPENING:
            self.conn.close()
            if self._held is not None:
                _release(self._held)
                self._held = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions and audit ---------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; everything inside commits or nothing does."""
        conn = self.conn
        if conn.in_transaction:
            raise RuntimeError("nested ledger transaction")
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._batch = None
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            else:
                conn.commit()
            finally:
                self._batch = None
        except sqlite3.OperationalError as exc:
            # Locked past the busy timeout, read-only, full: one line naming the file.
            raise ledger_failure(self.path or ":memory:", exc) from exc

    def _audit(
        self,
        conn: sqlite3.Connection,
        action: str,
        entity: str,
        entity_id: int | None,
        node: str | None,
        before: Record | None,
        after: Record | None,
    ) -> None:
        last = conn.execute("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
        prev_id, prev_hash = (int(last[0]), str(last[1])) if last else (0, auditchain.GENESIS)
        row: dict[str, Any] = {
            "id": prev_id + 1,
            "at": self.clock().astimezone(UTC).isoformat(timespec="microseconds"),
            "actor": self.actor,
            "action": action,
            "entity": entity,
            "entity_id": entity_id,
            "node": node,
            "before": None if before is None else json.dumps(before, ensure_ascii=False),
            "after": None if after is None else json.dumps(after, ensure_ascii=False),
        }
        # Everything one transaction writes is one batch, named by its first entry: one
        # command, which `zuka undo` takes back whole.
        if self._batch is None:
            self._batch = row["id"]
        row["batch"] = self._batch
        row["prev_hash"] = prev_hash
        row["hash"] = auditchain.entry_hash(row, prev_hash)
        conn.execute(
            f"INSERT INTO audit ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    # -- providers -----------------------------------------------------------------------

    def providers(self) -> list[Provider]:
        return [_provider(r) for r in self._rows("SELECT * FROM providers ORDER BY name")]

    def provider(self, name: str) -> Provider:
        rows = self._rows("SELECT * FROM providers WHERE name = ?", [name])
        if not rows:
            raise InputError("provider", name, "no provider of that name in the ledger")
        return _provider(rows[0])

    def add_provider(self, provider: Provider) -> Provider:
        with self.transaction() as conn:
            return self._insert_provider(conn, provider)

    # What `zuka provider edit` may change: the facts offboarding's preflight checks.
    PROVIDER_EDITABLE = ("region", "account_id", "account_alias", "credential_ref")

    def update_provider(self, name: str, changes: Mapping[str, Any]) -> Provider:
        """Change some fields of a provider (audited, undoable); the result is validated
        as a whole. Its nodes follow it: they refer to it by id."""
        unknown = set(changes) - set(self.PROVIDER_EDITABLE)
        if unknown:
            field = sorted(unknown)[0]
            raise InputError(field, changes[field], "cannot be changed by provider edit")
        with self.transaction() as conn:
            rows = self._rows("SELECT * FROM providers WHERE name = ?", [name])
            if not rows:
                raise InputError("provider", name, "no provider of that name in the ledger")
            current = _provider(rows[0])
            before = records.provider_record(current)
            after = records.provider_record(records.provider_from({**before, **changes}))
            if after == before:
                return current
            conn.execute(
                f"UPDATE providers SET {', '.join(f'{k} = ?' for k in after)} WHERE id = ?",
                [*after.values(), current.id],
            )
            self._audit(conn, "provider.edit", "provider", current.id, None, before, after)
            return _provider({**after, "id": current.id})

    def _insert_provider(self, conn: sqlite3.Connection, p: Provider) -> Provider:
        # Aliyun and aliyun are one provider to a person: unique without regard to case.
        same = conn.execute(
            "SELECT name FROM providers WHERE lower(name) = lower(?)", [p.name]
        ).fetchone()
        if same:
            raise InputError(
                "provider", p.name, f"a provider of that name already exists ({same[0]})"
            )
        rec = records.provider_record(p)
        cur = conn.execute(
            f"INSERT INTO providers ({', '.join(rec)}) VALUES ({', '.join('?' * len(rec))})",
            list(rec.values()),
        )
        self._audit(conn, "provider.add", "provider", cur.lastrowid, None, None, rec)
        return _provider({**rec, "id": cur.lastrowid})

    def _provider_id(self, conn: sqlite3.Connection, name: str | None) -> int | None:
        if name is None:
            return None
        row = conn.execute("SELECT id FROM providers WHERE name = ?", [name]).fetchone()
        if row is None:
            raise InputError(
                "provider", name, "no provider of that name (add it with `zuka provider add`)"
            )
        return int(row[0])

    # -- nodes ---------------------------------------------------------------------------

    _NODE_SELECT = (
        "SELECT n.*, p.name AS provider FROM nodes n LEFT JOIN providers p ON p.id = n.provider_id"
    )

    def nodes(
        self, states: Sequence[NodeState] | None = None, *, limit: int | None = None
    ) -> list[Node]:
        """Nodes by name; limit: the first `limit` of them in these states (read and
        checked alone: a first paint of a big fleet need not wait on every row)."""
        if limit is not None and states is not None:
            rows = self._rows(
                f"{self._NODE_SELECT} WHERE n.state IN ({', '.join('?' * len(states))})"
                " ORDER BY n.name LIMIT ?",
                [*(s.value for s in states), limit],
            )
            return [_node(r) for r in rows]
        rows = self._rows(f"{self._NODE_SELECT} ORDER BY n.name")
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
        rows = self._rows(
            f"{self._NODE_SELECT} WHERE n.name = ?"
            " ORDER BY n.state = 'released', n.id DESC LIMIT 1",
            [name],
        )
        if not rows:
            raise UnknownNode(name)
        return _node(rows[0])

    def node_by_id(self, node_id: int) -> Node | None:
        rows = self._rows(f"{self._NODE_SELECT} WHERE n.id = ?", [node_id])
        return _node(rows[0]) if rows else None

    def archived_nodes(self, name: str) -> list[Node]:
        """The released nodes that had this name, the latest first."""
        rows = self._rows(
            f"{self._NODE_SELECT} WHERE n.name = ? AND n.state = 'released' ORDER BY n.id DESC",
            [name],
        )
        return [_node(r) for r in rows]

    def _live_named(self, conn: sqlite3.Connection, name: str, other_than: int | None) -> bool:
        row = conn.execute(
            "SELECT 1 FROM nodes WHERE name = ? AND state != 'released' AND id IS NOT ?",
            [name, other_than],
        ).fetchone()
        return row is not None

    def add_node(self, node: Node, new_provider: Provider | None = None) -> Node:
        """Add a node, and in the same transaction the provider it names if that is new."""
        with self.transaction() as conn:
            if new_provider is not None:
                self._insert_provider(conn, new_provider)
            return self._insert_node(conn, node)

    def _insert_node(self, conn: sqlite3.Connection, node: Node) -> Node:
        if node.state is not NodeState.RELEASED and self._live_named(conn, node.name, None):
            raise InputError("name", node.name, "a node of that name already exists")
        rec = records.node_record(node)
        row = _node_row(rec, self._provider_id(conn, node.provider))
        cur = conn.execute(
            f"INSERT INTO nodes ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self._audit(conn, "node.add", "node", cur.lastrowid, node.name, None, rec)
        return _node({**row, "provider": node.provider, "id": cur.lastrowid})

    def update_node(
        self, name: str, changes: Mapping[str, Any], new_provider: Provider | None = None
    ) -> Node:
        """Change some fields of a node; the result is validated as a whole."""
        unknown = set(changes) - set(records.NODE_KEYS)
        if unknown:
            field = sorted(unknown)[0]
            raise InputError(field, changes[field], "not a node field")
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
                        f"its card_hour lease from {start} bills the node's GPUs (it has no"
                        f" --cards): give the lease its cards first (zuka lease edit {name}"
                        f" --start '{start}' --cards N)",
                    )
            if after_node.state is not NodeState.RELEASED and self._live_named(
                conn, after_node.name, current.id
            ):
                raise InputError("name", after_node.name, "a node of that name already exists")
            row = _node_row(after, self._provider_id(conn, after_node.provider))
            conn.execute(
                f"UPDATE nodes SET {', '.join(f'{k} = ?' for k in row)} WHERE id = ?",
                [*row.values(), current.id],
            )
            self._audit(conn, "node.edit", "node", current.id, after_node.name, before, after)
            return _node({**row, "provider": after_node.provider, "id": current.id})

    def archive_node(self, name: str) -> Node:
        """Mark a node released. Its leases must all have ended (see leases.ledger.release)."""
        return self.update_node(name, {"state": NodeState.RELEASED.value})

    def restore_node(self, name: str) -> Node:
        """Bring back the latest archived node of this name (state active)."""
        with self.transaction() as conn:
            archived = self.archived_nodes(name)
            if not archived:
                raise InputError("name", name, "no archived node of that name")
            node = archived[0]
            if self._live_named(conn, name, node.id):
                raise InputError(
                    "name",
                    name,
                    f"a live node {name} has this name: rename it first"
                    f" (`zuka node edit {name} --rename NEW_NAME`)",
                )
            before = records.node_record(node)
            after = {**before, "state": NodeState.ACTIVE.value}
            conn.execute("UPDATE nodes SET state = ? WHERE id = ?", [after["state"], node.id])
            self._audit(conn, "node.restore", "node", node.id, name, before, after)
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
                    f"has an open lease (from {start}): end it first (`zuka lease end {name}`)"
                    f", or if it was recorded by mistake, delete it"
                    f" (`zuka lease delete {name} --start '{start}'`)",
                )
            bundle = self._node_bundle(node)
            counts = {
                "leases": len(bundle["leases"]),
                "resources": sum(len(le["resources"]) for le in bundle["leases"]),
                **bundle["gpu_history"],
            }
            if any(counts.values()) and not force:
                raise InputError(
                    "node",
                    name,
                    f"is still referred to by {describe_counts(counts)}: give --force to"
                    " delete them with it",
                )
            for le in bundle["leases"]:
                conn.execute("DELETE FROM resources WHERE lease_id = ?", [le["id"]])
            conn.execute("DELETE FROM stops WHERE node_id = ?", [node.id])
            conn.execute("DELETE FROM leases WHERE node_id = ?", [node.id])
            for table in HISTORY_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE node_id = ?", [node.id])
            conn.execute("DELETE FROM nodes WHERE id = ?", [node.id])
            self._audit(conn, "node.delete", "node", node.id, name, bundle, None)
            return counts

    def _node_bundle(self, node: Node) -> Record:
        """A node's record with its leases and their resources (with ids, so that an undo
        puts them back as they were) and the count of its GPU history rows."""
        assert node.id is not None
        leases = self._rows("SELECT id FROM leases WHERE node_id = ? ORDER BY start", [node.id])
        return {
            **records.node_record(node),
            "leases": [self._lease_bundle(self._lease_by_id(r["id"])) for r in leases],
            "gpu_history": {
                table: self.conn.execute(
                    f"SELECT count(*) FROM {table} WHERE node_id = ?", [node.id]
                ).fetchone()[0]
                for table in HISTORY_TABLES
            },
        }

    # -- leases --------------------------------------------------------------------------

    _LEASE_SELECT = "SELECT l.*, n.name AS node FROM leases l JOIN nodes n ON n.id = l.node_id"

    def leases(
        self,
        node: str | Node | None = None,
        *,
        open_only: bool = False,
        node_ids: Sequence[int] | None = None,
    ) -> list[Lease]:
        """Leases by node and start (of a node: by name, see node(), or that very node;
        node_ids: of these nodes); open_only: those not ended by now (a renewed lease that
        runs until its end, and the renewal, are both open)."""
        where: list[str] = []
        params: list[Any] = []
        if node is not None:
            where.append("l.node_id = ?")
            params.append(node.id if isinstance(node, Node) else self.node(node).id)
        if node_ids is not None:
            where.append("l.node_id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(list(node_ids)))
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self._rows(f"{self._LEASE_SELECT}{clause} ORDER BY n.name, l.start", params)
        found = [_lease(r) for r in rows]
        if open_only:
            now = self.clock()
            found = [le for le in found if release.open_at(le, now)]
        return found

    def current_lease(self, node: str, at: datetime | None = None) -> Lease | None:
        """The lease that bills the node at `at` (default now); see in_effect."""
        return in_effect(self.leases(node), at or self.clock())

    def current_leases(self, at: datetime | None = None) -> dict[int | str, Lease]:
        """current_lease of every node that has one, by node id, in one read."""
        by_node: dict[int | str, list[Lease]] = {}
        for le in self.leases():
            by_node.setdefault(le.node_key, []).append(le)
        when = at or self.clock()
        found = {key: in_effect(group, when) for key, group in by_node.items()}
        return {key: le for key, le in found.items() if le is not None}

    def billing(
        self, at: datetime | None = None, node_ids: Sequence[int] | None = None
    ) -> dict[int | str, BillingNow]:
        """Of every node that has one (or of these nodes), by node id: the lease billing
        at `at` (default now) and the paid-until date of its renewal chain, in one read."""
        return billing_of(self.leases(node_ids=node_ids), at or self.clock())

    def readable_leases(self) -> tuple[list[Lease], list[str]]:
        """Every stored lease that reads, and in words each row that does not (a ledger
        edited by hand, imported, or written by an older zuka): one bad row costs itself,
        not the reader (the dashboard shows the rest)."""
        rows = self._rows(f"{self._LEASE_SELECT} ORDER BY n.name, l.start")
        return _readable(
            rows, _lease, lambda r: f"lease {r['id']} of node {visible(r['node'], 80)!r}"
        )

    def readable_providers(self) -> tuple[list[Provider], list[str]]:
        """As readable_leases, of providers."""
        rows = self._rows("SELECT * FROM providers ORDER BY name")
        return _readable(
            rows, _provider, lambda r: f"provider {r['id']} ({visible(r['name'], 80)!r})"
        )

    def add_lease(self, lease: Lease) -> Lease:
        with self.transaction() as conn:
            still = [s for s in self.stops(lease.node) if s.end is None]
            bound = lease.ended_at or lease.end  # None: it runs on, into the stop
            if still and (bound is None or still[0].start < bound):
                tz = lease.billing_tz
                raise InputError(
                    "node",
                    lease.node,
                    f"is recorded stopped since {fields.shown(still[0].start, tz)}: a new"
                    " lease would bill nothing while it is; record when it ran again first:"
                    f" zuka lease resume {lease.node} --at TIME",
                )
            return self._insert_lease(conn, lease)

    def _insert_lease(
        self, conn: sqlite3.Connection, lease: Lease, node: Node | None = None
    ) -> Lease:
        """Insert a lease on `node` (default: the node that has its name, see node())."""
        records.check_lease(lease)
        node = node or self.node(lease.node)
        release.check_lease_on(node, lease, self.clock())
        self._check_fits(node, lease, None)
        rec = records.lease_record(lease)
        row = _lease_row(rec, node.id)
        cur = conn.execute(
            f"INSERT INTO leases ({', '.join(_q(k) for k in row)})"
            f" VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self._audit(conn, "lease.add", "lease", cur.lastrowid, lease.node, None, rec)
        return _lease({**row, "node": lease.node, "id": cur.lastrowid})

    def _update_lease(self, conn: sqlite3.Connection, old: Lease, new: Lease, action: str) -> Lease:
        records.check_lease(new)
        before, after = records.lease_record(old), records.lease_record(new)
        row = _lease_row(after, None)
        conn.execute(
            f"UPDATE leases SET {', '.join(f'{_q(k)} = ?' for k in row)} WHERE id = ?",
            [*row.values(), old.id],
        )
        self._audit(conn, action, "lease", old.id, old.node, before, after)
        return replace(new, id=old.id, node_id=old.node_id)

    def end_lease(self, node: str, at: datetime | None = None) -> Lease:
        """Record that the node's open lease ended (released or handed back). Renewals of
        it that have not started by then end at their start: they never billed."""
        with self.transaction() as conn:
            leases = self.leases(node)
            lease = in_effect(leases, self.clock())
            if lease is None:
                raise InputError("node", node, "has no open lease to end")
            now = self.clock()
            # Released by the provider at its end, which passed: it ended then, not now
            # (`zuka lease end` said so and stored now, a month's row of nothing after).
            default = lease.end if lapsed(lease, now) and lease.end is not None else now
            when = (at or default).astimezone(lease.start.tzinfo)
            if when < lease.start:
                raise InputError(
                    "at",
                    fields.shown(when, lease.billing_tz),
                    f"is before the lease start {fields.shown(lease.start, lease.billing_tz)}",
                )
            if when > now + timedelta(minutes=5):
                raise InputError(
                    "at", fields.shown(when), "is in the future: record an end once it happened"
                )
            for later in cancelled_by_end(leases, lease, when):
                self._update_lease(conn, later, replace(later, ended_at=later.start), "lease.end")
            self._close_stop_at_end(conn, node, when, lease.billing_tz)
            return self._update_lease(conn, lease, replace(lease, ended_at=when), "lease.end")

    def _close_stop_at_end(
        self, conn: sqlite3.Connection, node: str, when: datetime, tz: str
    ) -> None:
        """A node recorded stopped when its lease ends is stopped no more as far as billing
        goes: its open stop ends there (else it would run on into the node's next lease and
        that lease would bill nothing). A stop recorded after the end is refused: the end
        or the stop is wrong."""
        from leases.ledger import stops as st

        found = self.stops(node)
        later = [s for s in found if s.start >= when]
        if later:
            raise InputError(
                "at",
                fields.shown(when, tz),
                f"{node} is recorded stopped from {fields.shown(later[0].start, tz)}, after"
                " this end: correct the stop (zuka undo) or give a later end",
            )
        for stop in (s for s in found if s.end is None):
            before = st.record(stop)
            after = st.record(replace(stop, end=when))
            conn.execute('UPDATE stops SET "end" = ? WHERE id = ?', [after["end"], stop.id])
            self._audit(conn, "stop.resume", "stop", stop.id, node, before, after)

    def renew_lease(
        self, node: str, end: datetime | str, changes: Mapping[str, Any] | None = None
    ) -> Lease:
        """A renewal is a new lease: the latest one ends at its end, the new one starts there."""
        with self.transaction() as conn:
            leases = self.leases(node)
            lease = leases[-1] if leases and leases[-1].ended_at is None else None
            if lease is None:
                raise InputError(
                    "node", node, "has no open lease to renew (add one with lease add)"
                )
            release.check_lease_on(self.node(node), lease, self.clock())
            if lease.end is None:
                raise InputError("node", node, "its open lease has no end date to renew from")
            new = records.lease_from(renewal_record(lease, end, changes or {}))
            if new.currency != lease.currency:
                raise InputError("currency", new.currency, _renewal_currency(lease, new.currency))
            self._update_lease(conn, lease, replace(lease, ended_at=lease.end), "lease.renew")
            return self._insert_lease(conn, new)

    def update_lease(
        self,
        node: str,
        changes: Mapping[str, Any],
        start: Any = None,
        *,
        whole_chain: bool = False,
    ) -> Lease:
        """Edit one lease of the node: the one starting at `start` (as `zuka lease list`
        prints it), by default the lease billing now (if none, the next to start: see
        in_effect). The result is validated as a whole, against the node's other leases
        as lease add checks a new one. An edit that changes nothing writes nothing.
        One renewal chain has one currency: a currency change to a lease of a chain of
        several is refused unless whole_chain, which records every lease of it so."""
        with self.transaction() as conn:
            if start in (None, ""):
                found = self.current_lease(node)
                if found is None:
                    raise InputError(
                        "node", node, "has no lease billing now or to come (pick one with --start)"
                    )
                lease = found
            else:
                lease = self._lease_for(node, start)
            new = records.lease_from({**records.lease_record(lease), **changes})
            if (
                lease.ended_at is not None
                and lease.ended_at == lease.end
                and "ended_at" not in changes
            ):
                # A renewed lease ends where its renewal starts: moving its end moves that
                # too, so an end moved into the renewal is an overlap, refused below.
                new = replace(new, ended_at=new.end)
            others = self._chain_recurrency(node, lease, new, whole_chain)
            if records.lease_record(new) == records.lease_record(lease):
                return lease
            self._check_fits(lease.node, new, lease.id, before=lease)
            edited = self._update_lease(conn, lease, new, "lease.edit")
            for le in others:
                self._update_lease(conn, le, replace(le, currency=new.currency), "lease.edit")
            return edited

    def _chain_recurrency(
        self, node: str, lease: Lease, new: Lease, whole_chain: bool
    ) -> list[Lease]:
        """The other leases of `lease`'s renewal chain that an edit to `new` records in
        its currency (whole_chain); refused when the currency changes in a chain of several
        without it (one chain, one currency), and whole_chain without a currency change."""
        if new.currency == lease.currency:
            if whole_chain:
                raise InputError(
                    "whole_chain",
                    None,
                    "changes only the currency of every lease of the chain: give --currency",
                )
            return []
        chain = chain_of(self.leases(node), lease)
        if len(chain) == 1 or whole_chain:
            return [le for le in chain if le.id != lease.id]
        tz = chain[0].billing_tz
        last = chain[-1].ended_at or chain[-1].end
        span = f"from {fields.shown(chain[0].start, tz)}" + (
            f" to {fields.shown(last, tz)}" if last else ""
        )
        name, cur = visible(lease.node), new.currency
        raise InputError(
            "currency",
            cur,
            f"this lease is one of the {len(chain)} leases of a renewal chain in"
            f" {lease.currency} ({span}), and one chain has one currency: if the chain was"
            f" recorded in the wrong currency, add --whole-chain to record all {len(chain)}"
            f" in {cur}; to rent on in {cur} from a date, end the lease and add a new one"
            f" (zuka lease end {name} --at WHEN, then zuka lease add {name} --currency {cur}"
            " --start WHEN ...)",
        )

    def _check_fits(
        self, node: str | Node, lease: Lease, lease_id: int | None, before: Lease | None = None
    ) -> None:
        """A lease (new or changed) against its node and the node's other leases. `before`:
        the lease as stored, for an edit (a row stored before a check existed stays
        editable in what that check is not about)."""
        found = node if isinstance(node, Node) else self.node(node)
        kept = before is not None and (before.billing_type, before.cards_billed) == (
            lease.billing_type,
            lease.cards_billed,
        )
        if not kept and lease.bills_node_gpus and not found.gpu_count:
            # Refused here, at every entry (lease add, edit, renew, the form, import): a
            # card-hour price times no known count cannot be billed, and once the node was
            # idle the forgotten-instance rule had nothing to multiply.
            raise InputError(
                "cards_billed",
                None,
                f"a card_hour lease is priced per card and {found.name} has no GPU count"
                f" recorded: give --cards N (or record the node's GPUs: zuka node edit"
                f" {found.name} --gpus N)",
            )
        if found.gpu_count and lease.cards_billed and lease.cards_billed > found.gpu_count:
            raise InputError(
                "cards_billed", lease.cards_billed, f"{found.name} has only {found.gpu_count} GPUs"
            )
        for other in self.leases(found):
            if other.id != lease_id and overlaps(other, lease):
                tz = other.billing_tz  # times as the tables and forms show them
                raise InputError(
                    "start",
                    fields.shown(lease.start, lease.billing_tz),
                    f"overlaps the lease from {fields.shown(other.start, tz)}"
                    + (f" to {fields.shown(other.end, tz)}" if other.end else " (still open)")
                    + ": end or renew that one instead",
                )

    def delete_lease(self, node: str, start: Any, *, force: bool = False) -> Record:
        """Delete a lease recorded by mistake; refused while resources refer to it unless
        force, which deletes them with it. Returns what went (the lease and resources)."""
        with self.transaction() as conn:
            if start in (None, ""):
                raise InputError("start", start, "give the lease's start (see `zuka lease list`)")
            lease = self._lease_for(node, start)
            bundle = self._lease_bundle(lease)
            if bundle["resources"] and not force:
                raise InputError(
                    "start",
                    start,
                    f"resources refer to this lease of {node}: "
                    f"{describe_resources(bundle['resources'])}; give --force to delete them"
                    " with it",
                )
            chain = chain_of(self.leases(node), lease)
            conn.execute("DELETE FROM resources WHERE lease_id = ?", [lease.id])
            conn.execute("DELETE FROM stops WHERE lease_id = ?", [lease.id])
            conn.execute("DELETE FROM leases WHERE id = ?", [lease.id])
            self._audit(conn, "lease.delete", "lease", lease.id, lease.node, bundle, None)
            # The last renewal of a chain gone, the lease it renewed runs on as before the
            # renewal (renew_lease ended it at its end): else it reads ended on a future
            # day, `lease renew` refuses it and `node archive` says it is open.
            if len(chain) > 1 and chain[-1].id == lease.id:
                before = chain[-2]
                reopened = self._update_lease(
                    conn, before, replace(before, ended_at=None), "lease.reopen"
                )
                bundle["reopened"] = records.lease_record(reopened)
            return bundle

    def _lease_by_id(self, lease_id: int) -> Lease:
        rows = self._rows(f"{self._LEASE_SELECT} WHERE l.id = ?", [lease_id])
        return _lease(rows[0])

    def _lease_bundle(self, lease: Lease) -> Record:
        """A lease's record with its id and its resources' records (with ids)."""
        resources = self._resource_rows(" WHERE r.lease_id = ?", [lease.id])
        bundle: Record = {
            "id": lease.id,
            **records.lease_record(lease),
            "resources": [{"id": res.id, **rec} for res, rec in resources],
        }
        # Its stops go (and an undo brings them back) with it; the key only where there
        # are some, so that bundles written before stops were kept still compare equal.
        stops = self._rows("SELECT * FROM stops WHERE lease_id = ? ORDER BY start", [lease.id])
        if stops:
            bundle["stops"] = stops
        return bundle

    # -- stops (leases.ledger.stops) ------------------------------------------------------------

    def stops(
        self, node: str | Node | None = None, *, node_ids: Sequence[int] | None = None
    ) -> list[LeaseStop]:
        """Recorded stops by start (of one node: by name, see node(), or that very node;
        node_ids: of these nodes). A row that does not read (a ledger edited behind zuka's
        back) is refused naming it: a stop dropped silently would bill a stopped node."""
        from leases.ledger import stops as st

        where, params = "", []
        if node is not None:
            found = node if isinstance(node, Node) else self.node(node)
            node_ids = [found.id or 0]
        if node_ids is not None:
            where = " WHERE s.node_id IN (SELECT value FROM json_each(?))"
            params = [json.dumps(list(node_ids))]
        rows = self._rows(
            "SELECT s.*, n.name AS node FROM stops s JOIN nodes n ON n.id = s.node_id"
            f"{where} ORDER BY s.start",
            params,
        )
        out = []
        for r in rows:
            try:
                out.append(st.from_row(r))
            except InputError as exc:
                raise InputError(f"stop {r['id']}: {exc.field}", exc.value, exc.reason) from None
        return out

    def stop_spans(self, lease_id: int | None = None) -> dict[int, tuple[Stop, ...]]:
        """Every lease's stops for billing (or of that one lease), by lease id
        (leases.ledger.stops.by_lease): what each caller of leases.money.billing passes as
        `stops`."""
        from leases.ledger import stops as st

        sql, params = "SELECT id, node_id FROM leases", []
        if lease_id is not None:
            sql, params = sql + " WHERE id = ?", [lease_id]
        lease_node = dict(self.conn.execute(sql, params).fetchall())
        node_ids = None if lease_id is None else list(lease_node.values())
        return st.by_lease(self.stops(node_ids=node_ids), lease_node)

    def stop_node(
        self, node: str, at: datetime | None = None, *, source: str = "hand"
    ) -> LeaseStop:
        """Record that the node was stopped at `at` (default now), under the lease running
        then. Refused (nothing written) in the future, outside every lease of the node,
        while it is recorded stopped, or overlapping a stop recorded."""
        from leases.ledger import stops as st

        with self.transaction() as conn:
            target = self.node(node)
            assert target.id is not None
            now = self.clock()
            when = at or now
            st.check_not_future("at", when, now)
            leases = self.leases(target)
            lease = st.lease_for_stop(target.name, leases, when)
            assert lease.id is not None
            st.check_stop(target.name, when, self.stops(target), lease.billing_tz)
            stop = st.LeaseStop(target.id, lease.id, when, None, source, self.actor, target.name)
            rec = st.record(stop)
            cur = conn.execute(
                'INSERT INTO stops (node_id, lease_id, start, "end", source, who)'
                " VALUES (?, ?, ?, ?, ?, ?)",
                [stop.node_id, stop.lease_id, rec["start"], None, source, self.actor],
            )
            self._audit(conn, "stop.add", "stop", cur.lastrowid, target.name, None, rec)
            return replace(stop, id=cur.lastrowid)

    def resume_node(
        self, node: str, at: datetime | None = None, *, source: str = "hand"
    ) -> LeaseStop:
        """Record that the stopped node runs again from `at` (default now): the end of its
        open stop. Refused (nothing written) in the future, when it is not recorded
        stopped, or at or before the stop's start."""
        from leases.ledger import stops as st

        with self.transaction() as conn:
            target = self.node(node)
            now = self.clock()
            when = at or now
            st.check_not_future("at", when, now)
            found = [s for s in self.stops(target) if s.end is None]
            tz = next((le.billing_tz for le in self.leases(target)), fields.DEFAULT_TZ)
            stop = st.check_resume(target.name, when, found[0] if found else None, tz)
            before = st.record(stop)
            ended = replace(stop, end=when)
            after = st.record(ended)
            conn.execute('UPDATE stops SET "end" = ? WHERE id = ?', [after["end"], stop.id])
            self._audit(conn, "stop.resume", "stop", stop.id, target.name, before, after)
            return ended

    # -- resources -----------------------------------------------------------------------

    def add_resource(self, node: str, rec: Mapping[str, Any]) -> Resource:
        """Attach a resource to a lease of the node, ended ones included (see _lease_for).
        A priced one (a storage line) created before its lease began is refused: its
        storage would be billed to the lease from then, years before it, say."""
        with self.transaction() as conn:
            res = self._insert_resource(conn, node, rec)
            lease = self._lease_by_id(res.lease_id)
            if res.created is not None and res.created > self.clock() + timedelta(minutes=5):
                raise InputError(
                    "created",
                    fields.shown(res.created, lease.billing_tz),
                    "is in the future: record when it was created",
                )
            if res.price is not None and res.created is not None and res.created < lease.start:
                tz = lease.billing_tz
                raise InputError(
                    "created",
                    fields.shown(res.created, tz),
                    f"is before its lease's start ({fields.shown(lease.start, tz)}): its storage"
                    " would be billed to this lease from then; give when it began billing for"
                    " this lease, or record it on the lease it was created in (--lease-start)",
                )
            return res

    def _lease_for(self, node: str, lease_start: Any, target: Node | None = None) -> Lease:
        """The lease of `node` (or of that very node, target) that `lease_start` names
        (see fields.names_start), ended or not. None names the lease billing now, or if
        none is, the latest that started (renewals.resource_default): snapshots are usually
        recorded at the end of a lease, after it ended."""
        leases = self.leases(target or node)
        if not leases:
            raise InputError(
                "node", node, f"has no lease to attach it to: add one: zuka lease add {node}"
            )
        if lease_start is None:
            return resource_default(leases, self.clock()) or leases[-1]
        value = lease_start if isinstance(lease_start, datetime) else str(lease_start)
        named = [
            le for le in leases if fields.names_start("lease_start", value, le.start, le.billing_tz)
        ]
        if len(named) == 1:
            return named[0]
        starts = ", ".join(le.start.strftime("%Y-%m-%d %H:%M") for le in named or leases)
        reason = (
            f"names more than one lease of {node} ({starts}): give the time"
            if named
            else f"no lease of {node} starts then (its leases start {starts})"
        )
        raise InputError("lease_start", value, reason)

    def _insert_resource(
        self,
        conn: sqlite3.Connection,
        node: str,
        rec: Mapping[str, Any],
        target: Node | None = None,
    ) -> Resource:
        lease = self._lease_for(node, rec.get("lease_start"), target)
        assert lease.id is not None
        res = records.resource_from(rec, lease.id, lease.billing_tz)
        if conn.execute(
            "SELECT 1 FROM resources WHERE lease_id = ? AND kind = ? AND native_id = ?",
            [lease.id, res.kind.value, res.native_id],
        ).fetchone():
            raise InputError(
                "native_id", res.native_id, f"this {res.kind.value} is already recorded"
            )
        self._refuse_overlap(conn, res, lease)
        out = records.resource_record(res, node, lease.start)
        row = {k: v for k, v in out.items() if k not in ("node", "lease_start")}
        row["lease_id"] = lease.id
        cur = conn.execute(
            f"INSERT INTO resources ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self._audit(conn, "resource.add", "resource", cur.lastrowid, node, None, out)
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
                "new_id", fixed.native_id, f"this {fixed.kind.value} is already recorded"
            )
        self._refuse_overlap(conn, fixed, self._lease_by_id(res.lease_id), apart=res.id)

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
                f"{first.first.shown()} is still recorded ({first.why}): offboarding one lease"
                " would delete the other's; mark the old one deleted and verified first"
                " (zuka resource edit ... --deleted --verified --notes ...)",
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
            for res, rec in self._resource_rows(clause, params)
        ]

    def readable_resources(self) -> tuple[list[tuple[str, datetime, Resource]], list[str]]:
        """As resources(), of every row that reads; in words, each one that does not."""

        def read(r: dict[str, Any]) -> tuple[str, datetime, Resource]:
            res = replace(records.resource_from(r, r["lease_id"], r["tz"]), id=r["id"])
            return r["node"], _moment(r["lease_start"]), res

        rows = self._resource_row_dicts("", [])
        return _readable(rows, read, lambda r: f"resource {r['id']} of node {_named(r['node'])}")

    def _resource_row_dicts(self, clause: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT r.*, n.name AS node, l.start AS lease_start, l.billing_tz AS tz"
            " FROM resources r JOIN leases l ON l.id = r.lease_id JOIN nodes n ON n.id = l.node_id"
            f"{clause} ORDER BY n.name, l.start, r.kind, r.native_id",
            params,
        )

    def _resource_rows(self, clause: str, params: Sequence[Any]) -> list[tuple[Resource, Record]]:
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
            raise InputError(field, changes[field], "cannot be changed by resource edit")
        if not changes:
            raise InputError("resource edit", native_id, "nothing to change: give an option")
        with self.transaction() as conn:
            node_id = self.node(node).id
            clause = " WHERE n.id = ? AND r.kind = ? AND r.native_id = ?"
            params: list[Any] = [node_id, kind, native_id]
            if lease_start not in (None, ""):
                clause += " AND r.lease_id = ?"
                params.append(self._lease_for(node, lease_start).id)
            found = self._resource_rows(clause, params)
            if not found:
                raise InputError(
                    "native_id", native_id, f"no {kind} {native_id} recorded on {node}"
                )
            if len(found) > 1:
                starts = ", ".join(rec["lease_start"] for _, rec in found)
                raise InputError(
                    "native_id",
                    native_id,
                    f"recorded on several leases of {node} ({starts}): give --lease-start",
                )
            res, before = found[0]
            tz = self._lease_by_id(res.lease_id).billing_tz
            now = self.clock().replace(microsecond=0)
            after = dict(before)
            for key in ("deleted_at", "verified_at"):
                if key in changes:
                    value = changes[key]
                    when = now if value == "now" else fields.moment(key, value, tz)
                    if when > now + timedelta(minutes=5):
                        raise InputError(key, fields.shown(when, tz), "is in the future")
                    after[key] = when.astimezone(fields.timezone(tz, "billing_tz")).isoformat()
            if "notes" in changes:
                after["notes"] = changes["notes"]
            fixed = {k: v for k, v in changes.items() if k in _CORRECTIONS}
            if fixed and (res.deleted_at is not None or res.verified_at is not None):
                raise InputError(
                    sorted(fixed)[0],
                    next(iter(fixed.values())),
                    f"{kind} {native_id} is marked deleted: its record is evidence now, not"
                    " corrected; record the right one with zuka resource add",
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
            self._audit(conn, "resource.edit", "resource", res.id, before["node"], before, after)
            return after

    # -- audit ---------------------------------------------------------------------------

    def history(self, node: str | None = None, *, archived: bool = False) -> list[AuditEntry]:
        """The audit log; of one node: its entries whatever it was called then (see
        leases.ledger.nodelog), for the node that has the name now, or with archived, the latest
        archived node of that name. A deleted node's entries are found by its name."""
        everything = [_audit_entry(r) for r in self._rows("SELECT * FROM audit ORDER BY id")]
        if node is None:
            return everything
        if archived:
            found = self.archived_nodes(node)
            if not found:
                raise InputError("node", node, "no archived node of that name")
            target: Node | None = found[0]
        else:
            try:
                target = self.node(node)
            except UnknownNode:
                target = None
        if target is None or target.id is None:
            # A deleted or renamed name: the lineage of the node last called so only.
            by_name = nodelog.name_entries(everything, node)
            if not by_name:
                raise UnknownNode(node)
            return by_name
        return nodelog.node_entries(everything, target.id)

    def renamed(self, name: str) -> tuple[str, datetime] | None:
        """For a name no node has: (the name the node once called so has now, when it was
        renamed away); None when a node has the name, or it was deleted, or never was."""
        try:
            self.node(name)
            return None
        except UnknownNode:
            pass
        everything = [_audit_entry(r) for r in self._rows("SELECT * FROM audit ORDER BY id")]
        found = nodelog.renamed(everything, name)
        return (found[0], found[1].at) if found else None

    def last_entries(self, n: int) -> list[AuditEntry]:
        """The log's last n entries, in order."""
        rows = self._rows("SELECT * FROM audit ORDER BY id DESC LIMIT ?", [n])
        return [_audit_entry(r) for r in reversed(rows)]

    def verify_audit(self, anchor: tuple[int, str] | None = None) -> auditchain.ChainReport:
        """Check the audit log's hash chain and the triggers that guard it."""
        # The ledger has no triggers but these: any other one (a RAISE(IGNORE) that drops
        # audit rows, one that rewrites a node after each edit) is tampering too.
        found = dict(
            self.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        )
        missing = [name for name, sql in AUDIT_TRIGGERS.items() if found.get(name) != sql]
        missing += [f"unexpected trigger {name}" for name in found if name not in AUDIT_TRIGGERS]
        cur = self.conn.execute("SELECT * FROM audit ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = (dict(zip(names, values, strict=True)) for values in cur)
        return auditchain.verify(rows, triggers_missing=missing, anchor=anchor)

    # -- export / import -----------------------------------------------------------------

    def export_records(self) -> dict[str, list[Record]]:
        """Every record; nodes, leases and resources with the node_key of their node (see
        leases.ledger.transfer: a reused name does not say which node)."""
        nodes = self.nodes()
        keys = transfer.node_keys(nodes)
        lease_node = dict(self.conn.execute("SELECT id, node_id FROM leases").fetchall())
        leases = self.leases()
        lease_of = {le.id: le for le in leases}
        key = transfer.NODE_KEY
        return {
            "providers": [records.provider_record(p) for p in self.providers()],
            "nodes": [{**records.node_record(n), key: keys[n.id or 0]} for n in nodes],
            "leases": [{**records.lease_record(le), key: keys[lease_node[le.id]]} for le in leases],
            "resources": [
                {**records.resource_record(r, n, s), key: keys[lease_node[r.lease_id]]}
                for n, s, r in self.resources()
            ],
            "stops": [
                {**self._stop_record(s, lease_of.get(s.lease_id)), key: keys[s.node_id]}
                for s in self.stops()
            ],
        }

    def _stop_record(self, stop: LeaseStop, lease: Lease | None) -> Record:
        """A stop as an export holds it: its lease by the node and the lease's start."""
        from leases.ledger import stops as st

        rec = st.record(stop)
        return {
            "node": stop.node,
            "lease_start": None if lease is None else lease.start.isoformat(),
            **{k: rec[k] for k in ("start", "end", "source", "who")},
        }

    def _insert_stop(
        self, conn: sqlite3.Connection, rec: Mapping[str, Any], target: Node | None
    ) -> LeaseStop:
        """An imported stop, under the lease its record names: refused before that lease's
        start, overlapping a stop of the node, or open while another is."""
        from leases.ledger import stops as st

        node = str(rec.get("node") or "")
        lease = self._lease_for(node, rec.get("lease_start"), target)
        assert lease.id is not None and lease.node_id is not None
        who = fields.text("who", str(rec.get("who") or ""), 100)
        stop = st.from_row({**rec, "who": who, "node_id": lease.node_id, "lease_id": lease.id})
        tz = lease.billing_tz
        if stop.start < lease.start:
            raise InputError(
                "start",
                fields.shown(stop.start, tz),
                f"is before its lease's start {fields.shown(lease.start, tz)}",
            )
        for s in self.stops(node_ids=[lease.node_id]):
            if (stop.end is None or s.start < stop.end) and (s.end is None or s.end > stop.start):
                raise InputError(
                    "start",
                    fields.shown(stop.start, tz),
                    f"overlaps the stop of {node} recorded from {fields.shown(s.start, tz)}",
                )
        out = st.record(replace(stop, node=node))
        cur = conn.execute(
            'INSERT INTO stops (node_id, lease_id, start, "end", source, who)'
            " VALUES (?, ?, ?, ?, ?, ?)",
            [stop.node_id, stop.lease_id, out["start"], out["end"], stop.source, who],
        )
        self._audit(conn, "stop.add", "stop", cur.lastrowid, node, None, out)
        return replace(stop, id=cur.lastrowid)

    def import_records(self, data: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, int]:
        """Add everything in an export to this ledger, all or nothing. A lease or resource
        goes to the node of the export it belongs to (see transfer.node_links), never to
        another node of the same name; one whose node is not in the export, to the node
        of that name in the ledger. An error names the record: "lease 2: end" is the
        second lease of the file, counting from 1."""
        counts = {k: 0 for k in ("providers", "nodes", "leases", "resources", "stops")}
        links = transfer.node_links(data)
        added: list[Node] = []

        def node_of(kind: str, i: int) -> Node | None:
            at = links[kind][i]
            return None if at is None else added[at]

        with self.transaction() as conn:
            for kind, insert in (
                ("providers", lambda i, r: self._insert_provider(conn, records.provider_from(r))),
                ("nodes", lambda i, r: added.append(self._insert_node(conn, records.node_from(r)))),
                (
                    "leases",
                    lambda i, r: self._insert_lease(
                        conn, records.lease_from(r), node_of("leases", i)
                    ),
                ),
                (
                    "resources",
                    lambda i, r: self._insert_resource(
                        conn, str(r.get("node")), r, node_of("resources", i)
                    ),
                ),
                ("stops", lambda i, r: self._insert_stop(conn, r, node_of("stops", i))),
            ):
                for i, rec in enumerate(data.get(kind, ())):
                    try:
                        insert(i, rec)
                    except InputError as exc:
                        raise InputError(
                            f"{kind[:-1]} {i + 1}: {exc.field}", exc.value, exc.reason
                        ) from None
                    counts[kind] += 1
            # One entry that says an import happened: `zuka undo` refuses to take it apart.
            self._audit(conn, "import", "ledger", None, None, None, counts)
        return counts


def _audit_entry(r: Mapping[str, Any]) -> AuditEntry:
    """One audit row as an entry; a row that cannot be read (forged, damaged) becomes an
    entry that says so instead of stopping `zuka log`."""
    problems: list[str] = []

    def change(key: str) -> dict[str, object] | None:
        raw = r.get(key)
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except (TypeError, ValueError):
            problems.append(f"{key} is not JSON")
            return None
        if not isinstance(value, dict):
            problems.append(f"{key} is not an object")
            return None
        return value

    try:
        at = datetime.fromisoformat(str(r.get("at")))
        if at.tzinfo is None:
            raise ValueError
    except ValueError:
        problems.append("its time is unreadable")
        at = datetime.min.replace(tzinfo=UTC)
    entity_id = r.get("entity_id")
    node = r.get("node")
    return AuditEntry(
        at=at,
        action=str(r.get("action") or ""),
        entity=str(r.get("entity") or ""),
        entity_id=entity_id if isinstance(entity_id, int) else None,
        node=node if isinstance(node, str) else None,
        before=change("before"),
        after=change("after"),
        actor=str(r.get("actor") or ""),
        id=r.get("id") if isinstance(r.get("id"), int) else None,
        problem="; ".join(problems),
        batch=r.get("batch") if isinstance(r.get("batch"), int) else None,
    )


def _whoami() -> str:
    """The user this process runs as, from its uid: $LOGNAME and $USER can say anything."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return str(os.getuid())


_SQLITE_MAGIC = b"SQLite format 3\x00"

# Ledger files this process has open, by (device, inode), with how many connections.
# POSIX record locks belong to the process, and closing ANY descriptor of a file drops all
# of them: SQLite's own descriptors are managed for that, but a header check that opened
# and closed the file beside an open connection let another process's last close delete
# the -wal under it. So the header is read only while no connection of ours has the file
# open, and opens and closes are serialised (_OPENING).
_OPENING = threading.RLock()
_HELD: dict[tuple[int, int], int] = {}


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _hold(path: Path) -> tuple[int, int] | None:
    key = _inode(path)
    if key is not None:
        _HELD[key] = _HELD.get(key, 0) + 1
    return key


def _release(key: tuple[int, int]) -> None:
    left = _HELD.get(key, 0) - 1
    if left > 0:
        _HELD[key] = left
    else:
        _HELD.pop(key, None)


T = TypeVar("T")


def _readable(
    rows: Sequence[dict[str, Any]],
    read: Callable[[dict[str, Any]], T],
    which: Callable[[dict[str, Any]], str],
) -> tuple[list[T], list[str]]:
    """The rows that read, and in words each one that does not ('<which>: not read: why')."""
    found: list[T] = []
    problems: list[str] = []
    for r in rows:
        try:
            found.append(read(r))
        except UNREADABLE as exc:
            problems.append(f"{which(r)} not read: {unreadable(exc)}")
    return found, problems


def _named(name: object) -> str:
    return repr(visible(name, 80))


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


# Tables every zuka ledger has had since its first migration.
_LEDGER_TABLES = frozenset({"_sqlite_migrations", "providers", "nodes", "leases", "audit"})


def _connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """The ledger opened for writing: refused early, in words, when it cannot be written."""
    if create:
        _create_private(path)
    _check_file(path, create=create)
    _check_writable(path)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S)
    try:
        _check_tables(conn, path, create=create)
        _prepare(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_reading(path: Path) -> sqlite3.Connection:
    """The ledger for a command that only reads. Where it can be written it is opened as
    for writing: upgraded if need be, and its last connection tidies the -wal and -shm
    files away (a read-only connection leaves them). Elsewhere, or when that open fails
    (a full disk), read-only."""
    if _writable(path):
        try:
            return _connect(path, create=False)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise  # it waited out the busy timeout once already: a second wait is no use
    return _connect_readonly(path)


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """The ledger opened read-only (SQLite's mode=ro); it cannot be upgraded here."""
    _check_file(path, create=False)
    uri = f"file:{quote(str(path))}?mode=ro"
    wal = _companion(path, "-wal")
    # An empty -wal (one a failed read-only open left) holds nothing the main file lacks.
    had_wal = wal.exists() and wal.stat().st_size > 0
    conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        # A WAL reader needs the -shm file beside the ledger, which a read-only directory
        # or a full disk will not let SQLite create. With no -wal file, or an empty one,
        # all of the ledger is in the main file: then it is read as immutable (no locks,
        # no -shm). With WAL content, a writer may be at work: not safe, the error stands.
        if had_wal:
            raise
        conn = sqlite3.connect(uri + "&immutable=1", uri=True)
    try:
        _check_tables(conn, path, create=False)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError(_newer(version))
        if version < SCHEMA_VERSION:
            raise LedgerError(
                f"{path}: needs an upgrade to this zuka's schema (version {version} to "
                f"{SCHEMA_VERSION}) but is {READ_ONLY.split(';')[0]}; run zuka once where "
                "it can write the file"
            )
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn


def _companion(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _writable(path: Path) -> bool:
    """Whether this user can write the ledger: the file, and its directory unless the WAL
    companions exist already (SQLite creates them there). Catches chmod, chattr +i and
    read-only mounts, for root too, before any write is tried."""
    eff = os.access in os.supports_effective_ids
    if not os.access(path, os.W_OK, effective_ids=eff):
        return False
    if _companion(path, "-wal").exists() and _companion(path, "-shm").exists():
        return True
    return os.access(path.parent, os.W_OK | os.X_OK, effective_ids=eff)


def _check_writable(path: Path) -> None:
    if not _writable(path):
        raise LedgerError(f"{path}: {READ_ONLY}")


def _check_file(path: Path, *, create: bool) -> None:
    """Refuse, before anything is written to it, a file that is not a zuka ledger: a
    directory, a device, or an empty file a read-only command was pointed at."""
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise LedgerError(f"{path}: is {what}, so not a zuka ledger: give the ledger's file")
    if _inode(path) in _HELD:
        return  # open here already, so checked; reading it now would drop our locks
    with path.open("rb") as fh:
        head = fh.read(len(_SQLITE_MAGIC))
    if not head:
        if create:
            path.chmod(0o600)  # a new ledger: ours to set up, private like every ledger
            return
        raise LedgerError(f"{path}: is an empty file, not a zuka ledger")
    if head != _SQLITE_MAGIC:
        raise LedgerError(f"{path}: is not an SQLite database, so not a zuka ledger")


def _check_tables(conn: sqlite3.Connection, path: Path, *, create: bool) -> None:
    """Refuse another application's database before anything is written to it."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and create:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            return
        raise LedgerError(
            f"{path}: is an empty database marked by another application (user_version"
            f" {version}), not a zuka ledger; refusing to touch it"
        )
    if not tables:
        raise LedgerError(f"{path}: is an empty database, not a zuka ledger")
    missing = _LEDGER_TABLES - tables
    if missing:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise LedgerError(
            f"{path}: is not a zuka ledger (another application's database? its tables: "
            f"{shown}); refusing to touch it"
        )


def _prepare(conn: sqlite3.Connection, attempts: int = 50) -> None:
    """WAL, pragmas and migrations. Switching a new file to WAL while another process does
    the same can answer "database is locked" without waiting for the busy timeout, so
    that one case is retried for a few seconds."""
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    for attempt in range(attempts):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn)
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 + 0.05 * random.random())


def _migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise LedgerError(_newer(version))
    from sqlite_utils import Database

    from leases.ledger.schema import MIGRATIONS

    db = Database(conn, execute_plugins=False)
    # A migration that rebuilds a table (m005) needs foreign keys off, and the pragma is
    # ignored inside a transaction: off here, checked by the migration, on again below.
    conn.execute("PRAGMA foreign_keys = OFF")
    # Two processes opening a new ledger at once (a dashboard and a collector): the write
    # lock makes the second wait, then find nothing pending (apply re-reads what is applied).
    conn.execute("BEGIN IMMEDIATE")
    try:
        known = {m.name for m in MIGRATIONS._migrations}
        applied = {m.name for m in MIGRATIONS.applied(db)}
        if applied - known:
            raise LedgerError(
                f"this ledger was written by a newer zuka (migrations {sorted(applied - known)})"
            )
        MIGRATIONS.apply(db)
        conn.execute(f"PRAGMA user_version = {len(known)}")
    except BaseException:
        conn.rollback()
        conn.execute("PRAGMA foreign_keys = ON")
        raise
    conn.commit()
    conn.execute("PRAGMA foreign_keys = ON")


def _newer(version: int) -> str:
    return (
        f"this ledger was written by a newer zuka (schema {version}, this one knows "
        f"{SCHEMA_VERSION}): upgrade zuka"
    )


def _q(column: str) -> str:
    return f'"{column}"'


def _moment(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


def _plural(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"


def describe_counts(counts: Mapping[str, int]) -> str:
    """'2 leases, 1 resource, 3 gpu_minute rows' from delete_node's counts (zeros left out)."""
    nouns = {"leases": "lease", "resources": "resource"}
    parts = [_plural(n, nouns.get(k, f"{k} row")) for k, n in counts.items() if n]
    return ", ".join(parts) or "nothing"


def describe_resources(rows: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r['kind']} {visible(r['native_id'], 80)}" for r in rows)


def _shown(iso: str) -> str:
    """A stored time (ISO, in the lease's billing zone) as messages print it."""
    return fields.shown(_moment(iso).replace(tzinfo=None))  # already in the billing zone


def _check_marks(before: Record, after: Record, changes: Mapping[str, Any]) -> None:
    """The rules of marking a resource deleted and verified by hand."""
    if "deleted_at" in changes and after["deleted_at"] is not None:
        deleted = _moment(after["deleted_at"])
        for key, what in (("lease_start", "its lease's start"), ("created", "its creation")):
            if after.get(key) and deleted < _moment(after[key]):
                raise InputError(
                    "deleted_at",
                    _shown(after["deleted_at"]),
                    f"is before {what} {_shown(after[key])}",
                )
    if after["verified_at"] is None:
        return
    if after["deleted_at"] is None:
        raise InputError(
            "verified_at",
            _shown(after["verified_at"]),
            "the resource is not marked deleted: give --deleted",
        )
    if _moment(after["verified_at"]) < _moment(after["deleted_at"]):
        raise InputError(
            "verified_at",
            _shown(after["verified_at"]),
            f"is before its deletion {_shown(after['deleted_at'])}",
        )
    if (
        after["verified_at"] != before["verified_at"]
        and not str(changes.get("notes") or "").strip()
    ):
        raise InputError(
            "notes",
            None,
            "marking a resource verified by hand needs a note saying how it was checked",
        )


def _renewal_currency(lease: Lease, currency: str) -> str:
    """Why a renewal in another currency is refused, and what to do instead."""
    assert lease.end is not None
    name, start = visible(lease.node), fields.shown(lease.end, lease.billing_tz)
    return (
        f"a renewal is billed in its lease's currency ({lease.currency}): one renewal chain"
        f" has one currency. To rent on in {currency}, add a new lease from the end instead"
        f" (zuka lease add {name} --currency {currency} --start '{start}' ...); if the lease"
        f" was recorded in the wrong currency, correct its chain first (zuka lease edit"
        f" {name} --currency {currency} --whole-chain)"
    )


def billing_of(leases: Sequence[Lease], at: datetime) -> dict[int | str, BillingNow]:
    """Of every node that has one among leases, by its Lease.node_key (its id; a released
    node's name may be reused, and the two nodes' leases never mix): the lease billing at
    `at` and the paid-until date of its renewal chain."""
    by_node: dict[int | str, list[Lease]] = {}
    for le in leases:
        by_node.setdefault(le.node_key, []).append(le)
    found = {key: billing_now(group, at) for key, group in by_node.items()}
    return {key: b for key, b in found.items() if b is not None}


def _node_row(rec: Record, provider_id: int | None) -> Record:
    row = {k: v for k, v in rec.items() if k != "provider"}
    row["tags"] = json.dumps(rec["tags"], ensure_ascii=False)
    row["provider_id"] = provider_id
    return row


def _lease_row(rec: Record, node_id: int | None) -> Record:
    row = {k: v for k, v in rec.items() if k != "node"}
    if node_id is not None:
        row["node_id"] = node_id
    return row


def _provider(row: Mapping[str, Any]) -> Provider:
    return replace(records.provider_from(row), id=row["id"])


def _node(row: Mapping[str, Any]) -> Node:
    rec = dict(row)
    # Not JSON: left as stored, refused (and said) by stored_node.
    with suppress(TypeError, ValueError):
        rec["tags"] = json.loads(row["tags"])
    return replace(records.stored_node(rec), id=row["id"])


def _lease(row: Mapping[str, Any]) -> Lease:
    return replace(records.lease_from(row), id=row["id"], node_id=row["node_id"])
