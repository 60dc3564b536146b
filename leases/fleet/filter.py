"""The fleet screen's `/` filter: free text and terms, parsed once, matched per row. Pure.

Terms (all must hold): `channel:platform`, `provider:autodl`, `state:timeout`,
`model:4090`, `tag:train`, `ending:7d` (paid-for time ends within 7 days), `idle` (every
GPU read idle now), `busy` (some GPU busy now), `alert` (open alerts). Any other word is
free text, found in the name, channel (its value or its word as shown), provider, GPU
model, tags or notes.

Whatever the language in use, a term is taken in Chinese as in English: its key
(`渠道:平台`, a full-width colon too), the value of `channel:` and `state:` as stored, as
its Chinese word or its English word, or a part of one (`channel:平台` finds the rental
platforms the table calls 算力租赁平台, `state:ok` and `state:正常` alike), `ending:` in
Chinese units (`ending:10天`, leases.alerts.state.parse_duration), and `闲置` `忙碌` `告警`
for idle, busy and alert.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from leases.core import valuewords
from leases.core.errors import InputError
from leases.core.i18n import EN, ZH, _, is_chinese, pgettext, speaking
from leases.core.models import NodeHealth, ProviderKind
from leases.fleet.nodestatus import HEALTH_LABEL, STALE_STATE

FIELDS = ("channel", "provider", "state", "model", "tag", "ending")
WORDS = ("idle", "busy", "alert", "alerts")
# Terms whose value is one of an enum's: matched by the values the typed text names.
ENUM_FIELDS = ("channel", "state")


def _field_words() -> dict[str, str]:
    """Each term's key in the language in use (the key typed in English, or this)."""
    return {
        "channel": pgettext("filter term", "channel"),
        "provider": pgettext("filter term", "provider"),
        "state": pgettext("filter term", "state"),
        "model": pgettext("filter term", "model"),
        "tag": pgettext("filter term", "tag"),
        "ending": pgettext("filter term", "ending"),
    }


def _word_words() -> dict[str, str]:
    return {
        "idle": pgettext("filter word", "idle"),
        "busy": pgettext("filter word", "busy"),
        "alert": pgettext("filter word", "alert"),
    }


def _channel_words() -> dict[str, list[str]]:
    said = valuewords.words(ProviderKind)
    return {k.value: [said.get(k.value, k.value)] for k in ProviderKind}


def _state_words() -> dict[str, list[str]]:
    """A node's state (NodeHealth's value, or stale) -> its words: the value's, and the
    fleet table's label where it has its own ("needs reboot")."""
    said = valuewords.words(NodeHealth)
    out = {h.value: [said.get(h.value, h.value)] for h in NodeHealth}
    for health, label in HEALTH_LABEL.items():
        out[health.value].append(_(label))
    out[STALE_STATE] = [_(STALE_STATE)]
    return out


def _both(words: Callable[[], dict[str, str]]) -> dict[str, set[str]]:
    """value -> its words in Chinese and in English (folded: compared as typed)."""
    out: dict[str, set[str]] = {}
    for lang in (ZH, EN):
        with speaking(lang):  # this task only: other threads keep theirs
            for value, word in words().items():
                out.setdefault(value, set()).add(_fold(word))
    return out


