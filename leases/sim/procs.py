"""The GPU processes of a simulated node as /proc, ps and kill show them: named users (and
one container user known only by uid), realistic command lines, start times, and signals.

Answers zuka's owner query (leases.telemetry.owners.APPS_OWNERS_COMMAND) and its stop
snippets (leases.telemetry.procstop) as the real shell would, from the same readings the
GPUs show. The login is root; in the simulator bob's trainers trap SIGTERM (they end on
SIGKILL) and carol's jobs run where the login may not signal them (kill says "Operation
not permitted"), so that both ways a stop goes wrong can be seen on `zuka demo`. A killed
process leaves its GPU idle (its memory freed) until the node's next job.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from leases.sim.gpu import SIM_USERS, SimNode, current_job, gpu_user, job_start, readings
from leases.sim.output import Answer
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry.cksum import cksum_word
from leases.telemetry.owners import APPS_OWNERS_COMMAND, OWNERS_MARK
from leases.telemetry.procinfo import MAX_CMDLINE, PROCS_MARK, start_token
from leases.telemetry.procstop import STOP_MARK, stop_command

HZ = 100
# Users whose processes behave badly when stopped (see the module's words).
TRAPS_TERM = "bob"
NOT_PERMITTED = "carol"
_BOOT_WINDOW = 60 * 86400
# What runs on every simulated node besides the GPU jobs: (pid, uid).
SYSTEM_PROCESSES = ((1, 0), (412, 0), (873, 0), (1290, SIM_USERS[0].uid))
_SHELL_PID = 1290  # what $$ names in the owner query (owners.PS_COMMAND)

_COMMANDS = {
    "alice": "python train.py --config configs/llama-7b.yaml --lr 3e-4 --out /data/ckpt/run-{job}",
    "bob": "torchrun --nproc_per_node=8 --master_port=29500 finetune.py --model qwen2-72b"
    " --deepspeed ds_zero3.json --run-name sweep-{job}",
    "carol": "python -m vllm.entrypoints.openai.api_server --model /models/Qwen2-7B-Instruct"
    " --port 8000 --tensor-parallel-size 1",
    "root": "python bench.py --steps 1000",
}
_CONTAINER = "python3 /workspace/main.py --epochs 90 --batch-size 256 --seed {job}"


@dataclass(frozen=True)
class SimProc:
    pid: int
    gpu: int
    uid: int
    user: str | None
    started: int  # epoch seconds
    cmdline: str  # as /proc/PID/cmdline reads with NULs as spaces (a trailing one too)


def boot_id(node: SimNode) -> str:
    return str(uuid.UUID(int=(node.seed * 2654435761 + 7) % (1 << 128), version=4))


def boot_epoch(node: SimNode, t: int) -> int:
    """When the node booted: constant for weeks, days before any job it runs."""
    return t - t % _BOOT_WINDOW - (3 + node.seed % 40) * 86400


def gpu_processes(node: SimNode, now: datetime) -> list[SimProc]:
    """The node's live GPU processes (killed ones are gone)."""
    t = int(now.timestamp())
    job, started = current_job(node, t), job_start(node, t)
    out = []
    for r in readings(node, now):
        for pid, _, _ in r.processes:
            user = gpu_user(node, r.gpu.index)
            text = _COMMANDS.get(user.name or "", _CONTAINER).format(job=job)
            out.append(SimProc(pid, r.gpu.index, user.uid, user.name, started or t, text + " "))
    return out


def owners_answer(node: SimNode, now: datetime, ps_text: str | None = None) -> Answer:
    """APPS_OWNERS_COMMAND's output: nvidia-smi's apps, the marker, ps, the /proc part.

    ps_text: what ps prints instead of the simulated process table (tests give hostile
    ps output this way)."""
    reads = readings(node, now)
    apps = [
        f"{r.gpu.uuid}, {pid}, {used}" for r in reads for pid, _, used in (*r.processes, *r.foreign)
    ]
    procs = gpu_processes(node, now)
    # ps of the pids nvidia-smi named (owners.PS_COMMAND), the shell's own among them.
    pids = ",".join([*(line.split(", ")[1] for line in apps), str(_SHELL_PID)])
    if ps_text is None:
        ps_text = ps_answer(node, ["-o", "pid=,uid=,user:32=", "-p", pids], now).stdout
    ps = ps_text.splitlines()
    t = int(now.timestamp())
    boot = boot_epoch(node, t)
    lines = [
        *apps,
        f"{OWNERS_MARK} 0",
        *ps,
        PROCS_MARK,
        f"boot {boot_id(node)}",
        f"hz {HZ}",
        *(f"@p {p.pid} {(p.started - boot) * HZ}:{_cksum(p)} {p.cmdline}" for p in procs),
        f"up {t - boot}.42",
    ]
    return Answer("".join(line + "\n" for line in lines), "", 0)


