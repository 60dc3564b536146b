"""The stops' rows: when a node was recorded stopped (and so billed nothing) under one of
its leases, and when it ran again. The rules are leases.ledger.stops' (pure), loaded only
when a stop is read or written (it imports the billing maths)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease, Node
from leases.ledger.lease_rows import LeaseRows
from leases.ledger.records import Record

if TYPE_CHECKING:
    from leases.ledger.stops import LeaseStop
    from leases.money.billing import Stop


class StopRows(LeaseRows):
    """The stops, a layer of a Ledger (see leases.ledger.store)."""

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
        rows = self.rows(
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
            self.audit(conn, "stop.add", "stop", cur.lastrowid, target.name, None, rec)
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
            self.audit(conn, "stop.resume", "stop", stop.id, target.name, before, after)
            return ended

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
        lease = self.lease_for(node, rec.get("lease_start"), target)
        assert lease.id is not None and lease.node_id is not None
        who = fields.text("who", str(rec.get("who") or ""), 100)
        stop = st.from_row({**rec, "who": who, "node_id": lease.node_id, "lease_id": lease.id})
        tz = lease.billing_tz
        if stop.start < lease.start:
            raise InputError(
                "start",
                fields.shown(stop.start, tz),
                _("is before its lease's start {shown}").format(
                    shown=fields.shown(lease.start, tz)
                ),
            )
        for s in self.stops(node_ids=[lease.node_id]):
            if (stop.end is None or s.start < stop.end) and (s.end is None or s.end > stop.start):
                raise InputError(
                    "start",
                    fields.shown(stop.start, tz),
                    _("overlaps the stop of {node} recorded from {shown}").format(
                        node=node, shown=fields.shown(s.start, tz)
                    ),
                )
        out = st.record(replace(stop, node=node))
        cur = conn.execute(
            'INSERT INTO stops (node_id, lease_id, start, "end", source, who)'
            " VALUES (?, ?, ?, ?, ?, ?)",
            [stop.node_id, stop.lease_id, out["start"], out["end"], stop.source, who],
        )
        self.audit(conn, "stop.add", "stop", cur.lastrowid, node, None, out)
        return replace(stop, id=cur.lastrowid)
