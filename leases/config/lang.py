"""The config's `[ui] lang`, read before anything else a command does: the language its
help and its errors are written in depends on it. Cheap (two small files at most). A config
that cannot be read says nothing here (the command's own load of it reports the problem);
a `[ui] lang` zuka does not speak is handed back as `Unspoken` for the command line to say
once on stderr, and the language is chosen without it: a config a whole lab shares must not
stop everyone's zuka (leases.config.load passes over it too)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from leases.config.keys import BY_KEY, BadValue
from leases.core.configfile import parse_toml, read_text
from leases.core.errors import ConfigError
from leases.lab.sysconfig import system_config_path

KEY = "ui.lang"


@dataclass(frozen=True)
class Unspoken:
    """A `[ui] lang` zuka does not speak: where it was set (a file, or the variable) and
    its value."""

    where: str
    value: str


def config_lang(cli_config: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """`[ui] lang` as the layers lay it: $ZUKA_UI_LANG over the user's file over the
    system config. None: not set, not readable here, or not a language zuka speaks."""
    found = read_config_lang(cli_config, env)
    return found if isinstance(found, str) else None


def read_config_lang(
    cli_config: str | None, env: Mapping[str, str] = os.environ
) -> str | Unspoken | None:
    """`[ui] lang` as the layers lay it (the first layer that sets it), or Unspoken for
    a value zuka does not speak; None when not set or not readable here."""
    spec = BY_KEY[KEY]
    if env.get(spec.env):
        return _checked(env[spec.env], f"${spec.env}")
    from leases.config.load import resolve_config_path

    user, _given = resolve_config_path(cli_config, env)
    for path in (user, system_config_path(env)):
        if path is None:
            continue
        try:
            raw = parse_toml(read_text(path)[0], path)
        except (OSError, ConfigError, ValueError):
            continue
        section = raw.get("ui")
        if isinstance(section, dict) and "lang" in section:
            return _checked(section["lang"], str(path))
    return None


def _checked(value: object, where: str) -> str | Unspoken:
    try:
        return str(BY_KEY[KEY].parse(value))
    except BadValue:
        return Unspoken(where, value if isinstance(value, str) else repr(value))
