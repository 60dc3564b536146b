"""Where a notification may go: a URL's host in every spelling, the addresses it resolves
to, and the refusal of link-local and cloud metadata addresses.

A notification URL holds a token, and zuka posts node text to it: pointed at a cloud
metadata service (169.254.169.254 and its kin) it would be a way to read the instance's
credentials. The same address has many spellings that the C resolver takes (2852039166,
0xa9fea9fe, 0251.0376.0251.0376, 169.254.43518, [::ffff:169.254.169.254], full-width
digits through IDNA...), and a name may resolve to it, today or only at send time (DNS
rebinding). So:
- canonical() turns every spelling into the one address it means (or a normalised name);
- refusal() judges that address, or the name, without the network (config check);
- resolved_refusal() also resolves a name and judges every address it has;
- guarded() makes every resolution a send thread does (urllib's, apprise's requests',
  smtplib's: all call socket.getaddrinfo, then connect to what it returned) go through the
  check, so the connection is made to the very address that was checked.

Refused: link-local (169.254.0.0/16, fe80::/10) and the metadata services' own addresses
and names (AWS, GCP, Azure, Aliyun 100.100.100.200, Tencent metadata.tencentyun.com,
Huawei, AWS's IPv6 fd00:ec2::254). Loopback and private ranges are allowed, as before: a
lab may post to an internal webhook or proxy.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from leases.core.i18n import _

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# socket.getaddrinfo's shape: (host, port, family, type, proto, flags) -> [(f, t, p, c, sa)]
Resolver = Callable[..., list[tuple[Any, ...]]]

# The resolver as the process had it before guarded() wrapped it.
system_resolver: Resolver = socket.getaddrinfo

METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.azure.internal",
        "metadata.tencentyun.com",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, Huawei, Oracle, ...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.0.23",  # Tencent
        "100.100.100.200",  # Aliyun (in 100.64.0.0/10, not link-local)
        "fd00:ec2::254",  # AWS over IPv6
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class RefusedAddress(OSError):
    """A send tried to reach a link-local or metadata address (raised from the resolver,
    so the HTTP or SMTP client fails its connect with it)."""


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address inet_aton reads in host (1 to 4 parts, each decimal, 0x-hex or
    0-octal, the last filling the bytes left: 2852039166, 169.254.43518, 0251.0376.0251.0376,
    0xa9.0xfe.0xa9.0xfe), or None."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        if part[:2].lower() == "0x":
            digits, base, allowed = part[2:], 16, "0123456789abcdefABCDEF"
        elif len(part) > 1 and part.startswith("0"):
            digits, base, allowed = part[1:], 8, "01234567"
        else:
            digits, base, allowed = part, 10, "0123456789"
        if not digits or any(c not in allowed for c in digits):
            return None
        values.append(int(digits, base))
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = last
    for i, v in enumerate(head):
        number |= v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries: mapped (::ffff:a.b.c.d), compatible
    (::a.b.c.d) or NAT64 (64:ff9b::a.b.c.d)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    number = int(address)
    if number >> 32 == 0 and number > 1:  # not :: nor ::1
        return ipaddress.IPv4Address(number)
    if address in _NAT64:
        return ipaddress.IPv4Address(number & 0xFFFFFFFF)
    return None


def _ascii_name(host: str) -> str:
    """host lower-cased, NFKC-folded (full-width digits and dots), IDNA-encoded where it
    can be; trailing dots and an IPv6 zone id (fe80::1%eth0, %25 in a URL) dropped."""
    host = unicodedata.normalize("NFKC", host.strip().strip("[]"))
    host = host.split("%", 1)[0].rstrip(".").lower()
    if not host.isascii():
        with suppress(UnicodeError):  # not a valid IDNA name: judged as written
            host = host.encode("idna").decode("ascii").lower()
    return host


def canonical(host: str) -> Address | str:
    """The address host means, in every spelling the resolver accepts; a name otherwise
    (lower case, ASCII, without its trailing dot)."""
    name = _ascii_name(host)
    try:
        address: Address = ipaddress.ip_address(name)
    except ValueError:
        v4 = _inet_aton(name)
        if v4 is None:
            return name
        address = v4
    if isinstance(address, ipaddress.IPv6Address):
        address = _embedded_v4(address) or address
    return address


def is_refused_address(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        address = _embedded_v4(address) or address
    return address.is_link_local or address in METADATA_ADDRESSES


def refusal(host: str) -> str | None:
    """Why host (a literal in any spelling, or a name) is no place for a notification,
    without resolving it; None when it may be."""
    what = canonical(host)
    if isinstance(what, str):
        if what in METADATA_NAMES:
            return _("{host} is a cloud metadata service").format(host=what)
        return None
    if is_refused_address(what):
        return _("{host} is a link-local or cloud metadata address").format(host=what)
    return None


def _checked(host: str, infos: list[tuple[Any, ...]]) -> str | None:
    for info in infos:
        said = refusal(str(info[4][0]))
        if said is not None:
            return _("{host} resolves to {said}").format(host=_ascii_name(host), said=said)
    return None


def resolved_refusal(host: str, port: int | None, resolve: Resolver | None) -> str | None:
    """refusal(), then (with a resolver) every address the name resolves to judged too.
    A name that does not resolve now is not refused for it (sending checks it again)."""
    said = refusal(host)
    if said is not None or resolve is None or not host or not isinstance(canonical(host), str):
        return said
    try:
        infos = resolve(host, port, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    return _checked(host, infos)


_local = threading.local()
_install_lock = threading.Lock()


def _guarded_getaddrinfo(
    host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0
) -> list[tuple[Any, ...]]:
    resolve: Resolver | None = getattr(_local, "resolve", None)
    if resolve is None:  # a thread outside a send: untouched
        return system_resolver(host, port, family, type, proto, flags)
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    said = refusal(name)
    infos = [] if said else resolve(host, port, family, type, proto, flags)
    said = said or _checked(name, infos)
    if said is not None:
        _local.refused.append(said)
        raise RefusedAddress(_("not sent: {why}").format(why=said))
    return infos


@contextmanager
def guarded(resolve: Resolver = system_resolver) -> Iterator[list[str]]:
    """In this thread, for the block: every socket.getaddrinfo goes through resolve and
    fails (RefusedAddress) when any address it gives is refused. The HTTP and SMTP clients
    connect to the addresses getaddrinfo returned, so a name rebound between the check and
    the connect cannot slip through. Yields the refusals, in words, as they happen."""
    with _install_lock:
        if socket.getaddrinfo is not _guarded_getaddrinfo:
            socket.getaddrinfo = _guarded_getaddrinfo
    refused: list[str] = []
    outer = getattr(_local, "resolve", None), getattr(_local, "refused", None)
    _local.resolve, _local.refused = resolve, refused
    try:
        yield refused
    finally:
        _local.resolve, _local.refused = outer
