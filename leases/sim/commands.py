"""What a simulated node prints for a command line, as /bin/sh and the real tools would.

`answer` is pure except that shred and rm remove paths from `node.files` (and the
offboarding's scripts from `node.files` and `node.keys`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from leases.sim.gpu import (
    GpuReading,
    Scenario,
    SimNode,
    readings,
)
from leases.sim.hostcmds import answer_host, file_text, grep, hami_env, head
from leases.sim.offboard import answer_script
from leases.sim.output import NA, NOT_SUPPORTED, OK, Answer
from leases.sim.procs import after_owners, answer_procs, owners_answer, ps_answer
from leases.sim.shellwords import tokens as shell_tokens
from leases.sim.smiq import EXTRA_FIELDS, smi_extra
from leases.sim.tools import answer_tool
from leases.sim.topo import topo_matrix
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry.gpuread import GPUS_MARK, unwrap_apps
from leases.telemetry.hoststats import HOST_MARK, SNIPPET

INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
MISMATCH = (
    "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n"
)
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)
_NODE_TZ = timezone(timedelta(hours=8))


_INDEX_SHIFT = {Scenario.GPU_INDEX_256: 256}


def _f(v: float) -> str:
    return f"{v:.2f}"


# Field -> (unit, value as printed with nounits). Aliases share an entry.
_Getter = Callable[[GpuReading, SimNode, datetime], str]
_FIELDS: dict[str, tuple[str, _Getter]] = {
    "timestamp": ("", lambda r, n, t: t.astimezone(_NODE_TZ).strftime("%Y/%m/%d %H:%M:%S.000")),
    "driver_version": ("", lambda r, n, t: r.gpu.model.driver),
    "count": ("", lambda r, n, t: str(n.count)),
    "index": ("", lambda r, n, t: str(r.gpu.index + _INDEX_SHIFT.get(n.scenario, 0))),
    "name": ("", lambda r, n, t: r.gpu.name),
    "uuid": ("", lambda r, n, t: r.gpu.uuid),
    "pci.bus_id": ("", lambda r, n, t: r.gpu.bus_id),
    "persistence_mode": (
        "",
        lambda r, n, t: "Enabled" if r.gpu.model.datacenter else "Disabled",
    ),
    "pstate": ("", lambda r, n, t: r.pstate),
    "fan.speed": ("%", lambda r, n, t: NA if r.fan_pct is None else str(r.fan_pct)),
    "utilization.gpu": ("%", lambda r, n, t: str(r.util_gpu)),
    "utilization.memory": ("%", lambda r, n, t: str(r.util_mem)),
    "memory.total": ("MiB", lambda r, n, t: str(r.gpu.memory_total_mib)),
    "memory.used": ("MiB", lambda r, n, t: str(r.mem_used_mib)),
    "memory.free": ("MiB", lambda r, n, t: str(r.gpu.memory_total_mib - r.mem_used_mib)),
    "temperature.gpu": ("", lambda r, n, t: str(r.temp_c)),
    "power.draw": ("W", lambda r, n, t: _f(r.power_w)),
    "power.limit": ("W", lambda r, n, t: _f(r.gpu.power_limit_w)),
    "clocks.sm": ("MHz", lambda r, n, t: str(r.sm_clock_mhz)),
    "clocks.max.sm": ("MHz", lambda r, n, t: str(r.gpu.model.max_sm_mhz)),
    "mig.mode.current": (
        "",
        lambda r, n, t: "Disabled" if r.gpu.model.mig_capable else NA,
    ),
    "ecc.errors.uncorrected.volatile.total": (
        "",
        lambda r, n, t: "0" if r.gpu.model.ecc else NOT_SUPPORTED,
    ),
    "clocks_throttle_reasons.active": ("", lambda r, n, t: r.throttle),
}
for _alias, _canonical in {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.current.sm": "clocks.sm",
    "clocks.max.sm_clock": "clocks.max.sm",
    "clocks_event_reasons.active": "clocks_throttle_reasons.active",
    "persistence-mode": "persistence_mode",
}.items():
    _FIELDS[_alias] = _FIELDS[_canonical]
_FIELDS.update(EXTRA_FIELDS)

_APP_FIELDS: dict[str, str] = {
    "gpu_uuid": "",
    "gpu_bus_id": "",
    "gpu_name": "",
    "pid": "",
    "process_name": "",
    "name": "",
    "used_memory": "MiB",
    "used_gpu_memory": "MiB",
}


def _bad_field(name: str) -> Answer:
    return Answer(f'Field "{name}" is not a valid field to query.\n\n', "", 2)


def _csv(rows: list[list[str]], fields: list[str], units: dict[str, str], opts: set[str]) -> str:
    out = []
    if "noheader" not in opts:
        out.append(", ".join(f"{f} [{units[f]}]" if units[f] else f for f in fields))
    for row in rows:
        if "nounits" not in opts:
            row = [
                f"{v} {units[f]}" if units[f] and not v.startswith("[") else v
                for f, v in zip(fields, row, strict=True)
            ]
        out.append(", ".join(row))
    return "".join(line + "\n" for line in out)


class _SmiArgs(NamedTuple):
    query_gpu: list[str] | None
    query_apps: list[str] | None
    fmt: set[str] | None
    list_gpus: bool
    topo: bool
    ids: list[str] | None
    loop_s: float | None


def _parse_smi(args: list[str]) -> _SmiArgs | None:
    """nvidia-smi's options, or None when they are not a combination it accepts."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    if args[:1] == ["topo"]:
        if args[1:] in (["-m"], ["--matrix"]):
            return _SmiArgs(None, None, None, False, True, None, None)
        return None
    takes_value = {
        "--query-gpu": "qg",
        "--query-compute-apps": "qa",
        "--format": "fmt",
        "-i": "id",
        "--id": "id",
        "-l": "l",
        "--loop": "l",
        "-lms": "lms",
        "--loop-ms": "lms",
    }
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        if key in takes_value:
            if not eq:
                if i + 1 >= len(args):
                    return None
                i += 1
                value = args[i]
            values[takes_value[key]] = value
        elif arg in ("-L", "--list-gpus"):
            flags.add("L")
        else:
            return None
        i += 1
    loop_s: float | None = None
    try:
        if "l" in values:
            loop_s = float(int(values["l"]))
        if "lms" in values:
            loop_s = int(values["lms"]) / 1000
    except ValueError:
        return None
    if loop_s is not None and loop_s <= 0:
        return None
    fmt = set(values["fmt"].split(",")) if "fmt" in values else None
    qg = values["qg"].split(",") if "qg" in values else None
    qa = values["qa"].split(",") if "qa" in values else None
    modes = sum(x is not None for x in (qg, qa)) + ("L" in flags)
    if modes != 1 or ((qg or qa) and (fmt is None or "csv" not in fmt)):
        return None
    ids = values["id"].split(",") if "id" in values else None
    return _SmiArgs(qg, qa, fmt, "L" in flags, False, ids, loop_s)


