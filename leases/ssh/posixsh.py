"""A command handed to `sh` whatever the login's shell: an exec runs its command under the
user's login shell, and zsh does not split an unquoted `$t` (`set -- $t` reads one word),
fish and tcsh do not read POSIX sh at all. zuka's node-side commands are POSIX sh; the
kept-open shell is `sh` already (leases.ssh.shell), an exec gets them through this."""

from __future__ import annotations

import shlex


def under_sh(command: str) -> str:
    """`sh -c 'COMMAND'`, quoted for any POSIX-like login shell."""
    return f"sh -c {shlex.quote(command)}"


def unwrap_sh(command: str) -> str | None:
    """The command under_sh wrapped, or None for any other command line (undone as
    shlex.quote does it, and checked by wrapping again: no shell parser needed)."""
    if not command.startswith("sh -c "):
        return None
    rest = command[len("sh -c ") :]
    quoted = len(rest) >= 2 and rest[0] == rest[-1] == "'"
    inner = rest[1:-1].replace("'\"'\"'", "'") if quoted else rest
    return inner if under_sh(inner) == command else None


__all__ = ["under_sh", "unwrap_sh"]
