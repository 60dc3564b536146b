"""What every path of a lab should be (kind, owner, group, mode, ACL), what is wrong with
them (`check`: each finding with the fix a root admin runs), and setting them (`apply`, as
root: missing companions made, each file opened without following a link and changed
through its descriptor, so a link or a swapped file is refused, never followed).

The layout (see leases.lab.layout): the folder root:VIEWERS 0750, its default ACL the
ledger's so that a file SQLite makes in it (root's -wal) starts right; the marker and the
collector's public key root:root 0644; the ledger, -wal, -shm and known_hosts owned by the
service user, group VIEWERS, ACL VIEWERS r, EDITORS rw, OFFBOARD rw, others nothing; the
poller's lock the service user's, VIEWERS r; the offboarding lock OFFBOARD rw, VIEWERS r;
faults/ the service user's, VIEWERS r-x; collector/ the service user's alone.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from leases.core.i18n import _
from leases.lab import acl
from leases.lab.acl import Acl
from leases.lab.layout import LEDGER, Lab, LabError

COLLECTOR_PUB = "collector.pub"
TRUST_STORE = "known_hosts"
# SQLite's files and zuka's own beside the ledger (leases.ledger.paths names them the same).
WAL = LEDGER + "-wal"
SHM = LEDGER + "-shm"
POLLER_LOCK = LEDGER + ".poller.lock"
OFFBOARD_LOCK = LEDGER + ".offboard.lock"
# Companions apply() makes empty when missing (the ledger itself only `zuka lab init` makes).
COMPANIONS = (WAL, SHM, TRUST_STORE, POLLER_LOCK, OFFBOARD_LOCK)


@dataclass(frozen=True)
class Ids:
    """Uid and gid lookups (injected in tests; pwd and grp by default)."""

    uid: Callable[[str], int]
    gid: Callable[[str], int]

    @classmethod
    def system(cls) -> Ids:
        return cls(uid=_uid, gid=_gid)


def _uid(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise LabError(
            _("no user {name!r} on this machine: sudo zuka lab init makes it").format(name=name)
        ) from None


def _gid(name: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise LabError(
            _("no group {name!r} on this machine: sudo zuka lab init makes it").format(name=name)
        ) from None


def user_group(name: str) -> str:
    """The name of a user's primary group."""
    gid = pwd.getpwnam(name).pw_gid
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


