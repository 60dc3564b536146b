"""Who used the cards: busy card-minutes attributed to the owners of the GPU processes.

A busy card-minute goes to the owners of the processes on that GPU during that minute,
split evenly when several users share the GPU. A busy minute with no known owner (no
process listed, owners unknown or refused, no process reading fresh enough) goes to "?":
it is still paid for, and the report must show it rather than hide it.

Pure code: no I/O. leases.telemetry.rollups stores what this computes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from leases.core.models import GpuProcess, GpuSample
from leases.telemetry.history import GpuMinute

UNKNOWN = "?"
# A process reading stands for the minutes after it for this long: the poller reads
# processes every few polls (30 s by default), so a minute often has no reading of its own.
FRESH_S = 300
# Owner readings kept per node at most: enough for FRESH_S at one reading a poll.
_KEEP = 128
# Older than this before the newest reading, a reading is asked for by no minute still to
# close (the open minute began at most a minute before the newest reading; a minute asks
# back FRESH_S from its start): dropped, so a steady collector does not hold _KEEP of them.
_SPARE_S = 120

# Owners per GPU index; a GPU the reading listed without processes maps to ().
GpuOwners = Mapping[int, tuple[str, ...]]


def gpu_owners(
    samples: Sequence[GpuSample], processes: Iterable[GpuProcess]
) -> dict[int, tuple[str, ...]]:
    """Owners of each GPU's processes ("?" for an unknown one), sorted, by GPU index."""
    index_of = {s.uuid: s.index for s in samples if s.uuid}
    found: dict[int, set[str]] = {s.index: set() for s in samples}
    for p in processes:
        index = index_of.get(p.gpu_uuid)
        if index is not None:
            found[index].add(p.owner or UNKNOWN)
    return {i: tuple(sorted(o)) for i, o in found.items()}


class OwnerTracker:
    """The owners seen on one node's GPUs over the last minutes."""

    def __init__(self, fresh_s: int = FRESH_S) -> None:
        self.fresh_s = fresh_s
        self._seen: deque[tuple[int, dict[int, tuple[str, ...]]]] = deque(maxlen=_KEEP)

    def see(self, at: datetime, owners: dict[int, tuple[str, ...]]) -> None:
        t = int(at.timestamp())
        seen = self._seen
        while seen and seen[-1][0] > t:
            seen.pop()  # the clock went back: later readings are not to be trusted
        if seen:
            newest, last = seen[-1]
            horizon = newest - self.fresh_s - _SPARE_S
            while seen[0][0] < horizon:
                seen.popleft()
            if owners == last:
                owners = last  # the same owners as the reading before: held once
        seen.append((t, owners))

    def owners(self, minute: int) -> dict[int, tuple[str, ...]] | None:
        """Owners per GPU during `minute`: those seen in it, else the last reading before
        it if fresh; None when there is none."""
        start, end = minute * 60, minute * 60 + 60
        inside = [o for t, o in self._seen if start <= t < end]
        if inside:
            merged: dict[int, set[str]] = {}
            for o in inside:
                for index, names in o.items():
                    merged.setdefault(index, set()).update(names)
            return {i: tuple(sorted(n)) for i, n in merged.items()}
        before = [(t, o) for t, o in self._seen if t < start and start - t <= self.fresh_s]
        return before[-1][1] if before else None


def minute_shares(gpus: Sequence[GpuMinute], owners: GpuOwners | None) -> dict[str, float]:
    """Busy card-minutes of one node-minute by owner (idle and unknown minutes: nothing)."""
    shares: dict[str, float] = {}
    for g in gpus:
        if not g.busy:
            continue
        names = (owners or {}).get(g.index) or (UNKNOWN,)
        for name in names:
            shares[name] = shares.get(name, 0.0) + 1.0 / len(names)
    return shares


def add_shares(total: dict[str, float], shares: Mapping[str, float], weight: float = 1.0) -> None:
    for name, value in shares.items():
        total[name] = total.get(name, 0.0) + value * weight


__all__ = [
    "FRESH_S",
    "UNKNOWN",
    "GpuOwners",
    "OwnerTracker",
    "add_shares",
    "gpu_owners",
    "minute_shares",
]
