"""POSIX access ACLs as Linux keeps them: the `system.posix_acl_access` extended attribute
(and `system.posix_acl_default` on a folder: what files made in it start with).

The format (Linux's posix_acl_xattr, version 2, little-endian): a u32 version, then one
entry of 8 bytes each: u16 tag, u16 permission bits (r 4, w 2, x 1), u32 id (a uid for a
named user, a gid for a named group, 0xFFFFFFFF for the others). The kernel wants the
entries sorted by tag, then id, and exactly one owner, owning group and other entry, with
a mask whenever a named user or group is there. Encoding and decoding are pure; what a file
holds is read as untrusted: a malformed attribute is an AclError naming the file, never a
crash. No setfacl needed (the `acl` package may be missing).
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from leases.core.i18n import _
from leases.lab.layout import LabError

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"
VERSION = 2
USER_OBJ = 0x01
USER = 0x02
GROUP_OBJ = 0x04
GROUP = 0x08
MASK = 0x10
OTHER = 0x20
UNDEFINED_ID = 0xFFFFFFFF
_TAGS = (USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER)
_HEADER = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")
# More entries than any lab needs, and than ext4 keeps in one block: a bigger attribute is
# refused unread.
MAX_ENTRIES = 512
MAX_BYTES = _HEADER.size + MAX_ENTRIES * _ENTRY.size


class AclError(LabError):
    """An ACL that is not one: a malformed attribute, or one the kernel would refuse."""


def _perm(value: int, what: str) -> int:
    if not 0 <= value <= 7:
        raise AclError(
            _("{what}: permission {value} is not 0 to 7 (rwx bits)").format(what=what, value=value)
        )
    return value


@dataclass(frozen=True)
class Acl:
    """One access ACL: the owner's, owning group's and others' bits as in a mode, named
    users and groups by id, and the mask (None: no mask, allowed only with no named
    entries, the ACL then no more than a mode)."""

    owner: int
    group: int
    other: int
    mask: int | None = None
    users: tuple[tuple[int, int], ...] = field(default=())  # (uid, perm), sorted by uid
    groups: tuple[tuple[int, int], ...] = field(default=())  # (gid, perm), sorted by gid

    def __post_init__(self) -> None:
        for what, value in (("owner", self.owner), ("group", self.group), ("other", self.other)):
            _perm(value, what)
        if self.mask is not None:
            _perm(self.mask, "mask")
        for kind, named in (("user", self.users), ("group", self.groups)):
            ids = [i for i, _perm in named]
            if ids != sorted(set(ids)):
                raise AclError(
                    _("named {kind}s: ids must be sorted and each once, not {ids}").format(
                        kind=kind, ids=ids
                    )
                )
            for i, perm in named:
                if not 0 <= i < UNDEFINED_ID:
                    raise AclError(_("named {kind}: id {i} is out of range").format(kind=kind, i=i))
                _perm(perm, f"{kind} {i}")
        if (self.users or self.groups) and self.mask is None:
            raise AclError(_("an ACL with named users or groups needs a mask"))

    @classmethod
    def of(
        cls,
        owner: int,
        group: int,
        other: int,
        *,
        users: dict[int, int] | None = None,
        groups: dict[int, int] | None = None,
        mask: int | None = None,
    ) -> Acl:
        """An ACL from mappings; the mask, when not given and needed, is the union of
        the owning group's and named entries' bits (as setfacl computes it)."""
        u = tuple(sorted((users or {}).items()))
        g = tuple(sorted((groups or {}).items()))
        if mask is None and (u or g):
            mask = group
            for _id, perm in (*u, *g):
                mask |= perm
        return cls(owner, group, other, mask, u, g)

    @property
    def extended(self) -> bool:
        """Whether it says more than a mode can (named entries or a mask)."""
        return self.mask is not None

    def mode_bits(self) -> int:
        """The permission bits of the mode the kernel shows for it: the group's bits are
        the mask's when there is one."""
        group = self.mask if self.mask is not None else self.group
        return (self.owner << 6) | (group << 3) | self.other

    def effective(self, gid: int) -> int:
        """What a member of this named group (only) gets: its bits within the mask."""
        for i, perm in self.groups:
            if i == gid:
                return perm & (self.mask if self.mask is not None else 7)
        return 0


