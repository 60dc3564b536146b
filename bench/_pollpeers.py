"""bench/poll.py's peers and whole-process timings, each on the fleet of bench/_fleet_server.py:

- the floor: a bare asyncssh client holding ONE shell channel per node (create_process("sh")
  once), writing the command and an `echo SENTINEL` each round and reading to the sentinel;
- Debian's parallel-ssh (pssh), fresh OpenSSH connections every round;
- cold `zuka poll --once` as a whole process on a ledger holding the fleet's nodes (built
  with zuka's own node use cases, the fleet's host keys in the ledger's trust store, HOME
  a temporary folder so that nothing of the user's ~/.ssh is read);
- `python -c 'import asyncssh'` as a whole process.

Only existing zuka APIs are used, so the bench measures any checkout of main.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from leases.ssh.options import SshOptions
from leases.telemetry import gpuread, nvsmi

ROOT = Path(__file__).resolve().parent.parent
# What zuka's warm exec sweep sends a node: the GPU query (the simulated nodes accept every
# field, so the probe keeps them all) ...
QUERY = nvsmi.query_command(nvsmi.QUERY_FIELDS)
# ... and, every 6th sweep (and in the cold round), with the compute apps, their owners and
# the host figures after it: the one command the poller sends then (leases.telemetry.
# gpuread.with_apps). pssh and the floor's cold round send this (the cold round's probe aside).
APPS_HOST = gpuread.with_apps(QUERY, host=True)
SENTINEL = "__floor_end__"
PSSH = "/usr/bin/parallel-ssh"


def children_cpu() -> float:
    """CPU seconds of every child process waited for so far (utime + stime)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- the floor ------------------------------------------------------------------------------


@dataclass
class Floor:
    cold: float = float("nan")  # wall: connect + shell + first command (APPS_HOST), all nodes
    cold_cpu: float = float("nan")
    warm: float = float("nan")  # median wall of a round of QUERY
    warm_cpu: float = float("nan")
    apps: float = float("nan")  # median wall of a round of APPS_HOST
    apps_cpu: float = float("nan")
    failed: int = 0

    def take(self, warm: list[tuple[float, float]], apps: list[tuple[float, float]]) -> None:
        """The medians of warm rounds of QUERY and of APPS_HOST, each (wall, client CPU)."""
        self.warm = statistics.median(w for w, _ in warm)
        self.warm_cpu = statistics.median(c for _, c in warm)
        self.apps = statistics.median(w for w, _ in apps)
        self.apps_cpu = statistics.median(c for _, c in apps)


@dataclass
class FloorChannel:
    """One node's connection and the shell channel the floor keeps open on it."""

    conn: asyncssh.SSHClientConnection
    proc: asyncssh.SSHClientProcess[str]


async def _ask(ch: FloorChannel, command: str) -> str:
    ch.proc.stdin.write(f"{command}\necho {SENTINEL}\n")
    out: list[str] = []
    tail = ""
    while True:
        chunk = await ch.proc.stdout.read(65536)
        if not chunk:
            raise ConnectionError("the shell channel closed")
        out.append(chunk)
        tail = (tail + chunk)[-(len(SENTINEL) + 2) :]
        if SENTINEL in tail:
            return "".join(out)


async def _open(port: int, key: Path, known_hosts: Path) -> FloorChannel:
    conn = await asyncssh.connect(
        "127.0.0.1", port, username="root", client_keys=[str(key)],
        known_hosts=str(known_hosts), agent_path=None, config=[], connect_timeout=30,
        # The cipher zuka puts first (leases.ssh.connect): the same bytes cost the same.
        encryption_algs="^" + ",".join(SshOptions().preferred_ciphers),
    )  # fmt: skip
    proc = await conn.create_process("sh", encoding="utf-8", errors="replace")
    return FloorChannel(conn, proc)


