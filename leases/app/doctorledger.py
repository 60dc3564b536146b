"""What `zuka doctor` reads of the ledger: the keys its nodes log in with, each node's last
state, and who polls it. Opened read-only; a ledger that cannot be opened is a finding."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from leases.app.doctor import NodeSeen
from leases.app.service import holder_user
from leases.core.errors import LedgerError
from leases.core.i18n import _
from leases.ledger import files
from leases.ledger.store import Ledger
from leases.telemetry.lock import PollerLock
from leases.telemetry.rollups import HistoryStore


@dataclass(frozen=True)
class LedgerLook:
    total: int  # nodes in the ledger
    keys: tuple[tuple[str, str], ...]  # (node, key path) of nodes that name one
    seen: tuple[NodeSeen, ...]
    polled_by: str | None  # "pid 812 (user zuka)", None when nobody holds the poller lock
    problem: str = ""  # why the ledger could not be read


def look(path: Path) -> LedgerLook:
    """The ledger at path read once, read-only; what kept it from being read (a lab's
    folder this user may not enter, a file that is no ledger) is its problem."""
    try:
        polled_by = poller(path)
        if not files.exists(path):
            return LedgerLook(0, (), (), polled_by)
        ledger = Ledger.open(path, create=False, readonly=True)
    except (LedgerError, OSError) as exc:
        return LedgerLook(0, (), (), None, str(exc))
    try:
        nodes = ledger.nodes()
        keys = tuple((n.name, n.ssh.key_path) for n in nodes if n.ssh.key_path)
        latest = HistoryStore(ledger).latest_by_id()
        seen = tuple(
            NodeSeen(s.node, s.health, s.checked, s.detail)
            for s in latest.values()
            if s.checked is not None
        )
    finally:
        ledger.close()
    return LedgerLook(len(nodes), keys, seen, polled_by)


def poller(path: Path) -> str | None:
    """Who holds the ledger's poller lock, in words, or None."""
    try:
        pid = PollerLock(path).holder()
    except OSError:
        return None
    if pid is None:
        return None
    if pid <= 0:
        return _("a process (its pid unreadable)")
    user = holder_user(pid)
    if user is None:
        return _("pid {pid}").format(pid=pid)
    return _("pid {pid} (user {user})").format(pid=pid, user=user)
