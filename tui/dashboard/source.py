"""Where the dashboard's readings come from, in the words its header says: polled here,
read from a collector, or in a lab read from the service every member's dashboard reads;
and the ledger checked before the app starts, read-only where this user may only read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from leases.core.errors import LedgerError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.store import Ledger


@dataclass(frozen=True)
class Source:
    """What the app knows of who polls its ledger."""

    polling_every: float | None  # seconds, when this dashboard's poller runs
    fault: str | None  # the poller's last fault, when it died and restarts
    starting: bool  # a poller of this dashboard exists (starting or restarting)
    collector_pid: int | None  # who else holds the poller lock
    lab: bool  # the ledger is a lab's: the service polls, never a dashboard
    waiting_for_nodes: bool  # would poll, but the ledger has no node yet


def source_words(s: Source) -> str:
    if s.polling_every is not None:
        return _("polling every {seconds:g} s").format(seconds=s.polling_every)
    if s.starting and s.fault:  # died: restarting
        return _("NOT polling ({fault}): restarting").format(fault=visible(s.fault, 60))
    if s.starting:
        return _("starting the poller")
    if s.lab and s.collector_pid is not None and s.collector_pid > 0:
        return _("reading the lab's collector (pid {pid})").format(pid=s.collector_pid)
    if s.lab and s.collector_pid is not None:  # its lock is the service user's alone
        return _("reading the lab's collector")
    if s.lab:
        return _("the lab's collector is not running: ask the lab's admin (zuka service status)")
    if s.collector_pid is not None:
        return _("reading collector pid {pid}").format(pid=s.collector_pid)
    if s.waiting_for_nodes:
        return _("no nodes yet")
    return _("not polling")


def check_ledger(ledger_path: Path) -> bool:
    """The ledger opened once before the app starts, so that a file that is not a zuka
    ledger is refused in plain words, not in a traceback from inside the running app.
    True when this user may only read it (a lab's viewer): then it opens read-only, and
    a file that cannot even be read still raises."""
    try:
        Ledger.open(ledger_path).close()
    except LedgerError:
        if not ledger_path.is_file():
            raise
        Ledger.open(ledger_path, readonly=True).close()
        return True
    return False