async def _round(channels: list[FloorChannel], command: str) -> tuple[float, float, int]:
    c, t = time.process_time(), time.perf_counter()
    answers = await asyncio.gather(*(_ask(ch, command) for ch in channels), return_exceptions=True)
    took, cpu = time.perf_counter() - t, time.process_time() - c
    return took, cpu, sum(not isinstance(a, str) or "," not in a for a in answers)


async def floor_cold(
    ports: list[int], key: Path, known_hosts: Path
) -> tuple[list[FloorChannel], Floor]:
    """The floor's cold round: every node connected at once, its shell opened and the first
    command (APPS_HOST) answered. The channels stay open for floor_round (floor_close)."""
    result = Floor()

    async def first(port: int) -> FloorChannel:
        ch = await _open(port, key, known_hosts)
        await _ask(ch, APPS_HOST)
        return ch

    c, t = time.process_time(), time.perf_counter()
    opened = await asyncio.gather(*(first(p) for p in ports), return_exceptions=True)
    result.cold, result.cold_cpu = time.perf_counter() - t, time.process_time() - c
    channels = [ch for ch in opened if isinstance(ch, FloorChannel)]
    result.failed = len(ports) - len(channels)
    return channels, result


async def floor_round(channels: list[FloorChannel], apps: bool) -> tuple[float, float, int]:
    """One warm round of the floor: QUERY, or APPS_HOST (what zuka reads every 6th sweep).
    (wall, client CPU, nodes that failed)."""
    return await _round(channels, APPS_HOST if apps else QUERY)


async def floor_close(channels: list[FloorChannel]) -> None:
    for ch in channels:
        ch.conn.close()
    await asyncio.gather(*(ch.conn.wait_closed() for ch in channels), return_exceptions=True)


async def floor(ports: list[int], key: Path, known_hosts: Path, rounds: int) -> Floor:
    """The 1-RTT floor alone: its cold round, then `rounds` rounds of QUERY and `rounds` of
    APPS_HOST (alternating, so both see the same machine). bench/poll.py runs the warm
    rounds paired with zuka's sweeps instead when it measures both."""
    channels, result = await floor_cold(ports, key, known_hosts)
    try:
        warm: list[tuple[float, float]] = []
        apps: list[tuple[float, float]] = []
        for _ in range(rounds):
            took, cpu, failed = await floor_round(channels, apps=False)
            warm.append((took, cpu))
            result.failed = max(result.failed, failed)
            took, cpu, failed = await floor_round(channels, apps=True)
            apps.append((took, cpu))
            result.failed = max(result.failed, failed)
        result.take(warm, apps)
    finally:
        await floor_close(channels)
    return result


# -- parallel-ssh ---------------------------------------------------------------------------


@dataclass
class Timed:
    """A whole-process figure: median wall, median CPU of the process and its children."""

    wall: float = float("nan")
    cpu: float = float("nan")
    failed: int = 0  # the most nodes (or runs) that failed in one round
    note: str = ""


def pssh(
    ports: list[int], key: Path, known_hosts: Path, par: int, rounds: int, folder: Path
) -> Timed:
    """parallel-ssh -p par over the nodes, fresh connections each round, APPS_HOST each."""
    if not Path(PSSH).exists():
        return Timed(note=f"skipped: no {PSSH} (apt-get install -y pssh)")
    hosts = folder / f"pssh-hosts-{len(ports)}"
    hosts.write_text("".join(f"127.0.0.1:{p}\n" for p in ports))
    extra = (f"-i {key} -o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
             "-o BatchMode=yes -o IdentitiesOnly=yes -F /dev/null")  # fmt: skip
    walls, cpus, failed = [], [], 0
    for i in range(rounds):
        out = folder / f"pssh-out-{len(ports)}-{par}-{i}"
        argv = [PSSH, "-h", str(hosts), "-p", str(par), "-l", "root", "-t", "120",
                "-x", extra, "-o", str(out), APPS_HOST]  # fmt: skip
        c, t = children_cpu(), time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - t)
        cpus.append(children_cpu() - c)
        ok = done.stdout.count("[SUCCESS]")
        failed = max(failed, len(ports) - ok)
        if ok == 0:
            return Timed(note=f"failed: {(done.stdout + done.stderr).strip()[-300:]}")
        shutil.rmtree(out, ignore_errors=True)
    return Timed(statistics.median(walls), statistics.median(cpus), failed)


