"""GPU history: the last hour at full rate in memory, and per-minute / per-hour roll-ups.

Pure code: no I/O. leases.telemetry.rollups stores what this computes.

Roll-ups are packed per node and period: one row per node-minute holds every GPU of that
node, 10 bytes a GPU. This is what keeps 90 days of a 200-node x 8-GPU fleet under 1 GB
(bench/history.py measures it); a row per GPU per minute would be about four times larger.
None is unknown everywhere; in the packed form unknown is the all-ones value of the field.
A minute row written before the power limit was kept is 10 bytes a GPU (an even length);
one written now starts with a format byte and holds 12 bytes a GPU (an odd length).
"""

from __future__ import annotations

import math
import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from leases.core.models import GpuSample

# When a GPU-minute counts as busy: see `busy_verdict`.
BUSY_UTIL_PCT = 10.0
# Driver reservation and a bare CUDA context stay under this (300 MB - 1 GB).
BUSY_MEM_MIB = 1024.0
# Loaded but idle draws up to about 37 % of the limit (A40: 110 of 300 W; H100: 145 of
# 700 W): only a draw above this share of the limit says the card works.
IDLE_POWER_SHARE = 0.4
# Without the limit: above what any card is known to draw loaded but idle (40 % of 1 kW).
IDLE_POWER_FLOOR_W = 400.0

_MINUTE_V1 = struct.Struct("<BBBBIH")  # index, readings, util mean, util max, MiB mean, dW mean
_MINUTE = struct.Struct("<BBBBIHH")  # the same, then the power limit in dW
_MINUTE_FORMAT = b"\x02"
_HOUR = struct.Struct("<BBBBBIH")  # index, known min, busy min, util mean, util max, MiB, dW
_U8, _U16, _U32 = 0xFF, 0xFFFF, 0xFFFFFFFF
# Resolution of the packed means, in steps per unit: whole percent, whole MiB, tenths of a
# watt. A value comes back within half a step (rounded to the nearest step).
UTIL_STEPS, MIB_STEPS, POWER_STEPS = 1, 1, 10


def busy_verdict(
    util_pct: float | None,
    mem_mib: float | None,
    power_w: float | None,
    power_limit_w: float | None = None,
) -> bool | None:
    """Whether a GPU-minute was busy: True, False, or None when the readings cannot say.

    Busy when its mean utilisation reaches BUSY_UTIL_PCT, or when it holds memory above
    BUSY_MEM_MIB together with power above idle (idle: IDLE_POWER_SHARE of the power limit
    when the limit is known, else IDLE_POWER_FLOOR_W). Neither alone is enough: memory in use
    is also a loaded model that runs nothing, and power cannot tell "loaded, idle" from work
    (see ../shared/BILLING-FACTS.md). Idle only when utilisation was read below the
    threshold and the memory-and-power test fails; a minute without a utilisation reading
    that the memory-and-power test does not call busy is unknown: never idle.
    """
    idle_w = IDLE_POWER_FLOOR_W if not power_limit_w else power_limit_w * IDLE_POWER_SHARE
    if util_pct is not None and util_pct >= BUSY_UTIL_PCT:
        return True
    loaded = None if mem_mib is None else mem_mib > BUSY_MEM_MIB
    working = None if power_w is None else power_w > idle_w
    if loaded and working:
        return True
    return None if util_pct is None else False


@dataclass(frozen=True)
class GpuMinute:
    index: int
    readings: int
    util_mean: float | None
    util_max: float | None
    mem_mean_mib: float | None
    power_mean_w: float | None
    power_limit_w: float | None = None

    @property
    def busy(self) -> bool | None:
        """Busy, idle, or None when unknown (see busy_verdict)."""
        if self.readings == 0:
            return None
        return busy_verdict(
            self.util_mean, self.mem_mean_mib, self.power_mean_w, self.power_limit_w
        )


