"""The language zuka speaks: one gettext catalogue (domain "zuka") per language, shipped in
the package under leases/locale, and the one place that says which language is in use.

Every user-facing string is written in English in the code and goes through `_` (or
`ngettext` for a count, `pgettext` where the same English word needs two translations):

    raise InputError("price", text, _("must be a number of yuan, e.g. 12.50"))
    print(_("{count} nodes polled").format(count=n))

A string that must be written before the language is known (a module's constant, a
table's column, a rule's advice) is marked with `N_` where it is written and translated
with `_` where it is shown, so a runtime switch (the dashboard's palette) shows it anew.
Placeholders are always named (`{name}`), never positional, so a translation may reorder
them; tests/i18n/test_catalogues.py checks each translation keeps the same ones.

Which language: `--lang`, then $ZUKA_LANG, then the config file's `[ui] lang`, then the
locale ($LC_ALL, $LC_MESSAGES, $LANG, the first set), the same order as `--ledger`
(`choose`). `--json` output never changes with the language: the front ends write it
under English (`using(EN)`).
"""

from __future__ import annotations

import gettext as _gettext
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

DOMAIN = "zuka"
EN = "en"
ZH = "zh_CN"
LANGS = (EN, ZH)
# The words each language is named by in a choice (`--lang`, the palette).
NAMES = {EN: "English", ZH: "简体中文"}
# A language named in words, as a person types it (`--lang 中文`, $ZUKA_LANG, `[ui] lang`):
# the words the palette finds the switch by, and their everyday kin (English in any case).
WORDS = {
    "中文": ZH,
    "简体中文": ZH,
    "简体": ZH,
    "汉语": ZH,
    "chinese": ZH,
    "英文": EN,
    "英语": EN,
    "english": EN,
}
ENV = "ZUKA_LANG"
LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")

_LANG_RE = re.compile(
    r"(?P<lang>[A-Za-z]{2,3})(?:[_-][A-Za-z0-9]{2,8}){0,2}(?:\.[A-Za-z0-9_-]{1,20})?(?:@[A-Za-z0-9_-]{1,20})?"
)


class LanguageError(ValueError):
    """A language zuka was asked for and does not speak; the message names it."""


def parse_lang(text: str) -> str | None:
    """The language a tag or locale names ("zh_CN.UTF-8", "zh-CN", "zh", "en_US", "C"),
    as one of LANGS; None for one zuka does not speak. Every Chinese locale reads the
    Simplified catalogue (it is the one there is). A language's name in words ("中文",
    "简体中文", "汉语", "英文", "English": WORDS) names it too."""
    text = text.strip()
    named = WORDS.get(text.casefold())
    if named is not None:
        return named
    if text in ("C", "POSIX") or re.fullmatch(r"(?:C|POSIX)\.[A-Za-z0-9_-]{1,20}", text):
        return EN
    m = _LANG_RE.fullmatch(text)  # the whole of it: "zh/../x" or "zh\x1b[31m" is none
    if m is None:
        return None
    base = m.group("lang").lower()
    if base == "zh":
        return ZH
    if base == "en":
        return EN
    return None


def checked_lang(text: str, where: str) -> str:
    """A language given on purpose (`--lang`, $ZUKA_LANG, the config): one zuka speaks, or
    LanguageError naming where it came from, what it was, and the choices."""
    found = parse_lang(text)
    if found is None:
        shown = text[:40]  # quoted once, by !r (which escapes what cannot be printed)
        raise LanguageError(
            _("{where}: zuka does not speak {got!r}; choose {choices}").format(
                where=where,
                got=shown,
                choices=_("{first} or {second}").format(first=LANGS[0], second=LANGS[1]),
            )
        )
    return found


def locale_lang(env: Mapping[str, str]) -> str:
    """The locale's language: the first of $LC_ALL, $LC_MESSAGES, $LANG that is set (as
    POSIX orders them); English for one zuka does not speak, or none."""
    for var in LOCALE_VARS:
        value = env.get(var, "")
        if value:
            return parse_lang(value) or EN
    return EN