# -- whole processes: cold zuka poll --once, import asyncssh --------------------------------


def build_ledger(folder: Path, names: list[str], ports: list[int], key: Path,
                 known_hosts: Path) -> Path:  # fmt: skip
    """A ledger holding these nodes, added with zuka's own use case (as `zuka node add
    NAME --ssh 'ssh -p PORT -i KEY root@127.0.0.1' --gpu-model A100 --gpu-count 8` does),
    the fleet's host keys in its trust store."""
    from leases.app.nodes import add_node, new_node, node_changes
    from leases.ledger.paths import trust_store
    from leases.ledger.store import Ledger

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ledger.db"
    with Ledger.open(path, actor="bench") as ledger:
        for name, port in zip(names, ports, strict=True):
            changes = node_changes({"gpu_model": "A100", "gpu_count": 8},
                                   f"ssh -p {port} -i {key} root@127.0.0.1", False)  # fmt: skip
            add_node(ledger, new_node(name, changes), None, None)
    shutil.copyfile(known_hosts, trust_store(path))
    return path


def clean_env(home: Path) -> dict[str, str]:
    """This environment without what would make zuka read the user's keys, agent, config
    or ledger; HOME a folder of the bench's. PYTHONPATH is kept (it names the checkout).
    PYTHONDONTWRITEBYTECODE goes: an installed zuka has its bytecode (pip compiles it), and
    without it every process would compile every module again (0.6 s on these machines)."""
    dropped = ("HOME", "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ZUKA", "SSH_", "XDG_")) and k not in dropped
    }
    env["HOME"] = str(home)
    return env


@dataclass
class Cold:
    poll: Timed = field(default_factory=Timed)
    imports: Timed = field(default_factory=Timed)


def _timed(
    argv: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    c, t = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env, cwd=ROOT)
    return time.perf_counter() - t, children_cpu() - c, done


def cold_processes(ledger: Path, nodes: int, rounds: int) -> Cold:
    """`python -m tui.cli.main poll --once --ledger L` and `python -c 'import asyncssh'`,
    alternating, `rounds` times each; a poll that did not read every node counts as failed
    (its first such output is kept in the note)."""
    home = Path(tempfile.mkdtemp(prefix="zuka-pollbench-home-"))
    env = clean_env(home)
    poll_argv = [sys.executable, "-m", "tui.cli.main", "poll", "--once", "--ledger", str(ledger)]
    import_argv = [sys.executable, "-c", "import asyncssh"]
    out = Cold()
    walls: dict[str, list[float]] = {"poll": [], "import": []}
    cpus: dict[str, list[float]] = {"poll": [], "import": []}
    try:
        for _ in range(rounds):
            took, cpu, done = _timed(poll_argv, env)
            walls["poll"].append(took)
            cpus["poll"].append(cpu)
            ok = sum(line.split()[1:2] == ["ok"] for line in done.stdout.splitlines())
            if ok < nodes:
                out.poll.failed = max(out.poll.failed, nodes - ok)
                out.poll.note = out.poll.note or (
                    f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
                )
            took, cpu, done = _timed(import_argv, env)
            walls["import"].append(took)
            cpus["import"].append(cpu)
            if done.returncode != 0:
                out.imports.failed += 1
                out.imports.note = done.stderr.strip()[-300:]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    out.poll.wall, out.poll.cpu = statistics.median(walls["poll"]), statistics.median(cpus["poll"])
    out.imports.wall = statistics.median(walls["import"])
    out.imports.cpu = statistics.median(cpus["import"])
    return out
