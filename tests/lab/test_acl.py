"""POSIX ACLs as the kernel's xattr: the codec (round trip, hostile bytes refused in words)
and a real file's ACL set and read back as the kernel keeps it."""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.lab import acl
from leases.lab.acl import Acl, AclError

perm = st.integers(0, 7)
ids = st.integers(0, acl.UNDEFINED_ID - 1)


@st.composite
def acls(draw: st.DrawFn) -> Acl:
    users = draw(st.dictionaries(ids, perm, max_size=6))
    groups = draw(st.dictionaries(ids, perm, max_size=6))
    named = bool(users or groups)
    mask = draw(perm) if named else draw(st.none() | perm)
    return Acl.of(draw(perm), draw(perm), draw(perm), users=users, groups=groups, mask=mask)


@given(acls())
def test_every_acl_reads_back_as_written(a: Acl) -> None:
    raw = acl.encode(a)
    assert acl.decode(raw) == a
    # The kernel's order: tags ascending, named ids ascending within their tag.
    entries = [struct.unpack_from("<HHI", raw, o) for o in range(4, len(raw), 8)]
    assert entries == sorted(entries, key=lambda e: (e[0], e[2] if e[0] in (2, 8) else -1))


@given(st.binary(max_size=200))
def test_any_bytes_decode_to_an_acl_or_an_acl_error(raw: bytes) -> None:
    try:
        decoded = acl.decode(raw)
    except AclError:
        return
    assert acl.encode(decoded) == raw  # what is accepted is exactly the kernel's form


def _entries(*items: tuple[int, int, int], version: int = 2) -> bytes:
    return struct.pack("<I", version) + b"".join(struct.pack("<HHI", *e) for e in items)


U = acl.UNDEFINED_ID


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "is not a header and whole entries"),
        (_entries((1, 6, U))[:-1], "is not a header and whole entries"),
        (_entries((1, 6, U), (4, 4, U), (0x20, 0, U), version=1), "version 1"),
        (_entries((1, 6, U), (4, 4, U), (0x40, 0, U)), "unknown entry tag 0x40"),
        (_entries((1, 9, U), (4, 4, U), (0x20, 0, U)), "permission 9"),
        (_entries((4, 4, U), (1, 6, U), (0x20, 0, U)), "out of order"),
        (_entries((1, 6, U), (1, 6, U), (4, 4, U), (0x20, 0, U)), "out of order or repeated"),
        (_entries((1, 6, U), (0x20, 0, U)), "no owning group entry"),
        (_entries((1, 6, U), (4, 4, U), (8, 6, 100), (0x20, 0, U)), "needs a mask"),
        (_entries((1, 6, U), (4, 4, U), (8, 6, U), (0x10, 6, U), (0x20, 0, U)), "without an id"),
        (b"\x02\x00\x00\x00" + b"\x00" * 8 * (acl.MAX_ENTRIES + 1), "more than an ACL"),
    ],
)
def test_a_malformed_attribute_is_refused_in_words(raw: bytes, words: str) -> None:
    with pytest.raises(AclError, match=words):
        acl.decode(raw, "ledger.db")


def test_the_mask_is_the_union_of_the_group_entries_and_shows_as_group_bits() -> None:
    a = Acl.of(6, 4, 0, groups={10: 6, 11: 2})
    assert a.mask == 6
    assert a.mode_bits() == 0o660
    assert a.effective(10) == 6 and a.effective(12) == 0
    assert Acl.of(6, 4, 0, groups={10: 6}, mask=4).effective(10) == 4


def test_a_real_file_takes_the_acl_and_its_mode_follows_the_mask(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    wanted = Acl.of(6, 4, 0, groups={os.getgid(): 6})
    fd = os.open(path, os.O_RDONLY)
    try:
        acl.write(fd, wanted)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o660
        assert acl.read(fd) == wanted
        assert acl.read(path) == wanted
        acl.write(fd, acl.from_mode(0o640))  # no extended ACL: removed, the mode set
        assert acl.read(path) is None
        assert acl.read(path, mode=0o640) == acl.from_mode(0o640)
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640
    finally:
        os.close(fd)


def test_a_forged_attribute_on_a_file_reads_as_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    # The kernel validates what it is given: a forged one can only be seen through a
    # user.* attribute, read with the same decoder.
    os.setxattr(path, "user.zuka", b"\x02\x00\x00\x00\x01\x00")
    with pytest.raises(AclError, match=r"f \(user.zuka\): 6 bytes"):
        acl.read(path, "user.zuka")
