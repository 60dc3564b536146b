"""SSH host key trust: which keys a node may present, and how a new one becomes trusted.

zuka reads its own known_hosts file (in the user data dir) together with the user's
~/.ssh/known_hosts and the system-wide one. A key the user accepts is appended to zuka's
own file only, so the user's OpenSSH files are never edited. A changed key is refused and
never replaced: whoever owns the node has to explain it, and the user removes the old line.

Matching follows OpenSSH: a node on port 22 matches `host` lines, a node on another port
matches only `[host]:port` lines. (asyncssh's own matcher falls back to port-less lines when
nothing matches the port, which would turn every NAT-mapped port of a rental platform's
gateway into a "changed key".) Hashed `|1|salt|hash` lines and wildcard patterns are matched
by asyncssh's parser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import asyncssh
import platformdirs

from leases.ssh.speech import _

DEFAULT_PORT = 22


class HostKeyStatus(StrEnum):
    TRUSTED = "trusted"
    UNKNOWN = "unknown"  # no key on file for this host: ask the user
    CHANGED = "changed"  # other keys on file, or this key revoked: refuse


class HostKeyChangedError(Exception):
    """Refused to trust a key because a different key is on file for the host."""


@dataclass(frozen=True)
class KnownKeys:
    """The keys on file for one host and port."""

    host_keys: tuple[asyncssh.SSHKey, ...] = ()
    ca_keys: tuple[asyncssh.SSHKey, ...] = ()
    revoked: tuple[asyncssh.SSHKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.host_keys or self.ca_keys)


def default_known_hosts_path() -> Path:
    """zuka's own known_hosts file, where accepted keys are written."""
    return platformdirs.user_data_path("zuka") / "known_hosts"


def default_known_hosts_paths() -> tuple[Path, ...]:
    """Files read when verifying a node: zuka's own first, then the user's and the system's."""
    return (
        default_known_hosts_path(),
        Path("~/.ssh/known_hosts").expanduser(),
        Path("/etc/ssh/ssh_known_hosts"),
    )


def fingerprint(key: asyncssh.SSHKey) -> str:
    """The SHA256 fingerprint OpenSSH shows: `SHA256:base64-without-padding`."""
    return key.get_fingerprint("sha256")


def host_pattern(host: str, port: int | None) -> str:
    """How OpenSSH writes a host in known_hosts: `host` on port 22, `[host]:port` otherwise."""
    if port is None or port == DEFAULT_PORT:
        return host
    return f"[{host}]:{port}"


def _public_key_text(key: asyncssh.SSHKey) -> str:
    algorithm, blob, *_comment = key.export_public_key("openssh").decode("ascii").split()
    return f"{algorithm} {blob}"


class UnsafeKnownHostsEntry(ValueError):
    """A host or key that would not read back from known_hosts as exactly one entry."""


# What a host may hold to be written as one known_hosts pattern: no separators (space,
# comma, newline), no pattern syntax (* ? ! |, a leading @ marker, # comment), no brackets
# but the ones host_pattern adds, nothing outside printable ASCII.
_HOST_OK = re.compile(r"[A-Za-z0-9._:%-]+")


def known_hosts_line(host: str, port: int | None, key: asyncssh.SSHKey) -> str:
    """The one line that trusts key for host:port, checked to read back as exactly that.

    Raises UnsafeKnownHostsEntry for a host with characters known_hosts gives a meaning to
    (a newline would plant a second entry, a comma or `*` would trust other hosts), a bad
    port, or a key that does not export as one valid public key.
    """
    if not _HOST_OK.fullmatch(host) or host.startswith(("-", "@")) or len(host) > 255:
        raise UnsafeKnownHostsEntry(
            _("host {host!r} cannot be written to known_hosts safely").format(host=host)
        )
    if port is not None and not 0 < port < 65536:
        raise UnsafeKnownHostsEntry(_("port {port!r} is not a port number").format(port=port))
    try:
        text = _public_key_text(key)
        again = asyncssh.import_public_key(text)
    except (ValueError, UnicodeError, asyncssh.KeyImportError) as exc:
        raise UnsafeKnownHostsEntry(
            _("not a single valid public key: {why}").format(why=exc)
        ) from None
    if again.public_data != key.public_data or not text.isascii() or "\n" in text:
        raise UnsafeKnownHostsEntry(_("the key does not export as itself"))
    pattern = host_pattern(host, port)
    line = f"{pattern} {text}\n"
    # Read it back the way zuka reads its files: one entry, for this host only, this key.
    parsed = asyncssh.import_known_hosts(line)
    found = parsed.match(pattern, "", None)
    if [k.public_data for k in found[0]] != [key.public_data] or any(found[1:5]):
        raise UnsafeKnownHostsEntry(
            _("{pattern!r} does not read back as one entry").format(pattern=pattern)
        )
    return line


_cache: dict[Path, tuple[int, int, asyncssh.SSHKnownHosts]] = {}


