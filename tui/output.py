"""Human tables and JSON for the command line."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO


def width(text: str) -> int:
    """Terminal cells taken by text: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


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


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO) -> None:
    pad = max((width(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        out.write(f"{key}{' ' * (pad - width(key))}  {cell(value)}\n")


def dump_json(data: Any, out: TextIO) -> None:
    """Indented for a person at a terminal; compact (and several times faster, through
    json's C encoder) when piped to a script."""
    indent = 2 if out.isatty() else None
    out.write(json.dumps(data, ensure_ascii=False, indent=indent))
    out.write("\n")
