"""An option whose values are an enum's (argparse `choices`), as the command line takes
and lists them: the value, or its word in Chinese or English (`--billing 包月`), read as
the value before argparse checks it; in Chinese the help lists each value with its word
(leases.core.valuewords). English help and usage stay as argparse writes them."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from leases.core import valuewords
from leases.core.i18n import is_chinese


def typed(enum: type[Enum] | str) -> Callable[[str], str]:
    """argparse's `type`: a word of enum read as its value; anything else as typed (then
    refused by `choices`, which names the values)."""

    def read(text: str) -> str:
        return valuewords.parse(enum, text) or text

    return read


def help_of(enum: type[Enum] | str, said: str | None = None) -> str | None:
    """An enum option's help: `said` (None: none) in English; in Chinese the values with
    their words after it."""
    if not is_chinese():
        return said
    values = valuewords.listed(enum)
    return f"{said}；{values}" if said else values