@dataclass(frozen=True)
class GpuHour:
    index: int
    known_minutes: int
    busy_minutes: int
    util_mean: float | None
    util_max: float | None
    mem_mean_mib: float | None
    power_mean_w: float | None


@dataclass(frozen=True)
class NodeMinute:
    node: str
    minute: int  # Unix time // 60
    gpus: tuple[GpuMinute, ...]
    # (GPU index, owners of its processes) during the minute (leases.telemetry.attribution);
    # None when no process reading covers it: its busy minutes go to "?".
    owners: tuple[tuple[int, tuple[str, ...]], ...] | None = None


@dataclass(frozen=True)
class NodeHour:
    node: str
    hour: int  # Unix time // 3600
    gpus: tuple[GpuHour, ...]

    @property
    def busy_card_minutes(self) -> int:
        return sum(g.busy_minutes for g in self.gpus)

    @property
    def known_card_minutes(self) -> int:
        return sum(g.known_minutes for g in self.gpus)


def _enc(value: float | None, limit: int, scale: float = 1.0) -> int:
    # Never raises: NaN and infinities are unknown, the rest is clamped into the field.
    # (The poller refuses such readings first; this keeps one bad value from failing a
    # whole flush should another source let one through.)
    if value is None or not math.isfinite(value):
        return limit
    return max(0, min(limit - 1, round(value * scale)))


def _count(value: int, limit: int) -> int:
    return max(0, min(limit, value))


def _index(value: int) -> int:
    if not 0 <= value <= _U8:
        raise ValueError(f"GPU index {value} does not fit the packed roll-up (0..{_U8})")
    return value


def _dec(value: int, limit: int, scale: float = 1.0) -> float | None:
    return None if value == limit else value / scale


def pack_minute(gpus: Sequence[GpuMinute]) -> bytes:
    return _MINUTE_FORMAT + b"".join(
        _MINUTE.pack(
            _index(g.index),
            _count(g.readings, _U8),
            _enc(g.util_mean, _U8, UTIL_STEPS),
            _enc(g.util_max, _U8, UTIL_STEPS),
            _enc(g.mem_mean_mib, _U32, MIB_STEPS),
            _enc(g.power_mean_w, _U16, POWER_STEPS),
            _enc(g.power_limit_w, _U16, POWER_STEPS),
        )
        for g in gpus
    )


def unpack_minute(blob: bytes) -> tuple[GpuMinute, ...]:
    if len(blob) % 2 == 0:  # written before the power limit was kept
        return tuple(
            GpuMinute(i, n, _dec(u, _U8), _dec(m, _U8), _dec(mem, _U32), _dec(p, _U16, 10))
            for i, n, u, m, mem, p in _MINUTE_V1.iter_unpack(blob)
        )
    return tuple(
        GpuMinute(
            i,
            n,
            _dec(u, _U8, UTIL_STEPS),
            _dec(m, _U8, UTIL_STEPS),
            _dec(mem, _U32, MIB_STEPS),
            _dec(p, _U16, POWER_STEPS),
            _dec(lim, _U16, POWER_STEPS),
        )
        for i, n, u, m, mem, p, lim in _MINUTE.iter_unpack(blob[1:])
    )


def minute_util_mean(blob: bytes) -> float | None:
    """The mean utilisation over a stored node-minute's GPUs (None when none was read):
    unpack_minute's util_mean values averaged, without building a GpuMinute each (the
    dashboard reads an hour of minutes for every node)."""
    if len(blob) % 2 == 0:  # written before the power limit was kept
        known = [u for _, _, u, *_ in _MINUTE_V1.iter_unpack(blob) if u != _U8]
    else:
        known = [u for _, _, u, *_ in _MINUTE.iter_unpack(blob[1:]) if u != _U8]
    return sum(known) / UTIL_STEPS / len(known) if known else None


