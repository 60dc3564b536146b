"""Human tables and JSON for the command line.

Every value in a table or a field list goes through cell() (tui.words), which shows control
characters instead of letting the terminal obey them (text from nodes and ledgers is not ours).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from rich.cells import cell_len

from leases.core.i18n import _
from leases.core.textsafe import REORDERING, visible
from tui.linebreak import wrap as wrap  # shared with the dashboard's refusals
from tui.words import cell

# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal obeys or that reorder
# text: DEL, C1 controls, bidi controls and line separators. Escaped, the JSON means the same.
_JSON_UNSAFE_RE = re.compile(f"[\x7f-\x9f{REORDERING}]")


def width(text: str) -> int:
    """Terminal cells taken by text, as rich (and the terminal) measure them: CJK
    characters take two, combining marks none."""
    return cell_len(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    fit_table(headers, rows, out, columns=None)


def _table_lines(headers: Sequence[str], cells: Sequence[Sequence[str]]) -> list[str]:
    widths = [width(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], width(v))

    def line(values: Sequence[str]) -> str:
        padded = [v + " " * (widths[i] - width(v)) for i, v in enumerate(values)]
        return "  ".join(padded).rstrip()

    return [line(headers), *(line(row) for row in cells)]


def fit_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    out: TextIO,
    *,
    columns: int | None,
    below: Sequence[str] = (),
    key: int = 1,
) -> None:
    """A table no line of which is wider than `columns` terminal cells (None: as wide as
    its rows, `--wide`). As it is when it fits; else its `below` columns (long words: a
    message, advice) move under their row, on indented lines, wrapped; else each row is a
    block: its first `key` cells, then each other cell as `header: value`, packed into
    indented lines. Nothing is cut."""
    cells = [[cell(v) for v in row] for row in rows]
    whole = _table_lines(headers, cells)
    if columns is None or not rows or max(width(x) for x in whole) <= columns:
        out.write("\n".join(whole) + "\n")
        if not rows:
            out.write(_("(none)") + "\n")
        return
    keep = [i for i, h in enumerate(headers) if h not in below]
    moved = [i for i, h in enumerate(headers) if h in below]
    narrow = _table_lines([headers[i] for i in keep], [[r[i] for i in keep] for r in cells])
    blocks = max(width(x) for x in narrow) > columns
    if not blocks:
        out.write(narrow[0] + "\n")
    for n, r in enumerate(cells):
        lines = [narrow[n + 1]] if not blocks else ["  ".join(r[i] for i in keep[:key])]
        if blocks:
            lines += _packed([_pair(headers[i], r[i]) for i in keep[key:] if r[i] != "-"],
                             columns, "    ")  # fmt: skip
        for i in moved:
            if r[i] != "-":
                lines += hanging(_pair(headers[i], r[i]), columns, "    ", "      ")
        out.write("\n".join(lines) + "\n")


def _pair(header: str, value: str) -> str:
    """A cell under its header's name, as a row's block says it: `to date: ¥1.00`
    (Chinese: `至今：¥1.00`)."""
    return _("{header}: {value}").format(header=header.lower(), value=value)


def _packed(pairs: Sequence[str], columns: int, indent: str) -> list[str]:
    """pairs in as few lines of at most `columns` cells as they fill, two spaces apart; a
    pair longer than a line wrapped on its own."""
    lines: list[str] = []
    line = ""
    for pair in pairs:
        candidate = f"{line}   {pair}" if line else pair
        if width(indent + candidate) <= columns:
            line = candidate
            continue
        if line:
            lines.append(indent + line)
        if width(indent + pair) <= columns:
            line = pair
        else:
            lines += wrap(pair, columns, indent)
            line = ""
    if line:
        lines.append(indent + line)
    return lines


def hanging(text: str, columns: int, first: str, rest: str) -> list[str]:
    """wrap() with its first line after `first` and the others after `rest`."""
    lines = wrap(text, columns, indent=rest)
    head = wrap(lines[0][len(rest) :], columns, indent=first)
    return [*head, *lines[1:]]


def fitted_columns(args: argparse.Namespace, out: TextIO) -> int | None:
    """The width a fitted table keeps to: the terminal's, 80 when out is no terminal;
    None with --wide (a line a row, however wide)."""
    return None if getattr(args, "wide", False) else terminal_columns(out, 80)


def terminal_columns(out: TextIO, default: int = 100) -> int:
    """The width of the terminal out writes to, or `default` when it is not one or says
    it has no size (a pty `ssh -tt` opens from a script reports 0 columns)."""
    try:
        columns = os.get_terminal_size(out.fileno()).columns if out.isatty() else default
    except (OSError, ValueError, AttributeError):
        return default
    return columns if columns > 0 else default


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO) -> None:
    pad = max((width(k) for k, _value in pairs), default=0)
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