@dataclass(frozen=True)
class Want:
    """What one path of the lab should be."""

    path: Path
    directory: bool
    owner: str
    group: str
    acl: Acl  # the mode's bits when not extended
    default_acl: Acl | None = None  # a folder's: what files made in it start with
    make: bool = True  # apply() makes it when missing

    @property
    def mode(self) -> int:
        return self.acl.mode_bits()


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a lab path: what, and the command that fixes it."""

    path: Path
    problem: str
    fix: str

    def line(self) -> str:
        return _("{path}: {problem}; fix: {fix}").format(
            path=self.path, problem=self.problem, fix=self.fix
        )


def shared_acl(lab: Lab, ids: Ids) -> Acl:
    """The ledger's (and its companions', and the trust store's) ACL: the owner (the
    service user) and editors and offboarders write, viewers read, others nothing."""
    rw = 6
    groups = {ids.gid(lab.editors): rw, ids.gid(lab.offboard): rw}
    return Acl.of(rw, 4, 0, groups=groups)


def wants(lab: Lab, ids: Ids | None = None) -> list[Want]:
    """Every path of the lab and what it should be, the folder first."""
    ids = ids or Ids.system()
    f = lab.folder
    svc, viewers = lab.service_user, lab.viewers
    shared = shared_acl(lab, ids)
    svc_group = user_group(svc) if _exists_user(svc) else viewers
    # The locks: only who may take one may open it. flock() needs no write access, so a
    # lock a viewer could open, a viewer could hold: the collector or offboarding stopped.
    offboard_lock = acl.from_mode(0o660)
    return [
        Want(f, True, "root", viewers, acl.from_mode(0o750), default_acl=shared),
        Want(lab.marker, False, "root", "root", acl.from_mode(0o644), make=False),
        Want(f / LEDGER, False, svc, viewers, shared, make=False),
        *(Want(f / name, False, svc, viewers, shared) for name in (WAL, SHM, TRUST_STORE)),
        Want(f / POLLER_LOCK, False, svc, viewers, acl.from_mode(0o600)),
        Want(f / OFFBOARD_LOCK, False, "root", lab.offboard, offboard_lock),
        Want(lab.faults_dir, True, svc, viewers, acl.from_mode(0o750)),
        Want(lab.collector_key_dir, True, svc, svc_group, acl.from_mode(0o700)),
        Want(lab.collector_key, False, svc, svc_group, acl.from_mode(0o600), make=False),
        Want(
            lab.collector_key.with_name(lab.collector_key.name + ".pub"),
            False,
            svc,
            svc_group,
            acl.from_mode(0o644),
            make=False,
        ),
        Want(f / COLLECTOR_PUB, False, "root", "root", acl.from_mode(0o644), make=False),
    ]


def _exists_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _name_of_uid(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _name_of_gid(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


REPAIR = "sudo zuka lab repair"


def check_one(want: Want, ids: Ids) -> list[Finding]:
    """What is wrong with one path (nothing followed); a path this user may not look at
    is not judged."""
    p = want.path
    try:
        info = os.lstat(p)
    except FileNotFoundError:
        fix = REPAIR if want.make else _("sudo zuka lab init (it makes it)")
        return [Finding(p, _("is missing"), fix)]
    except PermissionError:
        return []
    kind_ok = stat.S_ISDIR(info.st_mode) if want.directory else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        what = _("is a symlink") if stat.S_ISLNK(info.st_mode) else _("is not a regular file")
        if want.directory:
            what = _("is a symlink") if stat.S_ISLNK(info.st_mode) else _("is not a folder")
        return [Finding(p, what, f"sudo rm {p} && {REPAIR}")]
    found: list[Finding] = []
    if not want.directory and info.st_nlink != 1:
        links = _("has {n} hard links (another name for some other file?)").format(n=info.st_nlink)
        return [Finding(p, links, f"sudo rm {p} && {REPAIR}")]
    uid, gid = ids.uid(want.owner), ids.gid(want.group)
    if (info.st_uid, info.st_gid) != (uid, gid):
        found.append(
            Finding(
                p,
                _("is {have}, should be {want}").format(
                    have=f"{_name_of_uid(info.st_uid)}:{_name_of_gid(info.st_gid)}",
                    want=f"{want.owner}:{want.group}",
                ),
                f"sudo chown {want.owner}:{want.group} {p}",
            )
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode != want.mode:
        found.append(
            Finding(
                p,
                _("mode {have}, should be {want}").format(
                    have=f"{mode:04o}", want=f"{want.mode:04o}"
                ),
                f"sudo chmod {want.mode:04o} {p}",
            )
        )
    try:
        have = acl.read(p, mode=mode)
        if have != want.acl:
            found.append(
                Finding(
                    p,
                    _("ACL {have}, should be {want}").format(
                        have=_acl_words(have), want=_acl_words(want.acl)
                    ),
                    REPAIR,
                )
            )
        if want.directory:
            default = acl.read(p, acl.DEFAULT)
            if default != want.default_acl:
                have_words, want_words = _acl_words(default), _acl_words(want.default_acl)
                problem = _("default ACL {have}, should be {want}").format(
                    have=have_words, want=want_words
                )
                found.append(Finding(p, problem, REPAIR))
    except acl.AclError as exc:
        found.append(Finding(p, str(exc), REPAIR))
    except PermissionError:
        pass
    return found


def _acl_words(a: Acl | None) -> str:
    if a is None:
        return _("none")
    parts = [f"user::{_rwx(a.owner)}", f"group::{_rwx(a.group)}"]
    parts += [f"group:{_name_of_gid(g)}:{_rwx(p)}" for g, p in a.groups]
    parts += [f"user:{_name_of_uid(u)}:{_rwx(p)}" for u, p in a.users]
    if a.mask is not None:
        parts.append(f"mask::{_rwx(a.mask)}")
    parts.append(f"other::{_rwx(a.other)}")
    return ",".join(parts)


def _rwx(perm: int) -> str:
    return "".join(c if perm & bit else "-" for c, bit in (("r", 4), ("w", 2), ("x", 1)))


def check(lab: Lab, ids: Ids | None = None) -> list[Finding]:
    """Everything wrong with the lab's paths (any user may ask; what it may not see is
    not judged). A missing user or group is a finding too."""
    ids = ids or Ids.system()
    try:
        all_wants = wants(lab, ids)
    except LabError as exc:
        return [Finding(lab.folder, str(exc), "sudo zuka lab init")]
    found: list[Finding] = []
    for want in all_wants:
        try:
            found += check_one(want, ids)
        except LabError as exc:
            found.append(Finding(want.path, str(exc), "sudo zuka lab init"))
    return found


def unseen(lab: Lab) -> list[Path]:
    """The lab's paths this user may not look at (check does not judge them)."""
    hidden: list[Path] = []
    for want in wants(lab):
        try:
            os.lstat(want.path)
        except PermissionError:
            hidden.append(want.path)
        except OSError:
            continue
    return hidden


