"""Everything the fleet dashboard reads from the ledger on a refresh, in one place that can
run off the UI loop (its own connection, its own thread), and the last hour of every node's
utilisation read with one query for all nodes, closed minutes cached per node.

The read model: the ledger's rows joined by node id (a released node's name may be reused)
with what the poller in this process holds (statuses, live readings) or else what a
collector last wrote. It only reads: the writes that go with polling (purges, alert
evaluation where nobody polls) are the poller's owner's (leases.telemetry.housekeeping).

No Textual here: the dashboard calls FleetReader.read from a worker thread and only draws
what comes back.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from leases.config.sections import Config
from leases.core.errors import InputError, LedgerError, said
from leases.core.i18n import _
from leases.core.models import Lease, Node, NodeStatus
from leases.core.textsafe import visible
from leases.fleet.header import MonthMoney, bill_state, month_money
from leases.fleet.live import hour_means
from leases.fleet.nodestatus import StatusCache, current
from leases.fleet.sparkline import CellSums, Reading, cell_sums, window_end
from leases.ledger import rowaudit
from leases.ledger.records import UNREADABLE, unreadable
from leases.ledger.store import Ledger
from leases.money.renewals import BillingNow, billing_now
from leases.offboard.evidence import Progress, progress
from leases.telemetry.history import minute_util_mean
from leases.telemetry.housekeeping import FLEET_STATES, fleet_nodes
from leases.telemetry.rollups import HistoryStore

if TYPE_CHECKING:
    # Read with the alerts, after the first paint (the alert rules take ~0.1 s to import).
    from leases.alerts.state import StoredAlert

WINDOW_MIN = 60  # the sparkline's hour
# A stored minute may still be rewritten this long after it began (a poller flushes closed
# minutes every few seconds; a late reading lands in its minute): read again until then.
SETTLE_MIN = 3
RELOAD_S = 15.0  # nodes, leases and providers re-read this often when the ledger was edited
# ...and this often whatever happened (a lease starts or ends by the clock, not by an edit).
FACTS_S = 60.0
MONEY_S = 300.0  # the month's cost recomputed this often (it reads every lease's history)


def minute_util(blob: bytes) -> float | None:
    """Mean utilisation over a stored node-minute's GPUs; None when none was read."""
    return minute_util_mean(blob)


class MinuteCache:
    """Mean utilisation per node-minute over the last WINDOW_MIN minutes.

    One query for all nodes (node ids from a JSON list, joined to gpu_minute's primary
    key, so each node is one index range); a minute is read once it is stored and again
    only while it may still change (SETTLE_MIN), so a refresh unpacks a few rows per node,
    not sixty. Keyed by node id: a name may be reused after a node is released.
    """

    def __init__(self, window_min: int = WINDOW_MIN, settle_min: int = SETTLE_MIN) -> None:
        self.window_min = window_min
        self.settle_min = settle_min
        self._minutes: dict[int, dict[int, float | None]] = {}
        self._changed: set[int] = set()  # nodes whose minutes changed since their sums
        # The stored bytes of the minutes still read again: unchanged ones are not decoded.
        self._raw: dict[tuple[int, int], bytes] = {}
        self._sums: dict[int, tuple[float, CellSums]] = {}  # node -> (window end, sums)
        self._last_now: int | None = None
        self.rows_read = 0  # by the last refresh (tests and benchmarks read it)

    def refresh(self, conn: sqlite3.Connection, ids: Iterable[int], now: datetime) -> None:
        now_min = int(now.timestamp()) // 60
        lo = now_min - self.window_min
        wanted = list(dict.fromkeys(ids))
        for gone in set(self._minutes) - set(wanted):
            del self._minutes[gone]
            self._sums.pop(gone, None)
        new = [i for i in wanted if i not in self._minutes]
        known = [i for i in wanted if i in self._minutes]
        # From the earlier of this and the last refresh's unsettled minutes: a refresh that
        # came late (a suspended laptop) still rereads what settled meanwhile.
        since_last = min(now_min, self._last_now if self._last_now is not None else now_min)
        self.rows_read = 0
        if known:
            self._read(conn, known, max(lo, since_last - self.settle_min), now_min + 1)
        if new:
            for i in new:
                self._minutes[i] = {}
            self._read(conn, new, lo, now_min + 1)
        for node_id, minutes in self._minutes.items():
            old = [m for m in minutes if m < lo]
            for m in old:
                del minutes[m]
            if old:
                self._changed.add(node_id)
        settled = now_min - self.settle_min
        for key in [k for k in self._raw if k[1] < settled or k[0] not in self._minutes]:
            del self._raw[key]
        self._last_now = now_min

    def _read(self, conn: sqlite3.Connection, ids: Sequence[int], lo: int, hi: int) -> None:
        rows = conn.execute(
            "SELECT g.node_id, g.minute, g.gpus FROM json_each(?) AS j"
            " CROSS JOIN gpu_minute AS g ON g.node_id = j.value"
            " WHERE g.minute >= ? AND g.minute < ?",
            (json.dumps(list(ids)), lo, hi),
        )
        for node_id, minute, blob in rows:
            self.rows_read += 1
            if self._raw.get((node_id, minute)) == blob:
                continue
            self._raw[node_id, minute] = blob
            util = minute_util(blob)
            minutes = self._minutes[node_id]
            if minute not in minutes or minutes[minute] != util:
                minutes[minute] = util
                self._changed.add(node_id)

    def readings(self, node_id: int) -> tuple[Reading, ...]:
        return tuple(
            Reading(m * 60.0, 60.0, v) for m, v in sorted(self._minutes.get(node_id, {}).items())
        )

    def sums(self, node_id: int, end: float) -> CellSums:
        """The node's stored minutes spread over the sparkline's cells ending at `end`;
        computed again only when its minutes changed or the window moved."""
        cached = self._sums.get(node_id)
        if cached is None or cached[0] != end or node_id in self._changed:
            cached = (end, cell_sums(self.readings(node_id), end=end))
            self._sums[node_id] = cached
            self._changed.discard(node_id)
        return cached[1]

    def last_minute(self, node_id: int) -> int | None:
        return max(self._minutes.get(node_id, {}), default=None)


