"""One refresh round over 10, 100 and 300 simulated GPU nodes, 50 ms RTT added.

The fleet (SimFleet, busy 8 x A100 nodes, each behind a proxy adding 25 ms per direction)
runs in its own process (bench/_fleet_server.py). This process measures:

  z-exec    zuka's Poller.sweep() on persistent connections: the first round (connects,
            field probe, compute-apps query) as "cold", then the median of warm rounds
  z-host    exec sweeps that read the processes and the host figures (CPU, RAM, disks,
  z-gpus    network: leases.telemetry.hoststats) every sweep (apps_every 1), and the same
            without the host figures, same fleet, same run: what one host reading costs
            (zuka reads them every 6th sweep, with the processes; z-exec's warm rounds
            are sweeps without them)
  z-stream  zuka's stream mode (one `nvidia-smi ... -lms` per node): how old the readings
            are when asked for, how long until every node has a reading newer than the
            ask, and this process's CPU time per round (time.process_time) against exec
  (a)       a sequential loop of fresh OpenSSH `ssh ... nvidia-smi` commands (a sample of
            at most --ssh-sample nodes, extrapolated linearly)
  (b)       fresh parallel asyncssh connections every round (connect + run + close), as
            pssh does: at most 32 at once (pssh's default), and unbounded

Run: python bench/poll.py [--nodes 10,100,300] [--rounds 5] [--stream-interval 5]
Targets: a 300-node round under 1 s, and at least 10x faster than (b).
"""

from __future__ import annotations

import argparse
import asyncio
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry import nvsmi
from leases.telemetry.poller import NodeStatus, Poller

HERE = Path(__file__).resolve().parent
QUERY = nvsmi.query_command(nvsmi.QUERY_FIELDS)
ROUND_TARGET_S = 1.0
SPEEDUP_TARGET = 10.0


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
class Row:
    nodes: int
    warm: float = float("nan")
    cold: float = float("nan")
    exec_cpu: float = float("nan")
    fleet_cpu: float = float("nan")
    stream_cpu: float = float("nan")
    stream_age: float = float("nan")
    stream_age_max: float = float("nan")
    stream_fresh: float = float("nan")
    ssh_seq: float = float("nan")
    ssh_extrapolated: bool = False
    pssh32: float = float("nan")
    pssh32_failed: int = 0
    pssh_unbounded: float = float("nan")
    pssh_unbounded_failed: int = 0
    failed_nodes: int = 0
    # Exec sweeps reading processes every sweep, with the host snippet (z-host) and
    # without (z-gpus).
    host_warm: float = float("nan")
    host_cpu: float = float("nan")
    host_fleet_cpu: float = float("nan")
    bare_warm: float = float("nan")
    bare_cpu: float = float("nan")
    bare_fleet_cpu: float = float("nan")


# -- the fleet process --------------------------------------------------------------------


def start_fleet(
    count: int, delay_ms: float, directory: Path
) -> tuple[subprocess.Popen[str], Fleet]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_fleet_server.py"), "--nodes", str(count),
         "--delay-ms", str(delay_ms), "--dir", str(directory)],
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
    # zuka's defaults (32 connects at once, 8 per host, aes128-gcm first), without the user's own
    # ~/.ssh/config and agent.
    return SshOptions(known_hosts=(fleet.known_hosts,), agent_path=None, config=[])


# -- z-exec and z-stream --------------------------------------------------------------------


async def zuka_exec(
    fleet: Fleet, count: int, rounds: int, row: Row, *, host: bool | None = None
) -> None:
    """Exec sweeps as zuka runs them (host None), or reading processes every sweep with
    (True) or without (False) the host figures, into row.host_* / row.bare_*."""
    poller = Poller(
        nodes_of(fleet, count),
        pool=SshPool(zuka_options(fleet)),
        host_stats=host is not False,
        apps_every=6 if host is None else 1,
    )
    try:
        t = time.perf_counter()
        statuses = await poller.sweep()
        cold = time.perf_counter() - t
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
        if host is None:
            row.cold, (row.warm, row.exec_cpu), row.fleet_cpu = cold, figures, per_round
            row.failed_nodes = sum(s.health is not NodeHealth.OK for s in statuses.values())
        elif host:
            (row.host_warm, row.host_cpu), row.host_fleet_cpu = figures, per_round
            row.failed_nodes += sum(s.host is None for s in statuses.values())
        else:
            (row.bare_warm, row.bare_cpu), row.bare_fleet_cpu = figures, per_round
    finally:
        await poller.close()


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


