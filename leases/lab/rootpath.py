"""Whether only root can change what a path holds: every folder from / to it root's and
writable by no one else (a sticky folder, as /tmp, keeps others from renaming root's
entries). What a lab's folder and a system unit's code must be."""

from __future__ import annotations

import pwd
import stat
from collections.abc import Iterator
from pathlib import Path

from leases.core.i18n import _


def ancestors(path: Path) -> Iterator[Path]:
    yield from reversed([path, *path.parents])


def changeable_by_others(path: Path) -> str | None:
    """Why a non-root user could change what path holds, or None. Follows the path's
    folders from /: each must be root's and writable by no one else (a sticky folder,
    /tmp, keeps others from renaming root's entries in it)."""
    for part in ancestors(path):
        try:
            info = part.lstat()
        except OSError as exc:
            return _("{part} cannot be looked at ({problem})").format(
                part=part, problem=exc.strerror
            )
        if stat.S_ISLNK(info.st_mode):
            target = part.resolve()
            why = changeable_by_others(target)
            if why is not None:
                return why
            continue
        if info.st_uid != 0:
            return _("{part} belongs to {user_name}, not root").format(
                part=part, user_name=user_name(info.st_uid)
            )
        sticky_dir = stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX
        if info.st_mode & 0o022 and not (sticky_dir and part != path):
            return _("{part} may be written by others (mode {mode:04o})").format(
                part=part, mode=stat.S_IMODE(info.st_mode)
            )
    return None


def user_name(uid: int) -> str:
    """A uid's user name, or `uid N` where it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
