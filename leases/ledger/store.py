"""The SQLite ledger: every rented node, its leases and the resources that belong to them,
with an append-only audit log of every change.

One writer transaction per change (BEGIN IMMEDIATE), WAL mode so that a dashboard and a
collector can share the file, mode 0600 because the file says where the lab's machines are.

A Ledger is one class built in layers, one module an entity, each layer a base of the
next: the connection and its transactions (leases.ledger.connection), the audit log
(audit), providers (provider_rows), nodes (node_rows), leases (lease_rows), stops
(stop_rows), resources (resource_rows), the books (book_rows: deposit refunds, invoices,
balances, bills, offers); here, opening one and what spans them all,
export and import. Layers rather than objects the Ledger holds, because the entities'
checks call each other both ways (a node's edit reads its leases, a lease's add reads its
node and its stops) and every caller keeps one object, `ledger.add_lease(...)`; where a
layer calls a later one, it declares that method under TYPE_CHECKING, and mypy checks the
two agree. Opening the file is leases.ledger.files'; where it is, leases.ledger.paths'.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from leases.core.clock import Clock, utc_now
from leases.core.errors import InputError, ledger_failure
from leases.core.models import Node
from leases.ledger import files, records, transfer
from leases.ledger.book_rows import BookRows
from leases.ledger.books import BOOKS
from leases.ledger.records import Record


class Ledger(BookRows):
    """Reads and writes of the ledger. Construct with Ledger.open()."""

    @classmethod
    def open(
        cls,
        path: str | Path | None,
        *,
        create: bool = True,
        readonly: bool = False,
        clock: Clock = utc_now,
        actor: str | None = None,
        origin: str | None = None,
        action: str | None = None,
        lab_init: bool = False,
    ) -> Ledger:
        """Open (and if allowed, create) a ledger. path None means an in-memory ledger.

        With create=False a missing file is not created: an empty in-memory ledger stands
        in, so read-only commands never leave a file behind. With readonly=True (commands
        that only read) the file is opened read-only, so that a ledger this user cannot
        write still answers; it is upgraded first only where it can be written.
        Any OS or SQLite failure is a LedgerError of one line naming the file. A ledger in
        a lab's folder is refused in the lab's words (leases.ledger.labfiles): action, the
        command's words, is what a refused write names; lab_init (`zuka lab init` alone)
        may create it there.
        """
        if path is None or ((readonly or not create) and not files.exists(Path(path))):
            return cls(files.in_memory(), clock=clock, actor=actor, origin=origin)
        path = Path(path)
        try:
            conn, held, lab = files.open_file(
                path, readonly=readonly, create=create, action=action, lab_init=lab_init
            )
        except (OSError, sqlite3.Error) as exc:
            raise ledger_failure(path, exc) from exc
        ledger = cls(conn, clock=clock, actor=actor, path=path, origin=origin)
        ledger._held = held
        ledger.lab = lab
        return ledger

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
            **self.book_exports(),
        }

    def import_records(self, data: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, int]:
        """Add everything in an export to this ledger, all or nothing. A lease or resource
        goes to the node of the export it belongs to (see transfer.node_links), never to
        another node of the same name; one whose node is not in the export, to the node
        of that name in the ledger. An error names the record: "lease 2: end" is the
        second lease of the file, counting from 1."""
        counts = {k: 0 for k in ("providers", "nodes", "leases", "resources", "stops")}
        counts |= {spec.table: 0 for spec in BOOKS.values()}
        singular = {spec.table: spec.entity.replace("_", " ") for spec in BOOKS.values()}
        links = transfer.node_links(data)
        added: list[Node] = []

        def node_of(kind: str, i: int) -> Node | None:
            at = links[kind][i]
            return None if at is None else added[at]

        def importer(entity: str) -> Callable[[int, Mapping[str, Any]], None]:
            return lambda i, r: self._import_book(conn, entity, r)

        with self.transaction() as conn:
            steps: list[tuple[str, Callable[[int, Mapping[str, Any]], object]]] = [
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
                *((spec.table, importer(entity)) for entity, spec in BOOKS.items()),
            ]
            for kind, insert in steps:
                for i, rec in enumerate(data.get(kind, ())):
                    try:
                        insert(i, rec)
                    except InputError as exc:
                        raise InputError(
                            f"{singular.get(kind, kind[:-1])} {i + 1}: {exc.field}",
                            exc.value,
                            exc.reason,
                        ) from None
                    counts[kind] += 1
            # One entry that says an import happened: `zuka undo` refuses to take it apart.
            self.audit(conn, "import", "ledger", None, None, None, counts)
        return counts
