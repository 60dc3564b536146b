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


# Chinese breaks a line between any two of its characters, but never before closing
# punctuation nor after opening punctuation (禁则); never inside a run of narrow
# characters (an ASCII word, a node's name, a path).
_NO_LINE_START = frozenset("，。、：；！？）」』》】〉”’…%,.:;!?)]}")
_NO_LINE_END = frozenset("（「『《【〈“‘([{")


def _breakable(word: str, i: int) -> bool:
    """May a line break between word[i-1] and word[i]? Never between a number and the
    unit or measure word after it ("30.06天", "30.06 天", "1小时")."""
    before, after = word[i - 1], word[i]
    if width(before) < 2 and width(after) < 2:
        return False
    if width(after) == 2 and _after_number(word, i):
        return False
    for unit in _UNITS:  # "56分|钟": a unit of two characters after a number stays whole
        for j in range(1, len(unit)):
            if word.startswith(unit, i - j) and _after_number(word, i - j):
                return False
    return after not in _NO_LINE_START and before not in _NO_LINE_END


def _digit(char: str) -> bool:
    return "0" <= char <= "9"


# Units of more than one character that follow a number ("56分钟", "1.5小时").
_UNITS = ("分钟", "小时", "卡时", "个月", "秒钟")


def _after_number(word: str, i: int) -> bool:
    """Does word[i] come right after a number ("30天", "30 天")?"""
    if i < 1:
        return False
    before = word[i - 1]
    return _digit(before) or (before == " " and i > 1 and _digit(word[i - 2]))


def _space_breaks(text: str, i: int, after: int) -> bool:
    """May a line break at the spaces text[i:after] (dropped where it does)? Not before
    closing punctuation nor after opening punctuation, and never between a number and the
    wide word after it ("30 天", "224 忙碌"): a unit never starts a line. Between narrow
    words always, as English always did."""
    before = text[i - 1]
    nxt = text[after] if after < len(text) else ""
    if not nxt:
        return False
    if width(nxt) == 2 and (nxt in _NO_LINE_START or _digit(before)):
        return False
    return not (width(before) == 2 and before in _NO_LINE_END)


def _pieces(text: str) -> list[tuple[str, str]]:
    """text as (separator, piece) pairs: a line may break before each piece but the first,
    and drops its separator (spaces, or "" between two Chinese characters) where it does."""
    pieces: list[tuple[str, str]] = []
    sep, piece = "", ""
    i = 0
    while i < len(text):
        if text[i] == " " and piece:
            after = i
            while after < len(text) and text[after] == " ":
                after += 1
            if _space_breaks(text, i, after):
                pieces.append((sep, piece))
                sep, piece = text[i:after], ""
            else:
                piece += text[i:after]
            i = after
            continue
        if piece and text[i - 1] != " " and _breakable(text, i):
            pieces.append((sep, piece))
            sep, piece = "", ""
        piece += text[i]
        i += 1
    pieces.append((sep, piece))
    return pieces


def _by_characters(word: str, room: int, lines: list[str]) -> str:
    """word cut as characters into lines of room cells; what is left for the next line.
    In a word with Chinese in it, closing punctuation takes the character before it along
    ("(--price)" / "：" never); an ASCII word is cut as English always was."""
    chinese = width(word) != len(word)
    line = ""
    for char in word:
        if width(line + char) > room:
            cut = len(line)
            while (
                chinese
                and char in _NO_LINE_START
                and cut > 1
                and (cut == len(line) or line[cut] in _NO_LINE_START)
            ):
                cut -= 1
            lines.append(line[:cut])
            line = line[cut:]
        line += char
    return line


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text (already made visible) in lines of at most `columns` terminal cells, each
    after `indent`, each filled: broken at spaces, and in Chinese also between two of its
    characters (not before a closing mark nor after an opening one, not between a number
    and its unit, not inside an ASCII word or a name); a piece longer than a line at a
    character. Nothing is dropped; a CJK character counts two cells."""
    room = max(10, columns - width(indent))
    lines: list[str] = []
    line: str | None = None
    for sep, piece in _pieces(text):
        candidate = piece if line is None else line + sep + piece
        if width(candidate) <= room:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = piece if width(piece) <= room else _by_characters(piece, room, lines)
    if line or not lines:
        lines.append(line or "")
    return [indent + x for x in lines]


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
