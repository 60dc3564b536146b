"""The words and operators of a simulated shell's command line (leases.sim.commands),
cached: a poller sends the same few long lines (the GPU query with the host snippet) every
round, and tokenizing them was most of what answering them cost."""

from __future__ import annotations

import functools
import shlex


@functools.lru_cache(maxsize=512)
def tokens(command: str) -> tuple[str, ...] | None:
    """sh's tokens of command (`;`, `&&`, `||`, `|` apart); None: a quote left open."""
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        return tuple(lex)
    except ValueError:
        return None
