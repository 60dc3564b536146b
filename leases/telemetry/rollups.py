"""Storing GPU history in the ledger: minute and hour roll-ups, gaps, the latest reading of
every node (what a running collector shares with the dashboard).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from leases.core.host import HostStats, host_from, host_record
from leases.core.models import (
    GpuProcess,
    GpuSample,
    Lease,
    Node,
    NodeHealth,
    NodeStatus,
    OwnerHour,
)
from leases.core.readings import made_sample
from leases.ledger.store import Ledger
from leases.money import billing
from leases.telemetry.attribution import add_shares, minute_shares
from leases.telemetry.flushes import GapEvent, JsonMemo, TextMemo
from leases.telemetry.history import (
    NodeHour,
    NodeMinute,
    hour_of,
    pack_hour,
    pack_minute,
    unpack_hour,
    unpack_minute,
)

DEFAULT_MINUTE_DAYS = 14
_HOUR_UPSERT = (
    "INSERT OR REPLACE INTO gpu_hour"
    " (node_id, hour, gpus, busy_card_minutes, known_card_minutes) VALUES (?, ?, ?, ?, ?)"
)  # per-minute roll-ups; per-hour ones are kept for the lease's life


@dataclass(frozen=True)
class BusyHours:
    lease_id: int
    node: str
    busy_card_hours: float
    known_card_hours: float


_SAMPLE_FIELDS = tuple(f.name for f in fields(GpuSample) if f.name not in ("node", "at", "extra"))


def _host_of(text: str) -> HostStats | None:
    """A node_latest row's host figures; None for an old row ('{}') or one not readable."""
    try:
        return host_from(json.loads(text))
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None


def _procs_of(node: str, text: str) -> tuple[GpuProcess, ...]:
    return tuple(GpuProcess(**{**p, "node": node}) for p in json.loads(text))


def sample_record(s: GpuSample, at: datetime | None = None) -> dict[str, Any]:
    """A sample as stored and shown, read at `at` (NodeStatus.sample_time), else at its own."""
    # Explicit rather than dataclasses.asdict, whose deep copy was the collector's
    # largest cost (300 nodes x 8 GPUs every flush).
    d = {name: getattr(s, name) for name in _SAMPLE_FIELDS}
    d["at"] = (s.at if at is None else at).isoformat()
    d["extra"] = dict(s.extra)
    return d


def _processes_json(processes: tuple[GpuProcess, ...]) -> str:
    return json.dumps([asdict(p) for p in processes])


def _host_json(host: HostStats | None) -> str:
    return json.dumps(host_record(host) if host is not None else {})


_SAMPLE_KEYS = frozenset(f.name for f in fields(GpuSample))


def sample_from(node: str, d: dict[str, Any]) -> GpuSample:
    """A stored sample record as a GpuSample. A record that names only GpuSample's fields,
    with an index and a time (every record zuka writes), is made without its keyword
    __init__ (made_sample), a quarter of the cost (a dashboard reads 8,000 a refresh at
    1,000 nodes); any other goes through __init__ and fails there as it always did."""
    if not (type(d) is dict and d.keys() <= _SAMPLE_KEYS and "index" in d
            and type(d.get("at")) is str):  # fmt: skip
        return GpuSample(**{**d, "node": node, "at": datetime.fromisoformat(d["at"])})
    return made_sample(node, datetime.fromisoformat(d["at"]), d)


