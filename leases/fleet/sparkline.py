"""The time-true sparkline: one cell per fixed slice of time, gaps shown as gaps.

Pure. Minute roll-ups and live readings are both `Reading`s (a value over a stretch of
time) on one scale, so a node down for half an hour shows half a line of blanks, however
many samples exist around the gap. Sums per cell (`cell_sums`) add up, so the stored
minutes' part of a line is computed once a minute and the live readings added to it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BARS = "▁▂▃▄▅▆▇█"
GAP = " "
SPAN_S = 3600.0  # the dashboard's last hour
CELLS = 12  # 5 minutes a cell


@dataclass(frozen=True, slots=True)
class Reading:
    at: float  # Unix seconds at which the stretch it covers starts
    seconds: float  # how long it covers: 60 for a minute roll-up, the poll interval live
    value: float | None  # None: unknown (drawn as a gap)


@dataclass(frozen=True)
class CellSums:
    """Per cell: seconds of known values, and those values times their seconds."""

    weight: tuple[float, ...]
    total: tuple[float, ...]

    def __add__(self, other: CellSums) -> CellSums:
        return CellSums(
            tuple(a + b for a, b in zip(self.weight, other.weight, strict=True)),
            tuple(a + b for a, b in zip(self.total, other.total, strict=True)),
        )

    def means(self) -> list[float | None]:
        return [t / w if w > 0 else None for w, t in zip(self.weight, self.total, strict=True)]


def cell_sums(
    readings: Iterable[Reading], *, end: float, span_s: float = SPAN_S, cells: int = CELLS
) -> CellSums:
    """The known values of the readings spread over `cells` equal slices of
    [end - span_s, end), each by the time it overlaps the slice (an instant counts once)."""
    if cells <= 0 or span_s <= 0:
        return CellSums((), ())
    start = end - span_s
    width = span_s / cells
    weight = [0.0] * cells
    total = [0.0] * cells
    last_cell = cells - 1
    for r in readings:
        value = r.value
        if value is None:
            continue
        a = r.at
        b = a + r.seconds if r.seconds > 0 else a
        if b == a:  # an instant: counts once, in its slice
            if start <= a < end:
                i = int((a - start) // width)
                i = last_cell if i > last_cell else i
                weight[i] += 1.0
                total[i] += value
            continue
        a = start if a < start else a
        b = end if b > end else b
        if a >= b:
            continue
        first = int((a - start) // width)
        last = int((b - start) // width)
        first = last_cell if first > last_cell else first
        last = last_cell if last > last_cell else last
        if first == last:
            w = b - a
            weight[first] += w
            total[first] += w * value
            continue
        for i in range(first, last + 1):
            lo = start + i * width
            hi = lo + width
            w = (b if b < hi else hi) - (a if a > lo else lo)
            if w > 0:
                weight[i] += w
                total[i] += w * value
    return CellSums(tuple(weight), tuple(total))


def cell_means(
    readings: Iterable[Reading], *, end: float, span_s: float = SPAN_S, cells: int = CELLS
) -> list[float | None]:
    """The time-weighted mean of the known values in each of `cells` equal slices of
    [end - span_s, end); None for a slice no known value covers."""
    return cell_sums(readings, end=end, span_s=span_s, cells=cells).means()


def bar(value: float | None, top: float = 100.0) -> str:
    if value is None:
        return GAP
    share = min(1.0, max(0.0, value / top)) if top > 0 else 0.0
    return BARS[int(share * (len(BARS) - 1) + 0.5)]


def bars(means: Sequence[float | None], top: float = 100.0) -> str:
    """One character a cell, the oldest first; a known 0 is the lowest bar, unknown a space."""
    return "".join(bar(v, top) for v in means)


def sparkline(
    readings: Iterable[Reading],
    *,
    end: float,
    span_s: float = SPAN_S,
    cells: int = CELLS,
    top: float = 100.0,
) -> str:
    """`cells` characters; every cell stands for span_s / cells seconds, whatever the
    sampling rate."""
    return bars(cell_means(readings, end=end, span_s=span_s, cells=cells), top)


def window_end(now_s: float, span_s: float = SPAN_S, cells: int = CELLS) -> float:
    """The end of the dashboard's window: the end of the slice in progress, so the cells
    are fixed slices of the clock (09:25-09:30, 09:30-09:35...), the last one filling
    as time passes, and the stored minutes' part of a line moves once a slice."""
    width = span_s / cells
    return math.ceil(now_s / width) * width
