"""Where the person running this process came from, as an audit entry records it beside
their Unix user: the SSH client address of their login, a systemd service, a local
terminal, or nothing known.

Sources, most trusted first:
1. the utmp record of this process's controlling terminal: sshd (as root) wrote it at
   login, with the client's address; `ssh 203.0.113.7`;
2. SSH_CONNECTION / SSH_CLIENT from the environment: sshd sets them, but so can anyone,
   so the origin says where it came from: `ssh 203.0.113.7 (env)`;
3. a systemd service (no terminal; ZUKA_SERVICE set by zuka's units, or INVOCATION_ID with
   systemd as the parent): `service zuka-collect`;
4. the controlling terminal alone: `tty pts/3`;
5. else "".

Every byte read (utmp, the environment) is hostile: bounded, an address only when it parses
as an IP address (ASCII), a host name only in the letters host names have, nothing else
kept. The parsers are pure; `detect` takes its paths and environment injected.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import stat
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from leases.core.i18n import _
from leases.core.textsafe import visible

UTMP_PATHS = (Path("/run/utmp"), Path("/var/run/utmp"))
PROC_STAT = Path("/proc/self/stat")
# Linux's struct utmp (glibc, x86-64 and aarch64 alike): type (short, 2 bytes padding),
# pid, line[32], id[4], user[32], host[256], exit (two shorts), session, tv (two int32),
# addr_v6 (four int32, network order), 20 reserved bytes: 384 bytes.
RECORD = struct.Struct("<h2xi32s4s32s256shhiii16s20s")
USER_PROCESS = 7
# At most this many records read (a busy jump host has a few hundred; the file is 1.5 MB).
MAX_RECORDS = 4096
# The longest origin kept: "ssh " and an IPv6 address with " (env)" fit well inside.
MAX_ORIGIN = 80
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_MAX_HOSTNAME = 64
# The characters of a textual IPv4 or IPv6 address (ASCII only), with a scope id after %.
_ADDRESS = re.compile(r"[0-9A-Fa-f:.]{2,45}(?:%[A-Za-z0-9_.-]{1,15})?")
_MAX_ENV = 200
_LINE = re.compile(r"[A-Za-z0-9/_.-]{1,31}")
_UNIT = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


@dataclass(frozen=True)
class UtmpRecord:
    """One utmp record, its text fields cut at their first NUL and made visible."""

    type: int
    pid: int
    line: str
    user: str
    host: str
    addr: bytes  # ut_addr_v6: 16 bytes, an IPv4 address in the first 4


def parse_utmp(data: bytes, max_records: int = MAX_RECORDS) -> list[UtmpRecord]:
    """The whole records in data (a truncated last one is dropped), at most max_records."""
    records = []
    count = min(len(data) // RECORD.size, max_records)
    for i in range(count):
        fields = RECORD.unpack_from(data, i * RECORD.size)
        kind, pid, line, _id, user, host = fields[:6]
        records.append(
            UtmpRecord(kind, pid, _cstr(line), _cstr(user), _cstr(host), bytes(fields[11]))
        )
    return records


def _cstr(raw: bytes) -> str:
    return visible(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))


def address(text: str) -> str | None:
    """text as an IP address (an IPv4-mapped IPv6 one as its IPv4; a scope id dropped),
    or None when it is not one."""
    if not _ADDRESS.fullmatch(text):
        return None
    try:
        ip = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def hostname(text: str) -> str | None:
    """text as a host name (letters, digits, hyphens, dots; bounded), or None."""
    if len(text) > _MAX_HOSTNAME or not _HOSTNAME.fullmatch(text):
        return None
    return text.lower()


def record_remote(rec: UtmpRecord) -> str | None:
    """Where a login record says its user came from: the binary address sshd stored, else
    its host field as an address or a host name; None for a local login (no host, or an X
    display such as ':0')."""
    addr = rec.addr
    if len(addr) == 16 and any(addr):
        if not any(addr[4:]):
            return str(ipaddress.IPv4Address(addr[:4]))
        found = address(str(ipaddress.IPv6Address(addr)))
        if found:
            return found
    host = rec.host
    return address(host) or hostname(host)


def remote_of(records: Iterable[UtmpRecord], line: str) -> str | None:
    """The remote end of the live login on terminal `line` (e.g. 'pts/3'): its latest
    USER_PROCESS record's; None when that terminal has none or it is local."""
    latest: UtmpRecord | None = None
    for rec in records:
        if rec.line == line and rec.type == USER_PROCESS:
            latest = rec
    return None if latest is None else record_remote(latest)


