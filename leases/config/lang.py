"""The config's `[ui] lang`, read before anything else a command does: the language its
help and its errors are written in depends on it. Cheap (two small files at most) and
quiet: a config that cannot be read or is wrong says nothing here; the command's own
load of it (leases.config.load) reports the problem, in the language chosen without it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from leases.config.keys import BY_KEY, BadValue
from leases.core.configfile import parse_toml, read_text
from leases.core.errors import ConfigError
from leases.lab.sysconfig import system_config_path

KEY = "ui.lang"


def config_lang(cli_config: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """`[ui] lang` as the layers lay it: $ZUKA_UI_LANG over the user's file over the
    system config. None: not set, or not readable here."""
    spec = BY_KEY[KEY]
    if env.get(spec.env):
        return _checked(env[spec.env])
    from leases.config.load import resolve_config_path

    user, _ = resolve_config_path(cli_config, env)
    for path in (user, system_config_path(env)):
        if path is None:
            continue
        try:
            raw = parse_toml(read_text(path)[0], path)
        except (OSError, ConfigError, ValueError):
            continue
        section = raw.get("ui")
        if isinstance(section, dict) and isinstance(section.get("lang"), str):
            return _checked(section["lang"])
    return None


def _checked(value: str) -> str | None:
    try:
        return str(BY_KEY[KEY].parse(value))
    except BadValue:
        return None