def _raw_cmdline(p: SimProc) -> bytes:
    """/proc/PID/cmdline's bytes: the arguments NUL-separated."""
    return ("\0".join(p.cmdline.split()) + "\0").encode()


def _cksum(p: SimProc) -> str:
    return cksum_word(_raw_cmdline(p)[:MAX_CMDLINE])


_STOP = re.compile(r"\(p=([0-9]+); wb=([0-9a-f-]+); ws=([0-9]+); set -f;")
_SIGNAL = re.compile(r"kill -s (TERM|KILL) ")


def _parsed_stop(command: str) -> tuple[int, str, str | None] | None:
    """(pid, start, signal) of a stop snippet zuka made, else None."""
    snippet = unwrap_sh(command)
    match = _STOP.match(snippet) if snippet is not None else None
    if snippet is None or match is None:
        return None
    pid, start = int(match.group(1)), start_token(match.group(2), int(match.group(3)))
    sig = _SIGNAL.search(snippet)
    signal = sig.group(1) if sig else None
    if stop_command(pid, start, "", signal) != command:
        return None
    return pid, start, signal


def stop_answer(node: SimNode, command: str, now: datetime) -> Answer | None:
    """A stop snippet's answer (None: not one), killing the process when it matches."""
    parsed = _parsed_stop(command)
    if parsed is None:
        return None
    pid, start, signal = parsed
    t = int(now.timestamp())
    boot = boot_epoch(node, t)
    found = next((p for p in gpu_processes(node, now) if p.pid == pid), None)
    if found is None:
        return Answer(f"{STOP_MARK} gone\n", "", 0)
    changed = start_token(boot_id(node), (found.started - boot) * HZ) != start
    if changed:
        return Answer(f"{STOP_MARK} changed\n", "", 0)
    if signal is None:
        return Answer(f"{STOP_MARK} alive\n", "", 0)
    if found.user == NOT_PERMITTED:
        return Answer(f"{STOP_MARK} failed sh: 1: kill: Operation not permitted\n", "", 0)
    if signal == "KILL" or found.user != TRAPS_TERM:
        node.killed.add(pid)
    return Answer(f"{STOP_MARK} sent\n", "", 0)


def proc_file(node: SimNode, path: str, now: datetime) -> str | None:
    """/proc/PID/stat, /proc/PID/cmdline (NUL-separated) of a GPU process, the boot id;
    None for any other path (or a process that is gone)."""
    if path == "/proc/sys/kernel/random/boot_id":
        return boot_id(node) + "\n"
    match = re.fullmatch(r"/proc/([0-9]{1,10})/(stat|cmdline)", path)
    found = match and next((p for p in gpu_processes(node, now) if p.pid == int(match[1])), None)
    if not match or found is None:
        return None
    if match[2] == "cmdline":
        return _raw_cmdline(found).decode()
    ticks = (found.started - boot_epoch(node, int(now.timestamp()))) * HZ
    rest = ["1", str(found.pid), str(found.pid), "0", "-1", "4194560", *["0"] * 8, "20", "0",
            "1", "0", str(ticks), *["0"] * 30]  # fmt: skip
    return f"{found.pid} (python) S {' '.join(rest)}\n"


# The owner query, its $? as sent or already expanded (as a stand-in shell may hand it on).
_OWNERS_QUERY = re.compile(
    re.escape(APPS_OWNERS_COMMAND).replace(re.escape("$?"), r"(?:\$\?|[0-9]{1,3})")
)
_CAT = re.compile(r"cat (/proc/\S+)")
_KILL = re.compile(r"kill (?:-s )?-?(TERM|KILL|15|9) ([0-9]{1,10})")


def signal_answer(node: SimNode, signal: str, pid: int, now: datetime) -> Answer:
    """`kill -TERM PID` typed by hand: as the stop's signal, without its checks."""
    found = next((p for p in gpu_processes(node, now) if p.pid == pid), None)
    if found is None:
        return Answer("", "sh: 1: kill: No such process\n", 1)
    if found.user == NOT_PERMITTED:
        return Answer("", "sh: 1: kill: Operation not permitted\n", 1)
    if signal in ("KILL", "9") or found.user != TRAPS_TERM:
        node.killed.add(pid)
    return Answer("", "", 0)


