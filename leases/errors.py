"""Errors the domain raises for bad input, each naming the field and the value."""

from __future__ import annotations


class InputError(ValueError):
    """Input that was refused. Nothing was changed."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}: {reason} (got {value!r})")


class UnknownNode(InputError):
    def __init__(self, name: str) -> None:
        super().__init__("node", name, "no node of that name in the ledger")


class LedgerError(RuntimeError):
    """The ledger file cannot be used (newer schema, not a zuka ledger, unreadable)."""
