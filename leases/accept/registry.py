"""The check families a run takes, in registry order (the engine sorts by cost, this
order breaking ties). Each family is a module of leases.accept.checks exposing
`CHECK: Check`: inventory, sharing, health, links, heavy, sshd, host."""

from __future__ import annotations

from leases.accept.engine import Check


def checks() -> tuple[Check, ...]:
    """Every family's check. The families are imported here, when a run asks for them
    (the integrator lists each module of leases.accept.checks as it lands)."""
    families: list[Check] = []
    return tuple(families)
