"""What is read from a node: one GPU's reading, a process on a GPU, what the last attempt
to read a node found, and a node's live status (re-exported by leases.core.models, where
every other module finds them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from leases.core.host import HostStats


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. None always means unknown, never zero."""

    node: str
    # When these values were read. A status may hold them as read again later, unchanged
    # (NodeStatus.samples_at): NodeStatus.sample_time says when.
    at: datetime
    index: int
    uuid: str = ""
    name: str = ""
    util_gpu: float | None = None
    util_mem: float | None = None
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    pstate: str | None = None
    fan_pct: float | None = None
    mig: bool | None = None
    ecc_uncorrected: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


# Every GpuSample field's default, and the fields made fresh for each sample (extra).
SAMPLE_DEFAULTS: dict[str, object] = {
    f.name: f.default for f in fields(GpuSample) if f.default is not MISSING
}
_SAMPLE_FACTORIES = tuple(
    (f.name, f.default_factory) for f in fields(GpuSample) if f.default_factory is not MISSING
)


def made_sample(node: str, at: datetime, values: Mapping[str, object]) -> GpuSample:
    """The sample GpuSample(node=node, at=at, **values) makes (equal, the same repr, its
    fields held in the same order, so that samples share one key table and take half the
    memory), for values that name only GpuSample's fields, the index among them, each
    already checked by what read them (nvidia-smi's parser, a record zuka wrote). Made
    without a frozen dataclass's keyword __init__, which sets each field through
    object.__setattr__ and costs several times as much (a 1,000-node poller makes 8,000
    samples a sweep where the nodes are busy)."""
    new = object.__new__(GpuSample)
    held = vars(new)
    held["node"], held["at"], held["index"] = node, at, values["index"]
    held.update(SAMPLE_DEFAULTS)
    held.update(values)
    held["node"], held["at"] = node, at  # over a record's own (its time as text)
    for name, factory in _SAMPLE_FACTORIES:
        if name not in values:
            held[name] = factory()
    return new


class NodeHealth(StrEnum):
    """What the last attempt to read a node found. Shared by ssh, nvsmi, nvml and poller."""

    OK = "ok"
    CONNECTING = "connecting"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH_FAILED = "auth_failed"
    UNTRUSTED = "untrusted"  # host key not yet accepted by the user
    HOSTKEY_CHANGED = "hostkey_changed"  # refused: possible MITM or reinstalled node
    NO_NVIDIA_SMI = "no_nvidia_smi"  # exit 127
    DRIVER_NOT_LOADED = "driver_not_loaded"
    DRIVER_MISMATCH = "driver_mismatch"  # driver/library version mismatch: needs reboot
    # nvidia-smi runs but the driver's user-space library (libnvidia-ml.so) is not there.
    NVML_LIBRARY_MISSING = "nvml_library_missing"
    # NVML refuses the login user: /dev/nvidia* not open to it (group, container cgroup).
    NVML_PERMISSION = "nvml_permission"
    GPU_LOST = "gpu_lost"
    GARBAGE = "garbage"  # output we could not parse
    NO_NVML = "no_nvml"  # local node without NVML
    REFUSED = "refused"  # zuka will not connect: a refused ledger value or ssh config


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on a GPU (nvidia-smi --query-compute-apps)."""

    node: str
    gpu_uuid: str
    pid: int
    process_name: str = ""
    used_mib: float | None = None
    # The Unix user on the node (leases.telemetry.owners): a name, "uid:N" for a user without one,
    # "?" for one the node named in a way zuka refused; None when unknown.
    owner: str | None = None
    # Read from /proc in the same round trip (leases.telemetry.procinfo), None when unknown:
    # the start as "BOOT_ID:TICKS" (field 22 of /proc/PID/stat with the boot id: stable and
    # locale-free), the seconds it had run when read, and its command line as the node gave
    # it (NULs as spaces, bounded; hostile: show it through leases.core.textsafe).
    start: str | None = None
    elapsed_s: int | None = None
    cmdline: str | None = None
    # False: the login cannot see this pid (a container's host PID nvidia-smi named).
    visible: bool = True


@dataclass(frozen=True)
class NodeStatus:
    """What is known of a node now, the one live-status type: what a poller holds of it, what
    the poller last wrote (node_latest, read back by HistoryStore.latest_by_id), what the
    dashboard and `zuka poll` show and what the alert rules judge. Here, not in
    leases.telemetry.poller, so that readers of the ledger do not import SSH."""

    node: str
    health: NodeHealth = NodeHealth.CONNECTING
    detail: str = ""
    checked: datetime | None = None  # last attempt
    at: datetime | None = None  # last good reading
    samples: tuple[GpuSample, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    fingerprint: str | None = None  # of a host key we refused
    host: HostStats | None = None  # CPU, RAM, disks, network (None: not read)
    # When the samples were read, where that is not their own `at`: a node that answered
    # the same, byte for byte, as at its reading before keeps the samples that reading gave
    # (leases.telemetry.poller: no copy of each made again only for its time), read again
    # at this time. None: each sample was read at its own `at`. Written and shown as each
    # sample's time (`sample_time`).
    samples_at: datetime | None = None

    def sample_time(self, sample: GpuSample) -> datetime:
        """When one of this status's samples was read."""
        return self.samples_at or sample.at


class OwnerHour(NamedTuple):
    """Busy card-minutes of one owner on one node in one clock hour
    (leases.telemetry.attribution,
    stored by leases.telemetry.rollups, summed by leases.money.report)."""

    node: str
    owner: str  # a user name, "uid:N", or "?" (unknown or refused)
    hour: int  # Unix time // 3600
    busy_card_minutes: float
    node_id: int | None = None  # as read from the ledger (a released node's name is reused)