def encode(acl: Acl) -> bytes:
    """The xattr value the kernel takes for this ACL (entries in its order)."""
    parts = [_HEADER.pack(VERSION), _ENTRY.pack(USER_OBJ, acl.owner, UNDEFINED_ID)]
    parts += [_ENTRY.pack(USER, perm, uid) for uid, perm in acl.users]
    parts.append(_ENTRY.pack(GROUP_OBJ, acl.group, UNDEFINED_ID))
    parts += [_ENTRY.pack(GROUP, perm, gid) for gid, perm in acl.groups]
    if acl.mask is not None:
        parts.append(_ENTRY.pack(MASK, acl.mask, UNDEFINED_ID))
    parts.append(_ENTRY.pack(OTHER, acl.other, UNDEFINED_ID))
    return b"".join(parts)


def decode(raw: bytes, what: str = "ACL") -> Acl:
    """The ACL in an xattr value; AclError naming what when it is malformed."""
    if len(raw) > MAX_BYTES:
        raise AclError(
            _("{what}: {count} bytes, more than an ACL of {max_entries} entries").format(
                what=what, count=len(raw), max_entries=MAX_ENTRIES
            )
        )
    if len(raw) < _HEADER.size or (len(raw) - _HEADER.size) % _ENTRY.size:
        raise AclError(
            _("{what}: {count} bytes is not a header and whole entries").format(
                what=what, count=len(raw)
            )
        )
    (version,) = _HEADER.unpack_from(raw)
    if version != VERSION:
        raise AclError(
            _("{what}: version {version}, not {version2}").format(
                what=what, version=version, version2=VERSION
            )
        )
    singles: dict[int, int] = {}
    users: list[tuple[int, int]] = []
    groups: list[tuple[int, int]] = []
    last = (0, -1)
    for offset in range(_HEADER.size, len(raw), _ENTRY.size):
        tag, perm, ident = _ENTRY.unpack_from(raw, offset)
        if tag not in _TAGS:
            raise AclError(_("{what}: unknown entry tag {tag:#x}").format(what=what, tag=tag))
        if perm > 7:
            raise AclError(
                _("{what}: permission {perm} is not 0 to 7").format(what=what, perm=perm)
            )
        key = (tag, ident if tag in (USER, GROUP) else -1)
        if key <= last:
            raise AclError(
                _("{what}: entries out of order or repeated (tag {tag:#x})").format(
                    what=what, tag=tag
                )
            )
        last = key
        if tag == USER:
            users.append((ident, perm))
        elif tag == GROUP:
            groups.append((ident, perm))
        else:
            singles[tag] = perm
    for tag, name in ((USER_OBJ, "owner"), (GROUP_OBJ, "owning group"), (OTHER, "other")):
        if tag not in singles:
            raise AclError(_("{what}: no {name} entry").format(what=what, name=name))
    for uid, _perm in users:
        if uid == UNDEFINED_ID:
            raise AclError(_("{what}: a named user without an id").format(what=what))
    for gid, _perm in groups:
        if gid == UNDEFINED_ID:
            raise AclError(_("{what}: a named group without an id").format(what=what))
    try:
        return Acl(
            singles[USER_OBJ],
            singles[GROUP_OBJ],
            singles[OTHER],
            singles.get(MASK),
            tuple(users),
            tuple(groups),
        )
    except AclError as exc:
        raise AclError(f"{what}: {exc}") from None


def from_mode(mode: int) -> Acl:
    """The ACL a file without an extended one has: its mode's bits."""
    return Acl((mode >> 6) & 7, (mode >> 3) & 7, mode & 7)


def read(target: Path | int, name: str = ACCESS, *, mode: int | None = None) -> Acl | None:
    """The ACL of a file (a path, not followed if a symlink; or an open descriptor). None
    where it has no extended one and mode is not given; with mode, the mode's ACL then."""
    what = f"{target} ({name})" if isinstance(target, Path) else name
    try:
        if isinstance(target, int):
            raw = os.getxattr(target, name)
        else:
            raw = os.getxattr(target, name, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None if mode is None or name != ACCESS else from_mode(mode)
        raise
    return decode(raw, what)


def write(fd: int, acl: Acl | None, name: str = ACCESS) -> None:
    """Set an open file's ACL (None: remove the extended one, the mode alone then). The
    kernel sets the mode's group bits to the mask. Owner or root only."""
    if acl is None or (name == ACCESS and not acl.extended):
        try:
            os.removexattr(fd, name)
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
        if acl is not None:
            os.fchmod(fd, acl.mode_bits() | (os.fstat(fd).st_mode & 0o7000))
        return
    os.setxattr(fd, name, encode(acl))
