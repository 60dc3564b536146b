"""A ledger in a lab's folder (leases.lab): the one-user rule (0600, a 0700 folder) gives
way to the lab's groups. An ordinary open never creates nor chmods such a ledger; a write
this user may not do is refused before anything is written, in words naming the group it
needs; root reads the ledger read-only (leases.ledger.files: a reader's close leaves the
-wal and -shm, which only root may make in the lab's folder), and its writes are followed
by them made again with the lab's perms; a member finding one missing waits a moment for
that before refusing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from leases.core.errors import READ_ONLY
from leases.core.i18n import N_, _
from leases.lab import perms
from leases.lab.layout import Lab, LabError, find_lab
from leases.lab.roles import Role, me, refusal
from leases.ledger.paths import companion, offboard_lock_path

WRITE_ACTION = N_("changing the ledger")
READ_ACTION = N_("reading the ledger")


def _can(path: Path, mode: int) -> bool:
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def in_lab(path: Path | None) -> bool:
    """Whether a ledger's folder is a lab's: its readers open it read-only where they may
    not write (Ledger.open(readonly=True) opens it for writing where they may)."""
    return path is not None and find_lab(path) is not None


def may_write(path: Path) -> bool:
    """Whether this user may write a lab's ledger (an editor) rather than only read it."""
    return _can(path, os.W_OK)


def check_readable(lab: Lab, path: Path, action: str | None) -> None:
    """Refuse, naming the viewers group, a member whose groups do not let them read the
    ledger (a group taken away, a login older than the group it was given)."""
    if path.exists() and not _can(path, os.R_OK):
        raise LabError(refusal(lab, Role.VIEW, action or _(READ_ACTION), me()))


def check_writable(lab: Lab, path: Path, action: str | None) -> None:
    """Refuse, in the lab's words, a write open this user cannot carry through."""
    if not path.exists():
        raise LabError(
            _(
                "{path}: the lab's ledger is missing: the lab's admin runs `sudo zuka lab init "
                "--folder {folder}`"
            ).format(path=path, folder=lab.folder)
        )
    if os.geteuid() == 0:
        if not _can(path, os.W_OK):
            raise LabError(_("{path}: {problem}").format(path=path, problem=_(READ_ONLY)))
        return
    if not _can(path, os.W_OK):
        raise LabError(refusal(lab, Role.EDIT, action or _(WRITE_ACTION), me()))
    refuse_missing_companions(path)
    for suffix in ("-wal", "-shm"):
        other = companion(path, suffix)
        if not _can(other, os.R_OK | os.W_OK):
            raise LabError(
                _(
                    "{other}: this user may write the ledger but not its {suffix} file: the lab's "
                    "admin runs `sudo zuka lab repair`"
                ).format(other=other, suffix=suffix)
            )


def check_offboarder(lab: Lab | None, ledger_path: Path | None, action: str) -> None:
    """Refuse offboarding, before anything is written or any node touched, to a member
    not in the lab's offboarding group: the offboarding lock (writable by that group
    alone) is what the OS checks."""
    if lab is None or ledger_path is None or os.geteuid() == 0:
        return
    if not _can(offboard_lock_path(ledger_path), os.W_OK):
        raise LabError(refusal(lab, Role.OFFBOARD, action, me()))


def poller_refusal(ledger_path: Path) -> str:
    """Why this user may not take the poller's lock: in a lab, the service collects."""
    lab = find_lab(ledger_path)
    if lab is None:
        return _("this user may not write the poller's lock beside {path}").format(path=ledger_path)
    return _(
        "in the lab at {folder} only its service user, {user}, collects"
        " (the zuka-collect service); every dashboard reads what it writes"
    ).format(folder=lab.folder, user=lab.service_user)


# How long a member waits for a missing -wal or -shm to come back: root's own write
# (a `sudo zuka` command) lets SQLite remove them at its close and makes them again
# straight after (after_root_use), which takes milliseconds.
COMPANION_WAIT_S = 2.0


def refuse_missing_companions(
    path: Path,
    wait_s: float = COMPANION_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """A lab ledger's -wal or -shm gone and not back within wait_s (root's rm, or a root
    process killed at its close): only root may make them again."""
    deadline = clock() + wait_s
    while True:
        missing = [companion(path, s) for s in ("-wal", "-shm") if not companion(path, s).exists()]
        if not missing:
            return
        if clock() >= deadline:
            raise LabError(
                _(
                    "{other}: is missing, and only root may make it in the lab's folder: the lab's "
                    "admin runs `sudo zuka lab repair`"
                ).format(other=missing[0])
            )
        sleep(0.02)


def after_root_use(lab: Lab) -> None:
    """As root, the ledger's -wal and -shm made again (SQLite removes them at the last
    close) or set right (made by SQLite with the ledger's mode, not its ACL). Others may
    not and need not: a failure here is for `zuka lab check` to report, not a close's."""
    if os.geteuid() != 0:
        return
    with contextlib.suppress(OSError, LabError):
        perms.companions(lab)
