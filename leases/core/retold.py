"""Stored English, shown in the language in use.

What the offboarding and the poller store (a step's description, hashed with its plan; a
step's detail and the evidence, on the audit chain; a poll gap's and a node's failure
detail) is written in English whatever the language (`speaking(EN)` around the run), so
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
import threading
from functools import lru_cache

from leases.core.i18n import EN, _, catalogue, language

_DEPTH = 3
# Beyond these, text is shown as it is: each part is tried against every message.
MAX_CHARS = 2000
MAX_PARTS = 50
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LETTER_RE = re.compile(r"[A-Za-z]{2,}")


# How many pieces of one text are looked for among the messages (each against every
# template), at most: a hostile node's text made of many short parts ("a; a; a | ...")
# took a second a call; past this it is shown as it is.
MAX_LOOKUPS = 200


class _Spent(Exception):
    """The lookups of one text used up."""


_left = threading.local()  # this thread's lookups left for the text it says


def shown(text: str) -> str:
    """text, made by the offboarding in English, in the language in use."""
    if not text or language() == EN or len(text) > MAX_CHARS:
        return text
    return _shown(text, language())


@lru_cache(maxsize=1024)
def _shown(text: str, lang: str) -> str:
    # lang: a key of the cache (the language in use says it).
    _left.n = MAX_LOOKUPS
    try:
        return _say(text, _DEPTH, exact=True)
    except _Spent:
        return text


_SEPARATORS = ("\n", " | ", "; ")


def _say(text: str, depth: int, *, exact: bool) -> str:
    # "THING: a message as written" first: a message's own words before a pattern's guess
    # ("/data/a: is a symbolic link: refused, not followed" is no "{provider} is a {channel}").
    head, colon, tail = text.partition(": ")
    if colon and exact and _(tail) != tail:
        # The head said too where a message with placeholders made it ("node {node}" of
        # an SSH fault); never as an exact message: a key or a path may spell one.
        said_head = _whole(head, max(1, depth - 1), exact=False)
        if said_head == head and _LETTER_RE.search(head):
            # Words no message said: the text may be one message whose last value is a
            # message ("findmnt ...; outlives the instance: {note}").
            said = _whole(text, depth, exact=False)
            if said != text:
                return said
        return said_head + _(": {detail}").format(detail=_(tail))
    said = _whole(text, depth, exact=exact)
    if said != text or depth <= 1:
        return said
    # Sentences joined (a step's findings "a; b", caveats "a | b", lines): each said.
    for sep in _SEPARATORS:
        if sep in text:
            parts = text.split(sep)
            if len(parts) > MAX_PARTS:
                return text
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
    _left.n -= 1
    if _left.n < 0:
        raise _Spent
    if exact:
        said = _(text)
        if said != text:
            return said
    matched = _matches(text)
    if matched:
        # Of the templates that make text, the reading that says the most of it, its
        # values' own words counted: "S3: delete {what}; {proof}" before "{what} (region
        # {region}, endpoint {endpoint})" that has more words but leaves "; bucket owner
        # ... required" inside its endpoint; the first (the most words) on a tie.
        pieces, msgid, found = max(matched, key=lambda m: _said_size(m[0], m[2]))
        # A template whose few words happen to match ("{provider} is a {channel}" in
        # "/data/a: is a symbolic link: refused, not followed", "{a} or {b}" in caveats
        # joined by " | ") yields to the reading of the text as exact messages joined
        # (_say's) when that reading covers more of it.
        size = sum(map(len, pieces))
        if size + sum(_cover(v) for v in found.values()) < _cover(text, whole=False):
            return text
        values = {
            k: v if depth <= 1 else _say(v, depth - 1, exact=len(v) > 12 and " " in v)
            for k, v in found.items()
        }
        try:
            return _(msgid).format(**values)
        except (KeyError, IndexError, ValueError):
            return text
    return text


_RIVALS = 8  # templates that make one text weighed against each other, at most


def _matches(text: str) -> list[tuple[tuple[str, ...], str, dict[str, str]]]:
    """The first templates (the most words first) that make text: their words, message
    and values."""
    out = []
    for prefix, pieces, literals, fields, msgid in _templates(language()):
        # Its words first, each a plain search: matched only where all are.
        if not text.startswith(prefix) or not all(p in text for p in pieces):
            continue
        found = _match(text, literals, fields)
        if found is not None:
            out.append((pieces, msgid, found))
            if len(out) >= _RIVALS:
                break
    return out


def _said_size(pieces: tuple[str, ...], found: dict[str, str]) -> int:
    """How much of a text a template's reading says: its words, and of each value the
    length of the exact message it is or the words of the first template that makes it."""
    size = sum(map(len, pieces))
    for value in found.values():
        if _(value) != value:
            size += len(value)
            continue
        inner = _matches(value)
        size += sum(map(len, inner[0][0])) if inner else 0
    return size


def _cover(text: str, *, whole: bool = True) -> int:
    """How many characters of text exact messages say: the whole text (when whole), or
    its parts as _say splits it (sentences joined, "THING: message")."""
    if whole and _(text) != text:
        return len(text)
    best = 0
    for sep in _SEPARATORS:
        if sep in text:
            parts = text.split(sep)[: MAX_PARTS + 1]
            best = max(best, sum(len(p) for p in parts if p and _(p) != p))
    _head, colon, tail = text.partition(": ")
    if colon and _(tail) != tail:
        best = max(best, len(tail))
    return best


_Template = tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], str]


def _match(text: str, literals: tuple[str, ...], fields: tuple[str, ...]) -> dict[str, str] | None:
    """The values of fields in text, made by literals[0] field literals[1] field ... with
    each value not empty; None where text was not made so. Each literal between two values
    is the first found after the value before it began (a regex of lazy groups would try
    every split: polynomial in the text's length, a hang on a hostile line), so a text
    whose value holds the next literal is not matched and is shown as it is."""
    pos = len(literals[0])
    if not text.startswith(literals[0]):
        return None
    values: dict[str, str] = {}
    for i, name in enumerate(fields):
        literal = literals[i + 1]
        if i == len(fields) - 1:
            end = len(text) - len(literal)
            if end <= pos or not text.endswith(literal):
                return None
            value = text[pos:end]
        else:
            at = text.find(literal, pos + 1)
            if at < 0:
                return None
            value, pos = text[pos:at], at + len(literal)
        if values.setdefault(name, value) != value:
            return None
    return values


@lru_cache(maxsize=4)
def _templates(lang: str) -> tuple[_Template, ...]:
    """Every message of lang's catalogue with named placeholders, by its words around
    them; the one with the most words first (a specific sentence before a general one)."""
    found = []
    table = getattr(catalogue(lang), "_catalog", {})
    for msgid in table:
        if not isinstance(msgid, str) or "{" not in msgid or "\x04" in msgid:
            continue
        made = _template(msgid)
        if made is not None:
            found.append((made, msgid))
    found.sort(key=lambda t: -sum(map(len, t[0][1])))
    return tuple((*made, msgid) for made, msgid in found)


def _template(
    msgid: str,
) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    """A message's first words, its words, the literals between its fields, its fields;
    None for one that cannot be matched back (no words, a format spec, two fields with no
    words between them)."""
    try:
        parsed = list(string.Formatter().parse(msgid))
    except ValueError:
        return None
    literals: list[str] = [""]
    fields: list[str] = []
    for text, field, spec, conversion in parsed:
        literals[-1] += text
        if field is None:
            continue
        if spec or conversion or not _NAME_RE.match(field):
            return None
        if fields and not literals[-1]:
            return None
        fields.append(field)
        literals.append("")
    words = "".join(literals)
    if not fields or not _LETTER_RE.search(words):
        return None
    pieces = tuple(p for p in literals if p)
    return literals[0], pieces, tuple(literals), tuple(fields)
