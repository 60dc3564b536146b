"""What the poller keeps for each node between readings: its probed fields, its minute in
progress, its process owners, its gap state, its host figures and its parsed GPU rows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from leases.core.host import HostStats
from leases.core.models import GpuSample, Node
from leases.telemetry import hoststats
from leases.telemetry.attribution import OwnerTracker
from leases.telemetry.history import MinuteAccumulator, NodeMinute
from leases.telemetry.owners import OwnersMemo
from leases.telemetry.rowmemo import RowMemo


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


@dataclass
class NodeState:
    """What the poller holds for one node between readings (leases.telemetry.poller)."""

    node: Node
    fields: tuple[str, ...] | None = None
    # The driver the fields were probed with (None: not known); another one drops them.
    driver: str | None = None
    polls: int = 0
    acc: MinuteAccumulator = field(init=False)
    # Owners of the GPU processes as last read, for attributing the minutes it closes.
    tracker: OwnerTracker = field(default_factory=OwnerTracker)
    # The owner query's output as last read and what it parsed to (its name is the node's:
    # a node renamed is a new state, leases.telemetry.poller.set_nodes).
    owners: OwnersMemo = field(init=False)
    # Why some process owners were refused or unknown at the last reading (the detail).
    owner_problems: str = ""
    # Whether the ledger holds an open gap for this node; None until this process knows.
    # None makes the first good reading close a gap another process opened (a collector
    # that stopped, a dashboard that handed over), and the first bad one open it once.
    in_gap: bool | None = None
    # Set to cut a wait short (the user just trusted the node's key, say).
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # The host figures (leases.telemetry.hoststats): the last reading, for CPU and
    # network deltas, when it was read (this process's clock), and the figures.
    host_reading: hoststats.HostReading | None = None
    host_read_at: float | None = None
    host: HostStats | None = None
    # The GPU rows last read and what they parsed to (exec and stream alike).
    rows: RowMemo = field(default_factory=RowMemo)
    # The exec answer and query fields of the reading last recorded (None: it came from
    # elsewhere, a stream), and the samples it gave: the same answer again is the same
    # samples, read again (NodeStatus.samples_at, MinuteAccumulator.again).
    said: tuple[str, tuple[str, ...]] | None = None
    kept: tuple[GpuSample, ...] = ()

    def __post_init__(self) -> None:
        self.acc = MinuteAccumulator(self.node.name)
        self.owners = OwnersMemo(self.node.name)

    def attributed(self, minutes: Sequence[NodeMinute]) -> list[NodeMinute]:
        """Closed minutes with the owners of their GPUs' processes attached."""
        out = []
        for m in minutes:
            seen = self.tracker.owners(m.minute)
            out.append(m if seen is None else replace(m, owners=tuple(sorted(seen.items()))))
        return out

    def read_host(self, text: str | None) -> None:
        """Turn the host part of an output into the node's host figures (never raises on
        what the node printed: a part not read is named in the figures' problems)."""
        reading = hoststats.parse_host(text, self.host_reading)
        at = time.monotonic()
        before, seconds = self.host_reading, None
        if self.host_read_at is not None:
            seconds = at - self.host_read_at
        self.host = hoststats.stats(reading, before, seconds)
        self.host_reading, self.host_read_at = reading, at
