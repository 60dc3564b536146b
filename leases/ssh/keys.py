"""Client keys: private keys and their certificates, read from files size-capped."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import asyncssh

from leases.ssh.speech import _

# The largest private key or certificate file read (a 16k-bit RSA key is ~13 KB).
MAX_KEY_FILE_BYTES = 64 * 1024


ClientKey = asyncssh.SSHKey | tuple[asyncssh.SSHKey, asyncssh.SSHCertificate]


class KeyFileRefused(Exception):
    """A key file zuka will not read: missing, not a regular file, or too large."""


def read_key_file(
    path: Path, limit: int = MAX_KEY_FILE_BYTES, *, owner_only: bool = False
) -> bytes:
    """A key file's bytes, never more than limit: a regular file only (not /dev/zero, not a
    FIFO, which O_NONBLOCK keeps from blocking the open). owner_only: the file must also be
    the running user's own, not a link, and closed to group and others (a service's own
    key), checked on the file opened. Blocking: call it off the loop."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | (os.O_NOFOLLOW if owner_only else 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise KeyFileRefused(_("key file not found: {path}").format(path=path)) from None
    except OSError as exc:
        if owner_only and exc.errno == errno.ELOOP:
            raise KeyFileRefused(
                _("key file {path} is a symbolic link: name the key file itself").format(path=path)
            ) from None
        raise KeyFileRefused(
            _("key file {path} cannot be opened: {why}").format(path=path, why=exc.strerror)
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileRefused(_("key file {path} is not a regular file").format(path=path))
        if owner_only:
            _check_own(path, info)
        if info.st_size > limit:
            raise KeyFileRefused(
                _("key file {path} is larger than {limit} bytes").format(path=path, limit=limit)
            )
        data = os.read(fd, limit + 1)
        if len(data) > limit:  # grew after the stat
            raise KeyFileRefused(
                _("key file {path} is larger than {limit} bytes").format(path=path, limit=limit)
            )
        return data
    finally:
        os.close(fd)


def _check_own(path: Path, info: os.stat_result) -> None:
    if info.st_uid != os.geteuid():
        raise KeyFileRefused(
            _(
                "key file {path} is owned by uid {owner}, not by the user zuka runs as"
                " (uid {uid}): the key must be this user's own (chown it to them)"
            ).format(path=path, owner=info.st_uid, uid=os.geteuid())
        )
    if info.st_mode & 0o077:
        raise KeyFileRefused(
            _(
                "key file {path} may be read by others than its owner (mode {mode:04o}):"
                " chmod 600 {path}"
            ).format(path=path, mode=stat.S_IMODE(info.st_mode))
        )


# Keys read so far, by path, with the files' signatures when read: a fleet of 300 nodes on
# one key file parses it once per process, not once per connect.
_Signature = tuple[int, int, int] | None
_cache: dict[Path, tuple[_Signature, _Signature, ClientKey]] = {}


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None


def _signature(path: Path) -> _Signature:
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def load_client_key(path: str, *, owner_only: bool = False) -> ClientKey:
    """A private key (and its -cert.pub beside it, if any), read size-capped; again only
    when either file changed. Blocking. Raises KeyFileRefused, or asyncssh.KeyImportError
    for a file that is not a key. owner_only: see read_key_file (checked at every load,
    the cache aside: a chmod after start is seen)."""
    file = Path(path).expanduser()
    cert_file = file.with_name(file.name + "-cert.pub")
    signature, cert_signature = _signature(file), _signature(cert_file)
    cached = _cache.get(file)
    if owner_only:
        info = _lstat(file)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise KeyFileRefused(
                _("key file {path} is a symbolic link: name the key file itself").format(path=file)
            )
        if info is not None and stat.S_ISREG(info.st_mode):
            _check_own(file, info)
    if signature is not None and cached is not None and cached[:2] == (signature, cert_signature):
        return cached[2]
    key = asyncssh.import_private_key(read_key_file(file, owner_only=owner_only))
    loaded: ClientKey = key
    if cert_file.exists():
        # A certificate that does not load: ssh too goes on with the bare key.
        with contextlib.suppress(KeyFileRefused, asyncssh.KeyImportError):
            loaded = key, asyncssh.import_certificate(read_key_file(cert_file))
    if signature is not None:
        _cache[file] = (signature, cert_signature, loaded)
    return loaded


def load_own_key(path: Path) -> list[ClientKey]:
    """A service's own key, the only key it logs in with (see SshOptions.identity): the
    running user's, not readable by group or others. Blocking. Raises KeyFileRefused, or
    asyncssh.KeyImportError."""
    return [load_client_key(str(path), owner_only=True)]


def load_keys(required: str | None, optional: Sequence[str]) -> list[ClientKey]:
    """The ledger's key (must load) and the config's IdentityFiles (skipped when missing
    or encrypted: the agent may hold them). Blocking: call it off the loop."""
    keys = [load_client_key(required)] if required else []
    for path in optional:
        with contextlib.suppress(KeyFileRefused, asyncssh.KeyImportError):
            keys.append(load_client_key(path))
    return keys
