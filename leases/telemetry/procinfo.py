"""The start time and command line of each GPU process, read from /proc in the same round
trip as nvidia-smi's process list and ps (leases.telemetry.owners).

Why /proc and not ps: `ps -o lstart` is locale- and time-zone-dependent and has a
resolution of a second, `etimes` moves with every reading. Field 22 of /proc/PID/stat
(starttime, in clock ticks since boot) with the boot id never changes while the process
lives, and a reused pid gets a later one: that pair is the stable token the stop checks
again before each signal (leases.telemetry.procstop reads it the same way, with the same
shell words, so that the two agree byte for byte). The command line is /proc/PID/cmdline
with NULs and line breaks turned into spaces and "?", cut at MAX_CMDLINE bytes: shown and
recorded, never compared by a stop (a process may rewrite it).

Only the pids nvidia-smi named are read: the shell loop takes them from nvidia-smi's own
output (kept in a variable, so nvidia-smi runs once), each checked to be ASCII digits
before it reaches a path. Everything printed is hostile: lines and lengths are bounded,
numbers are ASCII digits, the boot id a UUID. Pure.
"""

from __future__ import annotations

import io
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from leases.telemetry.cksum import cksum_word

# The command line as read: bytes at most (head -c), and what a row keeps of it.
MAX_CMDLINE = 2048
# Lines of the /proc section read at most (nvidia-smi lists a few hundred processes).
MAX_PROC_LINES = 4096
PROCS_MARK = "@zuka-procs"

# The shell words that read one pid's start ticks into $1 and its command line into $c;
# READ_STAT is shared with the stop (leases.telemetry.procstop), so that both read the
# start the same way. $p must be
# ASCII digits (checked before), and file-name expansion off (NO_GLOB, said first in
# every command that uses them).
# stat is read whole with the shell's own `read` (no process forked per pid), its lines
# joined: the command name in it is the process's own choice (prctl, 15 bytes), line
# breaks, `)` and glob characters included. Everything up to its last `)` is dropped; what
# follows is the kernel's fields, and the 20th of them (start ticks) must be digits. The
# first (the state) is kept in $z and the 18th (threads) in $n: Z or X with one thread is a
# process that has ended (a zombie's stat still reads, its start unchanged, until its
# parent reaps it); Z with more is a thread group whose first thread alone has exited.
READ_STAT = (
    '{ t=; while IFS= read -r l || [ -n "$l" ]; do t="$t $l"; done < /proc/$p/stat; }'
    " 2>/dev/null && t=${t##*\\)} && set -- $t && [ $# -ge 20 ] && z=$1 && n=${18}"
    " && shift 19"
    " && case $1 in ''|*[!0-9]*) false ;; esac"
)
# No file-name expansion: `set -- $t` splits stat's fields, which must never be globbed.
NO_GLOB = "set -f"
READ_CMDLINE = (
    "c=$(tr '\\000\\n\\r' '  ?' < /proc/$p/cmdline 2>/dev/null | head -c " + str(MAX_CMDLINE) + ")"
)
# The POSIX cksum of the command line's first MAX_CMDLINE raw bytes into $k as "CRC-LEN"
# (leases.telemetry.cksum), kept in the start token: the audit of a stop records which
# bytes the person confirmed; the stop itself compares the start alone (empty: no cksum).
READ_CKSUM = (
    "k=$(head -c " + str(MAX_CMDLINE) + " /proc/$p/cmdline 2>/dev/null | cksum 2>/dev/null"
    " | tr ' ' -)"
)
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"

