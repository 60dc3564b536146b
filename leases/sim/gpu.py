"""The state of simulated GPU nodes: cards, scenarios, and readings as a function of time.

Every reading is a deterministic function of (node seed, time): the same node asked about
the same instant answers the same, in a live query or in a backfilled history.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import NamedTuple

from leases.core.models import GpuSample
from leases.sim.traps import Trap


class Scenario(StrEnum):
    BUSY = "busy"
    IDLE_MONTHLY = "idle_monthly"
    BURSTY = "bursty"
    FAKE_VRAM = "fake_vram"
    FLAKY = "flaky"
    UNREACHABLE = "unreachable"
    DRIVER_MISMATCH = "driver_mismatch"
    NO_DRIVER = "no_driver"
    CHANGED_HOSTKEY = "changed_hostkey"
    # A job holds every GPU but keeps them under a third busy: its input pipeline is slow.
    STARVED = "starved"
    # Hostile nodes: what a rented machine's owner, or another tenant, can make it print.
    GPU_INDEX_256 = "gpu_index_256"  # nvidia-smi lists GPUs 256, 257, ...
    ENDLESS_OUTPUT = "endless_output"  # nvidia-smi prints without newline, without end
    HUGE_LINE = "huge_line"  # nvidia-smi prints one 100 MB line


@dataclass(frozen=True)
class GpuModel:
    """What one kind of card looks like to nvidia-smi."""

    key: str
    name: str
    memory_mib: int
    nominal_gib: int
    power_limit_w: float
    idle_power_w: tuple[float, float]
    max_sm_mhz: int
    idle_sm_mhz: int
    # "NV18" etc. between every pair; "" for PCIe cards; "DGX1" for the V100 hybrid cube mesh.
    nvlink: str
    datacenter: bool
    mig_capable: bool = False
    ecc: bool = True
    driver: str = "550.54.15"


MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("H100", "NVIDIA H100 80GB HBM3", 81559, 80, 700.0, (68, 80), 1980, 345, "NV18",
                 True, mig_capable=True),
        # Export-limited parts: 8 NVLinks instead of 18 (H100) or 12 (A100).
        GpuModel("H800", "NVIDIA H800", 81559, 80, 700.0, (68, 80), 1980, 345, "NV8", True,
                 mig_capable=True),
        GpuModel("A100", "NVIDIA A100-SXM4-80GB", 81920, 80, 400.0, (58, 70), 1410, 210, "NV12",
                 True, mig_capable=True),
        GpuModel("A800", "NVIDIA A800-SXM4-80GB", 81920, 80, 400.0, (58, 70), 1410, 210, "NV8",
                 True, mig_capable=True),
        GpuModel("RTX 4090", "NVIDIA GeForce RTX 4090", 24564, 24, 450.0, (16, 30), 3105, 210, "",
                 False, ecc=False, driver="550.120"),
        GpuModel("A10", "NVIDIA A10", 23028, 24, 150.0, (15, 22), 1695, 210, "", True,
                 driver="535.183.01"),
        GpuModel("V100", "Tesla V100-SXM2-32GB", 32768, 32, 300.0, (38, 45), 1530, 135, "DGX1",
                 True, driver="535.183.01"),
    )
}  # fmt: skip

# A fake_vram node really holds (or is sliced down to) this much.
FAKE_VRAM_MODEL = MODELS["RTX 4090"]
# An idle GPU still shows the driver's reservation in memory.used.
DRIVER_RESERVE_MIB = 500

_SXM_BUS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
_PCIE_BUS = ("01", "25", "41", "61", "81", "A1", "C1", "E1")


@dataclass(frozen=True)
class SimGpu:
    index: int
    name: str
    uuid: str
    bus_id: str
    # As sold, and as nvidia-smi reports it (they differ on fake_vram nodes).
    nominal_mib: int
    memory_total_mib: int
    power_limit_w: float
    model: GpuModel


@dataclass(frozen=True)
class SimNode:
    """One simulated machine. `files`, `keys` and `killed` are the only mutable parts (shred
    and the offboarding's revoke remove from them, a kill adds to `killed`)."""

    name: str
    gpu_model: str
    count: int = 8
    scenario: Scenario = Scenario.BUSY
    seed: int = 0
    # Nominal VRAM per card as sold; defaults to the model's.
    vram_gib: int | None = None
    # fake_vram only: report the sold model's name instead of the real card's.
    spoof_name: bool = False
    # What the box is wrong in beside its load (leases.sim.traps), for acceptance checks.
    traps: frozenset[Trap] = frozenset()
    files: set[str] = field(
        default_factory=lambda: set(DEFAULT_FILES), compare=False, hash=False, repr=False
    )
    # The lines of /root/.ssh/authorized_keys (a simulated fleet fills in its client key and
    # accepts a login only with a key listed here); offboarding's revoke removes from it.
    keys: list[str] = field(default_factory=list, compare=False, hash=False, repr=False)
    # GPU processes killed (leases.sim.procs): their GPU reads idle until the next job.
    killed: set[int] = field(default_factory=set, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if self.gpu_model not in MODELS:
            raise ValueError(f"gpu_model: unknown model {self.gpu_model!r}; one of {list(MODELS)}")
        if not 1 <= self.count <= 8:
            raise ValueError(f"count: must be 1-8, got {self.count}")
        object.__setattr__(self, "scenario", Scenario(self.scenario))
        object.__setattr__(self, "traps", frozenset(Trap(t) for t in self.traps))

    @property
    def model(self) -> GpuModel:
        return MODELS[self.gpu_model]

    @property
    def nominal_gib(self) -> int:
        return self.vram_gib if self.vram_gib is not None else self.model.nominal_gib

    @property
    def gpus(self) -> tuple[SimGpu, ...]:
        key = (self.gpu_model, self.count, self.scenario, self.seed, self.nominal_gib)
        return _gpus(*key, self.spoof_name, self.traps & _GPU_TRAPS)


DEFAULT_FILES: frozenset[str] = frozenset(
    {
        "/root/.ssh/authorized_keys",
        "/root/.bash_history",
        "/root/.cache/huggingface/token",
        "/root/.netrc",
        "/data/ckpt/step-20000.pt",
        "/data/datasets/train.jsonl",
    }
)


# Traps that change what a card is (its memory, its power limit), not what it does.
_GPU_TRAPS = frozenset({Trap.HAMI, Trap.POWER_CAPPED})
POWER_CAP_SHARE = 0.6


def hami_mib(model: GpuModel) -> int:
    """memory.total on a HAMi-sliced card: a V100 shows 3000 MiB (HAMi issue 235), a big
    card a 24 GiB slice, a small one a quarter."""
    if model.key == "V100":
        return 3000
    return 24576 if model.memory_mib > 3 * 24576 else model.memory_mib // 4


@lru_cache(maxsize=4096)
def _gpus(
    key: str,
    count: int,
    scenario: Scenario,
    seed: int,
    nominal_gib: int,
    spoof: bool,
    traps: frozenset[Trap] = frozenset(),
) -> tuple[SimGpu, ...]:
    model = MODELS[key]
    rng = random.Random(f"gpus/{seed}")
    fake = scenario is Scenario.FAKE_VRAM
    real = FAKE_VRAM_MODEL if fake else model
    name = model.name if (not fake or spoof) else real.name
    bus = _SXM_BUS if model.nvlink else _PCIE_BUS
    return tuple(
        SimGpu(
            index=i,
            name=name,
            uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}",
            bus_id=f"00000000:{bus[i]}:00.0",
            nominal_mib=nominal_gib * 1024,
            memory_total_mib=hami_mib(real) if Trap.HAMI in traps else real.memory_mib,
            power_limit_w=real.power_limit_w
            * (POWER_CAP_SHARE if Trap.POWER_CAPPED in traps else 1.0),
            model=real,
        )
        for i in range(count)
    )


@dataclass(frozen=True)
class SimUser:
    """A Unix user on simulated nodes; name None: a uid with no passwd entry (a container's)."""

    uid: int
    name: str | None

    @property
    def owner(self) -> str:
        """As zuka records it (leases.telemetry.owners)."""
        return self.name if self.name is not None else f"uid:{self.uid}"


SIM_USERS: tuple[SimUser, ...] = (
    SimUser(1001, "alice"),
    SimUser(1002, "bob"),
    SimUser(1003, "carol"),
    SimUser(2000, None),
    SimUser(0, "root"),
)


def gpu_user(node: SimNode, index: int) -> SimUser:
    """Who runs the jobs on one GPU of a node: the same user for the node's whole life.

    Each node has a main user; on every other node a second user holds the upper half of
    the cards, so that a fleet's history splits between several people.
    """
    first = node.seed % len(SIM_USERS)
    if node.count > 1 and index >= node.count // 2 and node.seed % 2:
        return SIM_USERS[(first + 1) % len(SIM_USERS)]
    return SIM_USERS[first]


@dataclass(frozen=True)
class GpuReading:
    """Everything nvidia-smi can say about one card at one instant."""

    gpu: SimGpu
    util_gpu: int
    util_mem: int
    mem_used_mib: int
    temp_c: int
    power_w: float
    sm_clock_mhz: int
    pstate: str
    fan_pct: int | None
    throttle: str
    # Compute processes as (pid, process name, used MiB); empty when idle.
    processes: tuple[tuple[int, str, int], ...]
    # Another tenant's compute processes (Trap.TENANT): NVML lists them, ps does not.
    foreign: tuple[tuple[int, str, int], ...] = ()


class HistoryRow(NamedTuple):
    """One step of history for one node: one entry per GPU in each tuple."""

    at: datetime
    util_gpu: tuple[int, ...]
    mem_used_mib: tuple[int, ...]
    power_w: tuple[float, ...]
    temp_c: tuple[int, ...]


# Scenarios that only change how the node answers; their load is one of the basic three.
_LOAD = {
    Scenario.IDLE_MONTHLY: Scenario.IDLE_MONTHLY,
    Scenario.BURSTY: Scenario.BURSTY,
    Scenario.FLAKY: Scenario.BURSTY,
    Scenario.STARVED: Scenario.STARVED,
}
_NOISE = 4096  # power of two: index with & (_NOISE - 1)
_TICK_S = 10  # live readings move every 10 s
_JOB_S = 6 * 3600  # a busy node starts a new job (new memory footprint) every 6 h
_SWEEP_S = 1800  # a bursty node decides every 30 min whether a sweep runs
_CST = 8 * 3600  # days and hours are judged in Asia/Shanghai


# clocks_throttle_reasons.active bit masks.
_NONE = "0x0000000000000000"
_IDLE = "0x0000000000000001"
_SW_POWER_CAP = "0x0000000000000004"
# HW slowdown (0x8) with HW power brake slowdown (0x80): Trap.THROTTLED, busy or idle.
HW_SLOWDOWN = 0x88
TENANT_PID = 3_145_000
GHOST_SHARE = 0.35

_Row = tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...], tuple[int, ...]]
_Busy = tuple[tuple[int, ...], tuple[float, ...], tuple[int, ...]]


