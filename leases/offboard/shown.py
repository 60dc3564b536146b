"""Stored English, shown in the language in use.

What the offboarding stores (a step's description, hashed with its plan; a step's detail
and the evidence, on the audit chain) is written in English whatever the language, so
that a plan hashes the same on every machine and the evidence reads the same to every
reviewer. Those sentences are marked for the catalogue where they are written
(`N_("... {where} ...").format(where=...)`) and translated only when shown: `shown(text)`
finds the catalogue's message the text was made from (the exact message, else a message
with named placeholders whose words match around the values) and says it in the language
in use, the values put back as they came (a value that is itself such a sentence, said
in turn). Text made from no message (a tool's own output, data) is shown as it is.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache

from leases.core.i18n import EN, _, catalogue, language

_DEPTH = 3
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LETTER_RE = re.compile(r"[A-Za-z]{2,}")


def shown(text: str) -> str:
    """text, made by the offboarding in English, in the language in use."""
    if not text or language() == EN:
        return text
    return _say(text, _DEPTH, exact=True)


_SEPARATORS = ("\n", " | ", "; ")


def _say(text: str, depth: int, *, exact: bool) -> str:
    said = _whole(text, depth, exact=exact)
    if said != text or depth <= 1:
        return said
    # Sentences joined (a step's findings "a; b", caveats "a | b", lines): each said.
    for sep in _SEPARATORS:
        if sep in text:
            parts = text.split(sep)
            said_parts = [_say(p, depth - 1, exact=True) for p in parts]
            if said_parts != parts:
                return sep.join(said_parts)
    # "THING: sentence" (a path, a key, then what was found of it): the sentence said.
    head, colon, tail = text.partition(": ")
    if colon:
        said = _say(tail, depth - 1, exact=True)
        if said != tail:
            return head + _(": {detail}").format(detail=said)
    return text


def _whole(text: str, depth: int, *, exact: bool) -> str:
    if exact:
        said = _(text)
        if said != text:
            return said
    for prefix, pieces, pattern, msgid, size in _templates(language()):
        # Its words first, each a plain search: the pattern is tried only where all are.
        if not text.startswith(prefix) or not all(p in text for p in pieces):
            continue
        m = pattern.fullmatch(text)
        if m is None:
            continue
        # A template whose few words happen to match ("{provider} is a {channel}" in
        # "/data/a: is a symbolic link: refused, not followed", "{a} or {b}" in caveats
        # joined by " | ") yields to the reading of the text as exact messages joined
        # (_say's) when that reading covers more of it.
        if size + sum(_cover(v) for v in m.groupdict().values()) < _cover(text, whole=False):
            return text
        values = {
            k: v if depth <= 1 else _say(v, depth - 1, exact=len(v) > 12 and " " in v)
            for k, v in m.groupdict().items()
        }
        try:
            return _(msgid).format(**values)
        except (KeyError, IndexError, ValueError):
            return text
    return text


def _cover(text: str, *, whole: bool = True) -> int:
    """How many characters of text exact messages say: the whole text (when whole), or
    its parts as _say splits it (sentences joined, "THING: message")."""
    if whole and _(text) != text:
        return len(text)
    best = 0
    for sep in _SEPARATORS:
        if sep in text:
            best = max(best, sum(len(p) for p in text.split(sep) if p and _(p) != p))
    _head, colon, tail = text.partition(": ")
    if colon and _(tail) != tail:
        best = max(best, len(tail))
    return best


_Template = tuple[str, tuple[str, ...], re.Pattern[str], str, int]


@lru_cache(maxsize=4)
def _templates(lang: str) -> tuple[_Template, ...]:
    """Every message of lang's catalogue with named placeholders, as a pattern that
    matches the English it makes; the one with the most words first (a specific sentence
    before a general one)."""
    found = []
    table = getattr(catalogue(lang), "_catalog", {})
    for msgid in table:
        if not isinstance(msgid, str) or "{" not in msgid or "\x04" in msgid:
            continue
        made = _pattern(msgid)
        if made is not None:
            found.append((*made, msgid))
    found.sort(key=lambda t: -t[3])
    return tuple((prefix, pieces, pattern, msgid, n) for prefix, pieces, pattern, n, msgid in found)


def _pattern(msgid: str) -> tuple[str, tuple[str, ...], re.Pattern[str], int] | None:
    parts: list[str] = []
    pieces: list[str] = []
    names: set[str] = set()
    literal = ""
    prefix = ""
    try:
        parsed = list(string.Formatter().parse(msgid))
    except ValueError:
        return None
    for i, (text, field, spec, conversion) in enumerate(parsed):
        parts.append(re.escape(text))
        literal += text
        if text:
            pieces.append(text)
        if i == 0:
            prefix = text
        if field is None:
            continue
        if spec or conversion or not _NAME_RE.match(field):
            return None
        parts.append(f"(?P={field})" if field in names else f"(?P<{field}>.+?)")
        names.add(field)
    if not names or not _LETTER_RE.search(literal):
        return None
    return prefix, tuple(pieces), re.compile("".join(parts), re.DOTALL), len(literal)
