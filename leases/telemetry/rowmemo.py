"""A node's nvidia-smi output as last read and what it parsed to (leases.telemetry.nvsmi.
parse_query's memo): the warm sweep's rows and whole outputs that come back unchanged are
not parsed again. One per node (leases.telemetry.nodestate), a stream's too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from leases.core.models import GpuSample
from leases.telemetry import nvsmi


class RowMemo:
    """One node's GPU rows as last read and what they parsed to: a row that comes back the
    same, byte for byte, is not parsed again (its sample still takes the new time), and
    of one that changed only the tokens that changed are (nvsmi.row_values). Holds one
    row per GPU index, the last one read (a 1,000-node poller holds 1,000 of these); a
    new field list forgets them all."""

    def __init__(self) -> None:
        self._fields: tuple[str, ...] = ()
        self._index_at = 0  # where the index is in the fields
        # A row's line -> its tokens and what they parsed to (nvsmi.row_values' `before`).
        self._rows: dict[str, tuple[list[str], dict[str, object]]] = {}
        self._line_of: dict[object, str] = {}  # GPU index -> its row in _rows
        # The whole output last read, whom it came from and what it gave: read again
        # unchanged (an idle node, a second that did not move), it is not split again.
        self._text: str | None = None
        self._node = ""
        self._samples: tuple[GpuSample, ...] = ()

    def __len__(self) -> int:
        return len(self._rows)

    def parse(self, line: str, line_no: int, fields: Sequence[str]) -> dict[str, object]:
        """parse_row(line, line_no, fields), or what it gave for the same line before."""
        if tuple(fields) != self._fields:
            self._fields, self._rows, self._line_of = tuple(fields), {}, {}
            # (no index: its rows fail in row_values as they always did)
            self._index_at = self._fields.index("index") if "index" in fields else 0
            self._text = None
        held = self._rows.get(line)
        if held is not None:
            return {**held[1], "extra": dict(held[1]["extra"])}  # type: ignore[call-overload]
        tokens = nvsmi.row_tokens(line, line_no, fields)
        # The same GPU's row read last, found by its index as read before (a new index
        # token: the whole row is read).
        was = self._line_of.get(nvsmi.held_index(tokens[self._index_at]))
        before = self._rows[was] if was is not None else None
        values = nvsmi.row_values(tokens, line_no, fields, before)
        index = values["index"]
        old = self._line_of.get(index)
        if old is not None:
            del self._rows[old]
        self._rows[line] = (tokens, {**values, "extra": dict(values["extra"])})  # type: ignore[call-overload]
        self._line_of[index] = line
        return values

    def again(
        self, text: str, fields: Sequence[str], node: str, at: datetime
    ) -> list[GpuSample] | None:
        """What the same whole output gave last time for this node and field list, at the
        new time; None when it is not the same (or gave no sample)."""
        if text == self._text and node == self._node and tuple(fields) == self._fields:
            return _retimed(self._samples, at) or None
        return None

    def keep_output(self, text: str, node: str, samples: Sequence[GpuSample]) -> None:
        """Hold a whole output that parsed (every check passed) and its samples."""
        self._text, self._node, self._samples = text, node, tuple(samples)


def _retimed(samples: Sequence[GpuSample], at: datetime) -> list[GpuSample]:
    """The same readings at a new time, each with its own extra: their fields copied whole
    without GpuSample's keyword __init__, which costs six times as much (a 1,000-node
    poller makes 8,000 a sweep), in one loop (no call a sample). Frozen dataclass
    instances keep their fields in __dict__."""
    out = []
    for sample in samples:
        fields = sample.__dict__.copy()
        fields["at"], fields["extra"] = at, sample.extra.copy()
        new = object.__new__(GpuSample)
        object.__setattr__(new, "__dict__", fields)
        out.append(new)
    return out
