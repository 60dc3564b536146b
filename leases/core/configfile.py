"""Reading a small TOML config file safely: the one reader of the user's config, the
system config and the secrets file (leases.config.load, leases.lab.sysconfig).

Only a regular file of at most MAX_FILE_BYTES is read; O_NONBLOCK keeps a FIFO from
blocking the open, and fstat tells what was opened (no race with the path being swapped
after a check). The null device reads as an empty file: `--config /dev/null` is the usual
way to say "defaults". Every problem is a ConfigError naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible

# Bounds on what a config may hold, so that a wrong path (a FIFO, /dev/zero) or a hostile
# file costs a clear message, not a hang, gigabytes or a traceback.
MAX_FILE_BYTES = 1 << 20
# The mode a null device reads with: a private, empty file.
_NULL_MODE = stat.S_IFREG | 0o600


def read_text(path: Path) -> tuple[str, os.stat_result]:
    """The text of a config file and what fstat said of it (for the null device, a
    stat result of an empty private file of this user's). FileNotFoundError and
    PermissionError pass through (a missing layer is no layer; a secrets file this user may
    not read is skipped); every other problem is a ConfigError naming the file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as exc:
        raise ConfigError(
            [
                _("{path}: cannot be read ({strerror})").format(
                    path=path, strerror=visible(exc.strerror, 200)
                )
            ]
        ) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISCHR(info.st_mode) and _is_devnull(info):
            null = os.stat_result((_NULL_MODE, 0, 0, 1, os.geteuid(), os.getegid(), 0, 0, 0, 0))
            return "", null
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                [
                    _(
                        "{path}: not a regular file (a FIFO, a device or a directory);"
                        " a config must be a TOML file"
                    ).format(path=path)
                ]
            )
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(
                [
                    _("{path}: larger than {value} MiB; not a config").format(
                        path=path, value=MAX_FILE_BYTES >> 20
                    )
                ]
            )
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:  # the file may grow after fstat
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                [
                    _("{path}: larger than {value} MiB; not a config").format(
                        path=path, value=MAX_FILE_BYTES >> 20
                    )
                ]
            )
        text = b"".join(chunks).decode("utf-8")
    except OSError as exc:
        raise ConfigError(
            [
                _("{path}: cannot be read ({strerror})").format(
                    path=path, strerror=visible(exc.strerror, 200)
                )
            ]
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [_("{path}: not UTF-8 text ({exc})").format(path=path, exc=visible(exc, 200))]
        ) from None
    finally:
        os.close(fd)
    return text, info


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """The TOML of a config file, or ConfigError naming the file."""
    import tomllib  # only when there is a file to read (a cold `zuka poll` has none)

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            [_("{path}: not valid TOML: {exc}").format(path=path, exc=visible(exc, 200))]
        ) from None
    except RecursionError:
        raise ConfigError(
            [_("{path}: not usable TOML: values nested too deeply").format(path=path)]
        ) from None


def _is_devnull(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(null.st_mode) and info.st_rdev == null.st_rdev


def is_devnull(path: Path) -> bool:
    """Whether a path names the null device (how a layer is turned off)."""
    try:
        return _is_devnull(os.stat(path))
    except OSError:
        return False