def loop_interval(command: str) -> float | None:
    """Seconds between rounds when `command` is a streaming `nvidia-smi ... -l/-lms`."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None
    if argv[:1] != ["nvidia-smi"]:
        return None
    parsed = _parse_smi(argv[1:])
    return parsed.loop_s if parsed else None


def nvidia_smi(node: SimNode, args: list[str], now: datetime) -> Answer:
    """One round of nvidia-smi. A `-l`/`-lms` loop is the caller's to repeat."""
    if node.scenario is Scenario.DRIVER_MISMATCH:
        return Answer(MISMATCH, "", 18)
    if node.scenario is Scenario.NO_DRIVER:
        return Answer(NO_DRIVER, "", 9)
    if not args:
        return Answer(_table(node, readings(node, now), now), "", 0)
    if (extra := smi_extra(node, args, now)) is not None:
        return extra
    parsed = _parse_smi(args)
    if parsed is None:
        return Answer(INVALID_ARGS, "", 2)
    if parsed.topo:
        return Answer(topo_matrix(node), "", 0)
    reads = readings(node, now)
    if parsed.ids is not None:
        wanted = set(parsed.ids)
        reads = tuple(r for r in reads if wanted & {str(r.gpu.index), r.gpu.uuid, r.gpu.bus_id})
        if not reads:
            return Answer("No devices were found\n", "", 6)
    if parsed.list_gpus:
        return Answer("".join(f"GPU {r.gpu.index}: {r.gpu.name} (UUID: {r.gpu.uuid})\n"
                              for r in reads), "", 0)  # fmt: skip
    opts = parsed.fmt or set()
    if parsed.query_gpu is not None:
        fields = [f.strip() for f in parsed.query_gpu]
        for name in fields:
            if name not in _FIELDS:
                return _bad_field(name)
        units = {f: _FIELDS[f][0] for f in fields}
        rows = [[_FIELDS[f][1](r, node, now) for f in fields] for r in reads]
        return Answer(_csv(rows, fields, units, opts), "", 0)
    fields = [f.strip() for f in parsed.query_apps or ()]
    for name in fields:
        if name not in _APP_FIELDS:
            return _bad_field(name)
    rows = []
    for r in reads:
        for pid, pname, used in (*r.processes, *r.foreign):
            by = {"gpu_uuid": r.gpu.uuid, "gpu_bus_id": r.gpu.bus_id, "gpu_name": r.gpu.name,
                  "pid": str(pid), "process_name": pname, "name": pname,
                  "used_memory": str(used), "used_gpu_memory": str(used)}  # fmt: skip
            rows.append([by[f] for f in fields])
    return Answer(_csv(rows, fields, {f: _APP_FIELDS[f] for f in fields}, opts), "", 0)


