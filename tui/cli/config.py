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
from leases.core.textsafe import visible
from leases.lab.sysconfig import SYSTEM_CONFIG_ENV
from tui.cli import output


def _warn(config: Config) -> None:
    for warning in config.warnings:
        print(f"zuka: warning: {visible(warning)}", file=sys.stderr)


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
            print(f"zuka: config: {visible(problem)}", file=sys.stderr)
        return 2
    _warn(config)
    for layer in config.layers:
        if layer.kind != USER and layer.state != "absent":
            state = "ok" if layer.state == "read" else layer.state
            print(f"{layer.kind} {visible(str(layer.path))}: {visible(state)}", file=out)
    where = config.path or f"{resolve_config_path(args.config)[0]} (absent: defaults)"
    print(f"{visible(where)}: ok", file=out)
    return 0


def _layer_words(layer: Layer) -> str:
    if layer.state == "read":
        return ""
    if layer.state == "absent":
        return " (absent)"
    if layer.kind == SECRETS:  # a viewer's: the tokens are the service's and the editors'
        return f" ({layer.state}: its notification URLs are for the service and the editors)"
    return f" ({layer.state})"


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
        print(f"# {SYSTEM}: off (${SYSTEM_CONFIG_ENV} is empty or the null device)", file=out)
    for layer in config.layers:
        if layer.kind == USER:
            continue  # said below, absent or not
        print(f"# {layer.kind}: {visible(str(layer.path))}{_layer_words(layer)}", file=out)
    path, _ = resolve_config_path(args.config)
    below = "the layers above" if any(x.state == "read" for x in config.layers) else "defaults"
    state = "" if config.path is not None else f" (absent: {below})"
    print(f"# config file: {visible(path)}{state}", file=out)
    for s in settings:
        value = json.dumps(s.value, ensure_ascii=False)
        print(visible(f"{s.key} = {value}  ({s.source})"), file=out)
    return 0
