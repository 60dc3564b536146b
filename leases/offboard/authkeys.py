"""The lab's key in an authorized_keys file a node printed (hostile text): which lines
hold it, found by fingerprint, and the key blob that names those lines to grep -F.

A fingerprint is what the ledger records for an ssh_key resource (`SHA256:...`, as
ssh-keygen -l shows it); the blob is the base64 word of the line, checked to be base64
before it goes near a command.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ssh.keys import KeyFileRefused, load_client_key, read_key_file

_FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
_BLOB_RE = re.compile(r"[A-Za-z0-9+/]{16,16384}={0,2}")
_MAX_LINES = 10_000  # more than any real authorized_keys; the rest is not looked at


def check_fingerprint(value: str, field: str = "fingerprint") -> str:
    if not _FINGERPRINT_RE.fullmatch(value):
        raise InputError(
            field, visible(value, 80), _("a key fingerprint is SHA256: and 43 base64 characters")
        )
    return value


@dataclass(frozen=True)
class Found:
    blobs: tuple[str, ...]  # each key's base64 word, as it stands in the matching lines
    lines: int  # lines holding the key
    keys: int  # lines read as keys at all
    unread: int = 0  # lines past _MAX_LINES: not looked at, so nothing is said of them


_KEY_TYPE_RE = re.compile(r"(ssh|ecdsa|sk-ssh|sk-ecdsa)-[a-z0-9@.-]{1,60}")


def _after_options(line: str) -> str:
    """The line from its key type on: options come first unless it starts with a type.
    As sshd's sshkey_advance_past_options: options end at the first space or tab outside
    quotes, and only \\" is an escape (a backslash before anything else is itself)."""
    first = line.split(None, 1)[0]
    if _KEY_TYPE_RE.fullmatch(first):
        return line
    quoted = False
    i = 0
    while i < len(line) and (quoted or line[i] not in " \t"):
        if line[i] == "\\" and line[i + 1 : i + 2] == '"':
            i += 1  # skip both
        elif line[i] == '"':
            quoted = not quoted
        i += 1
    return "" if quoted else line[i:].strip()


def key_options(options: str) -> list[tuple[str, str]]:
    """(name, value) of each option in a line's options text, as sshd's auth_parse_options
    reads them: split at commas outside quotes, a value in quotes ("" when none); \" in a
    quoted value is a quote. `from="*,command="` is one option, from, not a command."""
    found: list[tuple[str, str]] = []
    i, n = 0, len(options)
    while i < n:
        j = i
        while j < n and options[j] not in ',="':
            j += 1
        name, value = options[i:j].strip().lower(), ""
        if j < n and options[j] == "=":
            j += 1
            if j < n and options[j] == '"':
                j += 1
                chars: list[str] = []
                while j < n and options[j] != '"':
                    if options[j] == "\\" and options[j + 1 : j + 2] == '"':
                        j += 1
                    chars.append(options[j])
                    j += 1
                value = "".join(chars)
                j += 1  # the closing quote
        while j < n and options[j] != ",":
            j += 1  # what sshd would refuse: skipped to the next comma
        if name:
            found.append((name, value))
        i = j + 1
    return found


# What a forced command may not start with and still be said to force one thing: shells,
# wrappers that run another program, interpreters, pagers and editors that open a shell.
_NOT_FORCING = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env",
    "exec", "nice", "ionice", "nohup", "timeout", "stdbuf", "setsid", "chroot", "flock",
    "watch", "script", "tmux", "screen", "perl", "ruby", "node", "lua", "php", "awk",
    "gawk", "mawk", "find", "xargs", "vi", "vim", "nvim", "less", "more", "man", "git",
    "su", "sudo", "doas", "ssh", "strace", "gdb",
})  # fmt: skip
# Bare names sshd runs itself or that do nothing.
_HARMLESS = frozenset({"true", "false", "internal-sftp"})
_METACHARS = re.compile(r"[$`;|&<>()'\"\\\n*?\[\]{}~]")


