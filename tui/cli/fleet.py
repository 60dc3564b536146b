"""Handlers of the fleet subcommands: poll, collect, sim and node trust."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from leases.core.errors import InputError, no_ledger
from leases.core.host import host_record
from leases.core.i18n import _
from leases.core.models import Node, NodeHealth, NodeState, NodeStatus
from leases.core.textsafe import visible
from leases.fleet.nodestatus import health_summary, status_figures
from leases.ledger import labfiles
from leases.ledger.paths import ledger_choice
from leases.ledger.store import Ledger
from leases.telemetry.housekeeping import Housekeeping, fleet_nodes
from leases.telemetry.lock import PollerLock
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore, sample_record
from leases.telemetry.wiring import make_poller, polled_nodes
from leases.telemetry.words import detail_said
from tui.cli import fleetwords, output
from tui.words import disk_cell, ram_cell, shown

if TYPE_CHECKING:
    from leases.sim import SimNode


def _path(args: argparse.Namespace, *, existing: bool = False) -> Path:
    """The ledger's path; existing: refused when there is no ledger (a typo in --ledger
    would otherwise poll an empty fleet and say nothing)."""
    path, why = ledger_choice(args.ledger)
    if existing and not path.exists():
        raise no_ledger(path, why)
    return path


def own_identity(value: str | None) -> Path | None:
    """`--identity FILE`: the collector's own key, loaded once here so that a key that is
    not this user's, or that others may read, is refused before anything starts."""
    if value is None:
        return None
    import asyncssh

    from leases.ssh.keys import KeyFileRefused, load_own_key

    path = Path(value).expanduser().absolute()
    try:
        load_own_key(path)
    except KeyFileRefused as exc:
        raise InputError("identity", value, _("refused: {problem}").format(problem=exc)) from None
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise InputError("identity", value, fleetwords.not_a_key(exc)) from None
    return path


def _positive(field: str, value: float) -> float:
    if value <= 0:
        raise InputError(field, value, _("must be greater than zero"))
    return value


# -- printing statuses -------------------------------------------------------------------


def _fmt(value: float | None, pattern: str) -> str:
    return "?" if value is None else pattern.format(value)


def status_row(st: NodeStatus, cut: bool = True) -> tuple[str, ...]:
    fig = status_figures(st)
    return (
        st.node,
        shown(st.health),
        str(fig.gpus) if fig else "-",
        _fmt(fig.util, "{:.0f}%") if fig else "-",
        f"{_fmt(fig.mem_used_gib, '{:.0f}')}/{_fmt(fig.mem_total_gib, '{:.0f}')} GiB"
        if fig
        else "-",
        _fmt(fig.power_w, "{:.0f} W") if fig else "-",
        _fmt(fig.temp_max, "{:.0f}°C") if fig else "-",
        disk_cell(st.host) or "-",
        ram_cell(st.host) or "-",
        # The fingerprint whole (the user compares it), the detail cut to fit a line at a
        # terminal; whole for a pipe (a script or a log keeps all of it).
        (f"[{st.fingerprint}] " if st.fingerprint else "")
        + visible(detail_said(st.detail), 70 if cut else None),
    )


def status_json(st: NodeStatus) -> dict[str, Any]:
    return {
        "node": st.node,
        "health": st.health.value,
        "detail": st.detail,
        "checked": st.checked.isoformat() if st.checked else None,
        "at": st.at.isoformat() if st.at else None,
        "fingerprint": st.fingerprint,
        "gpus": [sample_record(s, st.samples_at) for s in st.samples],
        "processes": [{k: v for k, v in asdict(p).items() if k != "node"} for p in st.processes],
        # CPU, load, memory, disks (with their labels) and network; null: not read.
        "host": host_record(st.host) if st.host is not None else None,
    }


def print_statuses(
    statuses: Sequence[NodeStatus], as_json: bool, out: TextIO, *, processes: bool = False
) -> None:
    """The table (with processes: a PROCS column, how many GPU processes), or JSON."""
    if as_json:
        output.dump_json([status_json(s) for s in statuses], out)
        return
    headers: tuple[str, ...] = (
        _("NODE"), _("HEALTH"), _("GPUS"), _("UTIL"), _("MEMORY"), _("POWER"), _("TEMP"),
        _("DISK"), "RAM", _("DETAIL"),
    )  # fmt: skip
    rows: list[tuple[str, ...]] = [status_row(s, cut=out.isatty()) for s in statuses]
    if processes:
        headers = (*headers[:-1], _("PROCS"), headers[-1])
        counts = [str(len(s.processes)) for s in statuses]
        rows = [(*r[:-1], n, r[-1]) for r, n in zip(rows, counts, strict=True)]
    output.table(headers, rows, out)


# -- poll --------------------------------------------------------------------------------


