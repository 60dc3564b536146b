"""What a poller's flush carries to the ledger beyond readings: the gaps opened and closed
since the last flush, and the JSON of values that did not change since the last write."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from leases.core.models import NodeHealth, NodeStatus
from leases.telemetry.history import NodeMinute

_V = TypeVar("_V")


@dataclass(frozen=True)
class GapEvent:
    """A node's readings stopped (opened) or came back (closed) at `at`."""

    node: str
    at: datetime
    opened: bool
    health: NodeHealth = NodeHealth.OK
    detail: str = ""


class _PerNode:
    """What is held per (node id, column), forgotten with the node."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, str], Any] = {}

    def keep(self, node_ids: Iterable[int]) -> None:
        """Forget the nodes not in node_ids (their values would be held forever)."""
        ids = set(node_ids)
        for key in [k for k in self._last if k[0] not in ids]:
            del self._last[key]

    def __len__(self) -> int:
        return len(self._last)


class JsonMemo(_PerNode):
    """The JSON text last made of a value, per (node id, column): made again only when the
    value is neither the same object nor equal to the one it was made of."""

    def text(self, node_id: int, column: str, value: _V, make: Callable[[_V], str]) -> str:
        key = (node_id, column)
        held = self._last.get(key)
        if held is not None and (held[0] is value or held[0] == value):
            said: str = held[1]
            return said
        text = make(value)
        self._last[key] = (value, text)
        return text


class TextMemo(_PerNode):
    """What a JSON text read back was made into last time, per (node id, column): a text
    read again unchanged (a node's processes between the readings that change them) is
    not decoded, nor its objects made, again. `key` holds anything else the value was
    made of (the node's name)."""

    def value(
        self, node_id: int, column: str, key: object, text: str, make: Callable[[str], _V]
    ) -> _V:
        held = self._last.get((node_id, column))
        if held is not None and held[1] == text and held[0] == key:
            return held[2]  # type: ignore[no-any-return]
        value = make(text)
        self._last[(node_id, column)] = (key, text, value)
        return value


class FlushStore(Protocol):
    def write(
        self,
        minutes: Sequence[NodeMinute] = (),
        latest: Sequence[NodeStatus] = (),
        gaps: Sequence[GapEvent] = (),
    ) -> None: ...


def write_flush(
    store: FlushStore,
    minutes: Sequence[NodeMinute],
    rows: Sequence[NodeStatus],
    gaps: Sequence[GapEvent],
    log: logging.Logger,
) -> list[tuple[str, Exception]]:
    """One transaction for all nodes; when it fails, node by node, so that one node's bad
    data costs only that node's rows. Returns the nodes whose own write failed, with why
    (logged here, with the traceback)."""
    if not (minutes or rows or gaps):
        return []
    try:
        store.write(minutes, rows, gaps)
        return []
    except Exception:
        count = len(minutes) + len(rows) + len(gaps)
        log.exception("storing %d rows failed; retrying node by node", count)
    failed: list[tuple[str, Exception]] = []
    names = dict.fromkeys([*(g.node for g in gaps), *(m.node for m in minutes),
                           *(r.node for r in rows)])  # fmt: skip
    for name in names:
        try:
            store.write(
                [m for m in minutes if m.node == name],
                [r for r in rows if r.node == name],
                [g for g in gaps if g.node == name],
            )
        except Exception as exc:
            log.error("node %s: storing its reading failed", name, exc_info=exc)
            failed.append((name, exc))
    return failed
