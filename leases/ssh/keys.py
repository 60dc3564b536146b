"""Client keys: private keys and their certificates, read from files size-capped."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import asyncssh

# The largest private key or certificate file read (a 16k-bit RSA key is ~13 KB).
MAX_KEY_FILE_BYTES = 64 * 1024


ClientKey = asyncssh.SSHKey | tuple[asyncssh.SSHKey, asyncssh.SSHCertificate]


class KeyFileRefused(Exception):
    """A key file zuka will not read: missing, not a regular file, or too large."""


def read_key_file(path: Path, limit: int = MAX_KEY_FILE_BYTES) -> bytes:
    """A key file's bytes, never more than limit: a regular file only (not /dev/zero, not a
    FIFO, which O_NONBLOCK keeps from blocking the open). Blocking: call it off the loop."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise KeyFileRefused(f"key file not found: {path}") from None
    except OSError as exc:
        raise KeyFileRefused(f"key file {path} cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileRefused(f"key file {path} is not a regular file")
        if info.st_size > limit:
            raise KeyFileRefused(f"key file {path} is larger than {limit} bytes")
        data = os.read(fd, limit + 1)
        if len(data) > limit:  # grew after the stat
            raise KeyFileRefused(f"key file {path} is larger than {limit} bytes")
        return data
    finally:
        os.close(fd)


# Keys read so far, by path, with the files' signatures when read: a fleet of 300 nodes on
# one key file parses it once per process, not once per connect.
_Signature = tuple[int, int, int] | None
_cache: dict[Path, tuple[_Signature, _Signature, ClientKey]] = {}


def _signature(path: Path) -> _Signature:
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def load_client_key(path: str) -> ClientKey:
    """A private key (and its -cert.pub beside it, if any), read size-capped; again only
    when either file changed. Blocking. Raises KeyFileRefused, or asyncssh.KeyImportError
    for a file that is not a key."""
    file = Path(path).expanduser()
    cert_file = file.with_name(file.name + "-cert.pub")
    signature, cert_signature = _signature(file), _signature(cert_file)
    cached = _cache.get(file)
    if signature is not None and cached is not None and cached[:2] == (signature, cert_signature):
        return cached[2]
    key = asyncssh.import_private_key(read_key_file(file))
    loaded: ClientKey = key
    if cert_file.exists():
        # A certificate that does not load: ssh too goes on with the bare key.
        with contextlib.suppress(KeyFileRefused, asyncssh.KeyImportError):
            loaded = key, asyncssh.import_certificate(read_key_file(cert_file))
    if signature is not None:
        _cache[file] = (signature, cert_signature, loaded)
    return loaded


def load_keys(required: str | None, optional: Sequence[str]) -> list[ClientKey]:
    """The ledger's key (must load) and the config's IdentityFiles (skipped when missing
    or encrypted: the agent may hold them). Blocking: call it off the loop."""
    keys = [load_client_key(required)] if required else []
    for path in optional:
        with contextlib.suppress(KeyFileRefused, asyncssh.KeyImportError):
            keys.append(load_client_key(path))
    return keys
