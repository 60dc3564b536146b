"""What each field of a record is, said once beside the dataclass field, and what follows.

A field's dataclasses metadata says how it is given on the command line (`cli`), and which
record keys it stands for when that is not simply its own name (`INTERNAL`, `stands_for`,
`flattened`). From that follow, with nothing else to edit when a field is added:
the record keys and their order (database rows, audit log, `--json`, the export formats:
`record_keys`, `record_values`) and the command-line options with their help
(`options`; leases.app.flags builds its flag tables from them). The allowed values of an
enum field come from the enum itself.

The schema cannot follow: migrations are frozen history. tests/ledger/test_recordfields.py checks
that every record key has its column and every column its key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

from leases.core import valuewords
from leases.core.i18n import _, is_chinese

_CLI = "zuka.cli"
_KEYS = "zuka.keys"
_PREFIX = "zuka.prefix"


@dataclass(frozen=True)
class Option:
    """How one record key is given on the command line."""

    key: str  # the record key it sets
    flag: str  # "--price", or "NODE" for a positional argument
    dest: str  # the argparse dest
    # The help as written (English, marked N_ in models.py); `help` says it in the
    # language in use. For an enum field `{values}` in it stands for the enum's values.
    template: str
    # Written out by hand in tui (a positional argument, a switch, a value that is parsed
    # into several keys): not in the generated flag tables, but named in errors and help.
    by_hand: bool = False
    enum: type[Enum] | None = None

    @property
    def help(self) -> str:
        """The help in the language in use; for an enum field, with its values."""
        if self.enum is None:
            return _(self.template)
        return _(self.template or "{values}").format(values=choices(self.enum))


def cli(
    flag: str,
    help: str = "",
    *,
    dest: str = "",
    key: str = "",
    by_hand: bool = False,
) -> dict[str, Any]:
    """Metadata: the field is set on the command line by `flag`.

    For an enum field `{values}` in help stands for its values (see `choices`; help
    defaults to just them). dest defaults to the flag's name with `_` for `-`; key (the
    record key the flag sets) to the field's name.
    """
    return {_CLI: (flag, help, dest, key, by_hand)}


# Metadata: kept on the object only, in no record (a row id, a problem found on reading).
INTERNAL: Mapping[str, Any] = {_KEYS: ()}


def stands_for(*keys: str) -> dict[str, Any]:
    """Metadata: in a record the field is these keys instead (a lease_id is the lease's
    node and start); the code that writes the record gives their values."""
    return {_KEYS: keys}


def flattened(prefix: str) -> dict[str, Any]:
    """Metadata: a field holding a dataclass is that dataclass's fields, prefixed."""
    return {_PREFIX: prefix}


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _enum_of(hint: Any) -> type[Enum] | None:
    """The enum type of a field typed `E` or `E | None`."""
    candidates = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return candidate
    return None


def choices(enum: type[Enum]) -> str:
    """An enum's values as help shows them, each with its `note` if the enum has one
    (said in the language in use): `cloud | platform (GPU rental) | ...`. In Chinese each
    with its word (leases.core.valuewords), and its note where the word does not say it:
    `cloud（公有云） | platform（算力租赁平台）`, `storage_only（仅存储计费：…）`."""
    if is_chinese() and valuewords.words(enum):
        return " | ".join(_chinese_choice(m) for m in enum)
    return " | ".join(
        _("{value} ({note})").format(value=m.value, note=_(note))
        if (note := getattr(m, "note", ""))
        else str(m.value)
        for m in enum
    )


def _chinese_choice(member: Enum) -> str:
    value = str(member.value)
    note = getattr(member, "note", "")
    said = valuewords.with_word(value, type(member))
    word = valuewords.word(value, type(member))
    if not note or _(note) in word:
        return said
    if word == value:
        return _("{value} ({note})").format(value=value, note=_(note))
    return f"{value}（{word}：{_(note)}）"


def field_keys(cls: type, f: dataclasses.Field[Any]) -> tuple[str, ...]:
    """The record keys one field of cls stands for, in order."""
    if _PREFIX in f.metadata:
        nested = _hints(cls)[f.name]
        return tuple(f.metadata[_PREFIX] + g.name for g in dataclasses.fields(nested))
    keys: tuple[str, ...] = f.metadata.get(_KEYS, (f.name,))
    return keys


def keys_of(cls: type, name: str) -> tuple[str, ...]:
    """The record keys of cls's field `name`."""
    return field_keys(cls, next(f for f in dataclasses.fields(cls) if f.name == name))


def record_keys(cls: type) -> tuple[str, ...]:
    """The keys of cls's record, in the order of its fields (the export's column order)."""
    return tuple(key for f in dataclasses.fields(cls) for key in field_keys(cls, f))


def plain(value: Any) -> Any:
    """A field's value as a record holds it: JSON types only."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def record_values(obj: Any, **given: Any) -> dict[str, Any]:
    """obj as its record; `given` holds the values of keys the object does not have
    (see stands_for), already plain."""
    rec: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if _PREFIX in f.metadata:
            prefix = f.metadata[_PREFIX]
            rec.update(
                {prefix + g.name: plain(getattr(value, g.name)) for g in dataclasses.fields(value)}
            )
        elif _KEYS in f.metadata:
            rec.update({key: given[key] for key in f.metadata[_KEYS]})
        else:
            rec[f.name] = plain(value)
    return rec


def options(cls: type) -> tuple[Option, ...]:
    """The command-line options of cls's fields, in field order."""
    hints = _hints(cls)
    out: list[Option] = []
    for f in dataclasses.fields(cls):
        if _CLI not in f.metadata:
            continue
        flag, text, dest, key, by_hand = f.metadata[_CLI]
        out.append(
            Option(
                key=key or f.name,
                flag=flag,
                dest=dest or flag.lstrip("-").replace("-", "_").lower(),
                template=text,
                by_hand=by_hand,
                enum=_enum_of(hints[f.name]),
            )
        )
    return tuple(out)


def settable(cls: type) -> tuple[str, ...]:
    """Names of cls's fields that the command line sets."""
    return tuple(f.name for f in dataclasses.fields(cls) if _CLI in f.metadata)


def option_enum(cls: type, key: str) -> type[Enum] | None:
    """The enum whose values the option setting record key `key` of cls takes (the form's
    choices), or None for a free value."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if _CLI in f.metadata and (f.metadata[_CLI][3] or f.name) == key:
            return _enum_of(hints[f.name])
    return None
