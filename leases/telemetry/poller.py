"""The sweep over every node: read GPUs (nvidia-smi over SSH, NVML for a local node), keep
the last hour in memory, fold readings into roll-ups, record gaps; after a flush, evaluate
alerts when they are due (leases.alerts.watch).

Two ways to read a remote node, both on its one persistent connection:
- "stream" (the default for `zuka collect` and the dashboard): one long-lived
  `nvidia-smi --query-gpu=... -lms N` per node. The node pushes each round: no round trip
  per poll, and no new nvidia-smi process waking the GPUs every few seconds (with
  persistence mode off a fresh process drives the card to P0, which distorts the power and
  clocks we read). bench/poll.py measures both modes.
- "exec": one query per poll (`zuka poll`; probed once, kept: leases.telemetry.gpuread).
A node's fault never stops the others: each node is read in its own task and every fault
ends as that node's NodeStatus. That includes zuka's own failures on a node's data (an
exception while parsing or storing it): the node becomes `garbage` with the reason and
the traceback goes to the fault log (leases.telemetry.faultlog). run_supervised restarts a run()
that dies anyway, with backoff, and says so through `running` and `last_fault`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from leases.core.clock import Clock, utc_now
from leases.core.i18n import EN, speaking
from leases.core.models import GpuProcess, GpuSample, Node, NodeHealth, NodeStatus
from leases.ssh.errors import BackingOff, HostKeyRejected, SshError, StreamExited
from leases.ssh.pool import SshPool
from leases.ssh.stream import CommandResult
from leases.telemetry import gcsettle, gpuread, nvsmi, nvsmiprobe, nvsmistream
from leases.telemetry.attribution import gpu_owners
from leases.telemetry.faultlog import quiet_logger
from leases.telemetry.flushes import GapEvent, write_flush
from leases.telemetry.history import NodeMinute, RecentHistory
from leases.telemetry.nodestate import NodeState, describe
from leases.telemetry.nvml import NvmlReader, NvmlUnavailable
from leases.telemetry.probecache import Probe, ProbeBook, ProbeCache
from leases.telemetry.promtarget import is_prometheus
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.words import REASONS

if TYPE_CHECKING:  # imported by the collector and the dashboard, which make one
    from leases.alerts.watch import AlertWatch
    from leases.telemetry.promread import PromReader  # made when a node reads from it

Mode = Literal["stream", "exec"]


class Poller:
    def __init__(
        self,
        nodes: Sequence[Node],
        *,
        pool: SshPool,
        clock: Clock = utc_now,
        store: HistoryStore | None = None,
        recent: RecentHistory | None = None,
        interval_s: float = 5.0,
        apps_every: int = 6,
        nvml: Callable[[], NvmlReader] = NvmlReader,
        on_update: Callable[[NodeStatus], None] | None = None,
        log: logging.Logger | None = None,
        alerts: AlertWatch | None = None,
        host_stats: bool = True,
        prom: PromReader | None = None,
        probes: ProbeCache | None = None,
        reuse_probes: bool = False,
        processes: bool = True,
        kept_shell: bool = True,
        settle_gc: bool = False,
    ) -> None:
        self.prom = prom  # nodes read from Prometheus share its session, made at first use
        self.pool = pool
        self.log = log or quiet_logger()
        # True while run() polls; last_fault says why it last stopped (run_supervised).
        self.running, self.last_fault, self.restarts = False, "", 0
        self.clock, self.store = clock, store
        # The last hour at full rate is for a screen: a headless collector keeps none.
        self.recent = recent
        self.interval_s, self.apps_every = interval_s, apps_every
        # Read CPU, RAM, disks and network with the GPUs (leases.telemetry.hoststats);
        # bench/poll.py turns it off to measure what it costs.
        self.host_stats = host_stats
        # The fields each node's nvidia-smi knows, kept in the ledger between processes;
        # whether to read the GPU processes at all (`zuka poll` only when it shows them);
        # kept_shell False: each command an exec of its own (a process reading nodes once).
        self.probes = ProbeBook(probes, reuse=reuse_probes)  # reused: `zuka poll` only
        self.processes, self.kept_shell = processes, kept_shell
        self.on_update = on_update
        # A long-lived process (zuka collect): after the first flush, move
        # what lives as long as the process out of full collections (leases.telemetry.gcsettle).
        self.settle_gc = settle_gc
        # Evaluated after a flush, every alerts.every_s at most (leases.alerts.watch).
        self.alerts = alerts
        self._nvml_factory = nvml
        self._nvml: NvmlReader | None = None
        self._nodes: dict[str, NodeState] = {}
        self.statuses: dict[str, NodeStatus] = {}
        self._pending_minutes: list[NodeMinute] = []
        self._pending_latest: dict[str, NodeStatus] = {}
        # Gaps opened and closed since the last flush, in order: written with it.
        self._pending_gaps: list[GapEvent] = []
        self.set_nodes(nodes)

    def set_nodes(self, nodes: Sequence[Node]) -> None:
        """Follow the ledger: new nodes are added, removed ones forgotten, and a name that now
        names another node (by id) starts afresh."""
        wanted = {n.name: n for n in nodes}
        if self.store is not None:
            self.store.set_nodes(nodes)
        for name in list(self._nodes):
            # Gone, or its name now another node's (the old one released, a new one added
            # under its name): what was read of the old node is not the new one's.
            was, now = self._nodes[name].node.id, wanted[name].id if name in wanted else None
            if name not in wanted or (was is not None and now is not None and was != now):
                del self._nodes[name]
                self.statuses.pop(name, None)
                self._pending_latest.pop(name, None)
                self._pending_gaps = [g for g in self._pending_gaps if g.node != name]
                if self.recent is not None:
                    self.recent.forget(name)
        new = [node for name, node in wanted.items() if name not in self._nodes]
        kept = self.probes.load(new)
        for name, node in wanted.items():
            state = self._nodes.get(name)
            if state is None:
                state = self._nodes[name] = NodeState(node)
                if (probe := kept.get(node.id or -1)) is not None:
                    state.fields, state.driver = probe.fields, probe.driver
                self.statuses[name] = NodeStatus(name)
            else:
                state.node = node

    @property
    def nodes(self) -> list[Node]:
        return [s.node for s in self._nodes.values()]

    async def sweep(self, names: Sequence[str] | None = None) -> dict[str, NodeStatus]:
        """One sweep (exec mode): every node (or those named) read at once, and stored."""
        targets = [self._nodes[n] for n in (names or list(self._nodes))]
        with speaking(EN):  # failure details are stored: English (leases.core.retold)
            await asyncio.gather(*(self._read_once(s) for s in targets))
        self.flush()
        return {s.node.name: self.statuses[s.node.name] for s in targets}

    async def _read_once(self, state: NodeState) -> None:
        try:
            if is_prometheus(state.node):  # no SSH: leases.telemetry.promread
                await self._read_prom(state)
            else:
                await self._read_once_unguarded(state)
        except Exception as exc:  # zuka's own failure on this node's data
            self._crashed(state, exc)

    async def _read_once_unguarded(self, state: NodeState) -> None:
        node = state.node
        if node.local:
            await self._read_local(state)
            return
        session = self.pool.add(node)
        run = session.query if self.kept_shell else session.run_sh
        # The node's CPU, RAM, disks, network in the same round trip, as often as the
        # processes (every apps_every readings: a CPU share over 30 s reads steadier), and
        # the processes themselves too once the fields are known.
        polls = state.polls
        due = polls % self.apps_every == 0
        with_host = self.host_stats and due
        apps_of = state.owners if self.processes and due else None
        try:
            read = await gpuread.read_gpus(run, state.fields, with_host=with_host, apps_of=apps_of)
            now, state.fields, result = self.clock(), read.fields, read.result
            if with_host:
                state.read_host(read.host)
            if result.exit_status != 0:
                self._failed_reading(state, result.exit_status, result.stdout, result.stderr)
                return
            said = (result.stdout, read.fields)  # again: the same values (and driver)
            again = said == state.said and not read.probed and bool(state.kept)
            if again:  # the samples it gave before, read again now (NodeStatus.samples_at)
                samples: Sequence[GpuSample] = state.kept
            else:
                samples = nvsmi.parse_query(result.stdout, read.fields, node.name, now, state.rows)
                self._probed(state, read.probed, samples)
            if not due:  # as _processes counts it, without a coroutine made and awaited
                state.polls += 1
            processes = await self._processes(state, run, read.apps) if due else None
            self._good(state, samples, processes, parsed=True, said=said, again=again, at=now)
        except HostKeyRejected as exc:
            self._bad(state, exc.health, exc.message, exc.offered.fingerprint)
        except SshError as exc:
            if due and state.polls == polls:  # its turn taken: a part that hangs (ps, df)
                state.polls += 1  # cannot time out every reading (the next ones are plain)
            self._bad(state, exc.health, exc.message)
        except nvsmiprobe.NvsmiProbeError as exc:
            if with_host:
                state.read_host(exc.host)
            self._bad(state, exc.health, str(exc))
        except nvsmi.NvsmiParseError as exc:
            self._unprobe(state)  # probe again: the node may have changed under us
            self._bad(state, NodeHealth.GARBAGE, str(exc))

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

    async def _processes(
        self,
        state: NodeState,
        run: Callable[[str], Awaitable[CommandResult]],
        read: gpuread.AppsRead | None = None,
        *,
        streaming: bool = False,
    ) -> tuple[GpuProcess, ...] | None:
        """Per-process use, every apps_every polls; None when not read this time. `read`:
        what the GPU query's command already brought back (exec mode, known fields)."""
        state.polls += 1
        if not self.processes or (state.polls - 1) % self.apps_every:
            return None
        # In stream mode the host figures ride on this round trip (in exec mode on the GPU
        # query's, see _read_once_unguarded).
        if read is None:
            host = self.host_stats and streaming
            read = await gpuread.read_apps(run, state.owners, host=host)
        if read.host_read:
            state.read_host(read.host)
        if (reading := read.reading) is None or reading.processes is None:
            return None
        said = "; ".join(reading.problems)
        state.owner_problems = f"process owners: {said}" if said else ""
        return reading.processes

    async def _read_local(self, state: NodeState) -> None:
        try:
            if self._nvml is None:
                reader = self._nvml_factory()
                await asyncio.to_thread(reader.open)
                self._nvml = reader
            samples = await asyncio.to_thread(self._nvml.read, state.node.name, self.clock())
            processes = None
            state.polls += 1
            if not (state.polls - 1) % self.apps_every:
                processes = tuple(
                    await asyncio.to_thread(self._nvml.processes, state.node.name, samples)
                )
        except NvmlUnavailable as exc:
            self._nvml = None
            self._bad(state, exc.health, str(exc))
            return
        self._good(state, samples, processes)

    async def _read_prom(self, state: NodeState) -> None:
        """A node read from Prometheus (leases.telemetry.promread): no processes."""
        if self.prom is None:
            from leases.telemetry.promread import PromReader  # aiohttp: only where used

            self.prom = PromReader()
        got = await self.prom.read(state.node, self.clock(), self.interval_s)
        if got.problem is not None:
            self._bad(state, got.problem.health, got.problem.detail)
        elif got.samples:
            self._good(state, got.samples, None)

    def _failed_reading(
        self, state: NodeState, status: int | None, stdout: str, stderr: str
    ) -> None:
        health = nvsmi.classify_failure(status, stdout, stderr)
        said = (stderr.strip() or stdout.strip()).splitlines()
        detail = REASONS[health] + (f": {said[0][:200]}" if said else "")  # stored: English
        if health is NodeHealth.GARBAGE:
            self._unprobe(state)
        self._bad(state, health, detail)

    # -- recording -----------------------------------------------------------------------

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

    # -- running -------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, mode: Mode = "stream", flush_s: float = 5.0) -> None:
        """Poll until stop is set. Stream mode: one task per node plus a flusher."""
        self.running = True
        try:
            if mode == "exec":
                while not stop.is_set():
                    started = time.monotonic()
                    await self.sweep()
                    self._settle()
                    left = self.interval_s - (time.monotonic() - started)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), max(0.0, left))
                return
            await self._run_streams(stop, flush_s)
        finally:
            self.running = False

    async def _run_streams(self, stop: asyncio.Event, flush_s: float) -> None:
        tasks: dict[str, asyncio.Task[None]] = {}
        try:
            while not stop.is_set():
                for name, state in self._nodes.items():
                    task = tasks.get(name)
                    if task is not None and task.done() and not task.cancelled():
                        exc = task.exception()
                        if exc is not None:  # escaped _follow: still only this node's
                            self._crashed(state, exc)
                    if task is None or task.done():
                        with speaking(EN):  # the task's copy of the context: English
                            tasks[name] = asyncio.create_task(self._follow(state, stop))
                for name in [n for n in tasks if n not in self._nodes]:
                    tasks.pop(name).cancel()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), flush_s)
                self.flush()
                self._settle()
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            self.flush()

    def _settle(self) -> None:
        if self.settle_gc:
            self.settle_gc = False
            gcsettle.settle()

    async def run_supervised(
        self,
        stop: asyncio.Event,
        mode: Mode = "stream",
        flush_s: float = 5.0,
        *,
        on_fault: Callable[[BaseException, float], None] | None = None,
        backoff_s: float = 1.0,
        backoff_cap_s: float = 60.0,
    ) -> None:
        """run() until stop is set, restarted after backoff whenever it dies.

        on_fault(exc, retry_in_s) is told each time (the dashboard notifies, the collector
        prints); the traceback goes to the log. The delay doubles up to backoff_cap_s and
        starts over after a run that lasted longer than the cap.
        """
        delay = backoff_s
        while not stop.is_set():
            started = time.monotonic()
            try:
                await self.run(stop, mode, flush_s)
                return
            except Exception as exc:
                if time.monotonic() - started > backoff_cap_s:
                    delay = backoff_s
                self.restarts += 1
                self.last_fault = describe(exc)
                self.log.error("the poller stopped; restarting in %g s", delay, exc_info=exc)
                if on_fault is not None:
                    on_fault(exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            delay = min(backoff_cap_s, delay * 2)

    async def _follow(self, state: NodeState, stop: asyncio.Event) -> None:
        """Keep one node's stream going; after a fault wait, then start again."""
        while not stop.is_set() and self._nodes.get(state.node.name) is state:
            wait = self.interval_s
            if state.node.local or is_prometheus(state.node):
                await self._read_once(state)
            else:
                wait = await self._stream_once(state)
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(state.wake.wait())]
            await asyncio.wait(waits, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
            state.wake.clear()

    def retry_now(self, name: str) -> None:
        """Try the node again at once: forget its backoff and end its current wait."""
        if name in self.pool:
            self.pool[name].retry_now()
        state = self._nodes.get(name)
        if state is not None:
            state.wake.set()

    async def _stream_once(self, state: NodeState) -> float:
        """Read one node's stream until it ends; return how long to wait before the next."""
        try:
            return await self._stream_once_unguarded(state)
        except Exception as exc:  # zuka's own failure on this node's data
            self._crashed(state, exc)
            return self.interval_s

    async def _stream_once_unguarded(self, state: NodeState) -> float:
        node = state.node
        session = self.pool.add(node)
        try:
            # One exec first: probes fields, proves the query works, tells the GPU count.
            await self._read_once(state)
            status = self.statuses[node.name]
            if status.health is not NodeHealth.OK or state.fields is None:
                return self.interval_s
            parser = nvsmistream.StreamParser(
                state.fields, node.name, self.clock, gpu_count=len(status.samples),
                memo=state.rows,
            )  # fmt: skip
            command = nvsmi.query_command(state.fields, loop_ms=int(self.interval_s * 1000))
            chunks = session.stream(command, idle_timeout=self.interval_s * 3 + 10, chunks=True)
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    try:
                        rounds = parser.feed(chunk)
                    except nvsmi.NvsmiParseError as exc:
                        self._bad(state, NodeHealth.GARBAGE, str(exc))
                        continue
                    for samples in rounds:
                        apps = await self._processes(state, session.query, streaming=True)
                        self._good(state, samples, apps, parsed=True)
            return self.interval_s
        except StreamExited as exc:
            r = exc.result
            self._failed_reading(state, r.exit_status, r.stdout, r.stderr)
        except BackingOff as exc:
            self._bad(state, exc.health, exc.message)
            return max(self.interval_s, exc.retry_at - self.pool.monotonic())
        except HostKeyRejected as exc:
            self._bad(state, exc.health, exc.message, exc.offered.fingerprint)
        except SshError as exc:
            self._bad(state, exc.health, exc.message)
        return self.interval_s

    async def close(self) -> None:
        await self.pool.close()
        if self.prom is not None:
            await self.prom.close()
        if self._nvml is not None:
            await asyncio.to_thread(self._nvml.close)
            self._nvml = None