# After the ps part: the boot id and the clock tick, then one line per GPU pid the login can
# read: "@p PID TICKS:CKSUM CMDLINE" (CKSUM empty where cksum is missing), or "@e PID" for
# one whose /proc entry is there but whose stat did not read (it ended while read, or stat
# is not readable): it runs in this pid namespace, its start unknown. The uptime comes
# last, alone on the answer's last line: the one line of a steady node's answer that moves
# every reading, cut off before the rest is compared with the last (leases.telemetry.owners.
# OwnersMemo). `a` holds nvidia-smi's output.
PROCS_COMMAND = (
    f"{NO_GLOB}; echo {PROCS_MARK}; echo boot $(cat {BOOT_ID_FILE} 2>/dev/null);"
    " echo hz $(getconf CLK_TCK 2>/dev/null);"
    f" printf '%s\\n' \"$a\" | head -n {MAX_PROC_LINES} | while IFS=', ' read -r u p r; do"
    " case $p in ''|*[!0-9]*) continue ;; esac;"
    f" if {READ_STAT}; then {READ_CMDLINE}; {READ_CKSUM};"
    ' printf \'@p %s %s:%s %s\\n\' "$p" "$1" "$k" "$c";'
    ' elif [ -d /proc/$p ]; then echo "@e $p"; fi;'
    " done; echo up $(cut -d' ' -f1 /proc/uptime 2>/dev/null)"
)

BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UPTIME = re.compile(r"([0-9]{1,12})(?:\.[0-9]{1,3})?")
_HZ = re.compile(r"[0-9]{1,6}")
TICKS = re.compile(r"[0-9]{1,20}")
CKSUM = re.compile(r"[0-9]{1,10}-[0-9]{1,5}")
_PID = re.compile(r"[0-9]{1,10}")
# Most Linux kernels count USER_HZ = 100 ticks a second; used when getconf is missing.
DEFAULT_HZ = 100


@dataclass(frozen=True)
class ProcInfo:
    """One GPU process as /proc showed it."""

    start: str  # "BOOT_ID:TICKS"
    elapsed_s: int | None
    cmdline: str
    # When it started, in whole seconds after boot (start ticks // the clock tick): what
    # elapsed_s is worked out from with the node's uptime (see elapsed).
    since_boot_s: int | None = None


@dataclass(frozen=True)
class ProcSection:
    """The /proc section: by pid; `read` False when the node printed no section at all.

    `present`: every pid whose /proc entry the login saw, read or not (a superset of
    by_pid's keys): the pids that run in the login's pid namespace. `up`: the uptime the
    section itself said (an `up` line in it), None when none did."""

    by_pid: dict[int, ProcInfo]
    read: bool = True
    present: frozenset[int] = frozenset()
    up: int | None = None


def uptime_seconds(value: str | None) -> int | None:
    """The whole seconds of an `up` line's value ("2981113.42"), None when it is not one."""
    m = _UPTIME.fullmatch(value.strip()) if value is not None else None
    return int(m.group(1)) if m else None


def elapsed(up: int | None, since_boot_s: int | None) -> int | None:
    """Seconds a process has run, from the node's uptime and its start after boot."""
    return None if up is None or since_boot_s is None else max(up - since_boot_s, 0)


def split_uptime(text: str) -> tuple[str, str | None]:
    """(text without its last line, that line's value) when the last line is "up VALUE"
    (PROCS_COMMAND prints the uptime last); else (text, None)."""
    end = len(text) - 1 if text.endswith("\n") else len(text)
    start = text.rfind("\n", 0, end) + 1
    if text.startswith("up ", start):
        return text[:start], text[start + 3 : end]
    return text, None


def split_procs(text: str) -> tuple[str, str | None]:
    """(the ps part, the /proc part or None) around the PROCS_MARK line. Nothing in the
    node's answer can print a second one (command lines are read with their line breaks
    as spaces): where there are two, the section is not trusted (None)."""
    mark = f"\n{PROCS_MARK}\n"
    at = text.rfind(mark)
    if at >= 0:
        if text.find(mark) != at or text.startswith(mark[1:]):
            return text[: at + 1], None
        return text[: at + 1], text[at + len(PROCS_MARK) + 2 :]
    if text.startswith(f"{PROCS_MARK}\n"):
        return "", text[len(PROCS_MARK) + 1 :]
    return text, None


def start_token(boot_id: str, ticks: int, cksum: str | None = None) -> str:
    """ "BOOT_ID:TICKS:CKSUM" ("BOOT_ID:TICKS" where the node had no cksum)."""
    return f"{boot_id}:{ticks}:{cksum}" if cksum else f"{boot_id}:{ticks}"


