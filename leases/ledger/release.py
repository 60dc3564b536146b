"""The one rule between a node's state and its leases: a released (archived) node has no
open lease. Otherwise a node would vanish from `zuka node list` and the dashboard while
its contract keeps billing. Every path that releases a node or adds a lease asks here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease, Node, NodeState


def open_at(lease: Lease, now: datetime) -> bool:
    """Not ended by `now`: a renewed lease runs, and bills, until its end; a renewal that
    ended at its start (cancelled by `lease end`) never runs."""
    return lease.ended_at is None or lease.ended_at > max(now, lease.start)


def check_release(node: str, leases: Sequence[Lease], now: datetime) -> None:
    """Refuse to release (archive) `node` while one of its leases is open."""
    still = [le for le in leases if open_at(le, now)]
    if still:
        since = still[0].start.strftime("%Y-%m-%d %H:%M")
        raise InputError(
            "state",
            NodeState.RELEASED.value,
            _(
                "{node} still has an open lease (from {since}), so it cannot be released or "
                "archived: end it first: zuka lease end {node}"
            ).format(node=node, since=since),
        )


def check_lease_on(node: Node, lease: Lease, now: datetime) -> None:
    """Refuse an open lease (a new one, or a renewal) on a released (archived) node; an
    ended one is history (an import of an archived node) and is let in."""
    if node.state is NodeState.RELEASED and open_at(lease, now):
        raise InputError(
            "node",
            node.name,
            _(
                "{name} is archived (released): no lease can be added to it or renewed on it; "
                "bring it back first: zuka node restore {name}"
            ).format(name=node.name),
        )
