"""The fleet screen's `/` filter: free text and terms, parsed once, matched per row. Pure.

Terms (all must hold): `channel:platform`, `provider:autodl`, `state:timeout`,
`model:4090`, `tag:train`, `ending:7d` (paid-for time ends within 7 days), `idle` (every
GPU read idle now), `busy` (some GPU busy now), `alert` (open alerts). Any other word is
free text, found in the name, channel, provider, GPU model, tags or notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from leases.core.errors import InputError
from leases.core.i18n import _

FIELDS = ("channel", "provider", "state", "model", "tag", "ending")
WORDS = ("idle", "busy", "alert", "alerts")


@dataclass(frozen=True)
class RowFacts:
    """What the filter and the grouping know of one row."""

    name: str
    channel: str = ""
    provider: str = ""
    model: str = ""
    tags: tuple[str, ...] = ()
    notes: str = ""
    state: str = ""
    idle: bool = False  # every GPU read idle now
    busy: bool = False  # some GPU busy now
    ends_in_s: float | None = None  # paid-for time left; None: no end
    alerts: int = 0


@dataclass(frozen=True)
class Filter:
    text: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    words: tuple[str, ...] = ()
    free: tuple[str, ...] = ()
    ending: timedelta | None = None

    def __bool__(self) -> bool:
        return bool(self.fields or self.words or self.free or self.ending)


# A filter is typed, not pasted: every row is matched against every term at each
# keystroke, so a 4 KB paste froze the screen for seconds. Longer is refused, by name.
MAX_CHARS = 200


def parse(text: str) -> Filter:
    """The filter the user typed; InputError naming the term for one zuka cannot read."""
    if len(text) > MAX_CHARS:
        raise InputError(
            "filter", text[:40], _("is longer than {n} characters").format(n=MAX_CHARS)
        )
    fields: list[tuple[str, str]] = []
    words: list[str] = []
    free: list[str] = []
    ending: timedelta | None = None
    for term in text.split():
        low = term.casefold()
        key, sep, value = low.partition(":")
        if sep and key in FIELDS:
            if not value:
                raise InputError("filter", term, _("give a value after '{key}:'").format(key=key))
            if key == "ending":
                # Here: the alert rules it lives with are read after the first paint.
                from leases.alerts.state import parse_duration

                ending = parse_duration(value, "filter ending")
            else:
                fields.append((key, value))
        elif sep and key.isalpha() and key not in FIELDS:
            known = ", ".join(f + ":" for f in FIELDS)
            raise InputError(
                "filter",
                term,
                _("unknown term '{key}:'; known: {known}").format(key=key, known=known),
            )
        elif low in WORDS:
            words.append("alert" if low == "alerts" else low)
        else:
            free.append(low)
    return Filter(text, tuple(fields), tuple(words), tuple(free), ending)


def _has(values: Sequence[str], wanted: str) -> bool:
    return any(wanted in v.casefold() for v in values)


def matches(f: Filter, row: RowFacts) -> bool:
    for key, value in f.fields:
        if key == "tag":
            if not _has(row.tags, value):
                return False
        elif value not in getattr(row, key).casefold():
            return False
    if "idle" in f.words and not row.idle:
        return False
    if "busy" in f.words and not row.busy:
        return False
    if "alert" in f.words and not row.alerts:
        return False
    if f.ending is not None and (row.ends_in_s is None or row.ends_in_s > f.ending.total_seconds()):
        return False
    haystack = (row.name, row.channel, row.provider, row.model, row.notes, *row.tags)
    return all(_has(haystack, word) for word in f.free)