@dataclass(frozen=True)
class LedgerFacts:
    """What changes only when someone edits the ledger: re-read every RELOAD_S."""

    polled: tuple[Node, ...] = ()
    refused: tuple[Node, ...] = ()  # stored rows holding a refused value: never polled
    billing: Mapping[int, BillingNow] = field(default_factory=dict)  # node id -> billing now
    channels: Mapping[str, str] = field(default_factory=dict)  # provider name -> kind
    # node id -> its offboarding plan in force (leases.offboard.evidence.progress)
    offboard: Mapping[int, Progress] = field(default_factory=dict)
    # Stored rows left out (a lease, a provider the ledger refuses), in words: said on
    # every read while they stand, so the dashboard tells them once.
    problems: tuple[str, ...] = ()

    @functools.cached_property
    def nodes(self) -> list[Node]:
        """By name; sorted once (each refresh asks it several times), never to be changed."""
        return sorted([*self.polled, *self.refused], key=lambda n: n.name)


@dataclass(frozen=True)
class FleetData:
    facts: LedgerFacts
    # node id -> its status now: the poller's here, else what a collector last wrote
    # (leases.fleet.nodestatus.current); a node with neither is not in it
    statuses: Mapping[int, NodeStatus]
    alerts: tuple[StoredAlert, ...]
    # node id -> its last hour, a mean a sparkline cell: the stored minutes and the live
    # readings after them (leases.fleet.live.hour_means); None a gap
    hour: Mapping[int, tuple[float | None, ...]]
    hour_end: float  # Unix s: the end of the sparkline's window (leases.fleet.sparkline.window_end)
    last_minute: Mapping[int, int]  # node id -> its latest stored minute
    money: MonthMoney | None
    problems: tuple[str, ...] = ()  # what could not be read this time, in words
    reloaded: bool = False  # facts were read again this time
    # Not None: the facts are of the first nodes only (a first paint), of this many
    total: int | None = None


@dataclass
class ReadRequest:
    now: datetime
    reload: bool = False  # re-read the ledger's facts now (the user asked)
    # What the poller in this process holds, by node name (None: nobody polls here, read
    # what a collector wrote to node_latest), and its readings after each node's last
    # stored minute, by node id (leases.fleet.live.recent_readings).
    polled: Mapping[str, NodeStatus] | None = None
    live: Mapping[int, list[Reading]] = field(default_factory=dict)
    # A stored status last checked before this is shown as stale (None: never).
    stale_before: datetime | None = None
    # False: the ledger's facts and latest readings only, for a first paint that does not
    # wait on an hour of minutes, the month's cost or the alert rules (read next time).
    history: bool = True
    # A number: the first paint's read, of that many nodes by name only (the next read
    # reads them all). Reading and checking 500 nodes' rows takes ~0.4 s.
    first: int | None = None