def _load(path: Path) -> asyncssh.SSHKnownHosts | None:
    """Parse one known_hosts file, cached by mtime and size; None when it is absent.
    Raises OSError when it is there but cannot be read (out of file descriptors, no
    permission): an unreadable file is not an empty one."""
    try:
        stat = path.stat()
        cached = _cache.get(path)
        if cached and cached[0] == stat.st_mtime_ns and cached[1] == stat.st_size:
            return cached[2]
        text = path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        parsed = asyncssh.import_known_hosts(text)
    except ValueError:
        # One malformed line must not make every node unverifiable: skip bad lines.
        parsed = asyncssh.SSHKnownHosts()
        for line in text.splitlines():
            try:
                parsed.load(line)
            except ValueError:
                continue
    _cache[path] = (stat.st_mtime_ns, stat.st_size, parsed)
    return parsed


def known_keys(
    host: str, port: int | None, known_hosts_paths: Sequence[Path], *, addr: str = ""
) -> KnownKeys:
    """Every key on file for host (or its address) on exactly this port."""
    host_keys: list[asyncssh.SSHKey] = []
    ca_keys: list[asyncssh.SSHKey] = []
    revoked: list[asyncssh.SSHKey] = []
    names = [host_pattern(name, port) for name in dict.fromkeys((host, addr)) if name]
    for path in known_hosts_paths:
        parsed = _load(Path(path))
        if parsed is None:
            continue
        for name in names:
            # Passed with port None the name is used verbatim, so asyncssh's
            # retry-without-port fallback never applies.
            found = parsed.match(name, "", None)
            host_keys += found[0]
            ca_keys += found[1]
            revoked += found[2]
    return KnownKeys(tuple(host_keys), tuple(ca_keys), tuple(revoked))


def classify(
    host: str,
    port: int | None,
    key: asyncssh.SSHKey,
    known_hosts_paths: Sequence[Path],
    *,
    addr: str = "",
) -> HostKeyStatus:
    """Is this key trusted for host:port, unknown, or different from the one on file?"""
    known = known_keys(host, port, known_hosts_paths, addr=addr)
    # Compare public halves: a caller may hold the private key (tests, the simulator).
    blob = key.public_data
    if any(k.public_data == blob for k in known.revoked):
        return HostKeyStatus.CHANGED
    if any(k.public_data == blob for k in known.host_keys):
        return HostKeyStatus.TRUSTED
    if known:
        return HostKeyStatus.CHANGED
    return HostKeyStatus.UNKNOWN


KeyLists = tuple[list[asyncssh.SSHKey], list[asyncssh.SSHKey], list[asyncssh.SSHKey]]


def known_hosts_matcher(
    known_hosts_paths: Sequence[Path],
) -> Callable[[str, str, int | None], KeyLists]:
    """A `known_hosts=` callable for asyncssh.connect with the matching rules above."""
    paths = tuple(Path(p) for p in known_hosts_paths)

    def match(host: str, addr: str, port: int | None) -> KeyLists:
        known = known_keys(host, port, paths, addr=addr)
        return list(known.host_keys), list(known.ca_keys), list(known.revoked)

    return match


def trust(
    host: str,
    port: int | None,
    key: asyncssh.SSHKey,
    path: Path,
    *,
    known_hosts_paths: Sequence[Path] = (),
) -> bool:
    """Append `host key` (or `[host]:port key`) to path, created 0600: the one function
    that writes known_hosts. Raises UnsafeKnownHostsEntry (see known_hosts_line).

    Only call this after the user has seen and accepted fingerprint(key). Returns False
    when the key was already trusted. Raises HostKeyChangedError when path or any of
    known_hosts_paths holds a different key for the host: a changed key is never replaced.
    """
    path = Path(path)
    line = known_hosts_line(host, port, key)  # checked before anything is read or written
    status = classify(host, port, key, [path, *known_hosts_paths])
    if status is HostKeyStatus.TRUSTED:
        return False
    if status is HostKeyStatus.CHANGED:
        raise HostKeyChangedError(
            _(
                "{host} already has a different host key on file; refusing to add {fingerprint}"
            ).format(host=host_pattern(host, port), fingerprint=fingerprint(key))
        )
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if _private(fd):
            os.fchmod(fd, 0o600)
        os.write(fd, line.encode("ascii"))
    finally:
        os.close(fd)
    return True


def _private(fd: int) -> bool:
    """Whether a trust store is one person's, to keep 0600: theirs and without an ACL. A
    lab's (leases.lab: the service user's, its ACL letting editors write) is never
    chmod-ed: 0600 would set its ACL's mask to nothing and lock the lab out."""
    if os.fstat(fd).st_uid != os.geteuid():
        return False
    try:
        os.getxattr(fd, "system.posix_acl_access")
    except OSError:
        return True
    return False


async def fetch_host_key(
    host: str,
    port: int | None = None,
    *,
    tunnel: asyncssh.SSHClientConnection | None = None,
    timeout: float = 10.0,
) -> asyncssh.SSHKey:
    """The key a server presents, fetched without trusting it or logging in.

    asyncssh never reads an ssh config here (it would run a ProxyCommand found there).
    """
    key = await asyncssh.get_server_host_key(
        host,
        port if port is not None else (),
        tunnel=tunnel if tunnel is not None else (),
        config=[],
        options=asyncssh.SSHClientConnectionOptions(connect_timeout=timeout),
    )
    if key is None:
        raise ValueError(
            _("{host} completed key exchange without a host key").format(
                host=host_pattern(host, port)
            )
        )
    return key