def _both_lists(words: Callable[[], dict[str, list[str]]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for lang in (ZH, EN):
        with speaking(lang):
            for value, said in words().items():
                out.setdefault(value, {_fold(value)}).update(_fold(w) for w in said)
    return out


# Full-width brackets and colon as a Chinese input method types them.
_FOLD = str.maketrans({"（": "(", "）": ")", "：": ":", "\u3000": " "})


def _fold(text: str) -> str:
    return text.translate(_FOLD).casefold()


@dataclass(frozen=True)
class RowFacts:
    """What the filter and the grouping know of one row (channel and state: the stored
    values, never their words)."""

    name: str
    channel: str = ""
    provider: str = ""
    model: str = ""
    tags: tuple[str, ...] = ()
    notes: str = ""
    state: str = ""  # a NodeHealth value, or "stale"
    idle: bool = False  # every GPU read idle now
    busy: bool = False  # some GPU busy now
    ends_in_s: float | None = None  # paid-for time left; None: no end
    alerts: int = 0


@dataclass(frozen=True)
class Filter:
    text: str = ""
    # (key, typed value) of a term matched by a part of the row's text (provider, model, tag)
    fields: tuple[tuple[str, str], ...] = ()
    words: tuple[str, ...] = ()
    free: tuple[str, ...] = ()
    ending: timedelta | None = None
    # (key, the stored values the typed value names) of channel: and state:
    among: tuple[tuple[str, frozenset[str]], ...] = ()
    # per free word: the channels whose word in the language in use holds it
    free_channels: tuple[frozenset[str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.fields or self.words or self.free or self.ending or self.among)


# A filter is typed, not pasted: every row is matched against every term at each
# keystroke, so a 4 KB paste froze the screen for seconds. Longer is refused, by name.
MAX_CHARS = 200


def _key(typed: str, keys: dict[str, set[str]]) -> str | None:
    for key, said in keys.items():
        if typed == key or typed in said:
            return key
    return None


def _named(typed: str, words: dict[str, set[str]]) -> frozenset[str]:
    """The values whose value or word (in either language) holds the typed text."""
    return frozenset(v for v, said in words.items() if any(typed in w for w in said))


def _known(keys: Iterable[str]) -> str:
    if not is_chinese():
        return ", ".join(f + ":" for f in keys)
    said = _field_words()
    return "、".join(f"{f}:（{said[f]}）" for f in keys)


def parse(text: str) -> Filter:
    """The filter the user typed; InputError naming the term for one zuka cannot read
    (its field said in the language in use: 筛选)."""
    where = pgettext("filter term", "filter")
    if len(text) > MAX_CHARS:
        raise InputError(where, text[:40], _("is longer than {n} characters").format(n=MAX_CHARS))
    keys = _both(_field_words)
    flags = _both(_word_words)
    fields: list[tuple[str, str]] = []
    among: list[tuple[str, frozenset[str]]] = []
    words: list[str] = []
    free: list[str] = []
    free_channels: list[frozenset[str]] = []
    ending: timedelta | None = None
    for term in text.split():
        low = _fold(term)
        typed_key, sep, value = low.partition(":")
        key = _key(typed_key, keys) if sep else None
        word = _key(low, flags) if low != "alerts" else "alert"
        if key is not None:
            if not value:
                raise InputError(where, term, _("give a value after '{key}:'").format(key=key))
            if key == "ending":
                # Here: the alert rules it lives with are read after the first paint.
                from leases.alerts.state import parse_duration

                said = _field_words()["ending"]
                ending = parse_duration(value, _("{filter} {term}").format(filter=where, term=said))
            elif key == "channel":
                among.append((key, _named(value, _both_lists(_channel_words))))
            elif key == "state":
                among.append((key, _named(value, _both_lists(_state_words))))
            else:
                fields.append((key, value))
        elif sep and typed_key.isalpha():
            raise InputError(
                where,
                term,
                _("unknown term '{key}:'; known: {known}").format(
                    key=typed_key, known=_known(FIELDS)
                ),
            )
        elif word is not None:
            words.append(word)
        else:
            free.append(low)
            shown = {v: {_fold(w) for w in said} for v, said in _channel_words().items()}
            free_channels.append(_named(low, shown))
    return Filter(
        text, tuple(fields), tuple(words), tuple(free), ending, tuple(among), tuple(free_channels)
    )


def _has(values: Sequence[str], wanted: str) -> bool:
    return any(wanted in v.casefold() for v in values)


def matches(f: Filter, row: RowFacts) -> bool:
    for key, value in f.fields:
        if key == "tag":
            if not _has(row.tags, value):
                return False
        elif value not in getattr(row, key).casefold():
            return False
    for key, values in f.among:
        if getattr(row, key) not in values:
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
    channels = f.free_channels or (frozenset(),) * len(f.free)
    return all(
        _has(haystack, word) or row.channel in named
        for word, named in zip(f.free, channels, strict=True)
    )
