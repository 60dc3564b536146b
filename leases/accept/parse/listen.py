"""Listening TCP sockets as a node shows them: `ss -ltnpH`, or /proc/net/tcp and tcp6
where ss is missing. Hostile text: never raises; what could not be read is in `problems`."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from leases.accept.parse._text import digits
from leases.accept.words import _

MAX_LINES = 50_000
MAX_PROBLEMS = 20
# Addresses that mean "every interface".
_ANY = frozenset({"0.0.0.0", "::", "*", "::ffff:0.0.0.0"})


@dataclass(frozen=True)
class Listener:
    address: str  # as printed, brackets and %interface dropped: "0.0.0.0", "::1"
    port: int
    process: str = ""  # the first process name ss showed ("sshd"), "" when not shown

    @property
    def all_interfaces(self) -> bool:
        return self.address in _ANY

    @property
    def loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.address).is_loopback
        except ValueError:
            return False


@dataclass(frozen=True)
class Listening:
    sockets: tuple[Listener, ...] = ()
    problems: tuple[str, ...] = ()

    def ports(self) -> tuple[int, ...]:
        return tuple(sorted({s.port for s in self.sockets}))


_PROC_RE = re.compile(r'users:\(\("([^"]{0,64})"')


def _split_address(local: str) -> tuple[str, int] | None:
    host, sep, port = local.rpartition(":")
    if not sep or not digits(port) or not 0 < int(port) < 65536:
        return None
    host = host.removeprefix("[").removesuffix("]")
    host = host.split("%", 1)[0]  # 127.0.0.53%lo
    return host, int(port)


def parse_ss(text: str) -> Listening:
    """`ss -ltnpH`: `LISTEN 0 128 0.0.0.0:22 0.0.0.0:* users:(("sshd",pid=1,fd=3))`; some
    versions leave the state column out with -l."""
    sockets: list[Listener] = []
    problems: list[str] = []
    seen: set[tuple[str, int]] = set()
    for number, line in enumerate(text.split("\n")[:MAX_LINES], 1):
        words = line.split()
        if not words:
            continue
        if words[0] == "State" or words[0] == "Netid":
            continue  # a header, if -H was not honoured
        if not digits(words[0]):
            words = words[1:]  # the state (LISTEN, UNCONN)
        if len(words) < 4 or not digits(words[0]) or not digits(words[1]):
            problems.append(_("ss line {line} not read").format(line=number))
            continue
        found = _split_address(words[2])
        if found is None:
            problems.append(_("ss line {line}: no address:port").format(line=number))
            continue
        m = _PROC_RE.search(line)
        key = found
        if key in seen:  # one line per listening socket: SO_REUSEPORT repeats it
            continue
        seen.add(key)
        sockets.append(Listener(found[0], found[1], m.group(1) if m else ""))
    return Listening(tuple(sockets), _capped(problems))


def _capped(problems: list[str]) -> tuple[str, ...]:
    if len(problems) <= MAX_PROBLEMS:
        return tuple(problems)
    more = _("and {count} more lines not read").format(count=len(problems) - MAX_PROBLEMS)
    return (*problems[:MAX_PROBLEMS], more)


def _hex_ipv4(word: str) -> str:
    return str(ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(word), "little")))


def _hex_ipv6(word: str) -> str:
    raw = b"".join(bytes.fromhex(word[i : i + 8])[::-1] for i in range(0, 32, 8))
    addr = ipaddress.IPv6Address(raw)
    return "::" if addr == ipaddress.IPv6Address(0) else str(addr)


def parse_proc_net_tcp(text: str) -> Listening:
    """/proc/net/tcp and /proc/net/tcp6 (together or alone): state 0A is LISTEN; addresses
    are hex, each 32-bit word in the host's (little-endian) order."""
    sockets: list[Listener] = []
    problems: list[str] = []
    seen: set[tuple[str, int]] = set()
    for number, line in enumerate(text.split("\n")[:MAX_LINES], 1):
        words = line.split()
        if len(words) < 4 or words[0] == "sl":
            continue
        if words[3] != "0A":
            continue
        addr, _sep, port = words[1].partition(":")
        try:
            host = _hex_ipv4(addr) if len(addr) == 8 else _hex_ipv6(addr) if len(addr) == 32 else ""
            port_no = int(port, 16)
        except ValueError:
            host, port_no = "", 0
        if not host or not 0 < port_no < 65536:
            problems.append(_("/proc/net/tcp line {line} not read").format(line=number))
            continue
        if (host, port_no) in seen:
            continue
        seen.add((host, port_no))
        sockets.append(Listener(host, port_no))
    return Listening(tuple(sockets), _capped(problems))
