"""`zuka config check` and `zuka config show`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TextIO

from leases.config.layers import SECRETS, SYSTEM, USER
from leases.config.load import load_user_config, resolve_config_path
from leases.config.sections import Config, Layer
from leases.core.errors import ConfigError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.lab.sysconfig import SYSTEM_CONFIG_ENV
from tui.cli import output


def _warn(config: Config) -> None:
    for warning in config.warnings:
        print(_("zuka: warning: {warning}").format(warning=visible(warning)), file=sys.stderr)


def check(args: argparse.Namespace, out: TextIO) -> int:
    """Exit 0 when the config is usable, 2 with every problem on its own line."""
    from tui.dashboard.keymap import check_keys

    def keys_problems(keys: Mapping[str, str]) -> list[str]:
        try:
            check_keys(keys)  # the ids and keys only the dashboard knows
        except ConfigError as exc:
            return list(exc.problems)
        return []

    try:
        # The [keys] problems with the others, in one run (they came on a second run).
        config = load_user_config(args.config, keys_check=keys_problems)
    except ConfigError as exc:
        for problem in exc.problems:
            print(_("zuka: config: {problem}").format(problem=visible(problem)), file=sys.stderr)
        return 2
    _warn(config)
    for layer in config.layers:
        if layer.kind != USER and layer.state != "absent":
            state = _("ok") if layer.state == "read" else _state(layer.state)
            print(f"{_kind(layer.kind)} {visible(str(layer.path))}: {visible(state)}", file=out)
    where = config.path or _("{path} (absent: defaults)").format(
        path=resolve_config_path(args.config)[0]
    )
    print(_("{where}: ok").format(where=visible(str(where))), file=out)
    return 0


def _kind(kind: str) -> str:
    """A layer's kind as a person reads it (JSON keeps the English kind)."""
    return {SYSTEM: _("system config"), SECRETS: _("secrets file"), USER: _("config file")}.get(
        kind, kind
    )


def _state(state: str) -> str:
    """A layer's state as a person reads it: "absent", or why it was skipped (a sentence
    from leases.config, already in the language in use)."""
    return _("absent") if state == "absent" else state


def _layer_words(layer: Layer) -> str:
    if layer.state == "read":
        return ""
    if layer.state == "absent":
        return _("absent")
    if layer.kind == SECRETS:  # a viewer's: the tokens are the service's and the editors'
        return _("{state}: its notification URLs are for the service and the editors").format(
            state=layer.state
        )
    return layer.state


def _layer_line(kind: str, path: str, state: str) -> str:
    """`# system config: /etc/zuka/config.toml (absent)`; in Chinese with its full-width
    colon and brackets (`# 系统配置：/etc/zuka/config.toml（不存在）`)."""
    where = _("{path} ({state})").format(path=path, state=state) if state else path
    return "# " + _("{header}: {value}").format(header=kind, value=where)


def show(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    _warn(config)
    settings = config.settings()
    if args.json:
        output.dump_json(
            {
                "path": None if config.path is None else str(config.path),
                "layers": [
                    {"kind": layer.kind, "path": str(layer.path), "state": layer.state}
                    for layer in config.layers
                ],
                "settings": {s.key: {"value": s.value, "source": s.source} for s in settings},
                "warnings": list(config.warnings),
            },
            out,
        )
        return 0
    if not any(layer.kind == SYSTEM for layer in config.layers):
        print(
            "# "
            + _("{layer}: off (${env} is empty or the null device)").format(
                layer=_kind(SYSTEM), env=SYSTEM_CONFIG_ENV
            ),
            file=out,
        )
    for layer in config.layers:
        if layer.kind == USER:
            continue  # said below, absent or not
        print(_layer_line(_kind(layer.kind), visible(str(layer.path)), _layer_words(layer)),
              file=out)  # fmt: skip
    path, _where = resolve_config_path(args.config)
    if config.path is not None:
        state = ""
    elif any(x.state == "read" for x in config.layers):
        state = _("absent: the layers above")
    else:
        state = _("absent: defaults")
    print(_layer_line(_kind(USER), visible(path), state), file=out)
    for s in settings:
        value = json.dumps(s.value, ensure_ascii=False)
        source = _("default") if s.source == "default" else s.source
        setting = f"{s.key} = {value}"
        print(visible(_("{setting}  ({source})").format(setting=setting, source=source)), file=out)
    return 0