def poll(args: argparse.Namespace, out: TextIO) -> int:
    path = _path(args, existing=True)
    interval = _positive("interval", args.interval)
    if getattr(args, "timeout", None) is not None:
        _positive("timeout", args.timeout)
    with Ledger.open(path, create=False) as ledger:
        refused: list[Node]
        if args.nodes:
            nodes, refused = polled_nodes(ledger, args.nodes), []
        else:
            nodes, refused = fleet_nodes(ledger)
        for skipped in refused:
            print(fleetwords.not_polling(visible(skipped.name), skipped.problem), file=sys.stderr)
        lock = PollerLock(path)
        if not lock.acquire() and not args.force:
            return _from_collector(ledger, lock, nodes, args, out)
        # Whether an active node has a cloud instance to read (None: not known here).
        clouds = None if args.nodes else any(n.instance_id for n in [*nodes, *refused]
                                             if n.state is NodeState.ACTIVE)  # fmt: skip
        try:
            return asyncio.run(_poll(ledger, path, args, interval, out, nodes, clouds))
        finally:
            lock.release()


def _from_collector(
    ledger: Ledger, lock: PollerLock, nodes: list[Node], args: argparse.Namespace, out: TextIO
) -> int:
    """Another process polls this fleet: show what it last wrote instead of polling too
    (by node id: a released node's name may be reused)."""
    latest = HistoryStore(ledger).latest_by_id()
    statuses = [
        latest[n.id]
        if n.id is not None and n.id in latest
        else NodeStatus(n.name, NodeHealth.CONNECTING, _("no reading from the collector yet"))
        for n in nodes
    ]
    print(fleetwords.collector_polls(lock.holder()), file=sys.stderr)
    print_statuses(statuses, args.json, out)
    return 0


async def _poll(
    ledger: Ledger,
    path: Path,
    args: argparse.Namespace,
    interval: float,
    out: TextIO,
    nodes: list[Node],
    clouds: bool | None = None,
) -> int:
    # The GPU processes only where they are shown (JSON prints them; --processes counts
    # them); one sweep: each node's command an exec of its own, no shell kept open.
    processes = bool(args.json or getattr(args, "processes", False))
    poller = make_poller(
        ledger,
        path,
        interval_s=interval,
        nodes=nodes,
        processes=processes,
        kept_shell=not args.once,
        reuse_probes=True,  # short-lived: start from the probes the ledger keeps
    )
    limit = getattr(args, "timeout", None)
    try:
        while True:
            statuses = await _bounded_sweep(poller, limit)
            print_statuses(list(statuses.values()), args.json, out, processes=processes)
            out.flush()
            if args.once:
                await _cloud_states(ledger, path, args, clouds)
                answered = any(s.health is NodeHealth.OK for s in statuses.values())
                return 0 if answered or not statuses else 1
            await asyncio.sleep(interval)
            out.write("\n")
    finally:
        if args.once:
            poller.pool.abandon()  # the process ends: no waiting for each node's goodbye
        await poller.close()


async def _cloud_states(
    ledger: Ledger, path: Path, args: argparse.Namespace, clouds: bool | None = None
) -> None:
    """`poll --once` reads the nodes' cloud instances once too (leases.telemetry.cloudstate), and
    says on stderr what it recorded; a cloud's failure is logged, never the poll's. clouds
    False: no active node has an instance (the config is still read: a broken one is said)."""
    from leases.config.load import load_user_config

    config = load_user_config(args.config)
    if clouds is False:
        return
    from leases.core.clock import utc_now
    from leases.telemetry import cloudstate
    from leases.telemetry.faultlog import fault_logger

    done = await cloudstate.run_once(ledger, config, clock=utc_now, log=fault_logger(path))
    for d in done:
        print(visible(fleetwords.instance_state(d.node.name, d.node.instance_id, d.action,
                                                f"{d.at.astimezone():%Y-%m-%d %H:%M}")),
              file=sys.stderr)  # fmt: skip


async def _bounded_sweep(poller: Poller, limit: float | None) -> dict[str, NodeStatus]:
    """One sweep, cut off after limit seconds: nodes not done by then are reported as
    timed out (and what the others gave is still stored)."""
    if limit is None:
        return await poller.sweep()
    started = poller.clock()
    task = asyncio.ensure_future(poller.sweep())
    done, _pending = await asyncio.wait({task}, timeout=limit)
    if done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    poller.flush()
    out: dict[str, NodeStatus] = {}
    for node in poller.nodes:
        st = poller.statuses.get(node.name, NodeStatus(node.name))
        if st.checked is None or st.checked < started:
            st = replace(
                st,
                health=NodeHealth.TIMEOUT,
                detail=_("no answer within --timeout {limit} s").format(limit=f"{limit:g}"),
                checked=poller.clock(),
            )
        out[node.name] = st
    return out


