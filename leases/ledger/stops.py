"""Stops: when a node was stopped (a platform's 关机, a cloud instance stopped), recorded
by hand (`zuka lease stop|resume NODE [--at T]`) or by the collector where a cloud driver
reads the instance's state. Billing applies them by the lease's stopped_billing
(leases.money.billing): a lease that bills `storage_only` or `none` while stopped does not bill
its running time then.

A stop is a fact about the node, kept by node id and the id of the lease it began under
(names are reused). Every lease of the node is billed with all the node's stops: the
maths clips each to the lease's own time, so a stop that runs on across a renewal pauses
the renewal too. Pure rules here; the writes are leases.ledger.stop_rows' (stop_node,
resume_node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease
from leases.money.billing import Stop, over

HAND = "hand"  # the source of a stop recorded with `zuka lease stop`
# How far in the future a stop or a resume may be said to happen (clocks differ a little).
SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class LeaseStop:
    """One stop of a node: from start until end (None: still stopped)."""

    node_id: int
    lease_id: int
    start: datetime
    end: datetime | None
    source: str = HAND
    who: str = ""
    node: str = ""  # the node's name now (display only)
    id: int | None = None

    @property
    def span(self) -> Stop:
        return (self.start, self.end)


def stored(at: datetime) -> str:
    """How a stop's time is stored: UTC, to the microsecond, so that the text compares
    as the time does (the table's CHECK compares end > start as text)."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def record(stop: LeaseStop) -> dict[str, Any]:
    """A stop as the audit log holds it."""
    return {
        "node": stop.node,
        "node_id": stop.node_id,
        "lease_id": stop.lease_id,
        "start": stored(stop.start),
        "end": None if stop.end is None else stored(stop.end),
        "source": stop.source,
        "who": stop.who,
    }


def _time(field: str, value: Any) -> datetime:
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        raise InputError(field, value, _("is not a time")) from None
    if at.tzinfo is None:
        raise InputError(field, value, _("has no time zone"))
    return at.astimezone(UTC)


def from_row(row: Mapping[str, Any]) -> LeaseStop:
    """A stop from its row (or its audit record), checked: a ledger edited behind zuka's
    back may hold anything."""
    start = _time("start", row.get("start"))
    end = None if row.get("end") is None else _time("end", row.get("end"))
    if end is not None and end <= start:
        raise InputError("end", row.get("end"), _("is not after the stop's start"))
    source = str(row.get("source") or "")
    if not 1 <= len(source) <= 40:
        raise InputError("source", source, _("must be 1 to 40 characters"))
    node_id, lease_id = row.get("node_id"), row.get("lease_id")
    if not isinstance(node_id, int) or not isinstance(lease_id, int):
        raise InputError("lease_id", lease_id, _("a stop needs its node's and lease's ids"))
    return LeaseStop(
        node_id,
        lease_id,
        start,
        end,
        source,
        str(row.get("who") or ""),
        str(row.get("node") or ""),
        row.get("id") if isinstance(row.get("id"), int) else None,
    )


def covering(leases: Sequence[Lease], at: datetime) -> Lease | None:
    """Of one node's leases (by start), the one running at `at`: started, and not over
    (ended, or released at its end); the latest such (a renewal, from its start)."""
    found = [le for le in leases if le.start <= at and not over(le, at)]
    return found[-1] if found else None


def lease_for_stop(node: str, leases: Sequence[Lease], at: datetime) -> Lease:
    """The lease a stop at `at` begins under, or why none: before the first lease's
    start, after the last one's end, no lease at all."""
    lease = covering(leases, at)
    if lease is not None:
        return lease
    if not leases:
        raise InputError(
            "node",
            node,
            _("has no lease: a stop is billed by one (zuka lease add {node})").format(node=node),
        )
    tz = leases[0].billing_tz
    if at < leases[0].start:
        raise InputError(
            "at",
            fields.shown(at, tz),
            _("is before the lease's start {shown}: {node} was not rented then").format(
                shown=fields.shown(leases[0].start, tz), node=node
            ),
        )
    before = [le for le in leases if le.start <= at]
    last = before[-1] if before else leases[-1]
    end = last.ended_at or last.end
    raise InputError(
        "at",
        fields.shown(at, tz),
        (
            _("is after the lease's end {end}: no lease of {node} ran then")
            if end is not None
            else _("is after the lease's end: no lease of {node} ran then")
        ).format(end=fields.shown(end, last.billing_tz) if end is not None else "", node=node),
    )


def check_not_future(field: str, at: datetime, now: datetime) -> None:
    if at > now + SKEW:
        raise InputError(
            field,
            fields.shown(at),
            _("is in the future: record a stop or a resume once it happened"),
        )


def check_stop(node: str, at: datetime, existing: Iterable[LeaseStop], tz: str) -> None:
    """A new (open) stop at `at` against the node's recorded stops: refused while one is
    open, and where it would overlap one recorded (a stop from `at` runs on until resumed,
    so any stop that ends after `at` is overlapped)."""
    for s in existing:
        if s.end is None:
            raise InputError(
                "node",
                node,
                _(
                    "is already stopped since {shown}: resume it first (zuka lease resume {node} "
                    "--at TIME)"
                ).format(shown=fields.shown(s.start, tz), node=node),
            )
        if s.end > at:
            raise InputError(
                "at",
                fields.shown(at, tz),
                _(
                    "overlaps the stop recorded from {shown} to {shown2}: record stops in the"
                    " order "
                    "they happened"
                ).format(shown=fields.shown(s.start, tz), shown2=fields.shown(s.end, tz)),
            )


def check_resume(node: str, at: datetime, open_stop: LeaseStop | None, tz: str) -> LeaseStop:
    """The open stop a resume at `at` ends, or why it cannot."""
    if open_stop is None:
        raise InputError(
            "node",
            node,
            _(
                "is not recorded as stopped: nothing to resume (record the stop first: zuka "
                "lease stop {node} --at TIME)"
            ).format(node=node),
        )
    if at <= open_stop.start:
        raise InputError(
            "at",
            fields.shown(at, tz),
            _("is not after the stop's start {shown}").format(
                shown=fields.shown(open_stop.start, tz)
            ),
        )
    return open_stop


def by_lease(
    stops: Iterable[LeaseStop], lease_node: Mapping[int, int]
) -> dict[int, tuple[Stop, ...]]:
    """Each lease's stops for billing (lease id -> its node's stops, as spans): every stop
    of the node, which the maths clips to the lease's own time."""
    of_node: dict[int, list[Stop]] = {}
    for s in sorted(stops, key=lambda s: s.start):
        # A row edited behind zuka's back could move one node's stop onto another's bill.
        if s.lease_id in lease_node and lease_node[s.lease_id] != s.node_id:
            raise InputError(
                f"stop {s.id}: node_id",
                s.node_id,
                _(
                    "is not the node of its lease {lease_id} (node {lease_node}): the ledger was "
                    "changed outside zuka; correct or delete the row"
                ).format(lease_id=s.lease_id, lease_node=lease_node[s.lease_id]),
            )
        of_node.setdefault(s.node_id, []).append(s.span)
    return {lid: tuple(of_node.get(nid, ())) for lid, nid in lease_node.items()}
