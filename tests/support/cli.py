"""The in-process command line the `cli` and `z` fixtures (tests/conftest.py) hand a test:
one call runs `zuka ARGS...` on the test's ledger and returns its exit code and output."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class CliResult:
    code: int
    out: str
    err: str


Cli = Callable[..., CliResult]


def ok(cli: Cli, *args: str) -> str:
    """`zuka ARGS...`, which must succeed (its words and stderr said if not): its output."""
    r = cli(*args)
    assert r.code == 0, (args, r.err)
    return r.out


def json_of(cli: Cli, *args: str) -> Any:
    """`zuka ARGS... --json`, which must succeed: its output read."""
    return json.loads(ok(cli, *args, "--json"))