# -- collect -----------------------------------------------------------------------------


def collect(args: argparse.Namespace, out: TextIO) -> int:
    path = _path(args)
    interval = _positive("interval", args.interval)
    _positive("flush", args.flush)
    if not path.exists():
        raise InputError("ledger", str(path), _("no ledger there yet: add nodes first"))
    from leases.metrics.exporter import settings

    # Refused before anything starts: a bad address, a token file others can read, a key
    # that is not this user's own.
    args.metrics = settings(args.metrics_listen, args.metrics_token_file, args.metrics_money)
    args.identity = own_identity(getattr(args, "identity", None))
    lock = PollerLock(path)
    if not lock.acquire():
        if lock.denied:
            print(f"zuka: {visible(labfiles.poller_refusal(path))}", file=sys.stderr)
            return 1
        print(fleetwords.another_poller(lock.holder(), path), file=sys.stderr)
        return 1
    try:  # whatever ends the collector, the lock goes with it: a dashboard takes over
        with Ledger.open(path) as ledger:
            return asyncio.run(_collect(ledger, path, interval, args, out))
    finally:
        lock.release()


async def _collect(
    ledger: Ledger, path: Path, interval: float, args: argparse.Namespace, out: TextIO
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    from leases.alerts.watch import watch_ledger
    from leases.config.load import load_user_config
    from leases.core.clock import utc_now
    from leases.telemetry.faultlog import fault_logger

    config = load_user_config(args.config)
    every = args.alerts_every
    if every < 0:
        raise InputError("alerts_every", every, _("must not be negative"))
    watch = watch_ledger(ledger, path, config, clock=utc_now, every_s=every,
                         log=fault_logger(path))  # fmt: skip
    # A long-lived process: full collections spared what lives as long as it does.
    poller = make_poller(ledger, path, interval_s=interval, alerts=watch, settle_gc=True,
                         identity=getattr(args, "identity", None))  # fmt: skip
    store = poller.store
    assert store is not None
    cloud_every = args.cloud_every
    if cloud_every < 0:
        raise InputError("cloud_every", cloud_every, _("must not be negative (0: never)"))
    from leases.telemetry.cloudstate import CloudWatch

    clouds = CloudWatch(ledger, config, clock=utc_now, every_s=cloud_every, log=poller.log)
    exporter = None
    if args.metrics is not None:
        from leases.metrics.exporter import Exporter

        try:
            exporter = Exporter(args.metrics, ledger, lambda: poller.statuses, utc_now)
            await exporter.start()
        except BaseException:  # the address is taken, say: nothing was started
            await poller.close()
            watch.close()
            raise
    print(fleetwords.collecting(len(poller.nodes), interval, args.mode, every), file=out,
          flush=True)  # fmt: skip
    if exporter is not None:
        print(fleetwords.metrics_at(exporter.where()), file=out, flush=True)

    house = Housekeeping(args.minute_days)

    def keep_house() -> None:
        now = datetime.now(UTC)
        poller.set_nodes(house.run(ledger, store, now)[0])
        if exporter is not None:
            exporter.refresh(ledger)
        summary = health_summary(poller.statuses.values())
        print(f"{now.astimezone():%H:%M:%S} {summary}", file=out, flush=True)

    async def housekeeping() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 30)
            try:
                keep_house()
            except Exception as exc:  # a locked ledger, say: polling goes on
                poller.log.error("housekeeping failed", exc_info=exc)
                print(fleetwords.housekeeping_failed(visible(exc)), file=sys.stderr, flush=True)

    def poller_fault(exc: BaseException, retry_in: float) -> None:
        print(fleetwords.poller_stopped(visible(exc), retry_in), file=sys.stderr, flush=True)

    keeper = asyncio.create_task(housekeeping())
    cloud_reader = asyncio.create_task(clouds.run(stop))
    try:
        await poller.run_supervised(stop, mode=args.mode, flush_s=args.flush, on_fault=poller_fault)
    finally:
        stop.set()
        await keeper
        await cloud_reader
        await poller.close()
        watch.close()
        if exporter is not None:
            await exporter.close()
    return 0


class _suppress_timeout:
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, *rest: object) -> bool:
        return exc_type is TimeoutError


# -- node trust ---------------------------------------------------------------------------


def node_trust(args: argparse.Namespace, out: TextIO) -> int:
    path = _path(args, existing=True)
    # Trusting a key is an editor's (the trust store is written as the ledger is).
    with Ledger.open(path, create=False, action="zuka node trust") as ledger:
        [node] = polled_nodes(ledger, [args.name])  # refuses a node with a refused value
    return asyncio.run(_trust(node, path, args, out))


