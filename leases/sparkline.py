"""The time-true sparkline: one cell per fixed slice of time, gaps shown as gaps.

Pure. Minute roll-ups and live readings are both `Reading`s (a value over a stretch of
time) on one scale, so a node down for half an hour shows half a line of blanks, however
many samples exist around the gap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BARS = "▁▂▃▄▅▆▇█"
GAP = " "


@dataclass(frozen=True, slots=True)
class Reading:
    at: float  # Unix seconds at which the stretch it covers starts
    seconds: float  # how long it covers: 60 for a minute roll-up, the poll interval live
    value: float | None  # None: unknown (drawn as a gap)


def cell_means(
    readings: Iterable[Reading], *, end: float, span_s: float = 3600.0, cells: int = 20
) -> list[float | None]:
    """The time-weighted mean of the known values in each of `cells` equal slices of
    [end - span_s, end); None for a slice no known value covers."""
    if cells <= 0 or span_s <= 0:
        return []
    start = end - span_s
    width = span_s / cells
    weight = [0.0] * cells
    total = [0.0] * cells
    for r in readings:
        if r.value is None:
            continue
        a, b = max(r.at, start), min(r.at + max(r.seconds, 0.0), end)
        if r.seconds <= 0 and start <= r.at < end:
            a, b = r.at, r.at  # an instant: counts once, in its slice
        elif a >= b:
            continue
        first = min(cells - 1, int((a - start) // width))
        last = min(cells - 1, int((b - start) // width)) if b > a else first
        for i in range(first, last + 1):
            lo, hi = start + i * width, start + (i + 1) * width
            w = min(b, hi) - max(a, lo) if b > a else 1.0
            if w > 0:
                weight[i] += w
                total[i] += w * r.value
    return [total[i] / weight[i] if weight[i] > 0 else None for i in range(cells)]


def bar(value: float | None, top: float = 100.0) -> str:
    if value is None:
        return GAP
    share = min(1.0, max(0.0, value / top)) if top > 0 else 0.0
    return BARS[int(share * (len(BARS) - 1) + 0.5)]


def sparkline(
    readings: Iterable[Reading],
    *,
    end: float,
    span_s: float = 3600.0,
    cells: int = 20,
    top: float = 100.0,
) -> str:
    """`cells` characters, the oldest slice first; a known 0 is the lowest bar, unknown a
    space. Every cell stands for span_s / cells seconds, whatever the sampling rate."""
    return "".join(bar(v, top) for v in cell_means(readings, end=end, span_s=span_s, cells=cells))