def _table(node: SimNode, reads: tuple[GpuReading, ...], now: datetime) -> str:
    """The default `nvidia-smi` screen (driver 550 layout)."""
    driver = reads[0].gpu.model.driver if reads else ""
    local = now.astimezone(_NODE_TZ)
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    wide = "+" + "-" * 89 + "+"
    lines = [
        f"{local:%a %b} {local.day:>2} {local:%H:%M:%S %Y}",
        wide,
        f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: 12.4     |",
        rule.replace("+", "|", 1)[:-1] + "+",
        "| GPU  Name                 Persistence-M | B"
        "us-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |  "
        "         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |  "
        "                      |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for r in reads:
        m = r.gpu.model
        persist = "On" if m.datacenter else "Off"
        ecc = "0" if m.ecc else "N/A"
        fan = "N/A" if r.fan_pct is None else f"{r.fan_pct}%"
        power = f"{round(r.power_w)}W / {round(r.gpu.power_limit_w)}W"
        mem = f"{r.mem_used_mib}MiB / {r.gpu.memory_total_mib}MiB"
        mig = "Disabled" if m.mig_capable else "N/A"
        lines += [
            f"| {r.gpu.index:>3}  {r.gpu.name[:26]:<26}{persist:>7}  | {r.gpu.bus_id:>18} Off"
            f" | {ecc:>20} |",
            f"| {fan:>3}  {r.temp_c:>3}C    {r.pstate:<3}{power:>23} | {mem:>22} |"
            f" {r.util_gpu:>6}%      Default |",
            f"|{'':41}|{'':24}| {mig:>20} |",
            rule,
        ]
    lines += [
        "",
        wide,
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process "
        "name                              GPU Memory |",
        "|        ID   ID                             "
        "                                  Usage      |",
        "|" + "=" * 89 + "|",
    ]
    procs = [(r.gpu.index, *p) for r in reads for p in (*r.processes, *r.foreign)]
    if not procs:
        lines.append("|  No running processes found" + " " * 61 + "|")
    for index, pid, pname, used in procs:
        lines.append(f"| {index:>4}   N/A  N/A {pid:>10}      C   {pname:<40}{used:>8}MiB |")
    lines.append(wide)
    return "\n".join(lines) + "\n"


def _is_dir(node: SimNode, path: str) -> bool:
    prefix = path.rstrip("/") + "/"
    return any(f.startswith(prefix) for f in node.files)


def _exists(node: SimNode, path: str) -> bool:
    return path in node.files or _is_dir(node, path) or path in ("/", "/etc/ld.so.preload")


def _cat(node: SimNode, args: list[str]) -> Answer:
    out, err, status = [], [], 0
    for path in args:
        if (text := file_text(node, path)) is not None:
            out.append(text)
        elif path == "/etc/hostname":
            out.append(node.name + "\n")
        elif path in node.files:
            out.append("")
        elif _is_dir(node, path):
            err.append(f"cat: {path}: Is a directory\n")
            status = 1
        else:
            err.append(f"cat: {path}: No such file or directory\n")
            status = 1
    return Answer("".join(out), "".join(err), status)


def _env(node: SimNode) -> Answer:
    env = {
        "SHELL": "/bin/sh",
        "PWD": "/root",
        "LOGNAME": "root",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "USER": "root",
        "PATH": "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "NVIDIA_VISIBLE_DEVICES": "all",
    }
    env |= hami_env(node)  # HAMi-style slicing: the limits the interposer enforces
    return Answer("".join(f"{k}={v}\n" for k, v in env.items()), "", 0)


def _shred(node: SimNode, args: list[str]) -> Answer:
    paths: list[str] = []
    remove = False
    i, opts_done = 0, False
    while i < len(args):
        arg = args[i]
        if opts_done or not arg.startswith("-") or arg == "-":
            paths.append(arg)
        elif arg == "--":
            opts_done = True
        elif arg in ("-n", "--iterations"):
            i += 1
        elif arg.startswith(("--iterations=", "--remove")) or arg in ("-u", "--zero"):
            remove = remove or arg.startswith(("-u", "--remove"))
        elif re.fullmatch(r"-[nuzvfx0-9]+", arg):
            remove = remove or "u" in arg
        else:
            return Answer("", f"shred: invalid option -- '{arg.lstrip('-')}'\n", 1)
        i += 1
    if not paths:
        return Answer("", "shred: missing file operand\n", 1)
    err, status = [], 0
    for path in paths:
        if path in node.files:
            if remove:
                node.files.discard(path)
        else:
            why = "Is a directory" if _is_dir(node, path) else "No such file or directory"
            err.append(f"shred: {path}: failed to open for writing: {why}\n")
            status = 1
    return Answer("", "".join(err), status)


def _rm(node: SimNode, args: list[str]) -> Answer:
    flags = "".join(a[1:] for a in args if a.startswith("-") and a != "--")
    paths = [a for a in args if not a.startswith("-")]
    err, status = [], 0
    for path in paths:
        if path in node.files:
            node.files.discard(path)
        elif _is_dir(node, path) and ("r" in flags or "R" in flags):
            prefix = path.rstrip("/") + "/"
            node.files.difference_update({f for f in node.files if f.startswith(prefix)})
        elif _is_dir(node, path):
            err.append(f"rm: cannot remove '{path}': Is a directory\n")
            status = 1
        elif "f" not in flags:
            err.append(f"rm: cannot remove '{path}': No such file or directory\n")
            status = 1
    return Answer("", "".join(err), status)


def _ls(node: SimNode, args: list[str]) -> Answer:
    paths = [a for a in args if not a.startswith("-")] or ["/root"]
    out, err, status = [], [], 0
    for path in paths:
        if path in node.files:
            out.append(path + "\n")
        elif _is_dir(node, path):
            prefix = path.rstrip("/") + "/"
            names = sorted(
                {f[len(prefix) :].split("/")[0] for f in node.files if f.startswith(prefix)}
            )
            out.append("".join(n + "\n" for n in names if not n.startswith(".") or "-a" in args))
        elif path == "/root":
            pass
        else:
            err.append(f"ls: cannot access '{path}': No such file or directory\n")
            status = 2
    return Answer("".join(out), "".join(err), status)


def _test(node: SimNode, args: list[str]) -> Answer:
    if args[-1:] == ["]"]:
        args = args[:-1]
    negate = args[:1] == ["!"]
    if negate:
        args = args[1:]
    if len(args) != 2 or args[0] not in ("-e", "-f", "-d"):
        return Answer("", "sh: 1: test: unexpected operator\n", 2)
    op, path = args
    found = {
        "-e": _exists(node, path),
        "-f": path in node.files,
        "-d": _is_dir(node, path) or path == "/",
    }[op]
    return Answer("", "", 0 if found != negate else 1)


def _uptime(node: SimNode, now: datetime) -> Answer:
    busy = sum(r.util_gpu for r in readings(node, now)) / 100
    days = 3 + node.seed % 40
    clock = now.astimezone(_NODE_TZ).strftime("%H:%M:%S")
    load = f"{busy:.2f}, {busy * 0.98:.2f}, {busy * 0.95:.2f}"
    line = f" {clock} up {days} days,  3:04,  1 user,  load average: {load}\n"
    return Answer(line, "", 0)


def _env_run(node: SimNode, args: list[str], now: datetime) -> Answer:
    """`env [-u NAME]... [NAME=VALUE]... CMD ARGS`: CMD as the simulator answers it (the
    simulated node has no CUDA_VISIBLE_DEVICES to honour)."""
    i = 0
    while i < len(args) and (args[i] == "-u" or "=" in args[i]):
        i += 2 if args[i] == "-u" else 1
    if i >= len(args):
        return _env(node)
    return _simple(node, args[i:], now)


def _simple(node: SimNode, argv: list[str], now: datetime) -> Answer:
    cmd, args = argv[0], argv[1:]
    if cmd == "env" and args:
        return _env_run(node, args, now)
    if cmd == "nvidia-smi":
        return nvidia_smi(node, args, now)
    if cmd in ("test", "["):
        return _test(node, args)
    if (found := answer_host(node, argv, now) or answer_tool(node, argv, now)) is not None:
        return found
    handlers: dict[str, Callable[[], Answer]] = {
        "true": lambda: OK,
        "false": lambda: Answer("", "", 1),
        "hostname": lambda: Answer(node.name + "\n", "", 0),
        "uptime": lambda: _uptime(node, now),
        "echo": lambda: Answer(" ".join(args) + "\n", "", 0),
        "env": lambda: _env(node),
        "printenv": lambda: _env(node),
        "cat": lambda: _cat(node, args),
        "shred": lambda: _shred(node, args),
        "rm": lambda: _rm(node, args),
        "ls": lambda: _ls(node, args),
        "ps": lambda: ps_answer(node, args, now),
        "head": lambda: head(args),
    }
    handler = handlers.get(cmd)
    if handler is None:
        return Answer("", f"sh: 1: {cmd}: not found\n", 127)
    return handler()


def answer_with_apps(
    node: SimNode, command: str, now: datetime, owners: Callable[[], Answer] | None = None
) -> Answer | None:
    """A command leases.telemetry.gpuread.with_apps made, as sh runs it: the GPU query, its
    marker line, the owner query only when the GPU query succeeded, then the host snippet
    with $? the owner query's (0 when it did not run). owners: what the owner query prints
    (the simulated node's by default). None for any other command."""
    unwrapped = unwrap_apps(command)
    if unwrapped is None:
        return None
    query, host = unwrapped
    gpus = answer(node, query, now)
    said = [gpus, Answer(f"\n{GPUS_MARK} {gpus.exit_status}\n", "", 0)]
    if gpus.exit_status == 0:
        said.append(owners() if owners is not None else owners_answer(node, now))
    if host:
        said.append(answer(node, f"echo {HOST_MARK} {said[-1].exit_status}; {SNIPPET}", now))
    return Answer("".join(a.stdout for a in said), "".join(a.stderr for a in said), 0)


def answer(node: SimNode, command: str, now: datetime, last_status: int = 0) -> Answer:
    """What `sh -c COMMAND` prints on the node: commands joined by ;, && and || run in turn.

    last_status is $? before the first of them (a shell carries it from line to line).
    The offboarding's scripts are answered by leases.sim.offboard."""
    if (procs := answer_procs(node, command, now)) is not None:
        return procs
    if (inner := unwrap_sh(command)) is not None:  # leases.ssh.posixsh: sh runs it
        return answer(node, inner, now, last_status)
    if (read := answer_with_apps(node, command, now)) is not None:
        return read
    if (rest := after_owners(command)) is not None:
        # The owner query, then what follows it (the host snippet in stream mode) with $?
        # the owner query's status.
        first = owners_answer(node, now)
        then = answer(node, rest, now, first.exit_status)
        return Answer(first.stdout + then.stdout, first.stderr + then.stderr, then.exit_status)
    if "\n" in command:
        script = answer_script(node, command)
        if script is not None:
            return Answer(*script)
    tokens = shell_tokens(command)
    if tokens is None:
        return Answer("", "sh: 1: Syntax error: Unterminated quoted string\n", 2)
    out, err = [], []
    result = OK if last_status == 0 else Answer("", "", last_status)
    op = ";"
    argv: list[str] = []
    stages: list[list[str]] = []  # the commands before a `|`, in order
    quiet = {1: False, 2: False}
    for token in [*tokens, ";"]:
        if token in (";", "&&", "||"):
            if argv:
                run = op == ";" or (op == "&&") == (result.exit_status == 0)
                if run:
                    # $? is the status of the command before, as in sh.
                    status = str(result.exit_status)
                    piped = [[a.replace("$?", status) for a in cmd] for cmd in (*stages, argv)]
                    result = _pipeline(node, piped, now)
                    out.append("" if quiet[1] else result.stdout)
                    err.append("" if quiet[2] else result.stderr)
            elif token != ";" or op != ";" or stages:
                return Answer("", f'sh: 1: Syntax error: "{token}" unexpected\n', 2)
            op, argv, stages, quiet = token, [], [], {1: False, 2: False}
        elif token == "|" and argv:
            stages.append(argv)
            argv = []
        elif re.fullmatch(r"[12]?>>?/dev/null", token):
            quiet[2 if token.startswith("2") else 1] = True
        elif token in ("&", "|", "&&&", "|||"):
            return Answer("", f'sh: 1: Syntax error: "{token}" unexpected\n', 2)
        else:
            argv.append(token)
    return Answer("".join(out), "".join(err), result.exit_status)


def _pipeline(node: SimNode, commands: list[list[str]], now: datetime) -> Answer:
    """`a | grep ...`: each stage after the first reads what the one before printed; only
    grep can stand there. The status is the last stage's, stderr every stage's."""
    result = _simple(node, commands[0], now)
    err = result.stderr
    for argv in commands[1:]:
        if argv[0] != "grep":
            said = f"sh: 1: {argv[0]}: the simulator pipes only into grep\n"
            return Answer("", err + said, 127)
        result = grep(argv[1:], result.stdout)
        err += result.stderr
    return Answer(result.stdout, err, result.exit_status)
