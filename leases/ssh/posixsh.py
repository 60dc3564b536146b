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
    """The command under_sh wrapped, or None for any other command line."""
    if not command.startswith("sh -c "):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) != 3 or under_sh(words[2]) != command:
        return None
    return words[2]


__all__ = ["under_sh", "unwrap_sh"]
