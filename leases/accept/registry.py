"""The check families a run takes, in registry order (the engine sorts by cost, this
order breaking ties). Each family is a module of leases.accept.checks exposing
`CHECK: Check`: inventory, sharing, health, links, heavy, sshd, host."""

from __future__ import annotations

from leases.accept.checks import health, heavy, host, inventory, links, sharing, sshd
from leases.accept.engine import Check


def checks() -> tuple[Check, ...]:
    """Every family's check, in registry order."""
    return (
        inventory.CHECK,
        sharing.CHECK,
        health.CHECK,
        links.CHECK,
        sshd.CHECK,
        host.CHECK,
        heavy.CHECK,
    )