def choose(flag: str | None, env: Mapping[str, str], config: str | None) -> str:
    """The language a command runs in: `--lang`, then $ZUKA_LANG, then the config's
    `[ui] lang`, then the locale. A flag or variable zuka cannot speak is refused
    (LanguageError); a locale it cannot speak is English."""
    if flag:
        return checked_lang(flag, "--lang")
    if env.get(ENV):
        return checked_lang(env[ENV], f"${ENV}")
    if config:
        return checked_lang(config, "[ui] lang")
    return locale_lang(env)


# -- the catalogue in use ---------------------------------------------------------------

_LOCALE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "locale")
# English is the source's own words: speaking it reads no catalogue (its .mo, shipped for
# completeness, says every message as written).
_SOURCE = _gettext.NullTranslations()
_catalogues: dict[str, _gettext.NullTranslations] = {}
_current: list[str] = [EN]
_active: list[_gettext.NullTranslations] = [_gettext.NullTranslations()]
# A task's own language (`speaking`), over the process's: an acceptance run writes what it
# stores in English while the dashboard, in another task, draws in Chinese.
_task: ContextVar[str | None] = ContextVar("zuka_speaking", default=None)


def catalogue(lang: str) -> _gettext.NullTranslations:
    """A language's compiled catalogue, read once from the package (English's when the
    file is missing, so a broken install still speaks)."""
    found = _catalogues.get(lang)
    if found is None:
        # Beside the package's modules (no importlib.resources: a cold command's import
        # time counts, leases/core/ -> leases/locale/).
        path = os.path.join(_LOCALE, lang, "LC_MESSAGES", f"{DOMAIN}.mo")
        try:
            with open(path, "rb") as fh:
                found = _gettext.GNUTranslations(fh)
        except Exception as exc:  # a missing, cut or tampered file: English, said once
            found = _gettext.NullTranslations()
            print(
                f"zuka: the {lang} catalogue {path} cannot be read ({type(exc).__name__}):"
                " speaking English",
                file=sys.stderr,
            )
        _catalogues[lang] = found
    return found


def set_language(lang: str) -> None:
    """Speak lang (one of LANGS) from now on, in this process."""
    if lang not in LANGS:
        raise LanguageError(f"not a language zuka speaks: {lang!r}")
    _active[0] = _SOURCE if lang == EN else catalogue(lang)
    _current[0] = lang


def language() -> str:
    """The language in use, one of LANGS: this task's own (`speaking`), else the
    process's. Every "in the language in use" (money's ¥ or CNY, a value's word, a
    retelling) follows it, so what a task stores in English is English throughout."""
    return _task.get() or _current[0]


def is_chinese() -> bool:
    return language() == ZH


@contextmanager
def using(lang: str) -> Iterator[None]:
    """Speak lang inside the block, then the language before it (JSON is written under
    English: `with using(EN): ...`)."""
    before = _current[0]
    set_language(lang)
    try:
        yield
    finally:
        set_language(before)


def _now() -> _gettext.NullTranslations:
    lang = _task.get()
    if lang is None:
        return _active[0]
    return _SOURCE if lang == EN else catalogue(lang)


def translations() -> _gettext.NullTranslations:
    """What `_` and pgettext translate with in this task now: a cache of translated words
    is keyed by it (one object per language and catalogue)."""
    return _now()


def speaking_now() -> str:
    """The language this task speaks (language())."""
    return language()


@contextmanager
def speaking(lang: str) -> Iterator[None]:
    """This task (and what it awaits) speaks lang inside the block; other tasks keep
    theirs. For what is stored in English while a person reads their language."""
    if lang not in LANGS:
        raise LanguageError(f"not a language zuka speaks: {lang!r}")
    token = _task.set(lang)
    try:
        yield
    finally:
        _task.reset(token)


def _(message: str) -> str:
    """message in the language in use (itself where the catalogue lacks it)."""
    if not message:
        return message
    return _now().gettext(message)


def N_(message: str) -> str:
    """message as it is: marks a string for the catalogue, translated later with `_`."""
    return message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form for n things in the language in use ("1 node" / "3 nodes")."""
    return _now().ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """message in the language in use, where the same English needs two translations
    (context tells them apart: pgettext("column", "Idle"))."""
    return _now().pgettext(context, message)
