"""Ledger work off the UI loop: one call in a worker thread, on a connection of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from leases.core.errors import no_ledger
from leases.ledger.store import Ledger

T = TypeVar("T")


async def in_thread(ledger: Ledger, fn: Callable[[Ledger], T]) -> T:
    """fn(a ledger on the same file), run in a thread; its InputError reaches the caller.

    A sqlite3 connection belongs to the thread that opened it, so the thread opens its own
    (same clock, same actor: the audit log says who wrote); SQLite's own locking orders it
    with the dashboard's and the collector's writes. An in-memory ledger exists only on
    its one connection, so it is called here (tests and `zuka demo` only)."""
    path = ledger.path
    if path is None:
        return fn(ledger)

    def run() -> T:
        if not path.exists():  # open(create=False) would stand an empty one in: say so
            raise no_ledger(path)
        with Ledger.open(
            path, create=False, clock=ledger.clock, actor=ledger.actor, origin=ledger.origin
        ) as own:
            return fn(own)

    return await asyncio.to_thread(run)
