"""The checks of one login's parts (port, host, user, key path), each value through the
ledger's own rule, with a refusal a person reads (leases.ssh.login parses the whole)."""

from __future__ import annotations

import ipaddress
import re

from leases.core.errors import InputError
from leases.core.secrets import HIDDEN, looks_like_key_text
from leases.core.textsafe import is_clean, visible
from leases.ssh.speech import _

MAX_KEY_PATH = 1024
# What a node whose stored target was refused points at (see records.stored_node): under
# .invalid, which never resolves (RFC 6761); check_host refuses it, so no edit keeps it.
QUARANTINED_HOST = "ssh-target-refused.invalid"

# Used with fullmatch: `$` would let a trailing newline through.
_NAME_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9_])?")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,31}\$?")
_KEY_PATH_RE = re.compile(r"[\w/.~+@:,=-]+")


def shown_value(value: object) -> str:
    """A refused value as an error message may show it: controls visible, size bounded."""
    return visible(value, 80)


def check_port(value: object, field: str = "ssh_port") -> int:
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 65535:
        raise InputError(field, shown_value(value), _("port must be a number from 1 to 65535"))
    return int(text)


def check_host(value: str, field: str = "ssh_host") -> str:
    """A DNS name, IPv4, IPv6 (bracketed or bare) or config alias; returned unbracketed."""
    bracketed = value.startswith("[") and value.endswith("]")
    inner = value[1:-1] if bracketed else value
    if ":" in inner:
        try:
            # Python reads a zone id (fe80::1%eth0); ssh_config would expand the `%`.
            if "%" in inner:
                raise ValueError(inner)
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise InputError(field, shown_value(value), _("is not a valid IPv6 address")) from None
        return inner
    if bracketed or not _NAME_RE.fullmatch(value):
        raise InputError(
            field,
            shown_value(value),
            _(
                "is not a valid host: use a DNS name, an IP address or an ~/.ssh/config alias"
                " (letters, digits, '.', '_', '-'; not starting with '-')"
            ),
        )
    if all(part.isdigit() for part in value.split(".")):
        # 0, 999.1.1.1 and 1.2.3.4.5 are not names: an address must be a real IPv4.
        try:
            if len(value.split(".")) != 4:
                raise ValueError(value)
            ipaddress.IPv4Address(value)
        except ValueError:
            raise InputError(field, shown_value(value), _("is not a valid IPv4 address")) from None
    if value.lower().rstrip(".").endswith(".invalid"):
        reason = (
            _("the stored ssh target was refused: give the login command with --ssh")
            if value == QUARANTINED_HOST
            else _("names under .invalid never resolve")
        )
        raise InputError(field, shown_value(value), reason)
    return value


def check_user(value: str, field: str = "ssh_user") -> str:
    if not _USER_RE.fullmatch(value):
        raise InputError(
            field,
            shown_value(value),
            _(
                "is not a valid user name (1-32 letters, digits, '.', '_', '-'; not starting"
                " with '-' or '.')"
            ),
        )
    return value


def check_key_path(value: str, field: str = "ssh_key_path") -> str:
    """The path of a key file (never the key itself)."""
    if looks_like_key_text(value):
        raise InputError(
            field, HIDDEN, _("looks like private key text: give the path of the key file instead")
        )
    if not value.strip():
        raise InputError(field, value, _("is empty"))
    if len(value) > MAX_KEY_PATH:
        raise InputError(
            field,
            shown_value(value),
            _("is longer than {count} characters").format(count=MAX_KEY_PATH),
        )
    if not is_clean(value):
        raise InputError(field, shown_value(value), _("contains control or bidi characters"))
    if value.startswith("-"):
        raise InputError(field, shown_value(value), _("must not start with '-'"))
    # `zuka node show` prints the ssh command: no path may turn into more shell words.
    if not _KEY_PATH_RE.fullmatch(value):
        raise InputError(
            field,
            shown_value(value),
            _(
                "a key path is letters, digits and / . _ - ~ + @ : , = (no spaces, quotes, %,"
                " or shell characters: link the key to a plainer path)"
            ),
        )
    return value