def _open_nofollow(want: Want, create: bool) -> int | None:
    """The path opened without following a link (None: missing and not to be made);
    LabError for a link or a thing of the wrong kind."""
    p = want.path
    if want.directory:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(p, 0o700)
        flags = os.O_RDONLY | os.O_DIRECTORY
    else:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
        if create:
            flags |= os.O_CREAT
    try:
        fd = os.open(p, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LabError(
                _("{p}: is a symlink or not a folder: refused (sudo rm {p})").format(p=p)
            ) from None
        raise
    info = os.fstat(fd)
    ok = stat.S_ISDIR(info.st_mode) if want.directory else stat.S_ISREG(info.st_mode)
    if not ok:
        os.close(fd)
        said = (
            _("{path}: is not a folder: refused")
            if want.directory
            else _("{path}: is not a regular file: refused")
        )
        raise LabError(said.format(path=p))
    if not want.directory and info.st_nlink != 1:
        # A hard link made by the owner of a folder (the service user's collector/) to a
        # file of root's: chown-ing it would give that file away.
        os.close(fd)
        raise LabError(
            _("{p}: has {links} hard links: refused (sudo rm {p})").format(p=p, links=info.st_nlink)
        )
    return fd


def apply_one(want: Want, ids: Ids) -> list[str]:
    """Set one path as wanted (root); the changes made, in words."""
    before = check_one(want, ids)
    if not before:
        return []
    fd = _open_nofollow(want, create=want.make)
    if fd is None:
        return []
    try:
        os.fchown(fd, ids.uid(want.owner), ids.gid(want.group))
        os.fchmod(fd, want.mode)
        acl.write(fd, want.acl)
        if want.directory:
            acl.write(fd, want.default_acl, acl.DEFAULT)
    finally:
        os.close(fd)
    return [f.line() for f in before]


def apply(lab: Lab, ids: Ids | None = None) -> list[str]:
    """Every path of the lab set as it should be (root only), companions made where
    missing; what was wrong and is now set, in words (empty: nothing to change)."""
    ids = ids or Ids.system()
    done: list[str] = []
    for want in wants(lab, ids):
        done += apply_one(want, ids)
    return done


def companions(lab: Lab, ids: Ids | None = None) -> list[str]:
    """The ledger's SQLite companions made again, with the lab's perms, where root's own
    use of the ledger removed (or made) them."""
    ids = ids or Ids.system()
    names = {lab.folder / WAL, lab.folder / SHM}
    done: list[str] = []
    for want in wants(lab, ids):
        if want.path in names:
            done += apply_one(want, ids)
    return done