async def _trust(node: Any, path: Path, args: argparse.Namespace, out: TextIO) -> int:
    from leases.app.trust import HostKeyTrust, refused
    from leases.ssh.errors import SshError

    async with HostKeyTrust(path, node) as trust:
        try:
            offered = await trust.offered()
        except SshError as exc:
            print(visible(f"zuka: {node.name}: {exc.message}"), file=sys.stderr)
            return 1
        if offered is None:
            out.write(visible(fleetwords.already_trusted(node.name)) + "\n")
            return 0
        if refused(offered):
            print(visible(fleetwords.key_changed(node.name, offered.fingerprint)), file=sys.stderr)
            return 1
        out.write(visible(fleetwords.presents(node.name, offered)) + "\n")
        if args.fingerprint is not None:
            if args.fingerprint != offered.fingerprint:
                raise InputError(
                    "fingerprint", args.fingerprint, _("does not match the key offered")
                )
        elif not sys.stdin.isatty():
            raise InputError(
                "fingerprint", None, _("not a terminal: pass --fingerprint SHA256:... to accept")
            )
        else:
            answer = input(_("Compare it with what the provider shows. Trust it? Type yes: "))
            if answer.strip().lower() != "yes":
                out.write(_("not trusted") + "\n")
                return 1
        trust.accept(offered, offered.fingerprint)
        out.write(visible(fleetwords.trusted(offered.fingerprint, node.name)) + "\n")
        try:
            await trust.log_in()
        except SshError as exc:
            print(visible(fleetwords.login_failed(node.name, exc.message)), file=sys.stderr)
            return 1
        return 0


# -- sim ---------------------------------------------------------------------------------


def sim(args: argparse.Namespace, out: TextIO) -> int:
    if not args.ledger:
        raise InputError("ledger", None, _("give --ledger PATH: the simulated nodes go there"))
    count = int(args.nodes)
    if not 1 <= count <= 1000:
        raise InputError("nodes", args.nodes, _("must be from 1 to 1000"))
    if args.history < 0:
        raise InputError("history", args.history, _("must not be negative"))
    return asyncio.run(_sim(_path(args), count, args.history, out))


def _backfilled(
    store: HistoryStore, sims: Sequence[SimNode], start: datetime, end: datetime, out: TextIO
) -> bool:
    """Each node's history from start to end, or False at Ctrl-C (or SIGTERM): stopped
    within a reading, each node's history written whole or not at all. The backfill runs
    in the event loop without awaiting, where asyncio's own Ctrl-C waits for the next
    await (it took ~20 s): a flag set by the signal is asked at every reading instead."""
    from leases.sim.ledger import backfill

    asked = threading.Event()
    before = {sig: signal.signal(sig, lambda *_: asked.set()) for sig in _STOPS}
    done = 0
    try:
        for sim in sims:
            backfill(store, sim, start, end, stopped=asked.is_set)
            done += 1
    except KeyboardInterrupt:
        out.write(fleetwords.backfill_stopped(done, len(sims)) + "\n")
        return False
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return True


_STOPS = (signal.SIGINT, signal.SIGTERM)


def _warn_unserved(ledger: Ledger, served: Sequence[Node]) -> None:
    """Say so when the ledger holds nodes this fleet does not serve (an earlier, larger
    `zuka sim` on the same ledger, or real nodes): they would show as unreachable."""
    names = {n.name for n in served}
    others = [n.name for n in ledger.nodes() if n.name not in names]
    if others:
        said = ", ".join(visible(n, 40) for n in others[:3]) + (", ..." if len(others) > 3 else "")
        print(fleetwords.unserved(len(others), said), file=sys.stderr)


async def _sim(path: Path, count: int, days: float, out: TextIO) -> int:
    from leases.sim.fleet import SimFleet
    from leases.sim.ledger import SimLock, attach, register_sim_nodes, sim_nodes_of

    now = datetime.now(UTC)
    with SimLock(path) as lock, Ledger.open(path, actor="zuka sim") as ledger:
        if not lock.acquire():
            raise InputError("ledger", str(path), fleetwords.another_sim(lock.holder()))
        nodes = register_sim_nodes(ledger, count, now)
        sims = sim_nodes_of(nodes)
        fleet = SimFleet(sims)
        await fleet.start()
        try:
            attach(ledger, path, fleet)
            if days and not _backfilled(
                HistoryStore(ledger), sims, now - timedelta(days=days), now, out
            ):
                return 130
            # Ctrl-C and SIGTERM stop the fleet from before it says it is up (a script
            # that stops it at once must not get a KeyboardInterrupt).
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, stop.set)
            _warn_unserved(ledger, nodes)
            ports = sorted(ep.port for ep in fleet)
            out.write(fleetwords.sim_up(len(fleet), ports[0], ports[-1], days, path))
            out.flush()
            await stop.wait()
        finally:
            await fleet.stop()
    return 0
