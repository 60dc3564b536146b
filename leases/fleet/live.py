"""The last hour of a node as the fleet shows it: the minutes stored in the ledger joined with
the live readings a poller in this process holds in memory (those after the node's last
stored minute), on the sparkline's one scale (leases.fleet.sparkline).

The dashboard's poller owns the live part (RecentHistory, read on the UI loop, where the
poller writes it); the fleet reader joins it with what it read (FleetReader.read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from leases.core.models import Node, NodeStatus
from leases.fleet.sparkline import CellSums, Reading, cell_sums
from leases.telemetry.history import RecentHistory


def live_readings(
    points: Mapping[int, Sequence[tuple[float, float | None]]], after: float, seconds: float
) -> list[Reading]:
    """Live readings of a node after `after` (Unix s): the mean over its GPUs at each
    poll, each standing for `seconds` (the poll interval). points: GPU index -> (at, util)."""
    by_time: dict[float, list[float]] = {}
    unknown: set[float] = set()
    for series in points.values():
        for at, util in series:
            if at < after:
                continue
            if util is None:
                unknown.add(at)
            else:
                by_time.setdefault(at, []).append(util)
    out = [Reading(at, seconds, sum(v) / len(v)) for at, v in by_time.items()]
    out += [Reading(at, seconds, None) for at in unknown - set(by_time)]
    return sorted(out, key=lambda r: r.at)


def recent_readings(
    nodes: Sequence[Node],
    polled: Mapping[str, NodeStatus],
    recent: RecentHistory,
    last_minute: Mapping[int, int],
    now: datetime,
    interval_s: float,
) -> dict[int, list[Reading]]:
    """Readings held in memory (polling here) after each node's last stored minute, by
    node id. polled: the poller's statuses, by the names of the fleet's nodes it polls;
    last_minute: each node's latest stored minute (FleetData.last_minute)."""
    out: dict[int, list[Reading]] = {}
    hour_ago = now.timestamp() - 3600
    for node in nodes:
        st = polled.get(node.name)
        if st is None or node.id is None:
            continue
        last = last_minute.get(node.id)
        after = (last + 1) * 60.0 if last is not None else hour_ago
        points = {
            s.index: [(p.at, p.util) for p in recent.series(node.name, s.index)] for s in st.samples
        }
        out[node.id] = live_readings(points, after, interval_s)
    return out


def hour_means(stored: CellSums, live: list[Reading] | None, end: float) -> list[float | None]:
    """The sparkline's cells: the stored minutes' sums plus the live readings' (few: only
    those after the node's last stored minute)."""
    return (stored + cell_sums(live, end=end)).means() if live else stored.means()
