"""The language a `zuka` command speaks, chosen before its parser is built (the help is
written in it): `--lang`, then $ZUKA_LANG, then the config's `[ui] lang`, then the locale
(leases.core.i18n.choose). A command asked for `--json` runs in English, so what it prints
is the same bytes in every language; and argparse's own words (usage, options, its errors)
come from zuka's catalogue."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from leases.core.i18n import (
    EN,
    LANGS,
    N_,
    LanguageError,
    _,
    choose,
    locale_lang,
    ngettext,
    set_language,
)
from leases.core.textsafe import visible

LANG_HELP = N_("the language zuka speaks: {choices} (default: $ZUKA_LANG, else the config's "
               "[ui] lang, else the locale)")  # fmt: skip


def lang_help() -> str:
    return _(LANG_HELP).format(choices=", ".join(LANGS))


def given(words: Sequence[str], flag: str) -> str | None:
    """The value of `flag VALUE` or `flag=VALUE` among the words before `--` (the last
    one wins, as argparse has it); None when not given."""
    found: str | None = None
    for i, word in enumerate(words):
        if word == "--":
            break
        if word == flag and i + 1 < len(words):
            found = words[i + 1]
        elif word.startswith(flag + "="):
            found = word.split("=", 1)[1]
    return found


def wants_json(words: Sequence[str]) -> bool:
    for word in words:
        if word == "--":
            return False
        if word == "--json":
            return True
    return False


def apply(words: Sequence[str], env: Mapping[str, str] = os.environ) -> str:
    """Choose and speak the command's language; returns it. LanguageError for a `--lang`
    or $ZUKA_LANG zuka does not speak."""
    flag = given(words, "--lang")
    config: str | None = None
    if not flag and not env.get("ZUKA_LANG"):
        from leases.config.lang import Unspoken, read_config_lang

        found = read_config_lang(given(words, "--config"), env)
        if isinstance(found, Unspoken):
            _say_unspoken(found.where, found.value, env)
        else:
            config = found
    try:
        lang = choose(flag, env, config)
    except LanguageError:
        # Refused in the language the locale speaks (the one left), said anew in it.
        set_language(locale_lang(env))
        choose(flag, env, config)
        raise
    set_language(EN if wants_json(words) else lang)
    return lang


def _say_unspoken(where: str, value: str, env: Mapping[str, str]) -> None:
    """A config's `[ui] lang` zuka does not speak, said once on stderr in the language
    chosen without it (the locale's); the command goes on in that language (a config a lab
    shares must not stop everyone's zuka)."""
    set_language(locale_lang(env))
    print(
        _(
            "zuka: note: {where}: [ui] lang = {value!r} is not a language zuka speaks"
            " (choose {choices}); going on without it"
        ).format(where=visible(where, 300), value=visible(value, 40), choices=" | ".join(LANGS)),
        file=sys.stderr,
    )


# argparse asks gettext for its words through its module's `_` and `ngettext`; these send
# them to zuka's catalogue instead (tui/cli/argwords.py marks each of them for it).
argparse._ = _  # type: ignore[attr-defined]
argparse.ngettext = ngettext  # type: ignore[attr-defined]