class _Load:
    """Per-node constants precomputed once so a reading is a handful of table lookups."""

    def __init__(self, node: SimNode) -> None:
        rng = random.Random(f"load/{node.seed}")
        self.noise = [rng.random() for _ in range(_NOISE)]
        self.kind = _LOAD.get(node.scenario, Scenario.BUSY)
        self.gpus = node.gpus
        self.n = len(self.gpus)
        model = self.gpus[0].model
        self.limit = self.gpus[0].power_limit_w
        self.idle_w = model.idle_power_w
        self.total = self.gpus[0].memory_total_mib
        # idle_monthly: two busy weekdays out of seven, which two depends on the seed.
        self.busy_days = {node.seed % 7, (node.seed + 3) % 7}
        self.reserve = [DRIVER_RESERVE_MIB - 20 + int(40 * self.noise[g]) for g in range(self.n)]
        self.idle_temp = [31 + int(6 * self.noise[100 + g]) for g in range(self.n)]
        self._idle: list[_Row | None] = [None] * _NOISE
        self._busy: list[_Busy | None] = [None] * _NOISE
        self._mem: dict[int, tuple[int, ...]] = {}

    def job(self, t: int) -> int | None:
        """The id of the job running at epoch second t, or None when the node is idle."""
        if self.kind in (Scenario.BUSY, Scenario.STARVED):
            return t // _JOB_S
        if self.kind is Scenario.BURSTY:
            block = t // _SWEEP_S
            return block if self.noise[(block * 31) & (_NOISE - 1)] < 0.45 else None
        local = t + _CST
        day, hour = local // 86400, (local % 86400) // 3600
        return day if day % 7 in self.busy_days and 9 <= hour < 23 else None

    def row(self, t: int) -> _Row:
        """(util %, memory used MiB, power W, temperature C) per GPU at epoch second t.

        Values repeat with the noise table, so each distinct tick key is computed once and
        cached: that is what makes a month of one-minute history cheap.
        """
        k = (t // _TICK_S) & (_NOISE - 1)
        job = self.job(t)
        if job is None:
            idle = self._idle[k]
            if idle is None:
                idle = self._idle[k] = self._idle_row(k)
            return idle
        busy = self._busy[k]
        if busy is None:
            busy = self._busy[k] = self._busy_row(k)
        mem = self._mem.get(job)
        if mem is None:
            if len(self._mem) > 256:
                self._mem.clear()
            mem = self._mem[job] = self._mem_row(job)
        return busy[0], mem, busy[1], busy[2]

    def _idle_row(self, k: int) -> _Row:
        nz, m, r = self.noise, _NOISE - 1, range(self.n)
        lo, span = self.idle_w[0], self.idle_w[1] - self.idle_w[0]
        util = tuple(3 if nz[(k * 7 + g) & m] > 0.97 else 0 for g in r)
        power = tuple(round(lo + span * nz[(k * 11 + g) & m], 2) for g in r)
        return util, tuple(self.reserve), power, tuple(self.idle_temp)

    def _busy_row(self, k: int) -> _Busy:
        nz, m, r = self.noise, _NOISE - 1, range(self.n)
        if self.kind is Scenario.STARVED:  # waiting on data most of the time
            util = tuple(12 + int(20 * nz[(k * 7 + g) & m]) for g in r)
            power = tuple(round(self.limit * (0.3 + 0.1 * nz[(k * 11 + g) & m]), 2) for g in r)
        # A short dip every so often: checkpointing or data loading.
        elif nz[(k * 5) & m] < 0.03:
            util = tuple(20 + int(30 * nz[(k * 7 + g) & m]) for g in r)
            power = tuple(round(self.limit * (0.35 + 0.2 * nz[(k * 11 + g) & m]), 2) for g in r)
        else:
            util = tuple(85 + int(15.99 * nz[(k * 7 + g) & m]) for g in r)
            power = tuple(round(self.limit * (0.84 + 0.155 * nz[(k * 11 + g) & m]), 2) for g in r)
        temp = tuple(58 + int(22 * p / self.limit) + (g % 3) for g, p in enumerate(power))
        return util, power, temp

    def _mem_row(self, job: int) -> tuple[int, ...]:
        nz, m = self.noise, _NOISE - 1
        frac = 0.60 + 0.33 * nz[(job * 17) & m]
        return tuple(int(self.total * (frac + 0.02 * nz[(job * 3 + g) & m])) for g in range(self.n))


@lru_cache(maxsize=1024)
def _load(node: SimNode) -> _Load:
    return _Load(node)


def _epoch(at: datetime) -> int:
    if at.tzinfo is None:
        raise ValueError("time must be timezone-aware")
    return int(at.timestamp())


def readings(node: SimNode, now: datetime) -> tuple[GpuReading, ...]:
    """What every GPU of the node shows at `now`."""
    load = _load(node)
    t = _epoch(now)
    util, mem, power, temp = load.row(t)
    job = load.job(t)
    nz = load.noise
    busy = job is not None
    out = []
    for gpu in load.gpus:
        g = gpu.index
        model = gpu.model
        capped = busy and power[g] > 0.97 * gpu.power_limit_w
        clock = model.max_sm_mhz if busy else model.idle_sm_mhz
        throttle = _IDLE if not busy else _SW_POWER_CAP if capped else _NONE
        procs: tuple[tuple[int, str, int], ...] = ()
        used, util_g = mem[g], util[g]
        if job is not None:
            pid = job_pid(job, g)
            procs = ((pid, "python", max(mem[g] - load.reserve[g], 0)),)
            if pid in node.killed:
                procs, used, util_g = (), load.reserve[g], 0
        util_mem = 25 + int(35 * nz[(t // _TICK_S * 13 + g) & (_NOISE - 1)]) if procs else 0
        reading = GpuReading(
            gpu=gpu,
            util_gpu=util_g,
            util_mem=util_mem,
            mem_used_mib=used,
            temp_c=temp[g],
            power_w=power[g],
            sm_clock_mhz=int(clock * 0.92) if capped else clock,
            pstate="P0" if busy else "P8",
            fan_pct=None if model.datacenter else (30 + util[g] // 2 if busy else 30),
            throttle=throttle,
            processes=procs,
        )
        out.append(_trapped(node, reading) if node.traps else reading)
    return tuple(out)


def job_pid(job: int, index: int) -> int:
    """The pid of a job's process on one GPU."""
    return 2000 + (job * 7919 + index * 13) % 60000


def job_start(node: SimNode, t: int) -> int | None:
    """The epoch second the job running at t started (None: idle)."""
    load = _load(node)
    job = load.job(t)
    if job is None:
        return None
    if load.kind is Scenario.BURSTY:
        return t - t % _SWEEP_S
    if load.kind is Scenario.IDLE_MONTHLY:
        return (t + _CST) // 86400 * 86400 + 9 * 3600 - _CST
    return t - t % _JOB_S


def current_job(node: SimNode, t: int) -> int | None:
    return _load(node).job(t)


def _trapped(node: SimNode, r: GpuReading) -> GpuReading:
    """A reading as the node's traps change it: a tenant's job, ghost memory, throttling."""
    g, total = r.gpu.index, r.gpu.memory_total_mib
    used, foreign, throttle, clock = r.mem_used_mib, r.foreign, r.throttle, r.sm_clock_mhz
    if Trap.TENANT in node.traps and g <= (node.count - 1) // 2:
        take = min(total // 4, max(total - used - 1, 0))
        foreign = ((TENANT_PID + 17 * g, "python3", take),)
        used += take
    if Trap.GHOST_MEMORY in node.traps:
        used += min(int(total * GHOST_SHARE), max(total - used - 1, 0))
    if Trap.THROTTLED in node.traps:
        throttle = f"0x{int(throttle, 16) | HW_SLOWDOWN:016X}"
        clock = min(clock, r.gpu.model.max_sm_mhz // 3)
    return dataclasses.replace(
        r, mem_used_mib=used, foreign=foreign, throttle=throttle, sm_clock_mhz=clock
    )


def history(
    node: SimNode, start: datetime, end: datetime, step: timedelta = timedelta(minutes=1)
) -> Iterator[HistoryRow]:
    """Plausible past readings from start (inclusive) to end (exclusive), one row per step.

    Cheap: 30 days at one-minute steps for an 8-GPU node takes a fraction of a second.
    Rows carry UTC times and agree with `readings` at the same instants.
    """
    seconds = int(step.total_seconds())
    if seconds <= 0:
        raise ValueError("step: must be at least one second")
    load = _load(node)
    t0, t1 = _epoch(start), _epoch(end)
    row, make = load.row, HistoryRow._make
    at = datetime.fromtimestamp(t0, UTC)  # stepping in UTC is safe across DST changes
    step = timedelta(seconds=seconds)
    for t in range(t0, t1, seconds):
        util, mem, power, temp = row(t)
        yield make((at, util, mem, power, temp))
        at += step


def row_samples(node: SimNode, row: HistoryRow) -> list[GpuSample]:
    """A history row as the GpuSample records the poller stores, one per GPU."""
    return [
        GpuSample(
            node=node.name,
            at=row.at,
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.name,
            util_gpu=float(row.util_gpu[gpu.index]),
            mem_used_mib=float(row.mem_used_mib[gpu.index]),
            mem_total_mib=float(gpu.memory_total_mib),
            temp_c=float(row.temp_c[gpu.index]),
            power_w=row.power_w[gpu.index],
            power_limit_w=gpu.power_limit_w,
        )
        for gpu in node.gpus
    ]


def utcnow() -> datetime:
    return datetime.now(UTC)
