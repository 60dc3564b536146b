"""Who owns each GPU process: the Unix user on the node, read in the same round trip as
the process list, and on a local node from /proc.

The remote command is nvidia-smi's compute-apps query, a marker line carrying its exit
status, then `ps` listing the pid, uid and user of the processes nvidia-smi named (or, where
ps is missing, as in many container images, `stat` of their /proc entries): a busy node runs
thousands of processes, and only the few on its GPUs are sent. Everything it prints is
hostile: the number of lines read and the length of a name are bounded, and only sane user
names are kept. A name that is not sane becomes "?" and the reason goes to the node's
detail; a user without a name (a container's uid with no passwd entry) is shown as "uid:N".

Pure except `local_owner`, which reads /proc and the passwd database.
"""

from __future__ import annotations

import io
import itertools
import pwd
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from leases.core.models import GpuProcess
from leases.core.textsafe import last_line, visible
from leases.telemetry.nvsmi import APPS_COMMAND, parse_compute_apps
from leases.telemetry.procinfo import (
    MAX_PROC_LINES,
    PROCS_COMMAND,
    ProcSection,
    elapsed,
    parse_procs,
    split_procs,
    split_uptime,
    uptime_seconds,
)

# The owner of a process whose user the node named in a way we refuse (see owner_of).
REFUSED = "?"
# Linux user names are at most 32 characters (useradd); uids are 32-bit.
MAX_USER_CHARS = 32
MAX_UID = 2**32 - 1
# Lines of ps output read at most: a busy node runs a few thousand processes; past this
# the rest are not read and their owners stay unknown. (The SSH output cap, 4 MiB, stops
# a node long before a million lines reach us.)
MAX_PS_LINES = 1 << 18
# Problems kept for the node's detail, and how much of a refused value each shows.
MAX_PROBLEMS = 5
# A process name is a path: PATH_MAX is 4096 (the command line read is shorter still).
MAX_NAME_CHARS = 4096
_SHOWN = 40
# The longest owner-query answer OwnersMemo keeps to compare with the next.
MEMO_MAX_CHARS = 64 * 1024

OWNERS_MARK = "@zuka-owners"
# The pids nvidia-smi named (in `a`), comma after each, into $l: ASCII digits only, so $l
# is safe unquoted. The shell's own pid ($$) is listed with them: a ps that works always
# prints a line, even when every GPU process has just ended.
GPU_PIDS = (
    f"l=$(printf '%s\\n' \"$a\" | head -n {MAX_PROC_LINES} | while IFS=', ' read -r u p r; do"
    " case $p in ''|*[!0-9]*) continue ;; esac; printf '%s,' \"$p\"; done)"
)
# pid, uid and the user name (width 32 so that no name is cut) of those pids alone ...
PS_LISTED = 'ps -o pid=,uid=,user:32= -p "$l$$" 2>/dev/null'
# ... or, where ps is missing or knows no uid column (busybox), stat of their /proc entries.
STAT_LISTED = "(cd /proc && IFS=, && stat -c '%n %u %U' $l$$ 2>/dev/null)"
PS_COMMAND = f"{GPU_PIDS}; {PS_LISTED} || {STAT_LISTED}"
# nvidia-smi's output is kept in `a` so that the /proc part (leases.telemetry.procinfo) reads
# the start and command line of exactly the pids it named without running it twice; all in
# a subshell, so that a kept-open shell (leases.ssh.shell) keeps none of its variables.
APPS_OWNERS_COMMAND = (
    f"(a=$({APPS_COMMAND}); s=$?; printf '%s\\n' \"$a\"; echo {OWNERS_MARK} $s; {PS_COMMAND};"
    f" {PROCS_COMMAND})"
)

# POSIX-ish user names, with capitals (LDAP and AD accounts have them).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")
_MARK_LINE = re.compile(rf"^{re.escape(OWNERS_MARK)} ([0-9]{{1,3}})[ \t\r]*$", re.MULTILINE)
_DIGITS = re.compile(r"[0-9]{1,10}")


def uid_owner(uid: int) -> str:
    """How a user without a name is shown."""
    return f"uid:{uid}"


def owner_from(user: str, uid: int | None) -> tuple[str, str | None]:
    """The owner a node's user column stands for, and the problem when it is refused.

    A sane name is kept; a number, an empty column, stat's UNKNOWN or a name ps cut
    short ("longname+") fall back to the uid; anything else is refused as "?".
    """
    if _NAME.fullmatch(user) and user != "UNKNOWN":
        return user, None
    if uid is not None and (
        user in ("", "UNKNOWN", str(uid)) or (user.endswith("+") and _NAME.fullmatch(user[:-1]))
    ):
        return uid_owner(uid), None
    return REFUSED, f"user name refused: {visible(user, _SHOWN)!r}"


