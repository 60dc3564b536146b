"""Whether a system service may run this zuka: the code a unit runs as the service user
(who owns the lab's ledger and reads the collector's key) must be code only root can
change, and the service user must be able to reach it.

A venv in a member's home, a checkout a member owns, or an interpreter in a folder others
may write would hand the service user's rights (and the key to every node) to whoever can
change those files: `zuka service install --system` refuses them, naming each."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Iterable
from pathlib import Path

from leases.core.i18n import _
from leases.lab.rootpath import ancestors, changeable_by_others, user_name
from leases.service.units import Runtime

# The packages whose every file the unit runs (besides the interpreter's own library).
PACKAGES = ("leases", "tui")


def unreachable(path: Path, user: str) -> str | None:
    """Why the service user could not reach path (a folder it may not pass), or None."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None  # said elsewhere: the user does not exist yet
    groups = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if user in g.gr_mem}
    for part in list(ancestors(path.resolve()))[:-1]:
        try:
            info = part.stat()
        except OSError:
            continue
        if info.st_uid == entry.pw_uid:
            ok = info.st_mode & stat.S_IXUSR
        elif info.st_gid in groups:
            ok = info.st_mode & stat.S_IXGRP
        else:
            ok = info.st_mode & stat.S_IXOTH
        if not ok:
            return _("{user} may not pass {part} (mode {mode:04o}) on the way to {path}").format(
                user=user, part=part, mode=stat.S_IMODE(info.st_mode), path=path
            )
    return None


def problems(runtime: Runtime, user: str) -> list[str]:
    """Everything that keeps a system unit from running this runtime safely."""
    found: list[str] = []
    paths: list[Path] = [runtime.python, *runtime.needs]
    if runtime.pythonpath is not None:
        paths.append(runtime.pythonpath)
    for path in dict.fromkeys(paths):
        why = changeable_by_others(path)
        if why is not None:
            found.append(f"{path}: {why}")
        far = unreachable(path, user)
        if far is not None:
            found.append(far)
    for root in _package_roots(runtime):
        found += [f"{p}: {w}" for p, w in _loose_files(root)]
    return found


def _package_roots(runtime: Runtime) -> Iterable[Path]:
    import leases

    base = Path(leases.__file__).resolve().parents[1]
    return [base / name for name in PACKAGES]


def _loose_files(folder: Path, limit: int = 20) -> list[tuple[Path, str]]:
    """Files and folders under a package that someone but root owns or may write."""
    loose: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if info.st_uid != 0:
                loose.append(
                    (
                        path,
                        _("belongs to {user_name}, not root").format(
                            user_name=user_name(info.st_uid)
                        ),
                    )
                )
            elif info.st_mode & 0o022:
                loose.append(
                    (
                        path,
                        _("may be written by others ({mode:04o})").format(
                            mode=stat.S_IMODE(info.st_mode)
                        ),
                    )
                )
            if len(loose) >= limit:
                return loose
    return loose
