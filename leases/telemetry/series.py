"""A node's utilisation, memory and power over a span of time, for the node screen's charts.

Time-true: a span is cut into slices of fixed length (one minute over the last hour, ten
over a day, an hour over a week, a few hours over a lease's life), each slice holds the
readings that fall in it, and a slice with none is a gap (None), never zero. Spans up to a
day read the minute roll-ups (kept 14 days, leases.telemetry.rollups.DEFAULT_MINUTE_DAYS) and the
hour roll-ups where minutes are gone, longer ones the hour roll-ups (kept for the lease's
life); the minute in progress comes from the live readings, rolled up the same way,
so both are on one scale. Pure: rows in, series out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from leases.core.i18n import N_
from leases.telemetry.history import GpuMinute, NodeHour, NodeMinute, Point

# Most slices a lease's life is cut into: about one a character of a wide chart.
LEASE_SLICES = 180


class Span(StrEnum):
    HOUR = "1h"
    DAY = "24h"
    WEEK = "7d"
    LEASE = "lease"

    @property
    def words(self) -> str:
        return _WORDS[self]

    @property
    def from_minutes(self) -> bool:
        """Whether the span reads minute roll-ups (else hour roll-ups)."""
        return self in (Span.HOUR, Span.DAY)


_WORDS = {
    Span.HOUR: "last hour",
    Span.DAY: "last 24 hours",
    Span.WEEK: "last 7 days",
    Span.LEASE: "the lease's life",
}
# Slice length and count of the spans that end now.
_FIXED = {Span.HOUR: (60, 60), Span.DAY: (600, 144), Span.WEEK: (3600, 168)}


@dataclass(frozen=True)
class Grid:
    """`count` slices of `step` seconds from `start` (Unix seconds), the last holding now."""

    start: int
    step: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.step * self.count

    def slice_of(self, t: float) -> int | None:
        i = math.floor((t - self.start) / self.step)
        return i if 0 <= i < self.count else None

    def at(self, i: int) -> datetime:
        return datetime.fromtimestamp(self.start + i * self.step, UTC)


def grid(span: Span, now: datetime, life: tuple[datetime, datetime] | None = None) -> Grid:
    """The slices of a span ending with the slice that holds now. Slices sit on multiples of
    their length, so a chart does not shift as the seconds pass. LEASE needs `life` (the
    lease chain's start and its end or now): whole hours, at most LEASE_SLICES slices."""
    t = int(now.timestamp())
    if span is not Span.LEASE:
        step, count = _FIXED[span]
        end = t // step * step + step
        return Grid(end - step * count, step, count)
    if life is None:
        raise ValueError("the lease's life needs the lease's start and end")
    start = int(life[0].timestamp()) // 3600 * 3600
    end = max(start + 3600, -(-int(min(life[1], now).timestamp()) // 3600) * 3600)
    hours = (end - start) // 3600
    step = 3600 * max(1, -(-hours // LEASE_SLICES))
    return Grid(start, step, -(-(end - start) // step))


@dataclass(frozen=True)
class Series:
    """Per slice of `grid`: mean utilisation over the GPUs (%), memory in use and power
    drawn summed over the GPUs (GiB, W); None where nothing was read."""

    span: Span
    grid: Grid
    util: tuple[float | None, ...]
    mem_gib: tuple[float | None, ...]
    power_w: tuple[float | None, ...]

    @property
    def known(self) -> int:
        """Slices with a utilisation reading."""
        return sum(1 for v in self.util if v is not None)


class _GpuFigures(Protocol):
    """What a GPU's minute and hour roll-ups both hold."""

    @property
    def util_mean(self) -> float | None: ...
    @property
    def mem_mean_mib(self) -> float | None: ...
    @property
    def power_mean_w(self) -> float | None: ...


def _node_values(
    gpus: Sequence[_GpuFigures],
) -> tuple[float | None, float | None, float | None]:
    """One row's node figures: util the mean of the GPUs read; memory and power sums only
    when every GPU's is known (a part read as the whole would understate)."""
    utils = [g.util_mean for g in gpus if g.util_mean is not None]
    mems = [g.mem_mean_mib for g in gpus if g.mem_mean_mib is not None]
    powers = [g.power_mean_w for g in gpus if g.power_mean_w is not None]
    util = sum(utils) / len(utils) if utils else None
    mem = sum(mems) / 1024 if gpus and len(mems) == len(gpus) else None
    power = sum(powers) if gpus and len(powers) == len(gpus) else None
    return util, mem, power


class _Slices:
    """Weighted means per slice, one per figure."""

    def __init__(self, count: int) -> None:
        self.sums = [[0.0] * count for _ in range(3)]
        self.weights = [[0.0] * count for _ in range(3)]

    def add(self, i: int, values: tuple[float | None, ...], weight: float) -> None:
        for f, v in enumerate(values):
            if v is not None and weight > 0:
                self.sums[f][i] += v * weight
                self.weights[f][i] += weight

    def means(self, f: int) -> tuple[float | None, ...]:
        return tuple(
            s / w if w else None for s, w in zip(self.sums[f], self.weights[f], strict=True)
        )


def live_minutes(node: str, live: Mapping[int, Sequence[Point]]) -> list[NodeMinute]:
    """Live readings (GPU index -> points, leases.telemetry.history.RecentHistory.series) rolled up
    per minute as the poller rolls them, so they sit on the roll-ups' scale."""
    by_minute: dict[int, dict[int, list[Point]]] = {}
    for index, points in live.items():
        for p in points:
            by_minute.setdefault(int(p.at) // 60, {}).setdefault(index, []).append(p)

    def mean(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    return [
        NodeMinute(
            node,
            minute,
            tuple(
                GpuMinute(
                    index,
                    len(ps),
                    mean(p.util for p in ps),
                    max((p.util for p in ps if p.util is not None), default=None),
                    mean(p.mem_mib for p in ps),
                    mean(p.power_w for p in ps),
                )
                for index, ps in sorted(gpus.items())
            ),
        )
        for minute, gpus in sorted(by_minute.items())
    ]


def from_minutes(
    span: Span,
    g: Grid,
    minutes: Iterable[NodeMinute],
    live: Iterable[NodeMinute] = (),
    hours: Iterable[NodeHour] = (),
) -> Series:
    """A series from minute roll-ups; `live` minutes (live_minutes) fill only minutes the
    roll-ups do not hold yet (the minute in progress), never counted twice. `hours` stand
    in where the minutes are gone (purged after their retention, or never kept: history
    written as hours only): only in slices that end by the first minute held, so a gap among
    the minutes stays a gap."""
    acc = _Slices(g.count)
    stored: set[int] = set()
    for m in minutes:
        stored.add(m.minute)
        _add_minute(acc, g, m)
    for m in live:
        if m.minute not in stored:
            _add_minute(acc, g, m)
    # Slices that end by the first minute held (all of them when none is held).
    before = g.count if not stored else (min(stored) * 60 - g.start) // g.step
    for h in hours:
        if not h.gpus:
            continue
        for t in range(h.hour * 3600, (h.hour + 1) * 3600, min(g.step, 3600)):
            i = g.slice_of(t)
            if i is not None and i < before and not acc.weights[0][i]:
                acc.add(i, _node_values(h.gpus), 1.0)
    return Series(span, g, acc.means(0), acc.means(1), acc.means(2))


def _add_minute(acc: _Slices, g: Grid, m: NodeMinute) -> None:
    i = g.slice_of(m.minute * 60)
    read = [x for x in m.gpus if x.readings > 0]
    if i is not None and read:
        acc.add(i, _node_values(read), 1.0)


def from_hours(span: Span, g: Grid, hours: Iterable[NodeHour]) -> Series:
    """A series from hour roll-ups, each hour weighted by the minutes it holds readings of
    (an hour with one minute read counts less than a full one)."""
    acc = _Slices(g.count)
    for h in hours:
        i = g.slice_of(h.hour * 3600)
        if i is None or not h.gpus:
            continue
        weight = max((x.known_minutes for x in h.gpus), default=0) or 1
        acc.add(i, _node_values(h.gpus), float(weight))
    return Series(span, g, acc.means(0), acc.means(1), acc.means(2))


def runs(values: Sequence[float | None]) -> list[tuple[int, int]]:
    """The stretches of known values as (first, last) indices: each is drawn as its own
    line, so a gap stays a gap instead of a line drawn across it."""
    out: list[tuple[int, int]] = []
    first: int | None = None
    for i, v in enumerate(values):
        if v is not None and first is None:
            first = i
        elif v is None and first is not None:
            out.append((first, i - 1))
            first = None
    if first is not None:
        out.append((first, len(values) - 1))
    return out


@dataclass(frozen=True)
class Axis:
    """How a chart's x axis reads: slice i is at x(i) in `label`'s unit (marked: shown
    with _())."""

    unit_s: int
    label: str
    from_start: bool  # x counts from the span's start (the lease's life), else back from now

    def x(self, g: Grid, i: int, now: datetime) -> float:
        """Where slice i starts (i = g.count: where the last one ends)."""
        origin = g.start if self.from_start else now.timestamp()
        return round((g.start + i * g.step - origin) / self.unit_s, 3)


def axis(span: Span) -> Axis:
    return {
        Span.HOUR: Axis(60, N_("minutes before now"), False),
        Span.DAY: Axis(3600, N_("hours before now"), False),
        Span.WEEK: Axis(86400, N_("days before now"), False),
        Span.LEASE: Axis(86400, N_("date, over the lease's life"), True),
    }[span]
