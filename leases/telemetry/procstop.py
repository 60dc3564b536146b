"""One signal to one process on a node, sent only if it is still the process confirmed.

PIDs are reused: between the reading a person confirmed and the signal, the process may
have ended and another taken its pid. So each signal is one remote shell snippet that
reads the pid's boot id and start ticks again (the same shell words as the reading,
leases.telemetry.procinfo) and sends the signal only when both match, in the same command:
nothing happens between the check and the `kill` but the shell itself. The command line is
not compared: a process may rewrite it at any moment (see stop_command); a zombie is gone.
Every value in it is zuka's own: the pid and ticks checked integers, the boot id checked a
UUID (the command line confirmed is checked to be one zuka read, and never sent). It runs
under `sh -c`, file-name expansion off, whatever the login's shell. Never pid <= 1, never
a process group (no negative pid, no -1), one signal name of a fixed set.
Pure.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ssh.posixsh import under_sh
from leases.telemetry.procinfo import (
    BOOT_ID,
    BOOT_ID_FILE,
    CKSUM,
    MAX_CMDLINE,
    NO_GLOB,
    READ_STAT,
    TICKS,
)

STOP_MARK = "@zuka-stop"
SIGNALS = ("TERM", "KILL")
# Linux's pid_max is at most 2**22; anything above is not a pid.
MAX_PID = 1 << 22
_ANSWER = re.compile(rf"^{re.escape(STOP_MARK)} (sent|alive|gone|changed|failed)(?: (.*))?$")


class Seen(enum.Enum):
    """What one snippet found and did."""

    SENT = "sent"  # the process matched and the signal was delivered
    ALIVE = "alive"  # the process matched (a check without a signal)
    GONE = "gone"  # no such pid (or its /proc is hidden from the login)
    CHANGED = "changed"  # the pid is another process now (reused, or another boot)
    DENIED = "denied"  # kill said: operation not permitted (another user's process)
    FAILED = "failed"  # kill failed otherwise, or the answer could not be read


@dataclass(frozen=True)
class Answer:
    seen: Seen
    said: str = ""  # kill's words on failure, made safe to show


def check_pid(pid: int) -> int:
    """pid as a signal may take it: a single process, never init, a group or everyone."""
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 < pid <= MAX_PID:
        raise InputError(
            "pid",
            pid,
            _("a process id from 2 to {max}: never 1, 0 or negative").format(max=MAX_PID),
        )
    return pid


def split_start(start: str) -> tuple[str, int, str | None]:
    """(boot id, start ticks, cksum of the command line's raw bytes or None) of a start
    token "BOOT_ID:TICKS:CKSUM" or "BOOT_ID:TICKS"; InputError otherwise."""
    boot, _sep, rest = start.partition(":")
    ticks, colon, ck = rest.partition(":")
    if not (
        BOOT_ID.fullmatch(boot) and TICKS.fullmatch(ticks) and (not colon or CKSUM.fullmatch(ck))
    ):
        raise InputError("start", visible(start, 80), _("not a process start read by zuka"))
    return boot, int(ticks), ck or None


def check_cmdline(cmdline: str) -> str:
    if len(cmdline.encode("utf-8", "surrogateescape")) > MAX_CMDLINE or any(
        ch in cmdline for ch in "\0\n\r"
    ):
        raise InputError("cmdline", visible(cmdline, 80), _("not a command line read by zuka"))
    return cmdline


def stop_command(pid: int, start: str, cmdline: str, signal: str | None) -> str:
    """The snippet: check the pid is still that process, then send `signal` (None: only
    check). It prints one line, STOP_MARK and what it found (see parse_answer).

    The process is known by its boot id and start ticks: no two processes of one boot
    share them (a pid is reused only after the whole pid space has wrapped, never within
    one clock tick). Its command line is not compared: a process may rewrite it at any
    moment (setproctitle, a Ray worker naming its task) and would never match, nor pass
    for gone once told to stop. `cmdline`, what the person confirmed, must be one zuka
    read (it is recorded). A zombie whose last thread has ended is gone; a pid whose
    /proc entry is there but whose stat does not read is neither signalled nor gone: the
    answer says so (FAILED)."""
    pid = check_pid(pid)
    boot, ticks, ck = split_start(start)
    if ck is None:
        check_cmdline(cmdline)
    if signal is None:
        act = f"echo {STOP_MARK} alive"
    elif signal in SIGNALS:
        act = (
            f'if e=$(kill -s {signal} "$p" 2>&1); then echo {STOP_MARK} sent;'
            f" else echo {STOP_MARK} failed $e; fi"
        )
    else:
        raise InputError("signal", signal, _("one of {choices}").format(choices=", ".join(SIGNALS)))
    # $z: the state, $n: the threads left (a thread group whose first thread has exited
    # shows Z while its other threads run): READ_STAT.
    snippet = (
        f"(p={pid}; wb={boot}; ws={ticks}; {NO_GLOB}; b=$(cat {BOOT_ID_FILE} 2>/dev/null);"
        f" if {READ_STAT}; then"
        f' if {{ [ "$z" = Z ] || [ "$z" = X ]; }} && [ "$n" = 1 ]; then echo {STOP_MARK} gone;'
        f' elif [ "$b" = "$wb" ] && [ "$1" = "$ws" ]; then {act};'
        f" else echo {STOP_MARK} changed; fi;"
        f" elif [ -d /proc/$p ]; then echo {STOP_MARK} failed its stat could not be read;"
        f" else echo {STOP_MARK} gone; fi)"
    )
    # Run by sh whatever the login's shell: an exec runs it under that shell, and zsh does
    # not split `set -- $t` (every stop failed), fish and tcsh do not read it at all.
    return under_sh(snippet)


def parse_answer(stdout: str) -> Answer:
    """What a snippet printed: its last STOP_MARK line; FAILED when there is none."""
    found: Answer | None = None
    for line in stdout[-8192:].splitlines():
        match = _ANSWER.match(line.rstrip("\r"))
        if match is None:
            continue
        word, said = match.group(1), visible(match.group(2) or "", 200)
        if word == "failed":
            low = said.lower()
            if "not permitted" in low:
                found = Answer(Seen.DENIED, said)
            elif "no such process" in low:
                found = Answer(Seen.GONE, said)
            else:
                found = Answer(Seen.FAILED, said)
        else:
            found = Answer(Seen(word), said)
    if found is None:
        return Answer(Seen.FAILED, f"no answer: {visible(stdout.strip(), 200)!r}")
    return found


__all__ = [
    "MAX_PID",
    "SIGNALS",
    "STOP_MARK",
    "Answer",
    "Seen",
    "check_cmdline",
    "check_pid",
    "parse_answer",
    "split_start",
    "stop_command",
]