# -- (b) fresh asyncssh connections every round, as pssh does ------------------------------


async def fresh_parallel(fleet: Fleet, count: int, limit: int | None) -> tuple[float, int]:
    gate = asyncio.Semaphore(limit or count)

    async def one(port: int) -> bool:
        async with gate:
            try:
                async with asyncssh.connect(
                    "127.0.0.1", port, username="root", client_keys=[str(fleet.key)],
                    known_hosts=str(fleet.known_hosts), agent_path=None, config=[],
                    connect_timeout=30,
                ) as conn:  # fmt: skip
                    result = await conn.run(QUERY, check=False, timeout=30)
                    return result.exit_status == 0
            except (OSError, asyncssh.Error, TimeoutError):
                return False

    t = time.perf_counter()
    results = await asyncio.gather(*(one(p) for p in fleet.ports[:count]))
    return time.perf_counter() - t, results.count(False)


async def pssh_like(fleet: Fleet, count: int, rounds: int, row: Row) -> None:
    times32, failed32, times_all, failed_all = [], 0, [], 0
    for _ in range(rounds):
        took, failed = await fresh_parallel(fleet, count, 32)
        times32.append(took)
        failed32 = max(failed32, failed)
        took, failed = await fresh_parallel(fleet, count, None)
        times_all.append(took)
        failed_all = max(failed_all, failed)
    row.pssh32, row.pssh32_failed = statistics.median(times32), failed32
    row.pssh_unbounded, row.pssh_unbounded_failed = statistics.median(times_all), failed_all


# -- report ---------------------------------------------------------------------------------


def _s(value: float) -> str:
    return "-" if value != value else f"{value:.3f} s"


def _ms(value: float) -> str:
    return "-" if value != value else f"{value * 1000:.0f} ms"


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def report(rows: list[Row], args: argparse.Namespace, rtt_ms: float) -> None:
    print()
    print(f"One refresh round, {rtt_ms:g} ms RTT added (2 x {rtt_ms / 2:g} ms proxy), "
          f"{os.cpu_count()} CPUs, fleet in another process; zuka: persistent connections, "
          "32 connects at once (8 per host), aes128-gcm first")  # fmt: skip
    table(
        ("nodes", "zuka warm exec", "zuka cold", "exec CPU/round", "stream CPU/round",
         "fleet CPU/exec round",
         "(a) ssh sequential", "(b) fresh x32", "(b) fresh unbounded", "zuka vs (b)x32"),
        [
            (
                str(r.nodes), _s(r.warm), _s(r.cold), _ms(r.exec_cpu), _ms(r.stream_cpu),
                _ms(r.fleet_cpu),
                _s(r.ssh_seq) + (" *" if r.ssh_extrapolated else ""),
                _s(r.pssh32) + (f" ({r.pssh32_failed} failed)" if r.pssh32_failed else ""),
                _s(r.pssh_unbounded) + f" ({r.pssh_unbounded_failed} failed)",
                f"{r.pssh32 / r.warm:.1f}x" if r.warm == r.warm and r.pssh32 == r.pssh32
                else "-",
            )
            for r in rows
        ],
    )  # fmt: skip
    print("  CPU/round: this (client) process; fleet CPU: the simulated nodes and their proxies")
    if any(r.ssh_extrapolated for r in rows):
        print(f"  * (a) timed over the first {args.ssh_sample} nodes and extrapolated linearly")
    print()
    print(f"Stream mode (-lms {int(args.stream_interval * 1000)}): what the dashboard holds "
          "when it asks; exec mode must run a round to answer")  # fmt: skip
    table(
        ("nodes", "mean age of readings", "oldest", "until all fresh", "exec: until all fresh"),
        [
            (str(r.nodes), _ms(r.stream_age), _ms(r.stream_age_max), _ms(r.stream_fresh),
             _ms(r.warm))
            for r in rows
        ],
    )  # fmt: skip
    print(f"  ages are counted from when a reading reached this process (it left the node "
          f"{rtt_ms / 2:g} ms earlier)")  # fmt: skip
    print()
    print("The host figures (CPU, load, RAM, disks, network) in the GPU query's round trip:"
          " exec sweeps reading the processes every sweep, with and without them, same"
          " fleet, same run")  # fmt: skip
    table(
        ("nodes", "warm, GPUs+procs+host", "warm, GPUs+procs", "ratio", "CPU/round +host",
         "CPU/round", "fleet CPU +host", "fleet CPU"),
        [
            (str(r.nodes), _s(r.host_warm), _s(r.bare_warm),
             f"{r.host_warm / r.bare_warm:.2f}x"
             if r.host_warm == r.host_warm and r.bare_warm == r.bare_warm else "-",
             _ms(r.host_cpu), _ms(r.bare_cpu), _ms(r.host_fleet_cpu), _ms(r.bare_fleet_cpu))
            for r in rows
        ],
    )  # fmt: skip
    print("  zuka reads them with the processes, every 6th sweep: a sixth of the difference"
          " per sweep on average; the fleet CPU is the simulator's (one process for every"
          " node), a real node spends its own")  # fmt: skip
    failed = [r for r in rows if r.failed_nodes]
    for r in failed:
        print(f"  WARNING: {r.failed_nodes} of {r.nodes} nodes gave no good reading (or no"
              " host figures) to zuka")  # fmt: skip
    big = max(rows, key=lambda r: r.nodes)
    print()
    fast = big.warm < ROUND_TARGET_S
    ratio = big.pssh32 / big.warm if big.warm == big.warm else float("nan")
    print(f"Target: {big.nodes}-node warm round under {ROUND_TARGET_S:g} s: "
          f"{'MET' if fast else 'NOT MET'} ({big.warm:.3f} s; cold {big.cold:.3f} s)")  # fmt: skip
    print(f"Target: >= {SPEEDUP_TARGET:g}x faster than (b) fresh connections x32: "
          f"{'MET' if ratio >= SPEEDUP_TARGET else 'NOT MET'} ({ratio:.1f}x; "
          f"{big.pssh_unbounded / big.warm:.1f}x against unbounded)")  # fmt: skip


