"""Reading the GPUs of this machine through NVML (nvidia-ml-py's `pynvml` module).

Used for a node marked local, instead of nvidia-smi over SSH. The readings land in the
same GpuSample fields, in the same units, as leases.telemetry.nvsmi gives (MiB, W, MHz, %), with
the same keys under extra. A reading NVML cannot give is None, never 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from leases.core.models import GpuProcess, GpuSample, NodeHealth
from leases.telemetry.nvsmi import (
    EXTRA_BUS_ID,
    EXTRA_DRIVER_VERSION,
    EXTRA_MAX_SM_CLOCK,
    EXTRA_PERSISTENCE,
    EXTRA_THROTTLE_REASONS,
)
from leases.telemetry.owners import local_owner
from leases.telemetry.procinfo import local_info
from leases.telemetry.words import REASONS

_T = TypeVar("_T")

_MIB = 1024 * 1024

# nvmlReturn_t values (nvml.h); stable across driver releases.
_ERROR_NO_PERMISSION = 4
_ERROR_DRIVER_NOT_LOADED = 9
_ERROR_GPU_IS_LOST = 15
_ERROR_LIB_RM_VERSION_MISMATCH = 18

# NVML constants read when no module defines them (a test's fake may leave them out).
_CONSTANTS = {
    "NVML_TEMPERATURE_GPU": 0,
    "NVML_CLOCK_SM": 1,
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1,
    "NVML_VOLATILE_ECC": 0,
    "NVML_DEVICE_MIG_ENABLE": 1,
    "NVML_PSTATE_UNKNOWN": 32,
}

# NVML_ERROR_LIBRARY_NOT_FOUND (12) stays NO_NVML here: on the machine zuka runs on it is
# most often a host without NVIDIA GPUs ("no NVML on this host"), not a broken install.
_INIT_HEALTH: dict[object, NodeHealth] = {
    _ERROR_NO_PERMISSION: NodeHealth.NVML_PERMISSION,
    _ERROR_DRIVER_NOT_LOADED: NodeHealth.DRIVER_NOT_LOADED,
    _ERROR_GPU_IS_LOST: NodeHealth.GPU_LOST,
    _ERROR_LIB_RM_VERSION_MISMATCH: NodeHealth.DRIVER_MISMATCH,
}


class NvmlUnavailable(RuntimeError):
    """NVML could not be used on this host; `health` says why in the poller's terms."""

    def __init__(self, message: str, health: NodeHealth = NodeHealth.NO_NVML) -> None:
        super().__init__(message)
        self.health = health


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvmlReader:
    """Holds NVML open between reads: init once, read many times, close once.

    `nvml` is the pynvml module or an object shaped like it (tests pass a fake); by
    default pynvml is imported on open, never at import time of this module.
    """

    def __init__(self, nvml: Any = None, proc: Path = Path("/proc")) -> None:
        self._nvml = nvml
        self._proc = proc  # where process owners are read (a test's own tree)
        self._open = False
        self._driver_version: str | None = None

    def open(self) -> None:
        if self._open:
            return
        if self._nvml is None:
            import pynvml

            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            health = _INIT_HEALTH.get(getattr(err, "value", None), NodeHealth.NO_NVML)
            if health is NodeHealth.NO_NVML:
                message = f"no NVML on this host: {err}"
            else:
                # Kept (a poll gap's detail): in English, as REASONS holds it.
                message = f"NVML did not start on this host: {REASONS[health]} ({err})"
            raise NvmlUnavailable(message, health) from err
        self._open = True
        self._driver_version = self._field(lambda: _text(nvml.nvmlSystemGetDriverVersion()))

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        # Nothing to do about a failed shutdown; the handles are gone either way.
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()

    def __enter__(self) -> NvmlReader:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _const(self, name: str) -> int:
        return int(getattr(self._nvml, name, _CONSTANTS[name]))

    def _field(self, read: Callable[[], _T]) -> _T | None:
        """One reading, or None where NVML cannot give it (NotSupported and the like)."""
        try:
            return read()
        except self._nvml.NVMLError as err:
            if getattr(err, "value", None) == _ERROR_GPU_IS_LOST:
                raise NvmlUnavailable(
                    f"{REASONS[NodeHealth.GPU_LOST]} ({err})", NodeHealth.GPU_LOST
                ) from err
            return None

    def read(self, node: str, now: datetime) -> list[GpuSample]:
        """One sample per GPU of this machine, all stamped `now`."""
        self.open()
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            health = _INIT_HEALTH.get(getattr(err, "value", None), NodeHealth.NO_NVML)
            raise NvmlUnavailable(f"NVML could not count GPUs: {err}", health) from err
        samples = []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as err:
                raise NvmlUnavailable(
                    f"NVML could not open GPU {index}: {err}", NodeHealth.GPU_LOST
                ) from err
            samples.append(self._sample(node, now, index, handle))
        return samples

    def _sample(self, node: str, now: datetime, index: int, handle: object) -> GpuSample:
        nvml = self._nvml
        f = self._field
        util = f(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        memory = f(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power_mw = f(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        limit_mw = f(lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle))
        pstate = f(lambda: int(nvml.nvmlDeviceGetPerformanceState(handle)))
        mig_modes = f(lambda: nvml.nvmlDeviceGetMigMode(handle))
        sm_clock = f(lambda: nvml.nvmlDeviceGetClockInfo(handle, self._const("NVML_CLOCK_SM")))

        extra: dict[str, str] = {}
        bus_id = f(lambda: _text(nvml.nvmlDeviceGetPciInfo(handle).busId))
        max_sm = f(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, self._const("NVML_CLOCK_SM")))
        persistence = f(lambda: nvml.nvmlDeviceGetPersistenceMode(handle))
        reasons = f(lambda: self._throttle_reasons(handle))
        if bus_id:
            extra[EXTRA_BUS_ID] = bus_id
        if max_sm is not None:
            extra[EXTRA_MAX_SM_CLOCK] = str(max_sm)
        if persistence is not None:
            extra[EXTRA_PERSISTENCE] = "Enabled" if persistence else "Disabled"
        if self._driver_version:
            extra[EXTRA_DRIVER_VERSION] = self._driver_version
        if reasons is not None:
            # The same form nvidia-smi prints for clocks_throttle_reasons.active.
            extra[EXTRA_THROTTLE_REASONS] = f"0x{reasons:016x}"

        return GpuSample(
            node=node,
            at=now,
            index=index,
            uuid=f(lambda: _text(nvml.nvmlDeviceGetUUID(handle))) or "",
            name=f(lambda: _text(nvml.nvmlDeviceGetName(handle))) or "",
            util_gpu=None if util is None else float(util.gpu),
            util_mem=None if util is None else float(util.memory),
            mem_used_mib=None if memory is None else memory.used / _MIB,
            mem_total_mib=None if memory is None else memory.total / _MIB,
            temp_c=_float(
                f(
                    lambda: nvml.nvmlDeviceGetTemperature(
                        handle, self._const("NVML_TEMPERATURE_GPU")
                    )
                )
            ),
            power_w=None if power_mw is None else power_mw / 1000,
            power_limit_w=None if limit_mw is None else limit_mw / 1000,
            sm_clock_mhz=_float(sm_clock),
            pstate=(
                None
                if pstate is None or pstate == self._const("NVML_PSTATE_UNKNOWN")
                else f"P{pstate}"
            ),
            fan_pct=_float(f(lambda: nvml.nvmlDeviceGetFanSpeed(handle))),
            mig=(
                None if mig_modes is None else mig_modes[0] == self._const("NVML_DEVICE_MIG_ENABLE")
            ),
            ecc_uncorrected=_int(
                f(
                    lambda: nvml.nvmlDeviceGetTotalEccErrors(
                        handle,
                        self._const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
                        self._const("NVML_VOLATILE_ECC"),
                    )
                )
            ),
            extra=extra,
        )

    def processes(self, node: str, samples: Sequence[GpuSample]) -> list[GpuProcess]:
        """The compute processes on the GPUs of `samples`, each with its owner (from
        /proc/PID/status; None when the process is gone)."""
        self.open()
        nvml = self._nvml
        out = []
        for sample in samples:
            handle: Any = self._field(partial(nvml.nvmlDeviceGetHandleByIndex, sample.index))
            if handle is None:
                continue
            running: Any = self._field(partial(nvml.nvmlDeviceGetComputeRunningProcesses, handle))
            for p in running or ():
                pid = int(p.pid)
                used = getattr(p, "usedGpuMemory", None)
                name: Any = self._field(partial(nvml.nvmlSystemGetProcessName, pid))
                info = local_info(pid, self._proc)
                out.append(
                    GpuProcess(
                        node=node,
                        gpu_uuid=sample.uuid,
                        pid=pid,
                        process_name="" if name is None else _text(name),
                        used_mib=None if used is None else used / _MIB,
                        owner=local_owner(pid, self._proc),
                        start=info.start if info else None,
                        elapsed_s=info.elapsed_s if info else None,
                        cmdline=info.cmdline if info else None,
                        visible=info is not None,
                    )
                )
        return out

    def _throttle_reasons(self, handle: object) -> int:
        # Newer NVML renamed throttle reasons to clock event reasons; same bit mask.
        read = getattr(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if read is None:
            read = self._nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(read(handle))


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def read_local(node: str, now: datetime, nvml: Any = None) -> list[GpuSample]:
    """Read this machine's GPUs once (init, read, shut down).

    Raises NvmlUnavailable ("no NVML on this host: ...", health NO_NVML) where there is no
    NVIDIA driver library, as on a machine without a GPU.
    """
    with NvmlReader(nvml) as reader:
        return reader.read(node, now)


__all__ = ["NvmlReader", "NvmlUnavailable", "read_local"]
