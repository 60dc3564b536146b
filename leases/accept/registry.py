"""The check families a run takes, in registry order (the engine sorts by cost, this
order breaking ties). Each family is a module of leases.accept.checks exposing
`CHECK: Check`: inventory, sharing, health, links, heavy, sshd, host."""

from __future__ import annotations

from leases.accept.checks import heavy, host, links, sshd
from leases.accept.engine import Check


def checks() -> tuple[Check, ...]:
    """Every family's check, in registry order."""
    return (links.CHECK, sshd.CHECK, host.CHECK, heavy.CHECK)
