"""Where unit files go and how they are written: atomically (a temporary file beside the
unit, then a rename), and never over a file zuka did not write (its first line, the marker)
unless told to."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.service.units import MARKER, Mode

# The largest unit file read back (zuka's are under 3 KB).
MAX_UNIT_BYTES = 64 * 1024


def units_dir(mode: Mode, root: Path | None, home: Path, env: dict[str, str]) -> Path:
    """The folder systemd reads this mode's units from, under root when one is given (as
    `systemctl --root` does). A user's: $XDG_CONFIG_HOME/systemd/user, else
    ~/.config/systemd/user."""
    if mode is Mode.SYSTEM:
        where = Path("/etc/systemd/system")
    else:
        config = env.get("XDG_CONFIG_HOME") or ""
        base = Path(config) if config.startswith("/") else home / ".config"
        where = base / "systemd" / "user"
    return where if root is None else root / where.relative_to("/")


def is_ours(path: Path) -> bool | None:
    """Whether the file at path was written by zuka (its first line is the marker); None
    when there is no file."""
    try:
        with path.open("rb") as f:
            head = f.read(len(MARKER.encode()) + 1)
    except FileNotFoundError:
        return None
    return head.rstrip(b"\r\n") == MARKER.encode()


def refuse_foreign(path: Path, force: bool) -> None:
    """A file there that zuka did not write is kept, unless --force."""
    if not force and is_ours(path) is False:
        raise InputError(
            "unit",
            str(path),
            _(
                "exists and was not written by zuka (no marker line): kept; move it "
                "away, or give --force to replace it"
            ),
        )


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """text at path, whole or not at all: a temporary file in the same folder, flushed to
    disk, then renamed over path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_unit(path: Path) -> str | None:
    """A unit file's text (bounded), or None when there is none."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_UNIT_BYTES + 1)
    except FileNotFoundError:
        return None
    return raw[:MAX_UNIT_BYTES].decode("utf-8", errors="replace")
