"""A record's command-line options, from its flag table (leases.app.flags): adding them to
a parser, and picking the ones given."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from leases.app.flags import HELP


def add_flags(
    p: argparse.ArgumentParser,
    table: Mapping[str, tuple[str, str]],
    required: set[str],
    helps: Mapping[str, str] | None = None,
) -> None:
    for key, (flag, dest) in table.items():
        text = (helps or {}).get(key, HELP.get(key))
        p.add_argument(flag, dest=dest, required=key in required, help=text)


def pick(args: argparse.Namespace, table: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    return {
        key: getattr(args, dest)
        for key, (_, dest) in table.items()
        if getattr(args, dest, None) is not None
    }
