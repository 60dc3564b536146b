"""The user's key remaps: `[keys]` in the config (binding id -> keys) checked against the
bindings zuka has, then handed to `App.set_keymap`.

Every zuka Binding has an id ("<screen>-<verb>"); those ids are what a user remaps. An
unknown id or a key Textual would never send is refused with the id or key named (and a
"did you mean"), and then no remap at all is applied: bad input changes nothing.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import (
    REPLACED_KEYS,
    Keys,
    _normalize_key_list,
    key_to_character,
)

from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible

# Packages whose screens and widgets hold zuka's bindings: a new screen file is found
# without being listed anywhere. Plus the modules outside them that bind keys.
BINDING_PACKAGES = ("tui.screens", "tui.widgets")
BINDING_MODULES = ("tui.dashboard.app",)

MODIFIERS = ("ctrl", "shift", "alt", "meta", "super", "hyper")
# Named keys Textual sends (escape, f1, pageup...) and the names of printable characters
# it uses for them (question_mark, slash): a key outside these never arrives.
NAMED_KEYS = frozenset(
    {k.value.rpartition("+")[2] for k in Keys}
    | {"space", "enter", "tab", "backspace", "escape", "delete", "insert"}
)


@dataclass(frozen=True)
class BindingSite:
    """Where a binding id is declared: the class that binds it, and the binding itself."""

    owner: str  # the class's name, e.g. "AlertsScreen"
    binding: Binding


def _modules() -> Iterator[str]:
    yield from BINDING_MODULES
    for package in BINDING_PACKAGES:
        try:
            found = importlib.import_module(package)
        except ModuleNotFoundError as exc:
            if exc.name != package:  # a package that exists but fails to import: say so
                raise
            continue
        for info in pkgutil.iter_modules(found.__path__):
            yield f"{package}.{info.name}"


def known_bindings() -> dict[str, BindingSite]:
    """Every binding id zuka declares, from the app and every screen and widget class."""
    out: dict[str, BindingSite] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name or not issubclass(cls, DOMNode):
                continue
            for item in cls.__dict__.get("BINDINGS", ()):
                if isinstance(item, Binding) and item.id:
                    out.setdefault(item.id, BindingSite(cls.__name__, item))
    return out


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return " " + _("(did you mean {word}?)").format(word=close[0]) if close else ""


def key_problem(key: str) -> str | None:
    """Why Textual would never send `key` (e.g. "ctlr+f", "f99", "slsh"), or None."""
    if not key:
        return _("an empty key")
    if len(key) == 1:
        return None if key.isprintable() and not key.isspace() else _("not a printable key")
    *mods, base = key.split("+")
    for mod in mods:
        if mod not in MODIFIERS:
            return _("unknown modifier {key}").format(key=_quoted(mod)) + _did_you_mean(
                mod, list(MODIFIERS)
            )
    if len(base) == 1 and base.isprintable() and not base.isspace():
        return None
    if base in NAMED_KEYS or key_to_character(REPLACED_KEYS.get(base, base)) is not None:
        return None
    return _("unknown key {key}").format(key=_quoted(base)) + _did_you_mean(
        base, sorted(NAMED_KEYS)
    )


def _quoted(word: str) -> str:
    """A word from the config as a message shows it: quoted, controls visible, bounded."""
    return visible(repr(word), 40)


def check_keys(
    keys: Mapping[str, str], known: Mapping[str, BindingSite] | None = None
) -> dict[str, str]:
    """The keymap to give `App.set_keymap`, or ConfigError with one line per problem."""
    if not keys:
        return {}  # no remaps: the screens need not be imported to check them
    known = known_bindings() if known is None else known
    problems: list[str] = []
    keymap: dict[str, str] = {}
    for binding_id, value in keys.items():
        where = f"keys.{visible(binding_id, 80)}"
        if binding_id not in known:
            hint = _did_you_mean(binding_id, sorted(known))
            problems.append(_("{where}: no binding has this id").format(where=where) + hint)
            continue
        words = [w.strip() for w in value.split(",")]
        bad = [(w, p) for w in words if (p := key_problem(w)) is not None]
        for word, problem in bad:
            problems.append(
                _("{where}: {key} is {problem}").format(
                    where=where, key=_quoted(word), problem=problem
                )
            )
        if not bad:
            keymap[binding_id] = _normalize_key_list(",".join(words))
    problems += _clashes(keymap, known)
    if problems:
        raise ConfigError(problems)
    return keymap


def _keys_of(binding_id: str, site: BindingSite, keymap: Mapping[str, str]) -> list[str]:
    return (keymap.get(binding_id) or _normalize_key_list(site.binding.key)).split(",")


def _clashes(keymap: Mapping[str, str], known: Mapping[str, BindingSite]) -> list[str]:
    """A remapped key that another binding of the same class already answers: one of the
    two would silently stop working. (A screen's key shadowing the app's is Textual's
    normal precedence, and allowed.)"""
    problems: list[str] = []
    for binding_id in keymap:
        site = known[binding_id]
        mine = set(_keys_of(binding_id, site, keymap))
        for other_id, other in known.items():
            if other_id == binding_id or other.owner != site.owner:
                continue
            shared = mine & set(_keys_of(other_id, other, keymap))
            if shared and (other_id not in keymap or other_id > binding_id):
                problems.append(
                    _("keys.{id}: {keys} is already {other}'s key on {owner}").format(
                        id=binding_id, keys=", ".join(sorted(shared)), other=other_id,
                        owner=site.owner,
                    )
                )  # fmt: skip
    return problems
