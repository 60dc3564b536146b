"""A bearer token read from a file: the one check every token file of zuka's goes through
(a Prometheus's `--token-file`, `--metrics-token-file`).

The path comes from the user or from the ledger, which anyone able to write it may have
edited: the file is opened without following a symbolic link and without blocking (a FIFO
or a terminal named by mistake or on purpose never freezes the process), and is a token
only when it is a regular file owned by the user zuka runs as, readable by that user only
(mode 0600 or 0400), of at most MAX_TOKEN_BYTES, holding one printable word. So a stray
path (`~/.git-credentials`, `/etc/hostname`) is never sent to a server as a token unless
it has been made a private file of its own.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from leases.core.errors import InputError
from leases.core.i18n import N_, _

# A token longer than this is not a token (a file named by mistake).
MAX_TOKEN_BYTES = 4096
# What the callers' tokens guard (said with _ in the chmod hint): leases.metrics.listen's
# and leases.telemetry.promread's.
GUARDS = (N_("money figures"), N_("the Prometheus queries"))


def _who(mode: int) -> str:
    group, others = mode & 0o070, mode & 0o007
    return (
        _("its group and others") if group and others else _("its group") if group else _("others")
    )


def read_token(path: str | Path, field: str, guards: str) -> bytes:
    """The token in `path` (surrounding whitespace dropped; `~` expanded), or InputError
    naming the field and what is wrong. guards: what the token protects, for the chmod hint
    ("money figures", "the Prometheus queries")."""
    shown = str(path)
    where = Path(path).expanduser()
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(
                field, shown, _("cannot be read: it is a symbolic link (name the file itself)")
            ) from None
        raise InputError(
            field, shown, _("cannot be read: {strerror}").format(strerror=exc.strerror)
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                field, shown, _("is not a regular file (a FIFO, device or directory is no token)")
            )
        if st.st_uid != os.geteuid():
            raise InputError(
                field,
                shown,
                _("is owned by uid {st_uid}, not by the user zuka runs as").format(
                    st_uid=st.st_uid
                ),
            )
        if st.st_mode & 0o077:
            raise InputError(
                field,
                shown,
                _(
                    "is open to {st_mode} (mode {S_IMODE:04o}): the token guards {guards}; make it "
                    "the owner's only: chmod 600 {shown}"
                ).format(
                    st_mode=_who(st.st_mode),
                    S_IMODE=stat.S_IMODE(st.st_mode),
                    guards=_(guards),
                    shown=shown,
                ),
            )
        if st.st_size > MAX_TOKEN_BYTES:
            raise InputError(
                field,
                shown,
                _("is longer than {MAX_TOKEN_BYTES} bytes: not a token").format(
                    MAX_TOKEN_BYTES=MAX_TOKEN_BYTES
                ),
            )
        if st.st_size == 0:  # also what /proc and /sys files say of themselves
            raise InputError(field, shown, _("is empty (or not a file on a disk)"))
        try:
            raw = os.read(fd, MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise InputError(
                field, shown, _("cannot be read: {strerror}").format(strerror=exc.strerror)
            ) from None
    finally:
        os.close(fd)
    token = raw.strip()
    if len(raw) > MAX_TOKEN_BYTES:
        raise InputError(
            field,
            shown,
            _("is longer than {MAX_TOKEN_BYTES} bytes: not a token").format(
                MAX_TOKEN_BYTES=MAX_TOKEN_BYTES
            ),
        )
    if not token:
        raise InputError(field, shown, _("is empty"))
    if any(b < 0x21 or b > 0x7E for b in token):
        raise InputError(
            field,
            shown,
            _("holds a character a bearer token cannot carry: one token on one line"),
        )
    return token
