"""Where `zuka collect --metrics-listen` listens and who may read it.

`127.0.0.1:PORT`, `[::1]:PORT` (an IP literal, never a name to resolve) or `unix:PATH`.
The access rule: money figures are not for every local user. A TCP address takes a bearer
token (`--metrics-token-file`, a file only its owner may read) unless money is off and the
address is loopback; a Unix socket is created 0600 (its owner only) and takes no token.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from leases.core import tokenfile
from leases.core.errors import InputError
from leases.core.i18n import N_, _

# The fields refusals name: the options as typed, as only `zuka collect` takes them.
FIELD = "--metrics-listen"
TOKEN_FIELD = "--metrics-token-file"
MONEY_FIELD = "--metrics-money"
# Longer than a Unix socket path may be on Linux (sun_path is 108 bytes).
MAX_SOCKET_PATH = 107
FORMS = N_("give 127.0.0.1:PORT, [::1]:PORT or unix:/path/to/socket")


@dataclass(frozen=True)
class Listen:
    """A parsed --metrics-listen: a TCP host and port, or a Unix socket path."""

    host: str = ""
    port: int = 0
    path: Path | None = None

    @property
    def unix(self) -> bool:
        return self.path is not None

    @property
    def loopback(self) -> bool:
        return self.path is None and ipaddress.ip_address(self.host).is_loopback

    def __str__(self) -> str:
        if self.path is not None:
            return f"unix:{self.path}"
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(value: str) -> Listen:
    """`127.0.0.1:9400`, `[::1]:9400`, `0.0.0.0:9400` or `unix:/run/zuka.sock`; InputError
    naming what is wrong otherwise."""
    if not value or len(value) > 300 or not value.isprintable():
        raise InputError(FIELD, value, _(FORMS))
    if value.startswith("unix:"):
        raw = value.removeprefix("unix:")
        if not raw or "\x00" in raw:
            raise InputError(FIELD, value, _("unix: needs a path: {forms}").format(forms=_(FORMS)))
        if len(os.fsencode(raw)) > MAX_SOCKET_PATH:
            words = _("a socket path is at most {limit} bytes").format(limit=MAX_SOCKET_PATH)
            raise InputError(FIELD, value, words)
        return Listen(path=Path(raw))
    if value.startswith("["):
        host, sep, port = value[1:].partition("]:")
        if not sep:
            raise InputError(FIELD, value, _("an IPv6 address needs its port: [::1]:PORT"))
    else:
        host, sep, port = value.rpartition(":")
        if not sep or not host:
            raise InputError(FIELD, value, _("no port: {forms}").format(forms=_(FORMS)))
        if ":" in host:
            raise InputError(FIELD, value, _("an IPv6 address goes in brackets: [::1]:PORT"))
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InputError(
            FIELD,
            value,
            _("{host!r} is not an IP address (a host name is not resolved): {forms}").format(
                host=host, forms=_(FORMS)
            ),
        ) from None
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise InputError(FIELD, value, _("the port must be a number from 1 to 65535"))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise InputError(FIELD, value, _("give the IPv4 address itself, not its IPv6 mapping"))
    return Listen(host=str(address), port=int(port))


def read_token(path: Path) -> bytes:
    """The bearer token in `path` (leases.core.tokenfile: a private regular file of the
    user's, read without following a link or blocking)."""
    return tokenfile.read_token(path, TOKEN_FIELD, _("money figures"))


def access(listen: Listen, token_file: Path | None, money: bool) -> bytes | None:
    """The token a scrape must carry (None: none needed), by the rule of the module's
    docstring; InputError when the combination is refused."""
    if listen.unix:
        if token_file is not None:
            raise InputError(
                TOKEN_FIELD,
                str(token_file),
                _("a Unix socket is its owner's only (mode 0600) and takes no token"),
            )
        return None
    if token_file is not None:
        return read_token(token_file)
    if not listen.loopback:
        raise InputError(
            FIELD,
            str(listen),
            _(
                "an address other machines can reach needs --metrics-token-file (or listen on"
                " 127.0.0.1)"
            ),
        )
    if money:
        raise InputError(
            MONEY_FIELD,
            None,
            _(
                "money figures over TCP need --metrics-token-file: every local user can reach"
                " {listen} (unix:PATH is a socket only you can open: for your own tools, not"
                " for Prometheus)"
            ).format(listen=listen),
        )
    return None
