"""Reading local GPUs through NVML.

This machine has no GPU, so the real pynvml is exercised only on its failure path
(nvmlInit raises NVMLError_LibraryNotFound). The happy path runs against FakeNvml below:
a FAKE pynvml, shaped like the real module and raising the real pynvml error classes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from leases.core.models import GpuSample, NodeHealth
from leases.telemetry.nvml import NvmlReader, NvmlUnavailable, read_local
from leases.telemetry.nvsmi import (
    EXTRA_BUS_ID,
    EXTRA_DRIVER_VERSION,
    EXTRA_MAX_SM_CLOCK,
    EXTRA_PERSISTENCE,
    EXTRA_THROTTLE_REASONS,
    QUERY_FIELDS,
    format_query,
    parse_query,
)

NOW = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
MIB = 1024 * 1024


def test_real_nvml_here_gives_samples_or_a_clear_status() -> None:
    # The real pynvml. Here (no GPU) nvmlInit raises NVMLError_LibraryNotFound; on a
    # machine with a GPU the same call must give real samples instead.
    try:
        samples = read_local("this-host", NOW)
    except NvmlUnavailable as err:
        assert str(err).startswith("no NVML on this host: ")
        assert err.health is NodeHealth.NO_NVML
        assert isinstance(err.__cause__, pynvml.NVMLError_LibraryNotFound)
        return
    assert samples
    assert all(s.node == "this-host" and s.mem_total_mib for s in samples)


def not_supported() -> pynvml.NVMLError:
    return pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)


class FakeNvml:
    """A FAKE pynvml: no GPU exists on the machines these tests run on.

    Two GPUs: an A100 SXM that reports everything but a fan, and a consumer card whose
    power, ECC and MIG readings are NotSupported. Values are in NVML's own units
    (bytes, milliwatts) so the reader's conversions are tested.
    """

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = pynvml.NVML_VOLATILE_ECC
    NVML_DEVICE_MIG_ENABLE = pynvml.NVML_DEVICE_MIG_ENABLE

    def __init__(self, init_error: int | None = None) -> None:
        self.init_error = init_error
        self.inits = 0
        self.shutdowns = 0
        self.lost: set[int] = set()

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "535.129.03"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def _gpu(self, handle: int, a100: object, consumer: object) -> Any:
        if handle in self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        value = a100 if handle == 0 else consumer
        if isinstance(value, pynvml.NVMLError):
            raise value
        return value

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._gpu(h, "GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c70", "GPU-7a6b5c4d-3e2f")

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._gpu(h, "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090")

    def nvmlDeviceGetPciInfo(self, h: int) -> SimpleNamespace:
        # The real structure holds busId as bytes.
        return SimpleNamespace(busId=self._gpu(h, b"00000000:07:00.0", b"00000000:01:00.0"))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return self._gpu(h, SimpleNamespace(gpu=100, memory=43), SimpleNamespace(gpu=0, memory=0))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return self._gpu(
            h,
            SimpleNamespace(used=71234 * MIB, total=81920 * MIB, free=10686 * MIB),
            SimpleNamespace(used=512 * MIB, total=24564 * MIB, free=24052 * MIB),
        )

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(h, 61, 35)

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._gpu(h, 312450, not_supported())

    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int:
        return self._gpu(h, 400000, not_supported())

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._gpu(h, 1410, 210)

    def nvmlDeviceGetMaxClockInfo(self, h: int, clock: int) -> int:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._gpu(h, 1410, 3120)

    def nvmlDeviceGetPerformanceState(self, h: int) -> int:
        return self._gpu(h, 0, 8)

    def nvmlDeviceGetFanSpeed(self, h: int) -> int:
        return self._gpu(h, not_supported(), 30)

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return self._gpu(h, [0, 0], not_supported())

    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int:
        assert kind == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        assert counter == pynvml.NVML_VOLATILE_ECC
        return self._gpu(h, 2, not_supported())

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self._gpu(h, 1, 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._gpu(h, 0, 1)


def test_fake_happy_path() -> None:
    fake = FakeNvml()
    a100, consumer = read_local("local", NOW, nvml=fake)
    assert a100 == GpuSample(
        node="local",
        at=NOW,
        index=0,
        uuid="GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c70",
        name="NVIDIA A100-SXM4-80GB",
        util_gpu=100.0,
        util_mem=43.0,
        mem_used_mib=71234.0,
        mem_total_mib=81920.0,
        temp_c=61.0,
        power_w=312.45,
        power_limit_w=400.0,
        sm_clock_mhz=1410.0,
        pstate="P0",
        fan_pct=None,
        mig=False,
        ecc_uncorrected=2,
        extra={
            EXTRA_BUS_ID: "00000000:07:00.0",
            EXTRA_MAX_SM_CLOCK: "1410",
            EXTRA_PERSISTENCE: "Enabled",
            EXTRA_DRIVER_VERSION: "535.129.03",
            EXTRA_THROTTLE_REASONS: "0x0000000000000000",
        },
    )
    # NotSupported is unknown, never zero.
    assert (consumer.power_w, consumer.power_limit_w) == (None, None)
    assert (consumer.mig, consumer.ecc_uncorrected) == (None, None)
    assert consumer.fan_pct == 30.0
    assert consumer.pstate == "P8"
    assert consumer.util_gpu == 0.0
    assert consumer.extra[EXTRA_PERSISTENCE] == "Disabled"
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_nvml_and_nvidia_smi_speak_the_same() -> None:
    # A local node and a remote one must be comparable field for field.
    samples = read_local("local", NOW, nvml=FakeNvml())
    assert parse_query(format_query(samples, QUERY_FIELDS), QUERY_FIELDS, "local", NOW) == samples


def test_reader_inits_once_and_closes_once() -> None:
    fake = FakeNvml()
    with NvmlReader(fake) as reader:
        first = reader.read("local", NOW)
        second = reader.read("local", NOW)
    reader.close()
    assert first == second
    assert (fake.inits, fake.shutdowns) == (1, 1)


def test_older_nvml_throttle_reasons() -> None:
    class OlderNvml(FakeNvml):
        nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
            return 4

    a100, _ = read_local("local", NOW, nvml=OlderNvml())
    assert a100.extra[EXTRA_THROTTLE_REASONS] == "0x0000000000000004"


@pytest.mark.parametrize(
    ("error", "health", "said"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, NodeHealth.NO_NVML, "no NVML on this host"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, NodeHealth.DRIVER_NOT_LOADED, "not loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, NodeHealth.DRIVER_MISMATCH, "mismatch"),
        (pynvml.NVML_ERROR_NO_PERMISSION, NodeHealth.NVML_PERMISSION, "/dev/nvidia"),
        (pynvml.NVML_ERROR_UNKNOWN, NodeHealth.NO_NVML, "no NVML on this host"),
    ],
)
def test_init_failures(error: int, health: NodeHealth, said: str) -> None:
    with pytest.raises(NvmlUnavailable, match=said) as caught:
        read_local("local", NOW, nvml=FakeNvml(init_error=error))
    assert caught.value.health is health


def test_lost_gpu_is_reported_not_zeroed() -> None:
    fake = FakeNvml()
    fake.lost.add(1)
    with pytest.raises(NvmlUnavailable) as caught:
        read_local("local", NOW, nvml=fake)
    assert caught.value.health is NodeHealth.GPU_LOST
    assert fake.shutdowns == 1  # NVML is released even when a read fails


@pytest.mark.parametrize(
    ("method", "health"),
    [
        ("nvmlDeviceGetCount", NodeHealth.NO_NVML),
        ("nvmlDeviceGetHandleByIndex", NodeHealth.GPU_LOST),
    ],
)
def test_device_enumeration_failures(method: str, health: NodeHealth) -> None:
    fake = FakeNvml()

    def fail(*_: object) -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    failing: Callable[..., None] = fail
    setattr(fake, method, failing)
    with pytest.raises(NvmlUnavailable) as caught:
        read_local("local", NOW, nvml=fake)
    assert caught.value.health is health


def test_importing_nvml_touches_no_gpu() -> None:
    # Import-time I/O is forbidden; constructing a reader must not init NVML either.
    fake = FakeNvml()
    NvmlReader(fake)
    assert fake.inits == 0
