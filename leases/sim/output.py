"""What a simulated command prints: stdout, stderr and its exit status."""

from __future__ import annotations

from typing import NamedTuple


class Answer(NamedTuple):
    stdout: str
    stderr: str
    exit_status: int


OK = Answer("", "", 0)
NA = "[N/A]"
NOT_SUPPORTED = "[Not Supported]"


def not_found(cmd: str) -> Answer:
    """What /bin/sh (dash) says for a command that is not on the PATH."""
    return Answer("", f"sh: 1: {cmd}: not found\n", 127)
