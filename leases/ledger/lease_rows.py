"""The leases' rows: what a node is rented for, from when to when, at what price; a
renewal is a new lease of the same chain. Each lease is checked against its node and the
node's other leases wherever it is written (add, edit, renew, import)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _, pgettext
from leases.core.models import Lease, Node, Resource
from leases.core.textsafe import visible
from leases.ledger import leasecheck, records, refund_rules, release
from leases.ledger.books import BOOKS
from leases.ledger.node_rows import NodeRows
from leases.ledger.records import Record, readable
from leases.ledger.wording import describe_resources
from leases.money.renewals import (
    BillingNow,
    billing_now,
    cancelled_by_end,
    chain_of,
    in_effect,
    lapsed,
    overlaps,
    resource_default,
)

if TYPE_CHECKING:
    from leases.ledger.stops import LeaseStop


class LeaseRows(NodeRows):
    """The leases, a layer of a Ledger (see leases.ledger.store)."""

    if TYPE_CHECKING:  # later layers of the Ledger (leases.ledger.stop_rows, resource_rows)

        def stops(
            self, node: str | Node | None = None, *, node_ids: Sequence[int] | None = None
        ) -> list[LeaseStop]: ...
        def resource_rows(
            self, clause: str, params: Sequence[Any]
        ) -> list[tuple[Resource, Record]]: ...

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
        rows = self.rows(f"{self._LEASE_SELECT}{clause} ORDER BY n.name, l.start", params)
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
        rows = self.rows(f"{self._LEASE_SELECT} ORDER BY n.name, l.start")
        return readable(
            rows,
            _lease,
            lambda r: _("lease {id} of node {node}").format(
                id=r["id"], node=repr(visible(r["node"], 80))
            ),
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
                    _(
                        "is recorded stopped since {shown}: a new lease would bill nothing while"
                        " it is; "
                        "record when it ran again first: zuka lease resume {node} --at TIME"
                    ).format(shown=fields.shown(still[0].start, tz), node=lease.node),
                )
            return self._insert_lease(conn, lease)

    def _insert_lease(
        self, conn: sqlite3.Connection, lease: Lease, node: Node | None = None
    ) -> Lease:
        """Insert a lease on `node` (default: the node that has its name, see node())."""
        leasecheck.check_lease(lease)
        node = node or self.node(lease.node)
        release.check_lease_on(node, lease, self.clock())
        self._check_fits(node, lease, None)
        rec = records.lease_record(lease)
        row = lease_row(rec, node.id)
        cur = conn.execute(
            f"INSERT INTO leases ({', '.join(_q(k) for k in row)})"
            f" VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        self.audit(conn, "lease.add", "lease", cur.lastrowid, lease.node, None, rec)
        return _lease({**row, "node": lease.node, "id": cur.lastrowid})

    def _update_lease(self, conn: sqlite3.Connection, old: Lease, new: Lease, action: str) -> Lease:
        leasecheck.check_lease(new)
        refund_rules.check_lease_refunds(self, replace(new, id=old.id))
        before, after = records.lease_record(old), records.lease_record(new)
        row = lease_row(after, None)
        conn.execute(
            f"UPDATE leases SET {', '.join(f'{_q(k)} = ?' for k in row)} WHERE id = ?",
            [*row.values(), old.id],
        )
        self.audit(conn, action, "lease", old.id, old.node, before, after)
        return replace(new, id=old.id, node_id=old.node_id)

    def end_lease(self, node: str, at: datetime | None = None) -> Lease:
        """Record that the node's open lease ended (released or handed back). Renewals of
        it that have not started by then end at their start: they never billed."""
        with self.transaction() as conn:
            leases = self.leases(node)
            lease = in_effect(leases, self.clock())
            if lease is None:
                raise InputError("node", node, _("has no open lease to end"))
            now = self.clock()
            # Released by the provider at its end, which passed: it ended then, not now
            # (`zuka lease end` said so and stored now, a month's row of nothing after).
            default = lease.end if lapsed(lease, now) and lease.end is not None else now
            when = (at or default).astimezone(lease.start.tzinfo)
            if when < lease.start:
                raise InputError(
                    "at",
                    fields.shown(when, lease.billing_tz),
                    _("is before the lease start {shown}").format(
                        shown=fields.shown(lease.start, lease.billing_tz)
                    ),
                )
            if when > now + timedelta(minutes=5):
                raise InputError(
                    "at", fields.shown(when), _("is in the future: record an end once it happened")
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
                _(
                    "{node} is recorded stopped from {shown}, after this end: correct the stop"
                    " (zuka "
                    "undo) or give a later end"
                ).format(node=node, shown=fields.shown(later[0].start, tz)),
            )
        for stop in (s for s in found if s.end is None):
            before = st.record(stop)
            after = st.record(replace(stop, end=when))
            conn.execute('UPDATE stops SET "end" = ? WHERE id = ?', [after["end"], stop.id])
            self.audit(conn, "stop.resume", "stop", stop.id, node, before, after)

    def renew_lease(
        self, node: str, end: datetime | str, changes: Mapping[str, Any] | None = None
    ) -> Lease:
        """A renewal is a new lease: the latest one ends at its end, the new one starts there."""
        with self.transaction() as conn:
            leases = self.leases(node)
            lease = leases[-1] if leases and leases[-1].ended_at is None else None
            if lease is None:
                raise InputError(
                    "node", node, _("has no open lease to renew (add one with lease add)")
                )
            release.check_lease_on(self.node(node), lease, self.clock())
            if lease.end is None:
                raise InputError("node", node, _("its open lease has no end date to renew from"))
            new = records.lease_from(records.renewal_record(lease, end, changes or {}))
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
                        "node",
                        node,
                        _("has no lease billing now or to come (pick one with --start)"),
                    )
                lease = found
            else:
                lease = self.lease_for(node, start)
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
            self._keep_started_schedule(lease, new)
            if records.lease_record(new) == records.lease_record(lease):
                return lease
            self._check_fits(lease.node, new, lease.id, before=lease)
            edited = self._update_lease(conn, lease, new, "lease.edit")
            for le in others:
                self._update_lease(conn, le, replace(le, currency=new.currency), "lease.edit")
            return edited

    def _keep_started_schedule(self, lease: Lease, new: Lease) -> None:
        """A lease that has started (at the ledger's clock) keeps its payment schedule:
        its instalments already charged are cash paid, which a new schedule would rewrite
        (upfront would move every month's charge to its start, a closed month's to 0)."""
        if new.payment_schedule == lease.payment_schedule or lease.start > self.clock():
            return
        tz = fields.timezone(lease.billing_tz, "billing_tz")
        day = lease.start.astimezone(tz).date().isoformat()
        raise InputError(
            "payment_schedule",
            new.payment_schedule.value,
            _(
                "the lease started on {day} under its schedule {value}; the cash already charged "
                "stays as it was: renew it from a date with the new schedule (zuka lease renew "
                "{node} --until ... --payment-schedule {value2})"
            ).format(
                day=day,
                value=pgettext("schedule", lease.payment_schedule.value),
                node=visible(lease.node),
                value2=new.payment_schedule.value,
            ),
        )

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
                    _("changes only the currency of every lease of the chain: give --currency"),
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
            _(
                "this lease is one of the {chain} leases of a renewal chain in {currency} "
                "({span}), and one chain has one currency: if the chain was recorded in the "
                "wrong currency, add --whole-chain to record all {chain} in {cur}; to rent on in "
                "{cur} from a date, end the lease and add a new one (zuka lease end {name} --at "
                "WHEN, then zuka lease add {name} --currency {cur} --start WHEN ...)"
            ).format(chain=len(chain), currency=lease.currency, span=span, cur=cur, name=name),
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
                _(
                    "a card_hour lease is priced per card and {name} has no GPU count recorded:"
                    " give "
                    "--cards N (or record the node's GPUs: zuka node edit {name} --gpus N)"
                ).format(name=found.name),
            )
        if found.gpu_count and lease.cards_billed and lease.cards_billed > found.gpu_count:
            raise InputError(
                "cards_billed",
                lease.cards_billed,
                _("{name} has only {gpu_count} GPUs").format(
                    name=found.name, gpu_count=found.gpu_count
                ),
            )
        for other in self.leases(found):
            if other.id != lease_id and overlaps(other, lease):
                tz = other.billing_tz  # times as the tables and forms show them
                raise InputError(
                    "start",
                    fields.shown(lease.start, lease.billing_tz),
                    (
                        _("overlaps the lease from {start} to {end}: end or renew that one instead")
                        if other.end
                        else _(
                            "overlaps the lease from {start} (still open): end or renew that one"
                            " instead"
                        )
                    ).format(
                        start=fields.shown(other.start, tz),
                        end=fields.shown(other.end, tz) if other.end else "",
                    ),
                )

    def delete_lease(self, node: str, start: Any, *, force: bool = False) -> Record:
        """Delete a lease recorded by mistake; refused while resources refer to it unless
        force, which deletes them with it. Returns what went (the lease and resources)."""
        with self.transaction() as conn:
            if start in (None, ""):
                raise InputError(
                    "start", start, _("give the lease's start (see `zuka lease list`)")
                )
            lease = self.lease_for(node, start)
            bundle = self.lease_bundle(lease)
            if bundle["resources"] and not force:
                raise InputError(
                    "start",
                    start,
                    _(
                        "resources refer to this lease of {node}: {bundle}; give --force to"
                        " delete them "
                        "with it"
                    ).format(node=node, bundle=describe_resources(bundle["resources"])),
                )
            sql = "SELECT count(*) AS n FROM {} WHERE lease_id = ?"
            counted = [
                (spec.entity, self.rows(sql.format(spec.table), [lease.id])[0]["n"])
                for spec in BOOKS.values()
                if "lease_id" in spec.columns
            ]
            booked = [f"{n} {entity.replace('_', ' ')}(s)" for entity, n in counted if n]
            if booked:
                raise InputError(
                    "start",
                    start,
                    _(
                        "the books refer to this lease of {node}: {join}; a lease the"
                        " accountant's rows "
                        "rest on is not deleted (undo or delete those first)"
                    ).format(node=node, join=", ".join(booked)),
                )
            chain = chain_of(self.leases(node), lease)
            conn.execute("DELETE FROM resources WHERE lease_id = ?", [lease.id])
            conn.execute("DELETE FROM stops WHERE lease_id = ?", [lease.id])
            conn.execute("DELETE FROM leases WHERE id = ?", [lease.id])
            self.audit(conn, "lease.delete", "lease", lease.id, lease.node, bundle, None)
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

    def lease_for(self, node: str, lease_start: Any, target: Node | None = None) -> Lease:
        """The lease of `node` (or of that very node, target) that `lease_start` names
        (see fields.names_start), ended or not. None names the lease billing now, or if
        none is, the latest that started (renewals.resource_default): snapshots are usually
        recorded at the end of a lease, after it ended."""
        leases = self.leases(target or node)
        if not leases:
            raise InputError(
                "node",
                node,
                _("has no lease to attach it to: add one: zuka lease add {node}").format(node=node),
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
            _("names more than one lease of {node} ({starts}): give the time")
            if named
            else _("no lease of {node} starts then (its leases start {starts})")
        ).format(node=node, starts=starts)
        raise InputError("lease_start", value, reason)

    def lease_by_id(self, lease_id: int) -> Lease:
        """The lease of that id, which must exist (an id read from the ledger)."""
        rows = self.rows(f"{self._LEASE_SELECT} WHERE l.id = ?", [lease_id])
        return _lease(rows[0])

    def lease_bundle(self, lease: Lease) -> Record:
        """A lease's record with its id and its resources' records (with ids)."""
        resources = self.resource_rows(" WHERE r.lease_id = ?", [lease.id])
        bundle: Record = {
            "id": lease.id,
            **records.lease_record(lease),
            "resources": [{"id": res.id, **rec} for res, rec in resources],
        }
        # Its stops go (and an undo brings them back) with it; the key only where there
        # are some, so that bundles written before stops were kept still compare equal.
        stops = self.rows("SELECT * FROM stops WHERE lease_id = ? ORDER BY start", [lease.id])
        if stops:
            bundle["stops"] = stops
        return bundle


def _q(column: str) -> str:
    return f'"{column}"'


def _renewal_currency(lease: Lease, currency: str) -> str:
    """Why a renewal in another currency is refused, and what to do instead."""
    assert lease.end is not None
    name, start = visible(lease.node), fields.shown(lease.end, lease.billing_tz)
    return _(
        "a renewal is billed in its lease's currency ({was}): one renewal chain"
        " has one currency. To rent on in {currency}, add a new lease from the end instead"
        " (zuka lease add {name} --currency {currency} --start '{start}' ...); if the lease"
        " was recorded in the wrong currency, correct its chain first (zuka lease edit"
        " {name} --currency {currency} --whole-chain)"
    ).format(was=lease.currency, currency=currency, name=name, start=start)


def billing_of(leases: Sequence[Lease], at: datetime) -> dict[int | str, BillingNow]:
    """Of every node that has one among leases, by its Lease.node_key (its id; a released
    node's name may be reused, and the two nodes' leases never mix): the lease billing at
    `at` and the paid-until date of its renewal chain."""
    by_node: dict[int | str, list[Lease]] = {}
    for le in leases:
        by_node.setdefault(le.node_key, []).append(le)
    found = {key: billing_now(group, at) for key, group in by_node.items()}
    return {key: b for key, b in found.items() if b is not None}


def lease_row(rec: Record, node_id: int | None) -> Record:
    """A lease's row in the leases table from its record (its node by id, if given)."""
    row = {k: v for k, v in rec.items() if k != "node"}
    if node_id is not None:
        row["node_id"] = node_id
    return row


def _lease(row: Mapping[str, Any]) -> Lease:
    return replace(records.lease_from(row), id=row["id"], node_id=row["node_id"])
