"""The sweep over every node: read GPUs (nvidia-smi over SSH, NVML for a local node); each
reading is recorded by the base class (leases.telemetry.recording: statuses, the last hour,
roll-ups, gaps, the ledger, the alerts after a flush).

Two ways to read a remote node, both on its one persistent connection:
- "stream" (the default for `zuka collect` and the dashboard): one long-lived
  `nvidia-smi --query-gpu=... -lms N` per node. The node pushes each round: no round trip
  per poll, and no new nvidia-smi process waking the GPUs every few seconds (with
  persistence mode off a fresh process drives the card to P0, which distorts the power and
  clocks we read). bench/poll.py measures both modes.
- "exec": one query per poll (`zuka poll`; probed once, kept: leases.telemetry.gpuread).
  A warm sweep's readings (fields known, a kept shell ready) go out in one batch whose
  answers are recorded in callbacks as they come (leases.ssh.asks); every other reading
  (a probe, a connect, a fallback) is a task of its own.
A node's fault never stops the others: every fault ends as that node's NodeStatus. That
includes zuka's own failures on a node's data (an exception while parsing or storing it):
the node becomes `garbage` with the reason and the traceback goes to the fault log
(leases.telemetry.faultlog). run_supervised restarts a run()
that dies anyway, with backoff, and says so through `running` and `last_fault`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Literal

from leases.core.clock import Clock, utc_now
from leases.core.i18n import EN, speaking
from leases.core.models import GpuProcess, GpuSample, Node, NodeHealth, NodeStatus
from leases.ssh.asks import Answer, AskBatch
from leases.ssh.errors import BackingOff, HostKeyRejected, SshError, StreamExited
from leases.ssh.pool import SshPool
from leases.ssh.stream import CommandResult
from leases.telemetry import gcsettle, gpuread, nvsmi, nvsmiprobe, nvsmistream
from leases.telemetry.faultlog import quiet_logger
from leases.telemetry.history import RecentHistory
from leases.telemetry.nodestate import NodeState, describe
from leases.telemetry.nvml import NvmlReader, NvmlUnavailable
from leases.telemetry.owners import OwnersMemo
from leases.telemetry.probecache import ProbeBook, ProbeCache
from leases.telemetry.promtarget import is_prometheus
from leases.telemetry.recording import Recorder
from leases.telemetry.rollups import HistoryStore

if TYPE_CHECKING:  # imported by the collector and the dashboard, which make one
    from leases.alerts.watch import AlertWatch
    from leases.telemetry.promread import PromReader  # made when a node reads from it

Mode = Literal["stream", "exec"]


class Poller(Recorder):
    """Reads the nodes (sweeps, streams) and records each reading (Recorder)."""

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
        super().__init__(
            clock=clock,
            store=store,
            recent=recent,
            # The fields each node's nvidia-smi knows, kept in the ledger between processes.
            probes=ProbeBook(probes, reuse=reuse_probes),  # reused: `zuka poll` only
            on_update=on_update,
            log=log or quiet_logger(),
            alerts=alerts,
        )
        self.prom = prom  # nodes read from Prometheus share its session, made at first use
        self.pool = pool
        # True while run() polls; last_fault says why it last stopped (run_supervised).
        self.running, self.last_fault, self.restarts = False, "", 0
        self.interval_s, self.apps_every = interval_s, apps_every
        # Read CPU, RAM, disks and network with the GPUs (leases.telemetry.hoststats);
        # bench/poll.py turns it off to measure what it costs.
        self.host_stats = host_stats
        # Whether to read the GPU processes at all (`zuka poll` only when it shows them);
        # kept_shell False: each command an exec of its own (a process reading nodes once).
        self.processes, self.kept_shell = processes, kept_shell
        # A long-lived process (zuka collect): after the first flush, move
        # what lives as long as the process out of full collections (leases.telemetry.gcsettle).
        self.settle_gc = settle_gc
        self._nvml_factory = nvml
        self._nvml: NvmlReader | None = None
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
            await self._read_all(targets)
        self.flush()
        return {s.node.name: self.statuses[s.node.name] for s in targets}

    async def _read_all(self, targets: Sequence[NodeState]) -> None:
        """Warm nodes' readings in one batch, the others each in a task of its own, and
        those the batch hands back (`later`: a probe, an exec) in theirs as soon as it
        does, not after the batch's slowest node."""
        asks, later = AskBatch(), list[asyncio.Task[None]]()
        slow = [s for s in targets if not self._ask_known(asks, s, later)]
        try:
            await asyncio.gather(asks.wait(), *(self._read_once(s) for s in slow))
            await asyncio.gather(*later)
        except BaseException:  # cancelled, even before the batch's wait began
            asks.give_up()
            for task in later:
                task.cancel()
            await asyncio.gather(*later, return_exceptions=True)
            raise

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
        polls = state.polls
        due, with_host, apps_of = self._extras(state)
        try:
            read = await gpuread.read_gpus(run, state.fields, with_host=with_host, apps_of=apps_of)
            now = self.clock()
            if with_host:
                state.read_host(read.host)
            taken = self._taken(state, read.fields, read.result, now, read.probed, count=not due)
            if taken is not None:
                processes = await self._processes(state, run, read.apps) if due else None
                self._good(state, taken[0], processes, parsed=True, said=taken[1],
                           again=taken[2], at=now)  # fmt: skip
        except (SshError, nvsmiprobe.NvsmiProbeError, nvsmi.NvsmiParseError) as exc:
            # Its turn taken by an SSH failure: a part that hangs (ps, df) cannot time out
            # every reading (the next ones are plain).
            self._not_read(state, exc, turn=due and state.polls == polls, with_host=with_host)

    def _extras(self, state: NodeState) -> tuple[bool, bool, OwnersMemo | None]:
        """Whether this reading is the node's turn (every apps_every: a CPU share over 30 s
        reads steadier), and so whether its CPU, RAM, disks and network, and its processes
        (their owner memo), are read in the same round trip as its GPUs."""
        due = state.polls % self.apps_every == 0
        return due, self.host_stats and due, state.owners if self.processes and due else None

    def _ask_known(self, asks: AskBatch, state: NodeState, later: list[asyncio.Task[None]]) -> bool:
        """Ask a warm node's reading in the sweep's batch (leases.ssh.asks: no task per
        node): its fields known, its kept shell ready now; the processes and host figures
        riding on it in their turn. False: read it the usual way (_read_once)."""
        node, fields = state.node, state.fields
        if fields is None or not self.kept_shell or node.local or is_prometheus(node):
            return False
        due, with_host, apps_of = self._extras(state)
        command = gpuread.known_command(fields, with_host=with_host, apps=apps_of is not None)
        try:
            then = partial(self._known_answered, state, fields, due, with_host, apps_of, later)
            return asks.add(self.pool.add(node), command, then)
        except Exception as exc:  # zuka's own failure on this node
            self._crashed(state, exc)
            return True

    def _known_answered(
        self,
        state: NodeState,
        fields: tuple[str, ...],
        due: bool,
        with_host: bool,
        apps_of: OwnersMemo | None,
        later: list[asyncio.Task[None]],
        answer: Answer,
    ) -> None:
        """A batch's answer to a node's reading (_ask_known), recorded as
        _read_once_unguarded records it; the node read the usual way at once (a task in
        `later`) where that would have gone on: the command run as an exec instead, the
        apps' marker missing, or a field refused (probed)."""
        try:
            if isinstance(answer, SshError):
                self._not_read(state, answer, turn=due, with_host=with_host)
                return
            if isinstance(answer, Exception):  # zuka's own, taking the answer
                raise answer
            read = None
            if answer is not None:
                read = gpuread.known_read(fields, answer, with_host=with_host, apps_of=apps_of)
            if read is None:
                later.append(asyncio.ensure_future(self._read_once(state)))
                return
            now = self.clock()
            if with_host:
                state.read_host(read.host)
            taken = self._taken(state, fields, read.result, now)  # counted, due or not
            if taken is not None:
                processes = None
                if due and read.apps is not None:
                    processes = self._apps_had(state, read.apps)
                self._good(state, taken[0], processes, parsed=True, said=taken[1],
                           again=taken[2], at=now)  # fmt: skip
        except nvsmi.NvsmiParseError as exc:  # the node's garbage, as _read_once_unguarded
            self._not_read(state, exc, turn=False, with_host=with_host)
        except Exception as exc:  # zuka's own failure on this node's data
            self._crashed(state, exc)

    def _taken(
        self,
        state: NodeState,
        fields: tuple[str, ...],
        result: CommandResult,
        now: datetime,
        probed: bool = False,
        *,
        count: bool = True,
    ) -> tuple[Sequence[GpuSample], tuple[str, tuple[str, ...]], bool] | None:
        """The samples of a GPU query's answer read at `now` with `fields` (probed: just
        probed for), the answer and fields they come from (NodeState.said), and whether
        that answer is the last one recorded (the samples then the ones it gave, read
        again: NodeStatus.samples_at). None: a failed reading, recorded. count: the reading
        counted here (a task's due reading is counted by _processes; a batch's, here)."""
        state.fields = fields
        if result.exit_status != 0:
            self._failed_reading(state, result.exit_status, result.stdout, result.stderr)
            return None
        said = (result.stdout, fields)  # again: the same values (and driver)
        again = said == state.said and not probed and bool(state.kept)
        if again:
            samples: Sequence[GpuSample] = state.kept
        else:
            samples = nvsmi.parse_query(result.stdout, fields, state.node.name, now, state.rows)
            self._probed(state, probed, samples)
        state.polls += count
        return samples, said, again

    def _not_read(self, state: NodeState, exc: Exception, *, turn: bool, with_host: bool) -> None:
        """A reading that failed (SshError, NvsmiProbeError, NvsmiParseError); turn: an SSH
        failure takes the node's turn for processes and host figures."""
        if isinstance(exc, HostKeyRejected):
            self._bad(state, exc.health, exc.message, exc.offered.fingerprint)
        elif isinstance(exc, SshError):
            state.polls += turn
            self._bad(state, exc.health, exc.message)
        elif isinstance(exc, nvsmiprobe.NvsmiProbeError):
            if with_host:
                state.read_host(exc.host)
            self._bad(state, exc.health, str(exc))
        else:
            self._unprobe(state)  # probe again: the node may have changed under us
            self._bad(state, NodeHealth.GARBAGE, str(exc))

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
        return self._apps_had(state, read)

    def _apps_had(self, state: NodeState, read: gpuread.AppsRead) -> tuple[GpuProcess, ...] | None:
        """The processes an apps reading had (None: not read), its host part kept."""
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
