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
# (leases.fields refuses these in ledger values too.)
REORDERING = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
# Zero-width and invisible characters that can hide or forge what a reader sees.
_ZERO_WIDTH = "\u00ad\u200b\u200c\u2060\ufeff"
_INVISIBLE = frozenset(REORDERING + _ZERO_WIDTH)
_UNSAFE_RE = re.compile("[\x00-\x1f\x7f-\x9f" + "".join(sorted(_INVISIBLE)) + "]")
_UNSAFE_KEEP_LINES_RE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f" + "".join(sorted(_INVISIBLE)) + "]"
)
ELLIPSIS = "…"


def _stand_in(match: re.Match[str]) -> str:
    char = match.group()
    if char in _C0:
        return _C0[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


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