def tty_of_stat(text: str) -> str | None:
    """The controlling terminal of a /proc/PID/stat line as utmp names it ('pts/3',
    'tty1', 'ttyS0'), or None (no terminal, or one of another kind)."""
    rest = text.rpartition(")")[2].split()
    if len(rest) < 5 or not rest[4].lstrip("-").isascii() or not rest[4].lstrip("-").isdigit():
        return None
    dev = int(rest[4])
    if dev <= 0:
        return None
    major = (dev >> 8) & 0xFFF
    minor = (dev & 0xFF) | ((dev >> 12) & 0xFFF00)
    if 136 <= major <= 143:
        return f"pts/{(major - 136) * 256 + minor}"
    if major == 4:
        return f"tty{minor}" if minor < 64 else f"ttyS{minor - 64}"
    return None


def line_of_ttyname(name: str) -> str | None:
    """A terminal's device path as utmp names it: '/dev/pts/3' -> 'pts/3'."""
    line = name.removeprefix("/dev/")
    return line if line != name and _LINE.fullmatch(line) else None


def env_remote(env: Mapping[str, str]) -> str | None:
    """The client address SSH_CONNECTION (else SSH_CLIENT) says: its first word, when it
    is an IP address."""
    for key in ("SSH_CONNECTION", "SSH_CLIENT"):
        value = env.get(key, "")
        if not value or len(value) > _MAX_ENV:
            continue
        words = value.split(" ")
        found = address(words[0])
        if found:
            return found
    return None


def service_name(env: Mapping[str, str], ppid: int) -> str | None:
    """The service this process runs as: ZUKA_SERVICE (zuka's own units set it), else
    'systemd' for a unit systemd started (INVOCATION_ID, parent pid 1); None otherwise."""
    named = env.get("ZUKA_SERVICE", "")
    if named and _UNIT.fullmatch(named):
        return named
    if env.get("INVOCATION_ID") and ppid == 1:
        return "systemd"
    return None


def decide(
    *,
    line: str | None,
    records: Iterable[UtmpRecord],
    env: Mapping[str, str],
    ppid: int,
) -> str:
    """The origin of a process from what was read of it (pure)."""
    if line:
        remote = remote_of(records, line)
        if remote:
            return _bounded(f"ssh {remote}")
    remote = env_remote(env)
    if remote:
        return _bounded(f"ssh {remote} (env)")
    if not line:
        service = service_name(env, ppid)
        return _bounded(f"service {service}") if service else ""
    return _bounded(f"tty {line}")


def _bounded(origin: str) -> str:
    return visible(origin, MAX_ORIGIN)


def read_utmp(
    paths: Iterable[Path] = UTMP_PATHS, max_records: int = MAX_RECORDS
) -> list[UtmpRecord]:
    """The records of the first utmp file found that can be trusted: a regular file of
    root's nobody else may write (group utmp may: login programs and terminals write it).
    [] when none is."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o002:
                return []
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(RECORD.size * max_records)
        except OSError:
            return []
        finally:
            os.close(fd)
        return parse_utmp(data, max_records)
    return []


def controlling_tty(
    stat_path: Path = PROC_STAT, ttyname: Callable[[int], str] = os.ttyname
) -> str | None:
    """This process's controlling terminal as utmp names it: from /proc's stat, else the
    terminal on stdin, stdout or stderr."""
    try:
        with open(stat_path, "rb") as f:
            text = f.read(4096).decode("ascii", "replace")
        found = tty_of_stat(text)
        if found:
            return found
    except OSError:
        pass
    for fd in (0, 1, 2):
        try:
            found = line_of_ttyname(ttyname(fd))
        except OSError:
            continue
        if found:
            return found
    return None


def detect(
    *,
    env: Mapping[str, str] | None = None,
    utmp_paths: Iterable[Path] = UTMP_PATHS,
    stat_path: Path = PROC_STAT,
    ttyname: Callable[[int], str] = os.ttyname,
    ppid: int | None = None,
) -> str:
    """Where this process's user came from (see the module's docstring)."""
    line = controlling_tty(stat_path, ttyname)
    return decide(
        line=line,
        records=read_utmp(utmp_paths) if line else (),
        env=os.environ if env is None else env,
        ppid=os.getppid() if ppid is None else ppid,
    )


@functools.cache
def this_process() -> str:
    """detect(), once per process: what every audit entry it writes records."""
    return detect()


def who(actor: str, origin: str) -> str:
    """Who wrote an entry, as the node screen and the offboarding report say it: 'alice
    from 203.0.113.7', 'alice from 203.0.113.7 (env)', 'zuka from service zuka-collect',
    'alice from tty pts/3', or the user alone. Both made visible and bounded (they are
    read back from a ledger)."""
    where = visible(origin, MAX_ORIGIN).removeprefix("ssh ")
    name = visible(actor, 64)
    return _("{name} from {where}").format(name=name, where=where) if where else name
