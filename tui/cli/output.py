"""Human tables and JSON for the command line.

Every value in a table or a field list goes through cell() (tui.words), which shows control
characters instead of letting the terminal obey them (text from nodes and ledgers is not ours).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from leases.core.textsafe import REORDERING, visible
from tui.words import cell

# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal obeys or that reorder
# text: DEL, C1 controls, bidi controls and line separators. Escaped, the JSON means the same.
_JSON_UNSAFE_RE = re.compile(f"[\x7f-\x9f{REORDERING}]")


def width(text: str) -> int:
    """Terminal cells taken by text: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [width(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], width(v))

    def line(values: Sequence[str]) -> str:
        padded = [v + " " * (widths[i] - width(v)) for i, v in enumerate(values)]
        return "  ".join(padded).rstrip()

    out.write(line(headers) + "\n")
    for row in cells:
        out.write(line(row) + "\n")
    if not rows:
        out.write("(none)\n")


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text (already made visible) in lines of at most `columns` terminal cells, each
    after `indent`; broken at spaces, a longer word at a character (never inside one: the
    text is cut as characters, and a CJK character counts two cells). Nothing is dropped."""
    room = max(10, columns - width(indent))
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if width(candidate) <= room:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        for char in word:
            if width(line + char) > room:
                lines.append(line)
                line = ""
            line += char
    if line or not lines:
        lines.append(line)
    return [indent + x for x in lines]


def terminal_columns(out: TextIO, default: int = 100) -> int:
    """The width of the terminal out writes to, or `default` when it is not one."""
    try:
        return os.get_terminal_size(out.fileno()).columns if out.isatty() else default
    except (OSError, ValueError, AttributeError):
        return default


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO) -> None:
    pad = max((width(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        out.write(f"{key}{' ' * (pad - width(key))}  {cell(value)}\n")


def dump_json(data: Any, out: TextIO) -> None:
    """Indented for a person at a terminal; compact (and several times faster, through
    json's C encoder) when piped to a script."""
    indent = 2 if out.isatty() else None
    text = json.dumps(data, ensure_ascii=False, indent=indent)
    out.write(_JSON_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
    out.write("\n")


def iso(at: datetime | None) -> str | None:
    """A time as JSON output writes it."""
    return at.isoformat() if at else None


def done(args: argparse.Namespace, out: TextIO, doc: Any, message: str) -> int:
    """What a command that changed the ledger prints: its record (--json) or its message."""
    if args.json:
        dump_json(doc, out)
    else:
        out.write(visible(message) + "\n")
    return 0