def _of_nodes(
    nodes: Iterable[Node], billing: Mapping[int | str, BillingNow]
) -> dict[int, BillingNow]:
    """Ledger.billing (by node id) of the fleet's nodes."""
    return {n.id: billing[n.id] for n in nodes if n.id is not None and n.id in billing}


class FleetReader:
    """Reads for the fleet screen over one Ledger connection, to be used from one thread
    at a time (the dashboard's refreshes never overlap)."""

    def __init__(self, ledger: Ledger, config: Config) -> None:
        self.ledger = ledger
        self.config = config
        self.store = HistoryStore(ledger)
        self.cache = MinuteCache()
        self.facts = LedgerFacts()
        self.money: MonthMoney | None = None
        self._money_problem: str | None = None  # why `money` is None, while it is
        self._facts_at: datetime | None = None
        self._version: int | None = None  # PRAGMA data_version at the last read
        self._minute: int | None = None
        self._latest: Mapping[int, NodeStatus] | None = None  # None: not read (or not kept)
        self._money_at: datetime | None = None
        self._alerts: tuple[StoredAlert, ...] = ()
        self._status_cache: StatusCache = {}  # statuses made of stored ones, kept
        self._edits: tuple[object, ...] | None = None  # _edit_mark() at the last facts read
        self._first_done = False  # a first paint's read of the first nodes was made
        # Each node's sparkline cells and the stored sums they were made of: the same sums
        # (the cache hands on one object until a minute or the window moves) and nothing
        # live give the same cells, not worked out again for every node each refresh.
        self._means: dict[int, tuple[CellSums, tuple[float | None, ...]]] = {}

    def _due(self, last: datetime | None, now: datetime, every_s: float) -> bool:
        return last is None or not timedelta(0) <= now - last < timedelta(seconds=every_s)

    def read(self, req: ReadRequest) -> FleetData:
        if req.first is not None and self._facts_at is None and not self._first_done:
            self._first_done = True  # once: every later read reads everything
            try:
                return self._first(req)
            except (*UNREADABLE, LedgerError):
                pass  # a row it cannot read: the whole read below shows the rest, says it
        now = req.now
        problems: list[str] = []
        reloaded = False
        edits = self._edits
        if req.reload or self._facts_due(now):
            try:
                self.facts = self._facts(now)
                reloaded = True
            except (InputError, LedgerError) as exc:
                # A row the ledger refuses to read: keep what was read before.
                problems.append(_("cannot read the ledger: {why}").format(why=said(exc)))
            self._facts_at = now
        problems.extend(self.facts.problems)
        ids = [n.id for n in self.facts.nodes if n.id is not None]
        # SQLite's data_version moves when another connection commits: while it stands
        # (no poller has written since), the readings and minutes read last time hold.
        version = self.ledger.conn.execute("PRAGMA data_version").fetchone()[0]
        unchanged = version == self._version and not reloaded
        self._version = version
        minute = int(now.timestamp()) // 60
        if not req.history:
            pass  # the first paint: the hour is read next time
        elif not (unchanged and minute == self._minute):
            self.cache.refresh(self.ledger.conn, ids, now)
            self._minute = minute
        if req.polled is not None:
            self._latest = None  # this process polls: its poller holds the readings
        elif self._latest is None or not unchanged:
            self._latest = self.store.latest_by_id()
        # Money moves with time slowly; an edit (a new lease, a price) changes it at once.
        edited = reloaded and self._edits != edits
        if req.history and (req.reload or edited or self._due(self._money_at, now, MONEY_S)):
            try:
                # A row changed outside zuka (a price edited with sqlite3) is in no figure.
                rowaudit.refuse(rowaudit.drifted_since(self.ledger), "the month's cost")
                b = self.config.billing
                self.money = month_money(self.ledger, now, b.tz, b.currency)
                bill = bill_state(self.ledger, now, b.tz, b.currency, self.config.bills.tolerance)
                self.money = dataclasses.replace(self.money, bill=bill)
                self._money_problem = None
            except (InputError, LedgerError) as exc:
                self.money = None
                self._money_problem = _("month's cost not computed: {why}").format(why=said(exc))
            self._money_at = now
        if self._money_problem is not None:
            problems.append(self._money_problem)  # said on every read while it stands
        end = window_end(now.timestamp())
        empty = cell_sums((), end=end)
        hour: dict[int, tuple[float | None, ...]] = {}
        means = self._means
        for i in ids:
            sums, live = self.cache.sums(i, end) if req.history else empty, req.live.get(i)
            held = means.get(i)
            if held is not None and held[0] is sums and not live:  # the same stored minutes
                hour[i] = held[1]
                continue
            hour[i] = tuple(hour_means(sums, live, end))
            if live:  # cells with live readings in them are not the stored sums' alone
                means.pop(i, None)
            else:
                means[i] = (sums, hour[i])
        for gone in means.keys() - hour.keys():
            del means[gone]
        last = {i: m for i in ids if (m := self.cache.last_minute(i)) is not None}
        statuses = current(self.facts.nodes, req.polled, self._latest or {}, req.stale_before,
                           self._status_cache)  # fmt: skip
        try:
            from leases.alerts import state as alertstate

            self._alerts = tuple(alertstate.alerts(self.ledger, now))
        except (InputError, LedgerError, ValueError) as exc:
            # One unreadable alert row (an imported or hand-edited ledger) is said; the
            # fleet goes on with the alerts read before.
            why = said(exc) if isinstance(exc, InputError | LedgerError) else str(exc)
            problems.append(_("alerts not read: {why}").format(why=visible(why, 200)))
        return FleetData(
            self.facts,
            statuses,
            self._alerts,
            hour,
            end,
            last,
            self.money,
            tuple(problems),
            reloaded,
        )

    def _first(self, req: ReadRequest) -> FleetData:
        """The first `req.first` nodes by name with their leases, providers, plans and
        latest readings; nothing is kept for the next read, which reads everything."""
        assert req.first is not None
        nodes = self.ledger.nodes(FLEET_STATES, limit=req.first)
        ids = [n.id for n in nodes if n.id is not None]
        shown = set(ids)
        facts = LedgerFacts(
            tuple(n for n in nodes if not n.problem),
            tuple(n for n in nodes if n.problem),
            _of_nodes(nodes, self.ledger.billing(req.now, ids)),
            {p.name: p.kind.value for p in self.ledger.providers()},
            {i: p for i, p in progress(self.ledger).items() if i in shown},
        )
        stored = self.store.latest_by_id(ids) if req.polled is None else {}
        statuses = current(facts.nodes, req.polled, stored, req.stale_before)
        total = self.ledger.count_nodes(FLEET_STATES)
        end = window_end(req.now.timestamp())
        empty = cell_sums((), end=end)
        hour = {i: tuple(hour_means(empty, req.live.get(i), end)) for i in ids}
        return FleetData(facts, statuses, (), hour, end, {}, None, reloaded=True, total=total)

    def _edit_mark(self) -> tuple[object, ...]:
        # Every edit of a node, lease, provider or resource adds an audit entry (the hash
        # chain); offboarding steps move their own rows too.
        row = self.ledger.conn.execute(
            "SELECT (SELECT max(id) FROM audit), (SELECT count(*) FROM offboard_steps),"
            " (SELECT max(updated_at) FROM offboard_steps)"
        ).fetchone()
        return tuple(row)

    def _facts_due(self, now: datetime) -> bool:
        """Every FACTS_S; every RELOAD_S only when the ledger was edited since (reading
        every node and lease costs far more than asking whether one changed)."""
        if self._due(self._facts_at, now, FACTS_S):
            return True
        if not self._due(self._facts_at, now, RELOAD_S):
            return False
        return self._edit_mark() != self._edits

    def _facts(self, now: datetime) -> LedgerFacts:
        self._edits = self._edit_mark()
        polled, refused = fleet_nodes(self.ledger)
        # A row the ledger refuses costs itself: the rest shows, and it is said.
        leases, problems = self.ledger.readable_leases()
        providers, unread = self.ledger.readable_providers()
        problems += unread
        problems += self.ledger.readable_resources()[1]  # left out of the month's cost
        # By node id: a released node's leases never stand for the live node of its name.
        by_node: dict[int | str, list[Lease]] = {}
        for le in leases:
            by_node.setdefault(le.node_key, []).append(le)
        billing: dict[int, BillingNow] = {}
        for n in [*polled, *refused]:
            if n.id not in by_node:
                continue
            try:
                b = billing_now(by_node[n.id], now)
            except UNREADABLE as exc:
                problems.append(
                    _("node {name!r}: its lease not shown: {why}").format(
                        name=visible(n.name, 80), why=unreadable(exc)
                    )
                )
                continue
            if b is not None and n.id is not None:
                billing[n.id] = b
        try:
            plans = progress(self.ledger)
        except UNREADABLE as exc:
            plans = {}
            problems.append(_("offboarding progress not read: {why}").format(why=unreadable(exc)))
        channels = {p.name: p.kind.value for p in providers}
        return LedgerFacts(tuple(polled), tuple(refused), billing, channels, plans,
                           tuple(problems))  # fmt: skip
