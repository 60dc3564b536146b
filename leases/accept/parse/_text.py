"""Shared bounds for the parsers: how much of a node's output is read, and how a line it
could not read is named in `problems` (shown only through textsafe.visible)."""

from __future__ import annotations

import re

from leases.accept.words import _
from leases.core.textsafe import visible

MAX_TEXT = 512 * 1024  # what the probe keeps of one stream
MAX_LINES = 20_000
MAX_PROBLEMS = 20
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def lines_of(text: str) -> list[str]:
    """The text's lines, bounded, ANSI colour codes dropped, \\r\\n made \\n."""
    text = _ANSI.sub("", text[:MAX_TEXT]).replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")[:MAX_LINES]


class Problems:
    """Collects what a parser could not read, bounded in count and size."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._more = 0

    def add(self, words: str, line: str | None = None) -> None:
        if len(self._items) >= MAX_PROBLEMS:
            self._more += 1
            return
        self._items.append(words if line is None else f"{words}: {visible(line, 120)}")

    def result(self) -> tuple[str, ...]:
        more = (_("... and {count} more").format(count=self._more),) if self._more else ()
        return (*self._items, *more)


def to_float(word: str) -> float | None:
    try:
        value = float(word)
    except ValueError:
        return None
    return value if value == value and abs(value) < 1e15 else None  # no NaN, no inf


def digits(word: str) -> bool:
    """Only ASCII digits: str.isdigit() also takes "²" and "٣", which int() refuses or reads
    as a number no tool printed."""
    return word.isascii() and word.isdigit()


def to_int(word: str) -> int | None:
    return int(word) if digits(word) and len(word) <= 18 else None
