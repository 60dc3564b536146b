"""Reading the SSH login command a rental platform hands out, verbatim.

Accepts what people paste: ``ssh -p 30022 root@connect.westb.seetacloud.com``,
``ssh root@region-9.autodl.pro -p 41234``, ``ssh -i ~/.ssh/lab -J bastion user@10.0.0.7``,
``ssh -o Port=2222 -l ubuntu host``, ``ssh://root@host:2200`` or an ~/.ssh/config alias.
"""

from __future__ import annotations

import re
import shlex

from leases.errors import InputError
from leases.models import SshTarget

FIELD = "ssh"
# Options that take an argument, per ssh(1).
_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")
# Options that stand alone; harmless for a login target, so they are accepted and dropped.
_FLAGS = set("46AaCfGgKkMNnqsTtVvXxYy")
_HOST_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?)$")
_USER_RE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,31}\$?$")


def _port(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise InputError(FIELD, value, "port must be a number from 1 to 65535")
    return int(value)


def _host(value: str, original: str) -> str:
    if not _HOST_RE.match(value):
        raise InputError(FIELD, original, f"{value!r} is not a valid host name or address")
    return value.strip("[]")


def _user(value: str, original: str) -> str:
    if not _USER_RE.match(value):
        raise InputError(FIELD, original, f"{value!r} is not a valid user name")
    return value


def _destination(dest: str, original: str) -> tuple[str | None, str, int | None]:
    port: int | None = None
    if dest.startswith("ssh://"):
        rest = dest.removeprefix("ssh://").rstrip("/")
        m = re.match(r"^(?:([^@]+)@)?(\[[^\]]+\]|[^:]+)(?::(\d+))?$", rest)
        if not m:
            raise InputError(FIELD, original, f"cannot read the URL {dest!r}")
        user = _user(m.group(1), original) if m.group(1) else None
        if m.group(3):
            port = _port(m.group(3))
        return user, _host(m.group(2), original), port
    user = None
    if "@" in dest:
        user_part, _, dest = dest.rpartition("@")
        user = _user(user_part, original)
    return user, _host(dest, original), port


def parse_ssh_command(command: str, known_aliases: frozenset[str] = frozenset()) -> SshTarget:
    """Parse a login command or alias into an SshTarget; InputError if it is not one."""
    original = command
    if not command.strip():
        raise InputError(FIELD, command, "is empty")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise InputError(FIELD, command, f"cannot be split into words: {exc}") from None
    if words and words[0] in {"ssh", "/usr/bin/ssh"}:
        words = words[1:]
    elif len(words) != 1 or words[0].startswith("-"):
        raise InputError(FIELD, command, "must start with 'ssh' or be a single ~/.ssh/config alias")
    port: int | None = None
    user: str | None = None
    key: str | None = None
    jump: str | None = None
    dest: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            continue
        if word.startswith("-") and len(word) >= 2:
            opt = word[1]
            if opt in _WITH_ARG:
                if len(word) > 2:
                    arg = word[2:]
                else:
                    i += 1
                    if i >= len(words):
                        raise InputError(FIELD, command, f"option -{opt} needs a value")
                    arg = words[i]
                # As in OpenSSH, the first value given for a setting wins.
                if opt == "p":
                    port = port or _port(arg)
                elif opt == "i":
                    key = key or arg
                elif opt == "J":
                    jump = jump or arg
                elif opt == "l":
                    user = user or _user(arg, original)
                elif opt == "o":
                    name, sep, val = arg.replace("=", " ", 1).partition(" ")
                    if not sep:
                        raise InputError(FIELD, command, f"-o {arg!r} is not Option=value")
                    key_name = name.strip().lower()
                    val = val.strip()
                    if key_name == "port":
                        port = port or _port(val)
                    elif key_name == "user":
                        user = user or _user(val, original)
                    elif key_name == "identityfile":
                        key = key or val
                    elif key_name == "proxyjump":
                        jump = jump or val
                # other options with arguments (-L, -D, -F, -c ...) do not change the target
            elif all(c in _FLAGS for c in word[1:]):
                pass
            else:
                raise InputError(FIELD, command, f"unknown ssh option {word!r}")
        elif dest is None:
            dest = word
        else:
            raise InputError(
                FIELD, command, f"has a remote command {word!r}; give only the login part"
            )
        i += 1
    if dest is None:
        raise InputError(FIELD, command, "has no host")
    dest_user, host, url_port = _destination(dest, original)
    user = dest_user or user
    port = url_port or port
    alias = host in known_aliases and port is None and user is None
    return SshTarget(host=host, port=port, user=user, key_path=key, jump=jump, alias=alias)


def ssh_config_aliases(text: str) -> frozenset[str]:
    """Host names (without wildcards) declared in an ssh_config text."""
    names: set[str] = set()
    for line in text.splitlines():
        parts = line.strip().split()
        if len(parts) >= 2 and parts[0].lower() == "host":
            names.update(p for p in parts[1:] if not any(c in p for c in "*?!"))
    return frozenset(names)