class HistoryStore:
    """History reads and writes over a Ledger's connection."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._ids: dict[str, int] = {}
        # The JSON last written of each node's processes and host figures: a poller
        # hands the same objects on between the readings that refresh them.
        self._json = JsonMemo()
        # What each node's processes and host figures read back were made into: the same
        # text read again (the dashboard reads every node each refresh) is not decoded.
        self._read = TextMemo()

    def set_nodes(self, nodes: Iterable[Node]) -> None:
        """The fleet as the poller sees it now: each name writes to that node's row. Called
        whenever the fleet is re-read, so that after a rename (A to B) and a new node A,
        A's rows go to the new node, not to B."""
        self._ids = {n.name: n.id for n in nodes if n.id is not None}
        self._json.keep(self._ids.values())

    def node_id(self, node: str) -> int:
        if node not in self._ids:
            # The live node of that name (a released node's name may have been reused).
            row = self.ledger.conn.execute(
                "SELECT id FROM nodes WHERE name = ? ORDER BY state = 'released', id DESC",
                [node],
            ).fetchone()
            if row is None:
                from leases.core.errors import UnknownNode

                raise UnknownNode(node)
            self._ids[node] = int(row[0])
        return self._ids[node]

    # -- writes --------------------------------------------------------------------------

    def write_minutes(self, minutes: Sequence[NodeMinute], refresh_hours: bool = True) -> None:
        """Store closed minutes and refresh the hours they fall in, in one transaction.

        refresh_hours=False is for a caller that writes those hours itself (a backfill).
        """
        if not minutes:
            return
        with self.ledger.transaction() as conn:
            self._write_minutes(conn, minutes, refresh_hours)

    def _write_minutes(self, conn: Any, minutes: Sequence[NodeMinute], refresh_hours: bool) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO gpu_minute (node_id, minute, gpus) VALUES (?, ?, ?)",
            [(self.node_id(m.node), m.minute, pack_minute(m.gpus)) for m in minutes],
        )
        self._write_owner_minutes(conn, minutes)
        if not refresh_hours:
            return
        for node, hour in sorted({(m.node, m.minute // 60) for m in minutes}):
            self._refresh_hour(conn, node, hour)
            self._refresh_owner_hour(conn, node, hour)

    def _write_owner_minutes(self, conn: Any, minutes: Sequence[NodeMinute]) -> None:
        """Each minute's busy card-minutes by owner; a minute without a busy card has no row
        (and loses one a rewrite of it had)."""
        rows, idle = [], []
        for m in minutes:
            owners = None if m.owners is None else dict(m.owners)
            shares = minute_shares(m.gpus, owners)
            key = (self.node_id(m.node), m.minute)
            if shares:
                rows.append((*key, json.dumps(shares, sort_keys=True)))
            else:
                idle.append(key)
        conn.executemany(
            "INSERT OR REPLACE INTO gpu_owner_minute (node_id, minute, owners) VALUES (?, ?, ?)",
            rows,
        )
        conn.executemany("DELETE FROM gpu_owner_minute WHERE node_id = ? AND minute = ?", idle)

    def _refresh_owner_hour(self, conn: Any, node: str, hour: int) -> None:
        node_id = self.node_id(node)
        total: dict[str, float] = {}
        for (owners,) in conn.execute(
            "SELECT owners FROM gpu_owner_minute WHERE node_id = ? AND minute >= ? AND minute < ?",
            (node_id, hour * 60, hour * 60 + 60),
        ):
            add_shares(total, json.loads(owners))
        self._replace_owner_hour(conn, node_id, hour, total)

    def _replace_owner_hour(
        self, conn: Any, node_id: int, hour: int, total: dict[str, float]
    ) -> None:
        conn.execute("DELETE FROM gpu_owner_hour WHERE node_id = ? AND hour = ?", (node_id, hour))
        conn.executemany(
            "INSERT INTO gpu_owner_hour (node_id, hour, owner, busy_card_minutes)"
            " VALUES (?, ?, ?, ?)",
            [(node_id, hour, owner, value) for owner, value in sorted(total.items()) if value],
        )

    def write_owner_hours(self, rows: Iterable[OwnerHour]) -> None:
        """Store whole hours of attribution directly (backfilled history); the hours
        named replace what was stored for them."""
        hours: dict[tuple[int, int], dict[str, float]] = {}
        for r in rows:
            total = hours.setdefault((self.node_id(r.node), r.hour), {})
            total[r.owner] = total.get(r.owner, 0.0) + r.busy_card_minutes
        with self.ledger.transaction() as conn:
            for (node_id, hour), total in sorted(hours.items()):
                self._replace_owner_hour(conn, node_id, hour, total)

    def _refresh_hour(self, conn: Any, node: str, hour: int) -> None:
        node_id = self.node_id(node)
        rows = conn.execute(
            "SELECT minute, gpus FROM gpu_minute WHERE node_id = ? AND minute >= ? AND minute < ?",
            (node_id, hour * 60, hour * 60 + 60),
        ).fetchall()
        rolled = hour_of(node, hour, (NodeMinute(node, m, unpack_minute(b)) for m, b in rows))
        conn.execute(_HOUR_UPSERT, self._hour_row(rolled))

    def _hour_row(self, h: NodeHour) -> tuple[int, int, bytes, int, int]:
        return (
            self.node_id(h.node),
            h.hour,
            pack_hour(h.gpus),
            h.busy_card_minutes,
            h.known_card_minutes,
        )

    def write_hours(self, hours: Iterable[NodeHour]) -> None:
        """Store whole hours directly (backfilled history)."""
        with self.ledger.transaction() as conn:
            conn.executemany(_HOUR_UPSERT, [self._hour_row(h) for h in hours])

    def write_latest(self, rows: Sequence[NodeStatus]) -> None:
        """Each node's status as of its last attempt (`checked`, which must be set)."""
        if rows:
            with self.ledger.transaction() as conn:
                self._write_latest(conn, rows)

    def write(
        self,
        minutes: Sequence[NodeMinute] = (),
        latest: Sequence[NodeStatus] = (),
        gaps: Sequence[GapEvent] = (),
    ) -> None:
        """A poller's flush in one transaction: gaps opened and closed (in order), closed
        minutes with their hours, the latest status of the nodes read since the last one."""
        if not (minutes or latest or gaps):
            return
        with self.ledger.transaction() as conn:
            for gap in gaps:
                if gap.opened:
                    self._open_gap(conn, gap.node, gap.at, gap.health, gap.detail)
                else:
                    self._close_gap(conn, gap.node, gap.at)
            if minutes:
                self._write_minutes(conn, minutes, True)
            if latest:
                self._write_latest(conn, latest)

    def _write_latest(self, conn: Any, rows: Sequence[NodeStatus]) -> None:
        memo = self._json
        conn.executemany(
            "INSERT OR REPLACE INTO node_latest"
            " (node_id, at, health, detail, fingerprint, gpus, processes, host)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    node_id := self.node_id(r.node),
                    _checked(r).isoformat(),
                    r.health.value,
                    r.detail,
                    r.fingerprint,
                    json.dumps([sample_record(s, r.samples_at) for s in r.samples]),
                    memo.text(node_id, "processes", r.processes, _processes_json),
                    memo.text(node_id, "host", r.host, _host_json),
                )
                for r in rows
            ],
        )

    def open_gap(self, node: str, start: datetime, health: NodeHealth, detail: str) -> None:
        """Record that readings stopped (an unknown stretch, never zero). Idempotent."""
        with self.ledger.transaction() as conn:
            self._open_gap(conn, node, start, health, detail)

    def _open_gap(
        self, conn: Any, node: str, start: datetime, health: NodeHealth, detail: str
    ) -> None:
        node_id = self.node_id(node)
        if conn.execute(
            'SELECT 1 FROM poll_gap WHERE node_id = ? AND "end" IS NULL', [node_id]
        ).fetchone():
            return
        conn.execute(
            "INSERT INTO poll_gap (node_id, start, health, detail) VALUES (?, ?, ?, ?)",
            (node_id, start.isoformat(), health.value, detail[:500]),
        )

    def close_gap(self, node: str, end: datetime) -> None:
        with self.ledger.transaction() as conn:
            self._close_gap(conn, node, end)

    def _close_gap(self, conn: Any, node: str, end: datetime) -> None:
        conn.execute(
            'UPDATE poll_gap SET "end" = ? WHERE node_id = ? AND "end" IS NULL',
            (end.isoformat(), self.node_id(node)),
        )

    def purge(self, now: datetime, minute_days: int = DEFAULT_MINUTE_DAYS) -> int:
        """Drop minute roll-ups older than minute_days; hours stay. Returns rows removed."""
        cutoff = int((now - timedelta(days=minute_days)).timestamp()) // 60
        with self.ledger.transaction() as conn:
            removed: int = conn.execute(
                "DELETE FROM gpu_minute WHERE minute < ?", [cutoff]
            ).rowcount
            # Owner minutes go with them; owner hours stay as long as gpu_hour rows do.
            conn.execute("DELETE FROM gpu_owner_minute WHERE minute < ?", [cutoff])
            return removed

    # -- reads ---------------------------------------------------------------------------

    def minutes(self, node: str, since: datetime, until: datetime) -> list[NodeMinute]:
        rows = self.ledger.conn.execute(
            "SELECT minute, gpus FROM gpu_minute WHERE node_id = ? AND minute >= ? AND minute < ?"
            " ORDER BY minute",
            (self.node_id(node), int(since.timestamp()) // 60, int(until.timestamp()) // 60),
        ).fetchall()
        return [NodeMinute(node, m, unpack_minute(b)) for m, b in rows]

    def hours(
        self, node: str, since: datetime, until: datetime, *, node_id: int | None = None
    ) -> list[NodeHour]:
        """The node's hours starting in [since, until): of the live node of that name, or
        of the node `node_id` (a released node's name may be reused)."""
        rows = self.ledger.conn.execute(
            "SELECT hour, gpus FROM gpu_hour WHERE node_id = ? AND hour >= ? AND hour < ?"
            " ORDER BY hour",
            (
                self.node_id(node) if node_id is None else node_id,
                int(since.timestamp()) // 3600,
                int(until.timestamp()) // 3600,
            ),
        ).fetchall()
        return [NodeHour(node, h, unpack_hour(b)) for h, b in rows]

    def busy_by_owner(
        self, since: datetime, until: datetime, nodes: Sequence[str] | None = None
    ) -> list[OwnerHour]:
        """Busy card-minutes by node, owner and clock hour, for hours starting in
        [since, until) (whole hours, as `hours` reads them); `nodes` limits the node names.

        Ordered by node, hour, owner. Within a node-hour the owners' minutes add up to the
        busy card-minutes of gpu_hour for the minutes the poller attributed ("?" included).
        """
        lo, hi = int(since.timestamp()) // 3600, int(until.timestamp()) // 3600
        sql = (
            "SELECT n.name, o.owner, o.hour, o.busy_card_minutes, o.node_id"
            " FROM gpu_owner_hour o JOIN nodes n ON n.id = o.node_id"
            " WHERE o.hour >= ? AND o.hour < ?"
        )
        params: list[Any] = [lo, hi]
        if nodes is not None:
            names = list(dict.fromkeys(nodes))
            if not names:
                return []
            sql += f" AND n.name IN ({', '.join('?' for _ in names)})"
            params += names
        rows = self.ledger.conn.execute(sql + " ORDER BY n.name, o.hour, o.owner", params)
        return [OwnerHour(n, o, h, b, i) for n, o, h, b, i in rows]

    def gaps(self, node: str) -> list[tuple[datetime, datetime | None, str, str]]:
        rows = self.ledger.conn.execute(
            'SELECT start, "end", health, detail FROM poll_gap WHERE node_id = ? ORDER BY start',
            [self.node_id(node)],
        ).fetchall()
        return [
            (datetime.fromisoformat(s), datetime.fromisoformat(e) if e else None, h, d)
            for s, e, h, d in rows
        ]

    def latest_by_id(self, node_ids: Sequence[int] | None = None) -> dict[int, NodeStatus]:
        """The latest status written of every node (or of these nodes), as the poller held
        it: by node id, never by name (a released node's name may be reused)."""
        sql = (
            "SELECT l.node_id, n.name, l.at, l.health, l.detail, l.fingerprint, l.gpus,"
            " l.processes, l.host FROM node_latest l JOIN nodes n ON n.id = l.node_id"
        )
        params: list[str] = []
        if node_ids is not None:
            sql += " WHERE l.node_id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(node_ids)))
        rows = self.ledger.conn.execute(sql, params).fetchall()
        out: dict[int, NodeStatus] = {}
        read = self._read
        for node_id, name, at, health, detail, fp, gpus, procs, host in rows:
            checked = datetime.fromisoformat(at)
            ok = NodeHealth(health) is NodeHealth.OK
            out[node_id] = NodeStatus(
                name,
                NodeHealth(health),
                detail,
                checked,
                checked if ok else None,
                tuple(sample_from(name, d) for d in json.loads(gpus)),
                read.value(node_id, "processes", name, procs, partial(_procs_of, name)),
                fp,
                read.value(node_id, "host", None, host, _host_of),
            )
        if node_ids is None:
            read.keep(out)
        return out

    def busy_card_hours(self, since: datetime, now: datetime) -> list[BusyHours]:
        """Busy and known card-hours of every lease between since and now.

        Hours are whole clock hours: an hour counts for a lease when it starts inside the
        lease's span (start to ended_at/end/now) and inside [since, now).
        """
        lo, hi = int(since.timestamp()) // 3600, int(now.timestamp()) // 3600 + 1
        spans = []
        for row in self.ledger.conn.execute(
            'SELECT l.id, l.node_id, n.name, l.start, l."end", l.ended_at'
            " FROM leases l JOIN nodes n ON n.id = l.node_id"
        ):
            lease_id, node_id, name, start, end, ended = row
            stop = ended or end
            a = max(lo, int(datetime.fromisoformat(start).timestamp()) // 3600)
            b = min(hi, int(datetime.fromisoformat(stop).timestamp()) // 3600 if stop else hi)
            if a < b:
                spans.append((lease_id, node_id, name, a, b))
        if not spans:
            return []
        conn = self.ledger.conn
        values = ", ".join("(?, ?, ?, ?)" for _ in spans)
        params = [v for s in spans for v in (s[0], s[1], s[3], s[4])]
        sums = {
            lease_id: (busy or 0, known or 0)
            for lease_id, busy, known in conn.execute(
                f"WITH span(lease_id, node_id, a, b) AS (VALUES {values})"
                " SELECT span.lease_id, SUM(h.busy_card_minutes), SUM(h.known_card_minutes)"
                " FROM span JOIN gpu_hour h ON h.node_id = span.node_id"
                " AND h.hour >= span.a AND h.hour < span.b GROUP BY span.lease_id",
                params,
            )
        }
        return [
            BusyHours(s[0], s[2], sums.get(s[0], (0, 0))[0] / 60, sums.get(s[0], (0, 0))[1] / 60)
            for s in spans
        ]

    def card_minutes(self, node: str | int, since: datetime, until: datetime) -> tuple[int, int]:
        """Busy and known card-minutes of the node's clock hours starting in [since, until)
        (node: the live node of a name, or a node id)."""
        node_id = node if isinstance(node, int) else self.node_id(node)
        end = int(until.timestamp())
        row = self.ledger.conn.execute(
            "SELECT SUM(busy_card_minutes), SUM(known_card_minutes) FROM gpu_hour"
            " WHERE node_id = ? AND hour >= ? AND hour < ?",
            (node_id, int(since.timestamp()) // 3600, end // 3600),
        ).fetchone()
        busy, known = int(row[0] or 0), int(row[1] or 0)
        part_busy, part_known = self.partial_hour(node_id, since, until)
        return busy + part_busy, known + part_known

    def partial_hour(self, node_id: int, since: datetime, until: datetime) -> tuple[int, int]:
        """Busy and known card-minutes of the unfinished clock hour `until` falls in (a
        collector writing now: the current hour), from the minutes read before `until`:
        what has been read so far, not unknown. (0, 0) when `until` is on the hour."""
        end = int(until.timestamp())
        hour = end // 3600
        if end % 3600 == 0 or hour * 3600 < int(since.timestamp()) // 3600 * 3600:
            return 0, 0
        rows = self.ledger.conn.execute(
            "SELECT minute, gpus FROM gpu_minute WHERE node_id = ? AND minute >= ? AND minute < ?",
            (node_id, max(hour * 60, int(since.timestamp()) // 60), end // 60),
        ).fetchall()
        name = str(node_id)
        part = hour_of(name, hour, (NodeMinute(name, m, unpack_minute(b)) for m, b in rows))
        return part.busy_card_minutes, part.known_card_minutes

    def usage_by(
        self, stops: Mapping[int, Sequence[billing.Stop]]
    ) -> Callable[[Lease, datetime, datetime, int | None], billing.CardHours]:
        """lease_usage as report.build_report and `zuka cost` ask for it, each lease with
        its stops from `stops` (Ledger.stop_spans, read once for all of them): not a read
        of the ledger's stops for every lease."""

        def usage(
            lease: Lease, since: datetime, until: datetime, cards: int | None
        ) -> billing.CardHours:
            held = stops.get(lease.id or 0, ())
            return self.lease_usage(lease, since, until, stops=held, cards=cards)

        return usage

    def lease_usage(
        self,
        lease: Lease,
        since: datetime,
        until: datetime,
        *,
        stops: Sequence[billing.Stop] | None = None,
        cards: int | None = None,
    ) -> billing.CardHours:
        """A lease's paid, busy, idle and unknown card-hours and cost over [since, until)
        (see leases.money.billing.lease_card_hours), history read for the time it is paid for.
        stops None: the stops the ledger records for the lease's node."""
        if stops is None:
            stops = self.ledger.stop_spans(lease.id or 0).get(lease.id or 0, ())
        # Only the history of the spans it pays for: a renewal not started yet pays for none
        # (the node's history is its predecessor's), and a stop is no span.
        busy = known = 0
        for a, b in billing.billed_spans(lease, until, stops):
            lo, hi = max(since, a), min(until, b)
            if lo < hi:
                # Its own node's history: a released node's name may be reused.
                span_busy, span_known = self.card_minutes(lease.node_key, lo, hi)
                busy, known = busy + span_busy, known + span_known
        return billing.lease_card_hours(lease, since, until, busy, known, stops=stops, cards=cards)


def _checked(status: NodeStatus) -> datetime:
    if status.checked is None:
        raise ValueError(f"node {status.node!r}: a status never checked is not stored")
    return status.checked