@dataclass(frozen=True)
class PsOwners:
    """Owners by pid from one ps (or stat) listing, and what was refused in it."""

    by_pid: dict[int, str]
    problems: tuple[str, ...] = ()


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.more = 0

    def add(self, problem: str) -> None:
        if len(self.items) < MAX_PROBLEMS:
            if problem not in self.items:
                self.items.append(problem)
        else:
            self.more += 1

    def result(self) -> tuple[str, ...]:
        more = (f"and {self.more} more",) if self.more else ()
        return (*self.items, *more)


def _pid(token: str) -> int | None:
    token = token.removeprefix("/proc/")
    return int(token) if _DIGITS.fullmatch(token) and int(token) <= MAX_UID else None


def parse_ps(text: str, wanted: Collection[int] | None = None) -> PsOwners:
    """`ps -o pid=,uid=,user:32= -p PIDS` (or `stat -c '%n %u %U'` of their /proc) as owners.

    Only pids in `wanted` are kept when given (the GPU processes). A pid listed twice
    with two owners is refused; a line that is not "PID UID USER" is skipped and said.
    Reads at most MAX_PS_LINES lines; never raises for any text.
    """
    by_pid: dict[int, str] = {}
    problems = _Problems()
    lines = io.StringIO(text)
    for line_no, line in enumerate(itertools.islice(lines, MAX_PS_LINES), start=1):
        words = line.split(None, 2)
        if not words:
            continue
        pid = _pid(words[0])
        if pid is None:
            problems.add(f"ps line {line_no}: not a pid: {visible(words[0], _SHOWN)!r}")
            continue
        if wanted is not None and pid not in wanted:
            continue
        uid = _pid(words[1]) if len(words) > 1 else None
        if len(words) > 1 and uid is None:
            problems.add(f"ps line {line_no}: not a uid: {visible(words[1], _SHOWN)!r}")
            owner, problem = REFUSED, None
        elif uid is None:
            owner, problem = REFUSED, f"ps line {line_no}: no uid or user for pid {pid}"
        else:
            user = words[2].strip() if len(words) > 2 else ""
            if len(user) > MAX_USER_CHARS + user.endswith("+"):  # ps marks a cut name "+"
                owner = REFUSED
                problem = f"user name longer than {MAX_USER_CHARS}: {visible(user, _SHOWN)!r}"
            else:
                owner, problem = owner_from(user, uid)
        if problem is not None:
            problems.add(problem)
        before = by_pid.get(pid)
        if before is not None and before != owner:
            problems.add(f"pid {pid} listed twice, as {before} and {owner}")
            owner = REFUSED
        by_pid[pid] = owner
    if lines.readline():
        problems.add(f"more than {MAX_PS_LINES} processes listed: the rest were not read")
    return PsOwners(by_pid, problems.result())


@dataclass(frozen=True)
class ProcessReading:
    """One owner query's result: processes (None when nvidia-smi failed) and problems."""

    processes: tuple[GpuProcess, ...] | None
    problems: tuple[str, ...] = ()


def split_answer(stdout: str) -> tuple[str, int | None, str | None]:
    """(compute-apps text, its exit status, ps text) around the last marker line.

    The last: nvidia-smi is asked for no process name, but a wrapper that ignores the
    field list could print names raw, and a name could hold a forged marker; nothing after
    the real one starts a line with it (ps lines start with a pid, /proc lines with "@").
    """
    last = last_line(stdout, OWNERS_MARK, _MARK_LINE)
    if last is None:
        return stdout, None, None
    return stdout[: last.start()], int(last.group(1)), stdout[last.end() :]


def name_of(cmdline: str) -> str:
    """A process's name as nvidia-smi would give it: the first word of its command line
    (as read from /proc, NULs already spaces), bounded."""
    words = cmdline.split(None, 1)
    return words[0][:MAX_NAME_CHARS] if words else ""


def with_owners(
    processes: Sequence[GpuProcess], owners: PsOwners | None, procs: ProcSection | None = None
) -> list[GpuProcess]:
    """Processes with their owner from `owners` (None where unknown), and their name,
    start, elapsed time and command line from `procs`.

    A pid the /proc section does not list as present is not visible to the login:
    nvidia-smi in a container names the host's pids, which are not this namespace's (it
    could not name them either: it reads names from the same /proc). Its owner stays
    unknown. Without a /proc section (`procs` None or not read) nothing is known to be
    visible. As with nvidia-smi's own names, a host pid that happens to be a pid of this
    namespace too cannot be told from it here.
    """
    out = []
    by_pid = procs.by_pid if procs is not None else {}
    present = procs.present if procs is not None else frozenset()
    for p in processes:
        info = by_pid.get(p.pid)
        seen = p.pid in present
        owner = owners.by_pid.get(p.pid) if owners is not None and seen else None
        # Made whole, not with dataclasses.replace (a third of its cost, every process of
        # every node each time the processes are read).
        out.append(
            GpuProcess(
                node=p.node,
                gpu_uuid=p.gpu_uuid,
                pid=p.pid,
                process_name=name_of(info.cmdline) if info else p.process_name,
                used_mib=p.used_mib,
                owner=owner,
                start=info.start if info else None,
                elapsed_s=info.elapsed_s if info else None,
                cmdline=info.cmdline if info else None,
                visible=seen,
            )
        )
    return out


