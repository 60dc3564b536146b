"""What a reading becomes (the poller's base, leases.telemetry.poller): each node's
NodeStatus, the last hour in memory, its minutes folded into roll-ups, its gaps opened and
closed, its probed fields kept or dropped; written to the ledger at each flush, after which
the alerts are evaluated when they are due (leases.alerts.watch). Nothing here reads a node."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from leases.core.clock import Clock
from leases.core.models import GpuProcess, GpuSample, NodeHealth, NodeStatus
from leases.telemetry import gpuread, nvsmi
from leases.telemetry.attribution import gpu_owners
from leases.telemetry.flushes import GapEvent, write_flush
from leases.telemetry.history import NodeMinute, RecentHistory
from leases.telemetry.nodestate import NodeState, describe
from leases.telemetry.probecache import Probe, ProbeBook
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.words import REASONS

if TYPE_CHECKING:  # made by the collector and the dashboard
    from leases.alerts.watch import AlertWatch


class Recorder:
    """The statuses of a poller's nodes and what is still to be written of them."""

    def __init__(
        self,
        *,
        clock: Clock,
        store: HistoryStore | None,
        recent: RecentHistory | None,
        probes: ProbeBook,
        on_update: Callable[[NodeStatus], None] | None,
        log: logging.Logger,
        alerts: AlertWatch | None,
    ) -> None:
        self.clock, self.store = clock, store
        # The last hour at full rate is for a screen: a headless collector keeps none.
        self.recent = recent
        self.probes = probes
        self.on_update = on_update
        self.log = log
        # Evaluated after a flush, every alerts.every_s at most (leases.alerts.watch).
        self.alerts = alerts
        self._nodes: dict[str, NodeState] = {}
        self.statuses: dict[str, NodeStatus] = {}
        self._pending_minutes: list[NodeMinute] = []
        self._pending_latest: dict[str, NodeStatus] = {}
        # Gaps opened and closed since the last flush, in order: written with it.
        self._pending_gaps: list[GapEvent] = []

    def _probed(self, state: NodeState, probed: bool, samples: Sequence[GpuSample]) -> None:
        """Keep a probe found; drop a kept one another driver answered (it may know more)."""
        driver = gpuread.driver_of(samples)
        if probed:
            state.driver = driver
            self.probes.found(state.node, Probe(state.fields or (), driver))
        elif state.driver is not None and driver != state.driver:
            self._unprobe(state)

    def _unprobe(self, state: NodeState) -> None:
        """Forget the node's fields here and in the ledger: its next reading probes."""
        state.fields = state.driver = None
        self.probes.drop(state.node)

    def _failed_reading(
        self, state: NodeState, status: int | None, stdout: str, stderr: str
    ) -> None:
        health = nvsmi.classify_failure(status, stdout, stderr)
        said = (stderr.strip() or stdout.strip()).splitlines()
        detail = REASONS[health] + (f": {said[0][:200]}" if said else "")  # stored: English
        if health is NodeHealth.GARBAGE:
            self._unprobe(state)
        self._bad(state, health, detail)

    def _good(
        self,
        state: NodeState,
        samples: Sequence[GpuSample],
        processes: tuple[GpuProcess, ...] | None,
        *,
        parsed: bool = False,
        said: tuple[str, tuple[str, ...]] | None = None,
        again: bool = False,
        at: datetime | None = None,
    ) -> None:
        """A good reading. parsed: the samples come from nvidia-smi's parser, which refused
        every value outside nvsmi.BOUNDS row by row (sample_problem's bounds): not checked
        twice. Samples from anywhere else (NVML) are. said: the exec answer and fields they
        were parsed from; again: the same answer as the reading recorded last, its samples
        (NodeState.kept) read again at `at` (the reading's time; else the samples' own)."""
        name = state.node.name
        if not samples:
            self._bad(state, NodeHealth.GPU_LOST, "nvidia-smi listed no GPUs")
            return
        if len(samples) > nvsmi.MAX_GPUS:
            self._bad(state, NodeHealth.GARBAGE, f"more than {nvsmi.MAX_GPUS} GPUs listed")
            return
        for sample in () if parsed else samples:
            problem = nvsmi.sample_problem(sample)
            if problem is not None:
                self._bad(state, NodeHealth.GARBAGE, problem)
                return
        now = samples[0].at if at is None else at
        previous = self.statuses.get(name) or NodeStatus(name)
        if processes is not None:
            state.tracker.see(now, gpu_owners(samples, processes))
        status = NodeStatus(
            name,
            NodeHealth.OK,
            state.owner_problems,
            checked=now,
            at=now,
            samples=tuple(samples),
            processes=previous.processes if processes is None else processes,
            host=state.host if state.host is not None else previous.host,
            samples_at=now if again else None,
        )
        if self.recent is not None:
            self.recent.add(samples, now if again else None)  # else their own (Prometheus)
        if closed := state.acc.again(samples, now) if again else state.acc.add(samples):
            self._pending_minutes.extend(state.attributed(closed))
        state.said, state.kept = said, (status.samples if said is not None else ())
        if state.in_gap is not False and self.store is not None:
            self._pending_gaps.append(GapEvent(name, now, opened=False))
        state.in_gap = False
        self._set(status)

    def _bad(
        self, state: NodeState, health: NodeHealth, detail: str, fingerprint: str | None = None
    ) -> None:
        name = state.node.name
        now = self.clock()
        previous = self.statuses.get(name) or NodeStatus(name)
        if fingerprint is None and health is previous.health:
            # An attempt held back by the backoff sees no key: the key refused is the one
            # seen before (else the host-key alert lost its fingerprint to "?").
            fingerprint = previous.fingerprint
        # Keep the last good readings for display, marked by `at`; history gets nothing.
        # The host figures read with a failed GPU query (no nvidia-smi, a lost GPU) are
        # still the node's.
        host = state.host if state.host is not None else previous.host
        status = replace(
            previous,
            health=health,
            detail=detail,
            checked=now,
            fingerprint=fingerprint,
            host=host,
        )
        closed = state.acc.flush(int(now.timestamp()) // 60)
        if closed is not None:
            self._pending_minutes.extend(state.attributed([closed]))
        if self.store is not None and state.in_gap is not True:
            # Idempotent: a gap another process left open stays the one open.
            self._pending_gaps.append(GapEvent(name, now, opened=True, health=health,
                                               detail=detail))  # fmt: skip
        state.in_gap = True
        self._set(status)

    def _crashed(self, state: NodeState, exc: BaseException) -> None:
        """zuka failed on this node's data: the node's state, a traceback in the log."""
        name = state.node.name
        self.log.error("node %s: failure while handling its data", name, exc_info=exc)
        self._unprobe(state)  # start again from a probe
        detail = f"zuka could not handle this node's data ({describe(exc)}); see the fault log"
        try:
            self._bad(state, NodeHealth.GARBAGE, detail)
        except Exception as again:  # the store failed too: keep the state in memory
            self.log.error("node %s: recording the failure failed", name, exc_info=again)
            self._mark(name, detail)

    def _mark(self, name: str, detail: str) -> None:
        """Garbage without touching the store, and without the readings that failed."""
        previous = self.statuses.get(name, NodeStatus(name))
        self._set(replace(previous, health=NodeHealth.GARBAGE, detail=detail, checked=self.clock(),
                          samples=(), samples_at=None, processes=()))  # fmt: skip

    def _set(self, status: NodeStatus) -> None:
        self.statuses[status.node] = status
        self._pending_latest[status.node] = status
        if self.on_update is not None:
            try:
                self.on_update(status)
            except Exception:  # the listener's fault, not the node's: polling goes on
                self.log.exception("on_update failed for node %s", status.node)

    def flush(self) -> None:
        """Write closed minutes and the latest status of changed nodes to the ledger."""
        now_minute = int(self.clock().timestamp()) // 60
        for state in self._nodes.values():
            closed = state.acc.flush(now_minute)
            if closed is not None:
                self._pending_minutes.extend(state.attributed([closed]))
        minutes, self._pending_minutes = self._pending_minutes, []
        latest, self._pending_latest = self._pending_latest, {}
        self.probes.write(self.clock(), self.log)
        gaps, self._pending_gaps = self._pending_gaps, []
        if self.store is None:
            return
        clock = self.clock
        rows = [
            s if s.checked is not None else replace(s, checked=clock())
            for s in latest.values()
            if s.node in self._nodes
        ]
        gaps = [g for g in gaps if g.node in self._nodes]
        self._store(minutes, rows, gaps)
        if self.alerts is not None:
            self.alerts.tick()  # never raises; cheap when not due

    def _store(
        self, minutes: list[NodeMinute], rows: list[NodeStatus], gaps: list[GapEvent]
    ) -> None:
        assert self.store is not None
        for name, exc in write_flush(self.store, minutes, rows, gaps, self.log):
            state = self._nodes.get(name)
            if state is not None:
                state.in_gap = None  # its gap's state in the ledger is not known now
                self._mark(name, f"zuka could not store this node's reading "
                                 f"({describe(exc)}); see the fault log")  # fmt: skip


__all__ = ["Recorder"]
