"""The in-process command line the `cli` and `z` fixtures (tests/conftest.py) hand a test:
one call runs `zuka ARGS...` on the test's ledger and returns its exit code and output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class CliResult:
    code: int
    out: str
    err: str


Cli = Callable[..., CliResult]
