"""Where a lab install keeps its files, and the marker that makes a ledger folder a lab's.

A lab folder (/var/lib/zuka unless `zuka lab init` is told otherwise) is root's, mode 0750,
its group the lab's viewers group: only the lab's members may enter it, and nobody but root
creates or deletes a file in it. So SQLite's -wal and -shm files, made once by `zuka lab
init`, stay there for read-only readers (a WAL reader needs the -shm file to exist), and no
member can swap a file for another. What each member may do with each file is set by its
owner, group and POSIX ACL (leases.lab.perms): the lab's viewers read; editors, and the
offboarding group, write the ledger; only the service user reads its own SSH key.

The marker, `zuka-lab.toml` in that folder (not `lab.toml`: a user's config beside their
ledger may well be called that), names the groups and the service user. It is read as
untrusted all the same: it counts only when root owns it and nobody else may write it.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from leases.core.errors import LedgerError
from leases.core.i18n import _

DEFAULT_FOLDER = Path("/var/lib/zuka")
MARKER = "zuka-lab.toml"
LEDGER = "ledger.db"
# The largest marker read: it holds four names.
MAX_MARKER_BYTES = 4096
# POSIX portable user and group names, as useradd accepts them by default.
_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


class LabError(LedgerError):
    """A lab folder that cannot be trusted or used: its marker, owner or modes are wrong."""


@dataclass(frozen=True)
class Lab:
    """One lab install: its folder and the Unix names that say who may do what."""

    folder: Path
    viewers: str = "zuka"
    editors: str = "zuka-editors"
    offboard: str = "zuka-offboard"
    service_user: str = "zuka"

    @property
    def marker(self) -> Path:
        return self.folder / MARKER

    @property
    def ledger(self) -> Path:
        return self.folder / LEDGER

    @property
    def collector_key_dir(self) -> Path:
        """The service user's own folder (0700): the collector's SSH key lives here."""
        return self.folder / "collector"

    @property
    def collector_key(self) -> Path:
        return self.collector_key_dir / "id_ed25519"

    @property
    def faults_dir(self) -> Path:
        """The collector's fault log and its rotations (the service user writes here)."""
        return self.folder / "faults"

    def marker_text(self) -> str:
        return (
            "# zuka lab install: who may do what with the ledger in this folder.\n"
            "# Written by `zuka lab init`; root's, mode 0644.\n"
            f'viewers = "{self.viewers}"\n'
            f'editors = "{self.editors}"\n'
            f'offboard = "{self.offboard}"\n'
            f'service_user = "{self.service_user}"\n'
        )


def check_name(what: str, name: str) -> str:
    """A user or group name as useradd and groupadd take it by default, else LabError."""
    if not _NAME.fullmatch(name):
        raise LabError(
            _(
                "{what}: {name!r} is not a usable Unix name (lower-case letters, digits, "
                "_ and -, starting with a letter or _, at most 32)"
            ).format(what=what, name=name)
        )
    return name


def outsider(folder: Path) -> str:
    """The words for a user who may not enter a lab's folder: the folder's group (the
    lab's viewers, which the marker inside would name) is what they need."""
    try:
        gid = os.stat(folder).st_gid
        group = grp.getgrgid(gid).gr_name
    except (OSError, KeyError):
        group = _("the lab's viewers group")
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = str(os.geteuid())
    return _(
        "reading the ledger needs group {group} in this lab ({folder}), and "
        "{user} is not in it: ask the lab's admin to run `sudo zuka lab add-user "
        "{user} --role view`, then log in again"
    ).format(group=group, folder=folder, user=user)


def find_lab(ledger_path: Path) -> Lab | None:
    """The lab whose folder holds this ledger, or None for a one-user ledger (no marker
    beside it). A marker that root does not own, that others may write, or that does not
    parse is refused with LabError: a member must not be able to make a folder a lab's
    (or change its groups) by writing a file."""
    folder = ledger_path.parent
    marker = folder / MARKER
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except (FileNotFoundError, NotADirectoryError):
        return None  # no marker (or no such folder): a one-user ledger's own checks say more
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return None
        if isinstance(exc, PermissionError):
            raise LabError(outsider(folder)) from None
        raise LabError(
            _("{marker}: cannot be read ({problem})").format(marker=marker, problem=exc.strerror)
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LabError(
                _("{marker}: is not a regular file, so not a lab's marker").format(marker=marker)
            )
        if info.st_uid != 0 or info.st_mode & 0o022:
            raise LabError(
                _(
                    "{marker}: is not root's alone (owner uid {uid}, mode {mode:04o}), so "
                    "it is not trusted to say who may do what: as root, chown root:root "
                    "{marker} && chmod 644 {marker}"
                ).format(marker=marker, uid=info.st_uid, mode=stat.S_IMODE(info.st_mode))
            )
        raw = os.read(fd, MAX_MARKER_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_MARKER_BYTES:
        raise LabError(
            _("{marker}: is larger than a lab's marker ({max_marker_bytes} bytes)").format(
                marker=marker, max_marker_bytes=MAX_MARKER_BYTES
            )
        )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LabError(
            _("{marker}: is not valid TOML ({problem})").format(marker=marker, problem=exc)
        ) from None
    names: dict[str, str] = {}
    for key in ("viewers", "editors", "offboard", "service_user"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise LabError(
                _("{marker}: {key} must be a name in quotes").format(marker=marker, key=key)
            )
        names[key] = check_name(f"{marker}: {key}", value)
    unknown = sorted(set(data) - {"viewers", "editors", "offboard", "service_user"})
    if unknown:
        raise LabError(
            _("{marker}: unknown keys {map}").format(
                marker=marker, map=", ".join(map(repr, unknown))
            )
        )
    return Lab(folder=folder, **names)