def pack_hour(gpus: Sequence[GpuHour]) -> bytes:
    return b"".join(
        _HOUR.pack(
            _index(g.index),
            _count(g.known_minutes, _U8),
            _count(g.busy_minutes, _U8),
            _enc(g.util_mean, _U8, UTIL_STEPS),
            _enc(g.util_max, _U8, UTIL_STEPS),
            _enc(g.mem_mean_mib, _U32, MIB_STEPS),
            _enc(g.power_mean_w, _U16, POWER_STEPS),
        )
        for g in gpus
    )


def unpack_hour(blob: bytes) -> tuple[GpuHour, ...]:
    return tuple(
        GpuHour(
            i,
            k,
            b,
            _dec(u, _U8, UTIL_STEPS),
            _dec(m, _U8, UTIL_STEPS),
            _dec(mem, _U32, MIB_STEPS),
            _dec(p, _U16, POWER_STEPS),
        )
        for i, k, b, u, m, mem, p in _HOUR.iter_unpack(blob)
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class _GpuAcc:
    readings: int = 0
    util: list[float] = field(default_factory=list)
    mem: list[float] = field(default_factory=list)
    power: list[float] = field(default_factory=list)
    limit: list[float] = field(default_factory=list)

    def add(self, s: GpuSample) -> None:
        self.readings += 1
        if s.util_gpu is not None:
            self.util.append(s.util_gpu)
        if s.mem_used_mib is not None:
            self.mem.append(s.mem_used_mib)
        if s.power_w is not None:
            self.power.append(s.power_w)
        if s.power_limit_w is not None:
            self.limit.append(s.power_limit_w)

    def add_times(self, s: GpuSample, times: int) -> None:
        """add(s) `times` times over (the values held as often: means are summed in the
        same order, so they come out the same to the last bit)."""
        self.readings += times
        if s.util_gpu is not None:
            self.util += [s.util_gpu] * times
        if s.mem_used_mib is not None:
            self.mem += [s.mem_used_mib] * times
        if s.power_w is not None:
            self.power += [s.power_w] * times
        if s.power_limit_w is not None:
            self.limit += [s.power_limit_w] * times

    def result(self, index: int) -> GpuMinute:
        return GpuMinute(
            index,
            self.readings,
            _mean(self.util),
            max(self.util) if self.util else None,
            _mean(self.mem),
            _mean(self.power),
            min(self.limit) if self.limit else None,
        )


class MinuteAccumulator:
    """Folds one node's readings into per-minute roll-ups as they arrive."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._minute: int | None = None
        self._gpus: dict[int, _GpuAcc] = {}
        # The readings last added, and how many times they were read again since (again)
        # in the open minute: added to its GPUs only when the minute closes or other
        # readings come, not GPU by GPU at every reading.
        self._last: Sequence[GpuSample] = ()
        self._repeats = 0

    def add(
        self, samples: Sequence[GpuSample], read_at: datetime | None = None
    ) -> list[NodeMinute]:
        """Add readings (read at `read_at`, else each at its own `at`); return the minutes
        they closed (a later minute has begun)."""
        self._fold()
        self._last = samples
        closed: list[NodeMinute] = []
        at: datetime | None = None
        minute = 0
        for s in samples:
            when = s.at if read_at is None else read_at
            if when is not at:  # a reading's samples share one time: worked out once
                at, minute = when, int(when.timestamp()) // 60
            if self._minute is not None and minute < self._minute:
                continue  # late reading of a minute already closed
            if self._minute is not None and minute > self._minute:
                done = self._close()
                if done is not None:
                    closed.append(done)
            self._minute = minute
            acc = self._gpus.get(s.index)
            if acc is None:  # not setdefault: its default would be made for every sample
                acc = self._gpus[s.index] = _GpuAcc()
            acc.add(s)
        return closed

    def again(self, samples: Sequence[GpuSample], read_at: datetime) -> list[NodeMinute]:
        """add(samples, read_at), where the caller knows them to hold the values last added
        (one reading of a node, its answer read again unchanged) at a later time: in the
        same minute, only counted. Returns the minutes closed."""
        if (
            self._last
            and samples
            and self._minute is not None
            and int(read_at.timestamp()) // 60 == self._minute
            and self._gpus
        ):
            self._repeats += 1
            return []
        return self.add(samples, read_at)

    def _fold(self) -> None:
        """The readings counted by again, added to the open minute's GPUs."""
        if self._repeats:
            for s in self._last:
                acc = self._gpus.get(s.index)
                if acc is None:
                    acc = self._gpus[s.index] = _GpuAcc()
                acc.add_times(s, self._repeats)
            self._repeats = 0

    def flush(self, now_minute: int) -> NodeMinute | None:
        """Close the open minute if now is past it (the node went quiet)."""
        if self._minute is not None and now_minute > self._minute:
            return self._close()
        return None

    def _close(self) -> NodeMinute | None:
        self._fold()
        if self._minute is None or not self._gpus:
            return None
        gpus = tuple(acc.result(i) for i, acc in sorted(self._gpus.items()))
        done = NodeMinute(self.node, self._minute, gpus)
        self._gpus = {}
        return done


def hour_of(node: str, hour: int, minutes: Iterable[NodeMinute]) -> NodeHour:
    """Roll the minutes of one hour (at most 60 per GPU) up into that hour."""
    per_gpu: dict[int, list[GpuMinute]] = {}
    for m in minutes:
        for g in m.gpus:
            per_gpu.setdefault(g.index, []).append(g)
    gpus = []
    for index, rows in sorted(per_gpu.items()):
        known = [g for g in rows if g.busy is not None]
        utils = [g.util_mean for g in rows if g.util_mean is not None]
        maxes = [g.util_max for g in rows if g.util_max is not None]
        mems = [g.mem_mean_mib for g in rows if g.mem_mean_mib is not None]
        powers = [g.power_mean_w for g in rows if g.power_mean_w is not None]
        gpus.append(
            GpuHour(
                index,
                known_minutes=len(known),
                busy_minutes=sum(1 for g in known if g.busy),
                util_mean=_mean(utils),
                util_max=max(maxes) if maxes else None,
                mem_mean_mib=_mean(mems),
                power_mean_w=_mean(powers),
            )
        )
    return NodeHour(node, hour, tuple(gpus))


@dataclass(frozen=True, slots=True)
class Point:
    at: float  # Unix seconds
    util: float | None
    mem_mib: float | None
    power_w: float | None


class RecentHistory:
    """The last `window` seconds of every GPU at full rate, for sparklines."""

    def __init__(self, window_s: float = 3600.0, max_points: int = 3600) -> None:
        self.window_s = window_s
        self.max_points = max_points
        self._series: dict[tuple[str, int], deque[Point]] = {}

    def add(self, samples: Iterable[GpuSample], read_at: datetime | None = None) -> None:
        """Readings, read at `read_at` (else each at its own `at`)."""
        read = None if read_at is None else read_at.timestamp()
        for s in samples:
            series = self._series.get((s.node, s.index))
            if series is None:
                series = self._series[(s.node, s.index)] = deque(maxlen=self.max_points)
            t = s.at.timestamp() if read is None else read
            series.append(Point(t, s.util_gpu, s.mem_used_mib, s.power_w))
            while series and series[0].at < t - self.window_s:
                series.popleft()

    def series(self, node: str, index: int) -> list[Point]:
        return list(self._series.get((node, index), ()))

    def node_points(self, node: str, since: float = 0.0) -> list[float | None]:
        """Mean utilization over the node's GPUs, point by point (None where unknown)."""
        keys = sorted(k for k in self._series if k[0] == node)
        if not keys:
            return []
        columns = [[p for p in self._series[k] if p.at >= since] for k in keys]
        length = min(len(c) for c in columns)
        out: list[float | None] = []
        for i in range(-length, 0):
            vals = [u for c in columns if (u := c[i].util) is not None]
            out.append(sum(vals) / len(vals) if vals else None)
        return out

    def forget(self, node: str) -> None:
        for key in [k for k in self._series if k[0] == node]:
            del self._series[key]