# -- main -------------------------------------------------------------------------------------


async def measure(fleet: Fleet, count: int, args: argparse.Namespace) -> Row:
    row = Row(count)
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
        ("z-exec", lambda: zuka_exec(fleet, count, args.rounds, row)),
        ("z-host", lambda: zuka_exec(fleet, count, args.rounds, row, host=True)),
        ("z-gpus", lambda: zuka_exec(fleet, count, args.rounds, row, host=False)),
        ("z-stream",
         lambda: zuka_stream(fleet, count, args.stream_interval, args.stream_rounds, row)),
        ("(a)", lambda: asyncio.to_thread(openssh_sequential, fleet, count, args.ssh_sample, row)),
        ("(b)", lambda: pssh_like(fleet, count, args.pssh_rounds, row)),
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
    ap.add_argument("--rounds", type=int, default=5, help="warm exec rounds (median)")
    ap.add_argument("--pssh-rounds", type=int, default=2, help="rounds of (b), each way")
    ap.add_argument("--stream-interval", type=float, default=5.0, help="-lms interval, s")
    ap.add_argument("--stream-rounds", type=int, default=3, help="asks in stream mode")
    ap.add_argument("--ssh-sample", type=int, default=20, help="nodes timed for (a)")
    ap.add_argument("--rtt-ms", type=float, default=50.0, help="added round-trip time")
    ap.add_argument(
        "--skip", default="", help="comma-separated: z-exec,z-host,z-gpus,z-stream,(a),(b)"
    )
    args = ap.parse_args(argv)
    counts = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    began = time.perf_counter()
    directory = Path(tempfile.mkdtemp(prefix="zuka-pollbench-"))
    proc, fleet = start_fleet(max(counts), args.rtt_ms / 2, directory)
    try:
        print(f"fleet: {len(fleet.ports)} nodes in pid {proc.pid}, "
              f"+{fleet.delay_ms:g} ms each way", flush=True)  # fmt: skip
        rows = [asyncio.run(measure(fleet, n, args)) for n in counts]
        report(rows, args, args.rtt_ms)
    finally:
        stop_fleet(proc)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"(bench took {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