_PS_COLUMNS = frozenset({"pid", "uid", "user", "euid", "euser", "etimes", "args"})
# What the system processes run, for ps's args column.
_SYSTEM_ARGS = {1: "/sbin/init", 412: "/lib/systemd/systemd-journald", 873: "sshd: /usr/sbin/sshd",
                1290: "-bash"}  # fmt: skip


def ps_answer(node: SimNode, args: list[str], now: datetime) -> Answer:
    """procps `ps -e -o COLUMNS` or `ps -o COLUMNS -p PID,...` (pid, uid, user, etimes, args;
    `=` headers and `:WIDTH`), the GPU processes with their users, elapsed seconds and
    command lines. Like procps, a -p list that names no process exits 1."""
    columns: list[tuple[str, str]] = []
    every = False
    picked: set[int] | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-e", "-A"):
            every = True
        elif arg == "-p":
            words = args[i + 1].replace(",", " ").split(" ") if i + 1 < len(args) else [""]
            if not all(w.isdigit() for w in words):
                return Answer("", "error: improper list\n", 1)
            picked = (picked or set()) | {int(w) for w in words}
            i += 1
        elif arg in ("-o", "-eo"):
            every = every or arg == "-eo"
            if i + 1 >= len(args):
                return Answer("", "error: option requires an argument\n", 1)
            i += 1
            for spec in args[i].split(","):
                name, _, header = spec.partition("=")
                key = name.partition(":")[0]
                if key not in _PS_COLUMNS:
                    said = f'error: unknown user-defined format specifier "{name}"\n'
                    return Answer("", said, 1)
                columns.append((key, header if "=" in spec else key.upper()))
        else:
            return Answer("", f"error: unsupported option {arg}\n", 1)
        i += 1
    if not (every or picked is not None) or not columns:
        return Answer("", "error: the simulator's ps needs -e or -p, and -o\n", 1)
    t = int(now.timestamp())
    boot = boot_epoch(node, t)
    users = {u.uid: u for u in SIM_USERS}
    table = {pid: (uid, boot, _SYSTEM_ARGS[pid]) for pid, uid in SYSTEM_PROCESSES}
    for p in gpu_processes(node, now):
        table[p.pid] = (p.uid, p.started, p.cmdline.strip())
    if picked is not None:
        table = {pid: row for pid, row in table.items() if pid in picked}
        if not table:
            return Answer("", "", 1)
    lines = []
    if any(header for _, header in columns):
        lines.append(" ".join(f"{header:>7}" for _, header in columns))
    for pid, (uid, started, text) in sorted(table.items()):
        name = users[uid].name or str(uid)
        values = {"pid": str(pid), "uid": str(uid), "euid": str(uid), "user": name,
                  "euser": name, "etimes": str(t - started),
                  "args": text}  # fmt: skip
        lines.append(" ".join(f"{values[key]:>7}" for key, _ in columns).rstrip())
    return Answer("".join(line + "\n" for line in lines), "", 0)


def after_owners(command: str) -> str | None:
    """What follows the owner query when a command starts with it and goes on after a `;`
    (the poller's stream mode sends it with the host snippet after it,
    leases.telemetry.hoststats.with_host); None for any other command."""
    found = _OWNERS_QUERY.match(command)
    if found is None:
        return None
    rest = command[found.end() :].lstrip(" ")
    if not rest.startswith(";"):
        return None
    return rest[1:].lstrip(" ") or None


def answer_procs(node: SimNode, command: str, now: datetime) -> Answer | None:
    """The owner query, a stop snippet, `cat /proc/...` of a GPU process or `kill` of
    one; None for any other command."""
    if _OWNERS_QUERY.fullmatch(command):
        return owners_answer(node, now)
    if command.startswith("sh -c ") and (stopped := stop_answer(node, command, now)):
        return stopped
    if (cat := _CAT.fullmatch(command.strip())) and (text := proc_file(node, cat[1], now)):
        return Answer(text, "", 0)
    if kill := _KILL.fullmatch(command.strip()):
        return signal_answer(node, kill[1], int(kill[2]), now)
    return None


__all__ = [
    "NOT_PERMITTED",
    "SYSTEM_PROCESSES",
    "TRAPS_TERM",
    "SimProc",
    "after_owners",
    "answer_procs",
    "boot_id",
    "gpu_processes",
    "owners_answer",
    "proc_file",
    "ps_answer",
    "signal_answer",
    "stop_answer",
]
