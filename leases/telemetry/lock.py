"""One poller per ledger: an advisory lock file beside it, held for the poller's life.

`zuka collect` and a dashboard that polls in-process both take it; whoever does not get it
reads what the holder writes to the ledger instead. The kernel drops the lock when the
holder dies, even by SIGKILL, so a stale lock cannot block the fleet.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from leases.ledger.paths import poller_lock_path


class PollerLock:
    denied_is_busy = True  # a lock this user may not write reads as held by another

    def __init__(self, ledger_path: Path) -> None:
        self.path = poller_lock_path(ledger_path)
        self._fd: int | None = None
        self.denied = False  # the last acquire was refused for want of permission

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another process holds it, or when
        this user may not write it (a lab's viewer)."""
        if self._fd is not None:
            return True
        try:
            fd = self._open()
        except PermissionError:
            self.denied = True
            # A lab's viewer (leases.lab) may read the lock, never take it: the service
            # polls, and this process reads what it writes.
            if not self.denied_is_busy:
                raise
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)

    def holder(self) -> int | None:
        """The pid written by the current holder, if anyone holds the lock."""
        if self._fd is not None:
            return os.getpid()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except PermissionError:
            return -1  # a lab's lock, its service user's alone: held or not, not ours to see
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 32).decode(errors="replace").strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PollerLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