def parse_procs(text: str | None, uptime: str | None = None) -> ProcSection:
    """The /proc section of the owner query (see PROCS_COMMAND); never raises.

    A line that does not parse is skipped; without a boot id no start is known (a pid
    is only comparable within one boot), so only which pids are present is kept. The
    uptime: `uptime` (the answer's last line, split off by split_uptime) when it reads as
    one, else the section's last `up` line that does.
    """
    if text is None:
        return ProcSection({}, read=False)
    boot: str | None = None
    up: int | None = None
    hz = DEFAULT_HZ
    started: dict[int, tuple[str, int, str]] = {}  # pid -> (start token, ticks, cmdline)
    present: set[int] = set()
    twice: set[int] = set()
    seen: dict[int, str] = {}  # each pid's line
    for raw in itertools.islice(io.StringIO(text), MAX_PROC_LINES + 3):
        line = raw.rstrip("\n").removesuffix("\r")
        key, _, rest = line.partition(" ")
        if key == "boot" and BOOT_ID.fullmatch(rest.strip()):
            boot = rest.strip()
        elif key == "up" and (seconds := uptime_seconds(rest)) is not None:
            up = seconds
        elif key == "hz" and _HZ.fullmatch(rest.strip()) and int(rest.strip()) > 0:
            hz = int(rest.strip())
        elif key == "@e" and _PID.fullmatch(rest):
            if int(rest) in present and seen.get(int(rest)) != line:
                twice.add(int(rest))
            seen[int(rest)] = line
            present.add(int(rest))
        elif key == "@p":
            pid_s, _, rest = rest.partition(" ")
            ticks_s, _, cmdline = rest.partition(" ")
            ticks_s, _, ck = ticks_s.partition(":")
            if not (_PID.fullmatch(pid_s) and TICKS.fullmatch(ticks_s)):
                continue
            pid = int(pid_s)
            # A process on two GPUs is listed twice, the same; two lines that differ are
            # not the process's start, neither of them.
            if pid in present and seen.get(pid) != line:
                twice.add(pid)
            seen[pid] = line
            present.add(pid)
            if boot is None:
                continue
            ticks = int(ticks_s)
            token = start_token(boot, ticks, ck if CKSUM.fullmatch(ck) else None)
            started[pid] = (token, ticks, cmdline[:MAX_CMDLINE])
    now = uptime_seconds(uptime)
    now = up if now is None else now
    by_pid = {
        pid: ProcInfo(token, elapsed(now, ticks // hz), cmdline, ticks // hz)
        for pid, (token, ticks, cmdline) in started.items()
        if pid not in twice
    }
    return ProcSection(by_pid, present=frozenset(present), up=up)


def local_info(pid: int, proc: Path = Path("/proc")) -> ProcInfo | None:
    """A process of this machine read as PROCS_COMMAND reads it on a node (same start
    token, same command line bytes); None when gone or unreadable."""
    try:
        boot = (proc / "sys/kernel/random/boot_id").read_text().strip()
        stat = (proc / str(pid) / "stat").read_text(errors="replace")
        raw = (proc / str(pid) / "cmdline").read_bytes()
        up = (proc / "uptime").read_text().split()[0]
    except (OSError, IndexError):
        return None
    fields = stat.rpartition(")")[2].split()
    if not BOOT_ID.fullmatch(boot) or len(fields) < 20 or not TICKS.fullmatch(fields[19]):
        return None
    ticks = int(fields[19])
    since = ticks // (os.sysconf("SC_CLK_TCK") or DEFAULT_HZ)
    cmdline = raw.translate(_TR)[:MAX_CMDLINE].decode("utf-8", "replace")
    token = start_token(boot, ticks, cksum_word(raw[:MAX_CMDLINE]))
    return ProcInfo(token, elapsed(uptime_seconds(up), since), cmdline, since)


_TR = bytes.maketrans(b"\0\n\r", b"  ?")

__all__ = [
    "BOOT_ID",
    "BOOT_ID_FILE",
    "CKSUM",
    "MAX_CMDLINE",
    "NO_GLOB",
    "PROCS_COMMAND",
    "PROCS_MARK",
    "READ_CKSUM",
    "READ_CMDLINE",
    "READ_STAT",
    "TICKS",
    "ProcInfo",
    "ProcSection",
    "elapsed",
    "local_info",
    "parse_procs",
    "split_procs",
    "split_uptime",
    "start_token",
    "uptime_seconds",
]