def forces_a_command(options: str) -> bool:
    """Whether the options force one command that cannot itself open a shell: a command
    option with no shell syntax ($, quotes, ;, |, ...), whose first word is an absolute
    path (or true, false, internal-sftp) to no shell, wrapper or interpreter. Anything
    else may run what the client asks, so it forces nothing."""
    commands = [value for name, value in key_options(options) if name == "command"]
    if not commands:
        return False
    command = commands[0].strip()
    if not command or _METACHARS.search(command):
        return False
    first = command.split()[0]
    if first in _HARMLESS:
        return True
    base = first.rsplit("/", 1)[-1]
    interpreter = base.startswith(("python", "perl", "ruby", "php", "lua", "node", "pypy"))
    return first.startswith("/") and base not in _NOT_FORCING and not interpreter


def find_key(text: str, fingerprint: str) -> Found:
    """The lines of an authorized_keys text that authorise the key with this fingerprint."""
    blobs: list[str] = []
    matched = keys = 0
    # sshd ends a line only at \n (str.splitlines also splits at \f, \x85, \u2028...).
    lines = text.split("\n")
    for raw in lines[:_MAX_LINES]:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = _after_options(line).split()
        if len(words) < 2 or not _KEY_TYPE_RE.fullmatch(words[0]):
            continue  # not a key line: it authorises nothing
        kind, blob = words[0], words[1]
        if not _BLOB_RE.fullmatch(blob):
            continue
        try:
            key = asyncssh.import_public_key(f"{kind} {blob}")
        except (asyncssh.KeyImportError, ValueError):
            continue
        keys += 1
        if key.get_fingerprint("sha256") != fingerprint:
            continue
        matched += 1
        if blob not in blobs:
            blobs.append(blob)
    return Found(tuple(blobs), matched, keys, max(0, len(lines) - _MAX_LINES))


@dataclass(frozen=True)
class AuthorizedKey:
    """One key line of an authorized_keys text: what a person needs to recognise it."""

    line: int  # 1-based
    kind: str  # "ssh-ed25519"
    fingerprint: str  # SHA256:...
    comment: str  # as written (hostile: show through visible())
    options: bool  # the line starts with options (from=, command=, ...)
    # Its options force a command (command="..."): it cannot open a shell of its own.
    forced: bool = False


def keys_in(text: str) -> tuple[list[AuthorizedKey], int]:
    """Every key an authorized_keys text authorises, and how many non-comment lines could
    not be read as keys (they authorise nothing, as in sshd)."""
    found: list[AuthorizedKey] = []
    unread = 0
    for number, raw in enumerate(text.split("\n")[:_MAX_LINES], 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        rest = _after_options(line)
        words = rest.split(None, 2)
        if (
            len(words) < 2
            or not _KEY_TYPE_RE.fullmatch(words[0])
            or not _BLOB_RE.fullmatch(words[1])
        ):
            unread += 1
            continue
        try:
            key = asyncssh.import_public_key(f"{words[0]} {words[1]}")
        except (asyncssh.KeyImportError, ValueError):
            unread += 1
            continue
        comment = words[2] if len(words) > 2 else ""
        forced = forces_a_command(line[: len(line) - len(rest)].strip())
        found.append(
            AuthorizedKey(
                number, words[0], key.get_fingerprint("sha256"), comment, rest != line, forced
            )
        )
    return found, unread


def check_blob(blob: str) -> str:
    if not _BLOB_RE.fullmatch(blob):
        raise InputError("key", visible(blob, 40), _("is not a base64 key blob"))
    try:
        base64.b64decode(blob, validate=True)
    except binascii.Error:
        raise InputError("key", visible(blob, 40), _("is not a base64 key blob")) from None
    return blob


def fingerprint_of(key_path: str) -> str:
    """The SHA256 fingerprint of the key in key_path: from its .pub beside it, else from
    the private key (unencrypted). Blocking: call it off the loop. Raises InputError."""
    path = Path(key_path).expanduser()
    try:
        pub = asyncssh.import_public_key(read_key_file(path.with_name(path.name + ".pub")))
        return str(pub.get_fingerprint("sha256"))
    except (KeyFileRefused, asyncssh.KeyImportError):
        pass
    try:
        loaded = load_client_key(str(path))
    except (KeyFileRefused, asyncssh.KeyImportError) as exc:
        raise InputError(
            "key_path", visible(key_path, 200), _("cannot read the key: {error}").format(error=exc)
        ) from exc
    key = loaded[0] if isinstance(loaded, tuple) else loaded
    return str(key.get_fingerprint("sha256"))