def parse_apps_owners(stdout: str, node: str) -> ProcessReading:
    """The output of APPS_OWNERS_COMMAND as processes with owners.

    Raises NvsmiParseError when the compute-apps part cannot be read; a failed or
    unreadable ps part only leaves owners unknown (said in problems).
    """
    return _parsed(*split_uptime(stdout), node)[0]


def _parsed(body: str, uptime: str | None, node: str) -> tuple[ProcessReading, ProcSection | None]:
    """parse_apps_owners of an output cut by split_uptime, with the /proc section read."""
    apps, status, ps = split_answer(body)
    if status is None:
        return ProcessReading(None, ("the owner query printed no end marker",)), None
    if status != 0:
        return ProcessReading(None), None
    processes = parse_compute_apps(apps, node)
    if not processes:
        return ProcessReading(()), None
    ps, proc_text = split_procs(ps or "")
    owners = parse_ps(ps, {p.pid for p in processes})
    problems = owners.problems
    if not ps.strip():
        problems = ("no process list (ps and stat missing?): owners unknown",)
    procs = parse_procs(proc_text, uptime)
    return ProcessReading(tuple(with_owners(processes, owners, procs)), problems), procs


class OwnersMemo:
    """One node's owner-query output as last read and what it parsed to: read again the
    same up to its last line (a steady node: the same processes, owners and command
    lines), it is not parsed again; only the elapsed times move with the uptime on that
    line. What it gives is what parse_apps_owners gives for the same output, always. One
    per node (leases.telemetry.nodestate), for the node's name it was made with."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._body: str | None = None
        self._uptime: str | None = None
        self._reading = ProcessReading(None)
        self._procs: ProcSection | None = None

    def parse(self, stdout: str) -> ProcessReading:
        """parse_apps_owners(stdout, self.node); raises as it does."""
        body, uptime = split_uptime(stdout)
        if body != self._body:
            self._body = None  # until it parsed: a parse that raises keeps nothing
            self._reading, self._procs = _parsed(body, uptime, self.node)
            # What a node may make a poller hold between readings is bounded: a longer
            # answer is parsed every time (a steady 8-GPU node's is about 3 KB).
            self._body = body if len(body) <= MEMO_MAX_CHARS else None
            self._uptime = uptime
        elif uptime != self._uptime:
            self._reading, self._uptime = self._retimed(uptime), uptime
        return self._reading

    def _retimed(self, uptime: str | None) -> ProcessReading:
        """The held reading with each process's elapsed time at another uptime (the
        section's own `up` line where this one does not read as one), as parse_procs
        would work it out."""
        held, procs = self._reading, self._procs
        if held.processes is None or procs is None:
            return held
        up = uptime_seconds(uptime)
        up = procs.up if up is None else up
        out = []
        for p in held.processes:
            info = procs.by_pid.get(p.pid)
            seconds = elapsed(up, info.since_boot_s) if info is not None else None
            if seconds == p.elapsed_s:
                out.append(p)
                continue
            # Its fields copied whole, without GpuProcess's keyword __init__ (see with_owners).
            fields = p.__dict__.copy()
            fields["elapsed_s"] = seconds
            new = object.__new__(GpuProcess)
            object.__setattr__(new, "__dict__", fields)
            out.append(new)
        return ProcessReading(tuple(out), held.problems)


# --- the local node ---

_UID_LINE = re.compile(r"^Uid:\s+([0-9]+)\s+([0-9]+)", re.MULTILINE)


def local_owner(
    pid: int,
    proc: Path = Path("/proc"),
    name_of: Callable[[int], str] = lambda uid: pwd.getpwuid(uid).pw_name,
) -> str | None:
    """The owner of a process of this machine, from /proc/PID/status; None when gone.

    The effective uid, as ps shows. A uid without a passwd entry is "uid:N".
    """
    try:
        status = (proc / str(pid) / "status").read_text(errors="replace")
    except OSError:
        return None
    match = _UID_LINE.search(status)
    if match is None:
        return None
    uid = int(match.group(2))
    try:
        name = name_of(uid)
    except KeyError:
        return uid_owner(uid)
    return owner_from(name, uid)[0]


__all__ = [
    "APPS_OWNERS_COMMAND",
    "GPU_PIDS",
    "MAX_NAME_CHARS",
    "MAX_PS_LINES",
    "MAX_USER_CHARS",
    "MEMO_MAX_CHARS",
    "OWNERS_MARK",
    "PS_COMMAND",
    "PS_LISTED",
    "REFUSED",
    "STAT_LISTED",
    "OwnersMemo",
    "ProcessReading",
    "PsOwners",
    "local_owner",
    "name_of",
    "owner_from",
    "parse_apps_owners",
    "parse_ps",
    "split_answer",
    "uid_owner",
    "with_owners",
]
