"""The long-lived `nvidia-smi --query-gpu=... -lms N` stream, read into rounds of samples."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from leases.core.models import GpuSample
from leases.telemetry.nvsmi import NvsmiParseError, as_sample, require_index
from leases.telemetry.rowmemo import RowMemo

# A real row is a few hundred characters; a stream line past this is garbage.
_MAX_LINE_CHARS = 64 * 1024


class StreamParser:
    """Turns the text of one `-lms` stream, fed in arbitrary chunks, into rounds.

    A round is one list of samples, one per GPU. It ends when the GPU index sequence
    restarts (an index not above the previous one), or as soon as it holds gpu_count rows
    when the count is known (so a round is not held back until the next one begins).
    Every sample of a round carries the time clock() gave when its first row arrived.

    A bad line makes feed raise NvsmiParseError and drops the round it was part of; the
    rounds completed before it and the text after it are kept, so call feed again (with
    the next chunk, or "") to go on. Nothing already parsed is lost.
    """

    def __init__(
        self,
        fields: Sequence[str],
        node: str,
        clock: Callable[[], datetime],
        gpu_count: int | None = None,
        memo: RowMemo | None = None,
    ) -> None:
        require_index(fields)
        if gpu_count is not None and gpu_count <= 0:
            raise ValueError(f"gpu_count must be positive, not {gpu_count}")
        self.fields = tuple(fields)
        self.node = node
        self.gpu_count = gpu_count
        self._clock = clock
        # A row sent again unchanged (an idle GPU's, often) is not parsed again.
        self._memo = memo if memo is not None else RowMemo()
        self._buffer = ""
        self._line_no = 0
        self._round: list[GpuSample] = []
        self._round_at: datetime | None = None
        self._ready: list[list[GpuSample]] = []

    def feed(self, chunk: str) -> list[list[GpuSample]]:
        """Rounds completed by this chunk (and any held back by an earlier error)."""
        self._buffer += chunk
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            self._line_no += 1
            self._take_line(line.strip())
        if len(self._buffer) > _MAX_LINE_CHARS:
            # A node streaming without newlines sends garbage; do not hold it all.
            self._buffer = ""
            self._discard_round()
            raise NvsmiParseError(
                f"nvidia-smi line {self._line_no + 1}: longer than {_MAX_LINE_CHARS} characters"
            )
        ready, self._ready = self._ready, []
        return ready

    def flush(self) -> list[list[GpuSample]]:
        """When the stream ends: what feed would return, plus the round in progress."""
        rest, self._buffer = self._buffer, ""
        self._line_no += 1
        self._take_line(rest.strip())
        self._close_round()
        ready, self._ready = self._ready, []
        return ready

    def _take_line(self, line: str) -> None:
        if not line:
            return
        try:
            values = self._memo.parse(line, self._line_no, self.fields)
        except NvsmiParseError:
            self._discard_round()
            raise
        index = values["index"]
        assert isinstance(index, int)
        if self._round and index <= self._round[-1].index:
            self._close_round()
        if not self._round:
            self._round_at = self._clock()
        assert self._round_at is not None
        self._round.append(as_sample(values, self.node, self._round_at))
        if self.gpu_count is not None and len(self._round) >= self.gpu_count:
            self._close_round()

    def _close_round(self) -> None:
        if self._round:
            self._ready.append(self._round)
        self._round = []
        self._round_at = None

    def _discard_round(self) -> None:
        self._round = []
        self._round_at = None
