"""Text from outside (a node, an SSH peer, an imported ledger) made safe to show.

Every string that did not come from zuka itself goes through `visible` before it reaches a
terminal, a table cell, an error message or a notification: C0 and C1 control characters,
DEL, and the Unicode controls that reorder or hide text (bidi overrides and isolates,
line and paragraph separators) are replaced by a visible stand-in, so that nothing from a
node can move the cursor, set the window title, fake a line or reverse what a reader sees.
Markup is a separate concern: the dashboard renders these strings as Rich `Text` (or with
markup=False), never as markup.

`--json` output stays exact: JSON escapes controls itself.
"""

from __future__ import annotations

import re

# C0 controls have their own visible symbols (U+2400 + code: ESC is ␛); DEL is ␡.
_C0 = {chr(c): chr(0x2400 + c) for c in range(0x20)}
_C0["\x7f"] = "\u2421"
# Bidi embeddings, overrides and isolates; marks; separators that terminals may break on.
# (leases.core.fields refuses these in ledger values too.)
REORDERING = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
# Characters that draw nothing (or a blank) and so can hide or forge what a reader sees
# ('gpu-\u2063a100' reads as 'gpu-a100'), or that make a terminal's width differ from
# what the table measured: Unicode's format characters (category Cf: zero-width spaces
# and joiners, invisible operators, tags, musical format marks...), the combining
# grapheme joiner, Hangul and Mongolian fillers and selectors, variation selectors, the
# blank Braille pattern.
INVISIBLE_RANGES = (
    "\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2065\u206a-\u206f\u2800\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001-\U000e007f\U000e0100-\U000e01ef"
)
_UNSAFE_RE = re.compile("[\x00-\x1f\x7f-\x9f" + REORDERING + INVISIBLE_RANGES + "]")
_UNSAFE_KEEP_LINES_RE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f" + REORDERING + INVISIBLE_RANGES + "]"
)
ELLIPSIS = "…"


def _stand_in(match: re.Match[str]) -> str:
    char = match.group()
    if char in _C0:
        return _C0[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(value: object, max_len: int | None = None, *, keep_newlines: bool = False) -> str:
    """str(value) with every control character shown instead of obeyed.

    max_len cuts the result (after the stand-ins) and marks the cut with an ellipsis.
    keep_newlines lets `\\n` through for text shown as several lines (stderr, say).
    """
    text = value if isinstance(value, str) else str(value)
    pattern = _UNSAFE_KEEP_LINES_RE if keep_newlines else _UNSAFE_RE
    if pattern.search(text):
        text = pattern.sub(_stand_in, text)
    if max_len is not None and len(text) > max_len:
        text = text[: max(0, max_len - 1)] + ELLIPSIS
    return text


def is_clean(value: str) -> bool:
    """No character that visible() would replace (newlines included)."""
    return _UNSAFE_RE.search(value) is None


# What a spreadsheet reads as a formula at the start of a cell (CSV injection): such a cell
# is written with a leading apostrophe, which spreadsheets show as text.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "'")


def formula_safe(text: str) -> str:
    """A CSV cell a spreadsheet opens as text, never as a formula."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def last_line(text: str, start: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The last line of text that `pattern` (anchored with ^ and $, re.MULTILINE) matches
    whole, where every such line starts with `start`: what the last of pattern.finditer
    would be, found from the end (a marker line after a long answer)."""
    end = len(text)
    while (at := text.rfind(start, 0, end)) >= 0:
        if (at == 0 or text[at - 1] == "\n") and (match := pattern.match(text, at)):
            return match
        end = at
    return None
