"""The local terminal of an interactive session (leases.ssh.interactive.Terminal): the
process's own tty, put in raw mode while the session runs, and always given back as it was
(termios attributes restored, the remote program's modes reset) however the session ends."""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import tty
from collections.abc import Iterator

from leases.ssh.interactive import RESET, term_type, write_all


def flush_input(fd: int) -> None:
    """Drop what was typed on the terminal fd and not yet read (nothing for a non-tty)."""
    with contextlib.suppress(OSError, termios.error):
        if os.isatty(fd):
            termios.tcflush(fd, termios.TCIFLUSH)


class TtyTerminal:
    """stdin, stdout and stderr of this process; a PTY is asked for only when stdin is a
    tty and pty is true (`zuka ssh NODE -- CMD` asks for none unless -t, as ssh)."""

    def __init__(
        self, stdin: int | None = None, stdout: int | None = None, *, pty: bool = True
    ) -> None:
        self.stdin = sys.__stdin__.fileno() if stdin is None and sys.__stdin__ else (stdin or 0)
        self.stdout = (
            sys.__stdout__.fileno() if stdout is None and sys.__stdout__ else (stdout or 1)
        )
        self.stderr = sys.__stderr__.fileno() if sys.__stderr__ else 2
        self.is_tty = os.isatty(self.stdin)
        self.term_type = term_type(os.environ.get("TERM")) if self.is_tty and pty else None

    def size(self) -> tuple[int, int] | None:
        for fd in (self.stdout, self.stdin):
            with contextlib.suppress(OSError):
                cols, rows = os.get_terminal_size(fd)
                return cols, rows
        return None

    @contextlib.contextmanager
    def raw(self) -> Iterator[None]:
        if self.term_type is None:
            yield
            return
        saved = termios.tcgetattr(self.stdin)
        blocking = os.get_blocking(self.stdin)
        try:
            tty.setraw(self.stdin, termios.TCSANOW)
            yield
        finally:
            with contextlib.suppress(OSError):
                os.set_blocking(self.stdin, blocking)
            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(self.stdin, termios.TCSADRAIN, saved)
            # Keys typed as the session ended (a second `exit`) are dropped, not read by
            # the dashboard or the shell that comes back.
            flush_input(self.stdin)
            if os.isatty(self.stdout):
                with contextlib.suppress(OSError):
                    write_all(self.stdout, RESET)
