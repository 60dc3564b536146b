"""Issue 23's "Must show": zuka against parallel-ssh and the 1-RTT floor, cold and warm.

One fleet (SimFleet, busy 8 x A100 nodes, each behind a proxy adding --rtt-ms / 2 per
direction) runs in its own process (bench/_fleet_server.py); every row below is measured in
this one run, on that fleet, at each of --nodes (default 10,100,300; 1000 on request):

  floor     a bare asyncssh client holding ONE shell channel per node: its cold round
            (connect, shell, first command with the apps and host figures) and its warm
            rounds of the query zuka's warm sweep sends, and of the query + apps + host
            (what zuka reads every 6th sweep): wall and client CPU (time.process_time)
  z-exec    zuka's Poller.sweep() on kept connections: the first sweep in this process, then
            warm sweeps, plain (the query) and every 6th (query, apps and host in one), wall
            and client CPU each, and the garbage collector's pauses (gc.callbacks) while warm;
            with the floor, each warm sweep paired with its round of the same command
  pssh      Debian's parallel-ssh, fresh OpenSSH connections every round, -p 32 (its default)
            and -p N (every node at once), sending the query + apps + host in one command
  cold      `python -m tui.cli.main poll --once --ledger L` as a whole process (median of
            --cold-rounds) on a ledger of the fleet's nodes, HOME a temporary folder; and
            `python -c 'import asyncssh'` as a whole process, alternating with it
  z-host    (with --skip '') exec sweeps reading processes every sweep with and without the
  z-gpus    host figures (leases.telemetry.hoststats): what one host reading costs
  z-stream  (with --skip '') zuka's stream mode: age of readings when asked, CPU per round
  (a)       (with --skip '') fresh OpenSSH `ssh ... nvidia-smi` one node after another

Run: python bench/poll.py [--nodes 10,100,300] [--rounds 5] [--cold-rounds 5] [--skip ...]
Targets (issue 23), printed MET / NOT MET with their figures:
  300 nodes: cold `zuka poll --once` at least 2x faster than parallel-ssh -p 32; a warm
  sweep within 1.1x of the floor's warm round, its client CPU within 1.3x of the floor's.
  10 nodes: cold no slower than parallel-ssh, or within 100 ms of `import asyncssh` plus
  the floor's cold round.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _pollpeers import (
    QUERY,
    Cold,
    Floor,
    FloorChannel,
    Timed,
    build_ledger,
    cold_processes,
    floor,
    floor_close,
    floor_cold,
    floor_round,
    pssh,
)

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry import gcsettle
from leases.telemetry.poller import NodeStatus, Poller

HERE = Path(__file__).resolve().parent
APPS_EVERY = 6  # the poller's default: processes (and host figures) every 6th sweep
DEFAULT_SKIP = "z-host,z-gpus,z-stream,(a)"


@dataclass(frozen=True)
class Fleet:
    ports: list[int]
    names: list[str]
    known_hosts: Path
    key: Path
    delay_ms: float
    pid: int

    def cpu(self) -> float:
        """The fleet process's CPU seconds so far (utime + stime)."""
        text = Path(f"/proc/{self.pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Zuka:
    """zuka's exec sweeps in this process, on kept connections."""

    first: float = float("nan")  # the first sweep: connects, probe, query + host, apps
    warm: float = float("nan")  # median plain sweep (the query)
    warm_cpu: float = float("nan")
    apps: float = float("nan")  # median 6th sweep (query, apps and host in one)
    apps_cpu: float = float("nan")
    fleet_cpu: float = float("nan")  # the simulated fleet's CPU per warm sweep, for scale
    gc_counts: tuple[int, int, int] = (0, 0, 0)  # collections per generation while warm
    gc_total: float = 0.0  # seconds paused by them
    gc_max: float = 0.0
    sweeps: int = 0


@dataclass
class Row:
    nodes: int
    zuka: Zuka = field(default_factory=Zuka)
    floor: Floor = field(default_factory=Floor)
    pssh32: Timed = field(default_factory=Timed)
    pssh_n: Timed = field(default_factory=Timed)
    cold: Cold = field(default_factory=Cold)
    failed_nodes: int = 0
    # The fleet process's CPU for one cold poll and one pssh -p 32 round: on this machine
    # it shares the client's cores (a remote fleet's would not).
    fleet_cold: float = float("nan")
    fleet_pssh: float = float("nan")
    stream_cpu: float = float("nan")
    stream_age: float = float("nan")
    stream_age_max: float = float("nan")
    stream_fresh: float = float("nan")
    ssh_seq: float = float("nan")
    ssh_extrapolated: bool = False
    # Exec sweeps reading processes every sweep, with the host snippet (z-host) and
    # without (z-gpus).
    host_warm: float = float("nan")
    host_cpu: float = float("nan")
    host_fleet_cpu: float = float("nan")
    bare_warm: float = float("nan")
    bare_cpu: float = float("nan")
    bare_fleet_cpu: float = float("nan")

    @property
    def warm(self) -> float:  # what the stream-mode table compares with
        return self.zuka.warm


# -- the fleet process --------------------------------------------------------------------


def start_fleet(
    count: int, delay_ms: float, directory: Path, speed: float = 1.0
) -> tuple[subprocess.Popen[str], Fleet]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_fleet_server.py"), "--nodes", str(count),
         "--delay-ms", str(delay_ms), "--dir", str(directory), "--speed", str(speed)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        sys.exit(f"poll bench: the fleet process exited {proc.wait()}")
    info = json.loads(line)
    fleet = Fleet(
        ports=[n["port"] for n in info["nodes"]],
        names=[n["name"] for n in info["nodes"]],
        known_hosts=Path(info["known_hosts"]),
        key=Path(info["key"]),
        delay_ms=float(info["delay_ms"]),
        pid=proc.pid,
    )
    return proc, fleet


def stop_fleet(proc: subprocess.Popen[str], grace_s: float = 10.0) -> None:
    """End the fleet process start_fleet started: SIGTERM, then SIGKILL after grace_s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def nodes_of(fleet: Fleet, count: int) -> list[Node]:
    return [
        Node(name, SshTarget("127.0.0.1", port, "root", str(fleet.key)), "A100", 8)
        for name, port in zip(fleet.names[:count], fleet.ports[:count], strict=True)
    ]


def zuka_options(fleet: Fleet) -> SshOptions:
    # zuka's defaults (128 connects at once, 8 per host, aes128-gcm first), without the user's own
    # ~/.ssh/config and agent.
    return SshOptions(known_hosts=(fleet.known_hosts,), agent_path=None, config=[])


# -- z-exec: zuka's sweeps, and the z-host / z-gpus pair -------------------------------------


class GcWatch:
    """The garbage collector's passes while on: counts per generation and pause times."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.pauses: list[float] = []
        self._began = 0.0
        self.on = False

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self.on:
            self.pauses.append(time.perf_counter() - self._began)
            self.counts[info["generation"]] += 1


async def zuka_exec(
    fleet: Fleet, count: int, rounds: int, row: Row, paired: list[FloorChannel] | None = None
) -> None:
    """Sweeps as `zuka collect --mode exec` runs them (no store): the first, then warm ones
    until `rounds` plain sweeps and max(1, rounds // 3) 6th sweeps were timed.

    With `paired` (the floor's open channels), each warm sweep is paired with the floor's
    round of the same command, their order swapped from one pair to the next: both then see
    the same machine, where one after the other they saw its load drift by 25-40 %."""
    poller = Poller(nodes_of(fleet, count), pool=SshPool(zuka_options(fleet)))
    z = row.zuka
    watch = GcWatch()
    gc.callbacks.append(watch)
    try:
        t = time.perf_counter()
        statuses = await poller.sweep()
        z.first = time.perf_counter() - t
        # As `zuka collect` does after its first round (Poller.run -> leases.telemetry.
        # gcsettle): what lives as long as the process frozen out of full collections.
        gcsettle.settle()
        plain: list[tuple[float, float]] = []
        apps: list[tuple[float, float]] = []
        floor_plain: list[tuple[float, float]] = []
        floor_apps: list[tuple[float, float]] = []
        fleet_cpu = 0.0
        sweep = 1  # the poller's count of readings per node before this sweep
        while len(plain) < rounds or len(apps) < max(1, rounds // 3):
            sixth = sweep % poller.apps_every == 0
            if paired is not None and sweep % 2:
                took, cpu, failed = await floor_round(paired, sixth)
                (floor_apps if sixth else floor_plain).append((took, cpu))
                row.floor.failed = max(row.floor.failed, failed)
            began = fleet.cpu()
            watch.on = True
            c, t = time.process_time(), time.perf_counter()
            statuses = await poller.sweep()
            took, cpu = time.perf_counter() - t, time.process_time() - c
            watch.on = False
            fleet_cpu += fleet.cpu() - began
            (apps if sixth else plain).append((took, cpu))
            if paired is not None and not sweep % 2:
                took, cpu, failed = await floor_round(paired, sixth)
                (floor_apps if sixth else floor_plain).append((took, cpu))
                row.floor.failed = max(row.floor.failed, failed)
            sweep += 1
        z.sweeps = sweep - 1
        z.fleet_cpu = fleet_cpu / z.sweeps
        z.warm = statistics.median(w for w, _ in plain)
        z.warm_cpu = statistics.median(c for _, c in plain)
        z.apps = statistics.median(w for w, _ in apps)
        z.apps_cpu = statistics.median(c for _, c in apps)
        z.gc_counts = (watch.counts[0], watch.counts[1], watch.counts[2])
        z.gc_total = sum(watch.pauses)
        z.gc_max = max(watch.pauses, default=0.0)
        row.failed_nodes = sum(s.health is not NodeHealth.OK for s in statuses.values())
        if paired is not None:
            row.floor.take(floor_plain, floor_apps)
    finally:
        gc.callbacks.remove(watch)
        await poller.close()


async def zuka_host(fleet: Fleet, count: int, rounds: int, row: Row, host: bool) -> None:
    """Sweeps reading processes every sweep, with (host) or without the host figures."""
    poller = Poller(
        nodes_of(fleet, count), pool=SshPool(zuka_options(fleet)), host_stats=host, apps_every=1
    )
    try:
        await poller.sweep()
        warm: list[float] = []
        cpu: list[float] = []
        fleet_cpu = fleet.cpu()
        for _ in range(rounds):
            c, t = time.process_time(), time.perf_counter()
            statuses = await poller.sweep()
            warm.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        figures = statistics.median(warm), statistics.median(cpu)
        per_round = (fleet.cpu() - fleet_cpu) / rounds
        if host:
            (row.host_warm, row.host_cpu), row.host_fleet_cpu = figures, per_round
            row.failed_nodes += sum(s.host is None for s in statuses.values())
        else:
            (row.bare_warm, row.bare_cpu), row.bare_fleet_cpu = figures, per_round
    finally:
        await poller.close()


# -- z-stream --------------------------------------------------------------------------------


async def zuka_stream(fleet: Fleet, count: int, interval: float, rounds: int, row: Row) -> None:
    """Stream mode: CPU per round, age of readings when asked, time until all are fresh."""
    seen: dict[str, float] = {}  # node -> monotonic time of its last good reading
    asked = float("inf")
    fresh_nodes = 0
    all_fresh = asyncio.Event()

    def on_update(status: NodeStatus) -> None:
        nonlocal fresh_nodes
        if status.health is not NodeHealth.OK:
            return
        now = time.monotonic()
        if seen.get(status.node, 0.0) <= asked < now:
            fresh_nodes += 1
            if fresh_nodes == count:
                all_fresh.set()
        seen[status.node] = now

    poller = Poller(
        nodes_of(fleet, count),
        pool=SshPool(zuka_options(fleet)),
        interval_s=interval,
        on_update=on_update,
    )
    stop = asyncio.Event()
    runner = asyncio.create_task(poller.run(stop, mode="stream", flush_s=interval))
    try:
        # Warm up: every node connected, probed and streaming, then a round more.
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(interval * 1.5)
        # CPU: this process doing nothing but following the streams for `rounds` rounds.
        c, t = time.process_time(), time.monotonic()
        await asyncio.sleep(interval * rounds)
        spent, elapsed = time.process_time() - c, time.monotonic() - t
        row.stream_cpu = spent / (elapsed / interval)
        ages: list[float] = []
        oldest: list[float] = []
        fresh: list[float] = []
        for i in range(rounds):
            # Ask at moments that drift against the streams' phase.
            await asyncio.sleep(interval * (0.37 + 0.29 * i) % interval)
            fresh_nodes = 0
            all_fresh.clear()
            asked = time.monotonic()
            now_ages = [asked - seen[n] for n in seen]
            ages.append(statistics.fmean(now_ages))
            oldest.append(max(now_ages))
            try:
                async with asyncio.timeout(interval * 3):
                    await all_fresh.wait()
                fresh.append(time.monotonic() - asked)
            except TimeoutError:
                fresh.append(float("nan"))
            asked = float("inf")
        row.stream_age = statistics.fmean(ages)
        row.stream_age_max = max(oldest)
        row.stream_fresh = statistics.fmean(fresh)
        row.failed_nodes = max(row.failed_nodes, count - len(seen))
    finally:
        stop.set()
        await runner
        await poller.close()


# -- (a) OpenSSH, one fresh connection a node, one node after another ----------------------


def openssh_sequential(fleet: Fleet, count: int, sample: int, row: Row) -> None:
    ssh = shutil.which("ssh")
    if ssh is None:
        print("  (a) skipped: no OpenSSH client (apt-get install -y openssh-client)")
        return
    taken = min(count, sample)
    failed = 0
    t = time.perf_counter()
    for port in fleet.ports[:taken]:
        done = subprocess.run(
            [ssh, "-p", str(port), "-i", str(fleet.key),
             "-o", f"UserKnownHostsFile={fleet.known_hosts}", "-o", "StrictHostKeyChecking=yes",
             "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-F", "/dev/null",
             "root@127.0.0.1", QUERY],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        failed += done.returncode != 0
    took = time.perf_counter() - t
    row.ssh_seq = took * count / taken
    row.ssh_extrapolated = taken < count
    if failed:
        print(f"  (a) {failed} of {taken} ssh commands failed")


# -- report ---------------------------------------------------------------------------------

NAN = float("nan")


def _s(value: float) -> str:
    return "-" if value != value else f"{value:.3f}"


def _ms(value: float) -> str:
    return "-" if value != value else f"{value * 1000:.0f} ms"


def _x(a: float, b: float) -> str:
    return "-" if a != a or b != b or b <= 0 else f"{a / b:.2f}x"


def _failed(t: Timed) -> str:
    return f" ({t.failed} failed)" if t.failed else ""


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def cycle(plain: float, apps: float) -> float:
    """A sweep on average over the poller's cycle: 5 plain sweeps and one 6th sweep."""
    return ((APPS_EVERY - 1) * plain + apps) / APPS_EVERY


def verdict(ok: bool | None) -> str:
    return "n/a (not measured)" if ok is None else "MET" if ok else "NOT MET"


def _le(a: float, b: float) -> bool | None:
    return None if a != a or b != b else a <= b


def main_table(rows: list[Row], rtt_ms: float, args: argparse.Namespace) -> None:
    print()
    print(f"Seconds a round, {rtt_ms:g} ms RTT added (2 x {rtt_ms / 2:g} ms proxy), "
          f"{os.cpu_count()} CPUs, the fleet in another process; cold: whole processes, "
          f"median of {args.cold_rounds}; warm: median of {args.rounds}")  # fmt: skip
    table(
        ("nodes", "pssh -p 32", "pssh -p N", "zuka cold poll --once", "pssh32/zuka",
         "import asyncssh", "floor cold", "zuka 1st sweep", "floor warm", "zuka warm",
         "zuka/floor", "floor 6th", "zuka 6th", "zuka/floor"),
        [
            (str(r.nodes), _s(r.pssh32.wall) + _failed(r.pssh32),
             _s(r.pssh_n.wall) + _failed(r.pssh_n), _s(r.cold.poll.wall) + _failed(r.cold.poll),
             _x(r.pssh32.wall, r.cold.poll.wall), _s(r.cold.imports.wall), _s(r.floor.cold),
             _s(r.zuka.first), _s(r.floor.warm), _s(r.zuka.warm), _x(r.zuka.warm, r.floor.warm),
             _s(r.floor.apps), _s(r.zuka.apps), _x(r.zuka.apps, r.floor.apps))
            for r in rows
        ],
    )  # fmt: skip
    print("  6th: the sweep that also reads the processes and host figures (every 6th;"
          " zuka and the floor send the same one command)")  # fmt: skip
    print("  pssh32/zuka above 1: zuka is faster (the target is 2x at 300 nodes);"
          " zuka/floor above 1: zuka is slower (the target is 1.1x)")  # fmt: skip
    print()
    print(
        "Client CPU seconds (this process's time.process_time for the floor and zuka's "
        "sweeps; the whole process with its children for pssh and the cold poll)"
    )
    table(
        ("nodes", "pssh -p 32", "(its fleet)", "zuka cold poll", "(its fleet)", "import asyncssh",
         "floor cold", "floor warm", "zuka warm", "zuka/floor", "floor 6th", "zuka 6th",
         "zuka/floor", "fleet/sweep", "GC gen0/1/2", "GC paused (max)"),
        [
            (str(r.nodes), _s(r.pssh32.cpu), _s(r.fleet_pssh), _s(r.cold.poll.cpu),
             _s(r.fleet_cold), _s(r.cold.imports.cpu),
             _s(r.floor.cold_cpu), _s(r.floor.warm_cpu), _s(r.zuka.warm_cpu),
             _x(r.zuka.warm_cpu, r.floor.warm_cpu), _s(r.floor.apps_cpu), _s(r.zuka.apps_cpu),
             _x(r.zuka.apps_cpu, r.floor.apps_cpu), _s(r.zuka.fleet_cpu),
             "/".join(map(str, r.zuka.gc_counts)),
             f"{r.zuka.gc_total * 1000:.0f} ms ({r.zuka.gc_max * 1000:.0f})")
            for r in rows
        ],
    )  # fmt: skip
    print(f"  GC: collections and pauses over zuka's {rows[0].zuka.sweeps} warm sweeps"
          " (gc.callbacks); fleet/sweep: the simulated fleet's CPU, for scale; (its fleet):"
          " the fleet's CPU for one round of the column before, on the same cores")  # fmt: skip
    for r in rows:
        peers = (("pssh -p 32", r.pssh32), ("pssh -p N", r.pssh_n), ("cold poll", r.cold.poll),
                 ("import asyncssh", r.cold.imports))  # fmt: skip
        for what, t in peers:
            if t.note:
                print(f"  {r.nodes} nodes, {what}: {t.note}")
        if r.floor.failed:
            print(f"  WARNING: {r.nodes} nodes, the floor: {r.floor.failed} nodes failed")
        if r.failed_nodes:
            print(f"  WARNING: {r.nodes} nodes: {r.failed_nodes} gave zuka no good reading")


def targets(rows: list[Row]) -> None:
    by = {r.nodes: r for r in rows}
    print()
    print("Targets (issue 23):")
    r = by.get(300)
    if r is None:
        print("  300 nodes: n/a (not measured; --nodes without 300)")
    else:
        z, f = r.zuka, r.floor
        print(f"  300 nodes, cold >= 2x faster than parallel-ssh -p 32: "
              f"{verdict(_le(2 * r.cold.poll.wall, r.pssh32.wall))} (zuka poll --once "
              f"{_s(r.cold.poll.wall)} s, pssh -p 32 {_s(r.pssh32.wall)} s: "
              f"{_x(r.pssh32.wall, r.cold.poll.wall)} faster; pssh -p 300 "
              f"{_s(r.pssh_n.wall)} s: {_x(r.pssh_n.wall, r.cold.poll.wall)})")  # fmt: skip
        zw, fw = cycle(z.warm, z.apps), cycle(f.warm, f.apps)
        print(f"  300 nodes, warm sweep within 1.1x of the floor's round: "
              f"{verdict(_le(zw, 1.1 * fw))} ({_x(zw, fw)}: {_s(zw)} s against {_s(fw)} s, "
              f"averaged over a 6-sweep cycle; plain sweep {_x(z.warm, f.warm)}, 6th sweep "
              f"{_x(z.apps, f.apps)})")  # fmt: skip
        zc, fc = cycle(z.warm_cpu, z.apps_cpu), cycle(f.warm_cpu, f.apps_cpu)
        print(f"  300 nodes, client CPU a warm sweep within 1.3x of the floor's: "
              f"{verdict(_le(zc, 1.3 * fc))} ({_x(zc, fc)}: {_s(zc)} s against {_s(fc)} s, "
              f"6-sweep cycle; plain {_x(z.warm_cpu, f.warm_cpu)}, 6th "
              f"{_x(z.apps_cpu, f.apps_cpu)})")  # fmt: skip
    r = by.get(10)
    if r is None:
        print("  10 nodes: n/a (not measured; --nodes without 10)")
    else:
        cold, bound = r.cold.poll.wall, r.cold.imports.wall + r.floor.cold + 0.1
        print(f"  10 nodes, cold <= parallel-ssh, or <= import asyncssh + the floor's cold "
              f"round + 100 ms: {verdict(_le(cold, max(r.pssh32.wall, bound)))} (zuka "
              f"{_s(cold)} s; pssh -p 32 {_s(r.pssh32.wall)} s; {_s(r.cold.imports.wall)} + "
              f"{_s(r.floor.cold)} + 0.100 = {_s(bound)} s)")  # fmt: skip


def stream_tables(rows: list[Row], args: argparse.Namespace, rtt_ms: float) -> None:
    if "z-stream" not in args.skip:
        print()
        print(f"Stream mode (-lms {int(args.stream_interval * 1000)}): what the dashboard holds "
              "when it asks; exec mode must run a round to answer")  # fmt: skip
        table(
            ("nodes", "mean age of readings", "oldest", "until all fresh", "exec: until all fresh",
             "stream CPU/round"),
            [
                (str(r.nodes), _ms(r.stream_age), _ms(r.stream_age_max), _ms(r.stream_fresh),
                 _ms(r.warm), _ms(r.stream_cpu))
                for r in rows
            ],
        )  # fmt: skip
        print(f"  ages are counted from when a reading reached this process (it left the node "
              f"{rtt_ms / 2:g} ms earlier)")  # fmt: skip
    if "z-host" not in args.skip or "z-gpus" not in args.skip:
        print()
        print("The host figures (CPU, load, RAM, disks, network) in the GPU query's round trip:"
              " exec sweeps reading the processes every sweep, with and without them")  # fmt: skip
        table(
            ("nodes", "warm, GPUs+procs+host", "warm, GPUs+procs", "ratio", "CPU/round +host",
             "CPU/round", "fleet CPU +host", "fleet CPU"),
            [
                (str(r.nodes), _s(r.host_warm), _s(r.bare_warm), _x(r.host_warm, r.bare_warm),
                 _ms(r.host_cpu), _ms(r.bare_cpu), _ms(r.host_fleet_cpu), _ms(r.bare_fleet_cpu))
                for r in rows
            ],
        )  # fmt: skip
    if "(a)" not in args.skip:
        print()
        print("(a) OpenSSH, one fresh connection a node, one after another: "
              + ", ".join(f"{r.nodes} nodes {_s(r.ssh_seq)} s" + (" *" if r.ssh_extrapolated
                          else "") for r in rows))  # fmt: skip
        print(f"  * timed over the first {args.ssh_sample} nodes and extrapolated linearly")


# -- main -------------------------------------------------------------------------------------


async def measure(fleet: Fleet, count: int, args: argparse.Namespace, folder: Path) -> Row:
    row = Row(count)
    ports = fleet.ports[:count]

    async def peers() -> None:
        row.floor = await floor(ports, fleet.key, fleet.known_hosts, args.rounds)

    async def warm_pairs() -> None:
        """The floor's cold round, then zuka's sweeps each paired with the floor's round."""
        channels, row.floor = await floor_cold(ports, fleet.key, fleet.known_hosts)
        try:
            await zuka_exec(fleet, count, args.rounds, row, paired=channels)
        finally:
            await floor_close(channels)

    def run_pssh() -> None:
        began = fleet.cpu()
        row.pssh32 = pssh(ports, fleet.key, fleet.known_hosts, 32, args.pssh_rounds, folder)
        row.fleet_pssh = (fleet.cpu() - began) / args.pssh_rounds
        row.pssh_n = pssh(ports, fleet.key, fleet.known_hosts, count, args.pssh_rounds, folder)

    def run_cold() -> None:
        ledger = build_ledger(folder / f"ledger-{count}", fleet.names[:count], ports, fleet.key,
                              fleet.known_hosts)  # fmt: skip
        began = fleet.cpu()
        row.cold = cold_processes(ledger, count, args.cold_rounds)
        row.fleet_cold = (fleet.cpu() - began) / args.cold_rounds

    warm: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("floor", peers),
        ("z-exec", lambda: zuka_exec(fleet, count, args.rounds, row)),
    ]
    if not {"floor", "z-exec"} & args.skip:  # both: their warm rounds paired
        warm = [("floor + z-exec", warm_pairs)]
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        *warm,
        ("pssh", lambda: asyncio.to_thread(run_pssh)),
        ("cold", lambda: asyncio.to_thread(run_cold)),
        ("z-host", lambda: zuka_host(fleet, count, args.rounds, row, True)),
        ("z-gpus", lambda: zuka_host(fleet, count, args.rounds, row, False)),
        ("z-stream",
         lambda: zuka_stream(fleet, count, args.stream_interval, args.stream_rounds, row)),
        ("(a)", lambda: asyncio.to_thread(openssh_sequential, fleet, count, args.ssh_sample, row)),
    ]  # fmt: skip
    for name, step in steps:
        if name in args.skip:
            continue
        t = time.perf_counter()
        await step()
        print(f"  {count} nodes, {name}: done in {time.perf_counter() - t:.1f} s", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="10,100,300", help="comma-separated node counts")
    ap.add_argument("--rounds", type=int, default=5, help="warm rounds (median)")
    ap.add_argument("--cold-rounds", type=int, default=5, help="cold whole processes (median)")
    ap.add_argument("--pssh-rounds", type=int, default=2, help="parallel-ssh rounds, each -p")
    ap.add_argument("--stream-interval", type=float, default=5.0, help="-lms interval, s")
    ap.add_argument("--stream-rounds", type=int, default=3, help="asks in stream mode")
    ap.add_argument("--ssh-sample", type=int, default=20, help="nodes timed for (a)")
    ap.add_argument("--rtt-ms", type=float, default=50.0, help="added round-trip time")
    ap.add_argument(
        "--fleet-speed",
        type=float,
        default=1.0,
        help="the simulated nodes' clock, times the wall's: their GPU rows move every 10 s "
        "of it, so 10 changes them about every second, as a busy real node's do",
    )
    ap.add_argument(
        "--skip",
        default=DEFAULT_SKIP,
        help="comma-separated steps left out, of floor,z-exec,pssh,cold,z-host,z-gpus,"
        f"z-stream,(a) (default {DEFAULT_SKIP}; '' runs every step)",
    )
    args = ap.parse_args(argv)
    if not 0 < args.fleet_speed <= 1000:  # NaN and inf too
        ap.error(f"--fleet-speed: must be above 0 and at most 1000, not {args.fleet_speed:g}")
    counts = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    began = time.perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="zuka-pollbench-"))
    proc, fleet = start_fleet(max(counts), args.rtt_ms / 2, directory, args.fleet_speed)
    try:
        print(f"fleet: {len(fleet.ports)} nodes in pid {proc.pid}, "
              f"+{fleet.delay_ms:g} ms each way, clock x{args.fleet_speed:g} (GPU rows move "
              f"every {10 / args.fleet_speed:g} s); load {os.getloadavg()[0]:.2f}",
              flush=True)  # fmt: skip
        rows = [asyncio.run(measure(fleet, n, args, directory)) for n in counts]
        main_table(rows, args.rtt_ms, args)
        stream_tables(rows, args, args.rtt_ms)
        targets(rows)
    finally:
        stop_fleet(proc)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"(bench took {time.perf_counter() - began:.0f} s; load {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
