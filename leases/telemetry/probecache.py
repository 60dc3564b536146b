"""What each node's nvidia-smi was found to know, kept in the ledger (table node_probe, m022),
so that a cold poll reads a node in one command instead of probing it first.

A row is a cache, not a record: it is not audited, and it is read back as untrusted (a row
edited behind zuka's back holding a field zuka does not ask for, or no required one, is
ignored: the node is probed afresh and the row replaced). A row is used only for the login
it was probed through (a node moved to another machine is probed again); the poller drops
it when the driver answering changes or a reading does not parse.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from leases.core.models import Node
from leases.telemetry.nvsmiprobe import checked_probe

if TYPE_CHECKING:
    from leases.ledger.store import Ledger

# The longest fields column read back: every known field name, quoted, is under 1 KB.
_MAX_FIELDS_TEXT = 4096


@dataclass(frozen=True)
class Probe:
    """The query fields a node's nvidia-smi accepted, and the driver that answered ("":
    the reading carried no driver version)."""

    fields: tuple[str, ...]
    driver: str


def target_digest(node: Node) -> str:
    """A digest of how the node is reached (address, port, user, jump hosts, config alias):
    a probe is the machine's at the end of that login, not the node name's."""
    t = node.ssh
    said = json.dumps([t.host, t.port, t.user, t.jump, t.alias], default=str)
    return hashlib.sha256(said.encode("utf-8", "replace")).hexdigest()[:32]


class ProbeCache:
    """node_probe rows over a Ledger's connection."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def load(self, nodes: Iterable[Node]) -> dict[int, Probe]:
        """The kept probes of these nodes (by node id) that still apply and read back as a
        probe's; one query. A row that does not is left out (the node is probed again)."""
        wanted = {n.id: target_digest(n) for n in nodes if n.id is not None and not n.local}
        if not wanted:
            return {}
        found: dict[int, Probe] = {}
        ids = list(wanted)
        for at in range(0, len(ids), 500):  # SQLite's bound on parameters is 999 at least
            part = ids[at : at + 500]
            marks = ",".join("?" * len(part))
            try:
                rows = self.ledger.conn.execute(
                    "SELECT node_id, fields, driver, target FROM node_probe"
                    f" WHERE node_id IN ({marks})",
                    part,
                ).fetchall()
            except sqlite3.Error:  # a ledger without the table (read-only, older): no cache
                return {}
            for node_id, fields_text, driver, target in rows:
                probe = _row_probe(fields_text, driver)
                if probe is not None and target == wanted.get(node_id):
                    found[node_id] = probe
        return found

    def save(self, changes: Mapping[int, tuple[Node, Probe] | None], now: datetime) -> None:
        """Keep (or, for None, drop) the probes of these node ids, in one transaction."""
        if not changes:
            return
        keep: list[tuple[int, str, str, str, str]] = []
        drop: list[tuple[int]] = []
        for node_id, change in changes.items():
            if change is None:
                drop.append((node_id,))
                continue
            node, probe = change
            fields = json.dumps(list(probe.fields))
            keep.append((node_id, fields, probe.driver, target_digest(node), now.isoformat()))
        with self.ledger.transaction() as conn:
            conn.executemany("DELETE FROM node_probe WHERE node_id = ?", drop)
            # Only for a node still there: one deleted meanwhile has no row to keep.
            conn.executemany(
                "INSERT OR REPLACE INTO node_probe (node_id, fields, driver, target, at)"
                " SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM nodes WHERE id = ?)",
                [(*row, row[0]) for row in keep],
            )


def _row_probe(fields_text: object, driver: object) -> Probe | None:
    if not isinstance(fields_text, str) or len(fields_text) > _MAX_FIELDS_TEXT:
        return None
    try:
        fields = json.loads(fields_text)
    except (ValueError, RecursionError):
        return None
    checked = checked_probe(fields, driver)
    if checked is None:
        return None
    assert isinstance(driver, str)  # checked_probe refuses any other
    return Probe(checked, driver)


class ProbeBook:
    """A poller's probes found and dropped since its last flush, written at the flush.

    reuse: start from the kept probes (a short-lived `zuka poll`). A long-lived poller (the
    collector, the dashboard) probes each node afresh and only writes what it found: a row
    edited behind zuka's back to drop fields (temperature, ECC...) could otherwise hide
    them for as long as it runs, and the probe is one round trip in hours."""

    def __init__(self, cache: ProbeCache | None, *, reuse: bool = True) -> None:
        self.cache = cache
        self.reuse = reuse
        self._pending: dict[int, tuple[Node, Probe] | None] = {}

    def load(self, nodes: Sequence[Node]) -> dict[int, Probe]:
        if self.cache is None or not nodes or not self.reuse:
            return {}
        return self.cache.load(nodes)

    def found(self, node: Node, probe: Probe) -> None:
        if node.id is not None:
            self._pending[node.id] = (node, probe)

    def drop(self, node: Node) -> None:
        if node.id is not None:
            self._pending[node.id] = None

    def write(self, now: datetime, log: logging.Logger) -> None:
        """Keep what was found, drop what was dropped (one transaction; never raises:
        a cache not written costs the next process a probe)."""
        changes, self._pending = self._pending, {}
        if self.cache is not None and changes:
            try:
                self.cache.save(changes, now)
            except Exception:
                log.exception("keeping %d nodes' nvidia-smi probes failed", len(changes))
