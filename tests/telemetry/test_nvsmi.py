"""nvidia-smi parsing: real outputs, every failure class, the -lms stream, properties."""

from __future__ import annotations

import dataclasses
import functools
import string
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leases.core.models import GpuProcess, GpuSample, NodeHealth
from leases.ssh.stream import CommandResult
from leases.telemetry.nvsmi import (
    APPS_COMMAND,
    BOUNDS,
    EXTRA_BUS_ID,
    EXTRA_DRIVER_VERSION,
    EXTRA_MAX_SM_CLOCK,
    EXTRA_PERSISTENCE,
    EXTRA_THROTTLE_REASONS,
    QUERY_FIELDS,
    REQUIRED_FIELDS,
    NvsmiParseError,
    classify_failure,
    format_query,
    human_reason,
    parse_compute_apps,
    parse_query,
    query_command,
)
from leases.telemetry.nvsmiprobe import NvsmiProbeError, probe, rejected_field
from leases.telemetry.nvsmistream import StreamParser

AT = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)

# --- sample outputs, in the form `--query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits`
# prints them (", " between values, [N/A] where a value cannot be read) ---

A100_SXM_X8 = """\
0, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c70, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 100, 43, 71234, 81920, 61, 312.45, 400.00, 1410, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000000
1, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c71, NVIDIA A100-SXM4-80GB, 00000000:0B:00.0, 100, 41, 71234, 81920, 58, 298.10, 400.00, 1410, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000000
2, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c72, NVIDIA A100-SXM4-80GB, 00000000:48:00.0, 100, 44, 71234, 81920, 63, 325.77, 400.00, 1410, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000000
3, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c73, NVIDIA A100-SXM4-80GB, 00000000:4C:00.0, 100, 42, 71234, 81920, 60, 305.02, 400.00, 1410, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000000
4, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c74, NVIDIA A100-SXM4-80GB, 00000000:88:00.0, 0, 0, 4, 81920, 34, 61.20, 400.00, 210, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000001
5, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c75, NVIDIA A100-SXM4-80GB, 00000000:8B:00.0, 0, 0, 4, 81920, 33, 60.95, 400.00, 210, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000001
6, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c76, NVIDIA A100-SXM4-80GB, 00000000:C8:00.0, 0, 0, 4, 81920, 35, 62.11, 400.00, 210, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 0, 0x0000000000000001
7, GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c77, NVIDIA A100-SXM4-80GB, 00000000:CB:00.0, 0, 0, 4, 81920, 34, 60.40, 400.00, 210, 1410, P0, [N/A], Disabled, Enabled, 535.129.03, 2, 0x0000000000000001
"""

# Some H800 hosts (rental platforms, vGPU passthrough) cannot report power at all.
H800_NO_POWER = """\
0, GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0, NVIDIA H800, 00000000:18:00.0, 87, 35, 60113, 81559, 49, [N/A], [N/A], 1980, 1980, P0, [N/A], Disabled, Enabled, 535.104.05, 0, 0x0000000000000000
1, GPU-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f1, NVIDIA H800, 00000000:2A:00.0, 0, 0, 1, 81559, 31, [N/A], [N/A], 345, 1980, P0, [N/A], Disabled, Enabled, 535.104.05, 0, 0x0000000000000001
"""

# With MIG on, whole-GPU utilisation is not reported.
A100_MIG = """\
0, GPU-9e8d7c6b-5a49-3827-1605-f4e3d2c1b0a9, NVIDIA A100-SXM4-40GB, 00000000:00:04.0, [N/A], [N/A], 13, 40960, 31, 52.31, 400.00, 1410, 1410, P0, [N/A], Enabled, Enabled, 550.54.15, 0, 0x0000000000000001
"""

RTX4090 = """\
0, GPU-7a6b5c4d-3e2f-1a0b-9c8d-7e6f5a4b3c2d, NVIDIA GeForce RTX 4090, 00000000:01:00.0, 98, 61, 22150, 24564, 72, 412.33, 450.00, 2730, 3120, P2, [Not Supported], [N/A], Disabled, 550.120, [N/A], 0x0000000000000000
"""


def parse(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[GpuSample]:
    return parse_query(text, fields, "node-a", AT)


# --- commands ---


def test_query_command_once_and_looping() -> None:
    assert query_command(("index", "uuid")) == (
        "nvidia-smi --query-gpu=index,uuid --format=csv,noheader,nounits"
    )
    assert query_command(("index",), loop_ms=2000).endswith(" -lms 2000")
    assert query_command(QUERY_FIELDS).count(",") == len(QUERY_FIELDS) - 1 + 2


@pytest.mark.parametrize("fields", [(), ("index; rm -rf /",), ("index", "index"), ("Index",)])
def test_query_command_refuses_bad_fields(fields: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        query_command(fields)


@pytest.mark.parametrize("loop_ms", [0, -5, True])
def test_query_command_refuses_bad_loop(loop_ms: int) -> None:
    with pytest.raises(ValueError, match="loop_ms"):
        query_command(("index",), loop_ms=loop_ms)


def test_apps_command() -> None:
    assert APPS_COMMAND == (
        "nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits"
    )


def test_query_fields_order_and_required() -> None:
    assert QUERY_FIELDS[:3] == ("index", "uuid", "name")
    assert QUERY_FIELDS[-1] == "clocks_throttle_reasons.active"
    assert len(QUERY_FIELDS) == 20
    assert REQUIRED_FIELDS.issubset(QUERY_FIELDS)


# --- real outputs ---


def test_a100_sxm_eight_gpus() -> None:
    samples = parse(A100_SXM_X8)
    assert [s.index for s in samples] == list(range(8))
    first = samples[0]
    assert first == GpuSample(
        node="node-a",
        at=AT,
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
        fan_pct=None,  # SXM boards have no fan of their own
        mig=False,
        ecc_uncorrected=0,
        extra={
            EXTRA_BUS_ID: "00000000:07:00.0",
            EXTRA_MAX_SM_CLOCK: "1410",
            EXTRA_PERSISTENCE: "Enabled",
            EXTRA_DRIVER_VERSION: "535.129.03",
            EXTRA_THROTTLE_REASONS: "0x0000000000000000",
        },
    )
    assert samples[7].ecc_uncorrected == 2
    assert samples[4].util_gpu == 0.0  # a real zero stays zero
    assert {s.mem_total_mib for s in samples} == {81920.0}


def test_h800_without_power_is_unknown_not_zero() -> None:
    samples = parse(H800_NO_POWER)
    assert [(s.power_w, s.power_limit_w) for s in samples] == [(None, None), (None, None)]
    assert samples[0].util_gpu == 87.0
    assert samples[1].mem_total_mib == 81559.0


def test_mig_enabled_gpu() -> None:
    (sample,) = parse(A100_MIG)
    assert sample.mig is True
    assert sample.util_gpu is None
    assert sample.util_mem is None
    assert sample.mem_used_mib == 13.0


def test_rtx4090_not_supported_fan() -> None:
    (sample,) = parse(RTX4090)
    assert sample.fan_pct is None
    assert sample.mig is None
    assert sample.ecc_uncorrected is None
    assert sample.pstate == "P2"
    assert sample.extra[EXTRA_PERSISTENCE] == "Disabled"


@pytest.mark.parametrize(
    "token",
    ["[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[GPU requires reset]", "", "  "],
)
def test_unreadable_values_are_none(token: str) -> None:
    fields = ("index", "utilization.gpu", "pstate", "mig.mode.current", "driver_version")
    (sample,) = parse(f"0, {token}, {token}, {token}, {token}\n", fields)
    assert sample.util_gpu is None
    assert sample.pstate is None
    assert sample.mig is None
    assert EXTRA_DRIVER_VERSION not in sample.extra


def test_blank_output_and_line_endings() -> None:
    assert parse("") == []
    assert parse("\n \n") == []
    crlf = A100_MIG.replace("\n", "\r\n")
    assert parse(crlf) == parse(A100_MIG)


def test_unmapped_field_lands_in_extra_and_event_reasons_alias() -> None:
    fields = ("index", "pcie.link.gen.current", "clocks_event_reasons.active")
    (sample,) = parse("3, 4, 0x0000000000000004\n", fields)
    assert sample.index == 3
    assert sample.extra == {
        "pcie.link.gen.current": "4",
        EXTRA_THROTTLE_REASONS: "0x0000000000000004",
    }


def test_fields_must_include_index() -> None:
    with pytest.raises(ValueError, match="index"):
        parse("GPU-x\n", ("uuid",))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("0, 50\n1, 60, 70\n", "line 2"),  # wrong column count
        ("0, 50\n1, busy\n", "line 2, field 'utilization.gpu'"),
        ("0, 50\n0, 60\n", "line 2, field 'index'"),  # duplicate index
        ("[N/A], 50\n", "line 1, field 'index'"),
        ("-1, 50\n", "line 1, field 'index'"),
        ("x, 50\n", "line 1, field 'index'"),
        ("0, nan\n", "field 'utilization.gpu'"),
        ("0, inf\n", "field 'utilization.gpu'"),
        ("0, 1" + "0" * 400 + "\n", "field 'utilization.gpu'"),
        ("0, 50%\n", "field 'utilization.gpu'"),  # units where nounits was asked for
        ("No devices were found\n", "line 1"),
    ],
)
def test_garbage_names_line_and_field(text: str, where: str) -> None:
    with pytest.raises(NvsmiParseError, match=where):
        parse(text, ("index", "utilization.gpu"))


def test_duplicate_uuid_and_bad_mig_and_bad_count() -> None:
    fields = ("index", "uuid", "mig.mode.current", "ecc.errors.uncorrected.volatile.total")
    with pytest.raises(NvsmiParseError, match="line 2, field 'uuid'"):
        parse("0, GPU-a, Disabled, 0\n1, GPU-a, Disabled, 0\n", fields)
    with pytest.raises(NvsmiParseError, match=r"field 'mig\.mode\.current'"):
        parse("0, GPU-a, Maybe, 0\n", fields)
    with pytest.raises(NvsmiParseError, match=r"field 'ecc\.errors"):
        parse("0, GPU-a, Disabled, 1.5\n", fields)


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(NvsmiParseError, ValueError)


# --- format_query is parse_query's inverse ---


def test_format_query_round_trips_real_output() -> None:
    for text in (A100_SXM_X8, H800_NO_POWER, A100_MIG, RTX4090):
        samples = parse(text)
        assert parse(format_query(samples, QUERY_FIELDS)) == samples


# --- the -lms stream ---


def ticking_clock(step: timedelta = timedelta(seconds=2)) -> Callable[[], datetime]:
    ticks: Iterator[datetime] = (AT + n * step for n in range(10**9))
    return lambda: next(ticks)


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_stream_rounds_from_chunks_split_mid_line() -> None:
    stream = A100_SXM_X8 * 3
    parser = StreamParser(QUERY_FIELDS, "node-a", ticking_clock())
    rounds: list[list[GpuSample]] = []
    for chunk in chunks_of(stream, 37):  # 37 never lines up with a row boundary
        rounds += parser.feed(chunk)
    # Without a known count, a round ends when the next one starts.
    assert len(rounds) == 2
    rounds += parser.flush()
    assert len(rounds) == 3
    expected = parse(A100_SXM_X8)
    for n, round_ in enumerate(rounds):
        at = AT + n * timedelta(seconds=2)
        assert round_ == [dataclasses.replace(s, at=at) for s in expected]


def test_stream_with_known_count_emits_without_waiting() -> None:
    parser = StreamParser(QUERY_FIELDS, "node-a", ticking_clock(), gpu_count=2)
    lines = H800_NO_POWER.splitlines(keepends=True)
    assert parser.feed(lines[0]) == []
    (round_,) = parser.feed(lines[1])
    assert [s.index for s in round_] == [0, 1]
    assert parser.flush() == []


def test_stream_short_round_when_a_gpu_drops_out() -> None:
    fields = ("index", "utilization.gpu")
    parser = StreamParser(fields, "n", ticking_clock(), gpu_count=3)
    rounds = parser.feed("0, 1\n1, 2\n0, 3\n1, 4\n2, 5\n")
    assert [[s.index for s in r] for r in rounds] == [[0, 1], [0, 1, 2]]


def test_stream_bad_line_raises_then_carries_on() -> None:
    fields = ("index", "utilization.gpu")
    parser = StreamParser(fields, "n", ticking_clock())
    with pytest.raises(NvsmiParseError, match="line 4"):
        parser.feed("0, 1\n1, 2\n0, 3\nUnable to determine the device handle\n0, 5\n1, 6\n0, 7\n")
    # The round completed before the bad line is not lost; the round it broke is dropped.
    rounds = parser.feed("")
    assert [[s.util_gpu for s in r] for r in rounds] == [[1.0, 2.0], [5.0, 6.0]]
    assert [[s.util_gpu for s in r] for r in parser.flush()] == [[7.0]]


def test_stream_flushes_an_unterminated_last_line() -> None:
    parser = StreamParser(("index",), "n", ticking_clock())
    assert parser.feed("0\n1") == []
    assert [[s.index for s in r] for r in parser.flush()] == [[0, 1]]


def test_stream_drops_an_endless_line() -> None:
    parser = StreamParser(("index",), "n", ticking_clock())
    with pytest.raises(NvsmiParseError, match="longer than"):
        parser.feed("x" * 70_000)
    assert parser.feed("0\n1\n") == []
    assert [[s.index for s in r] for r in parser.flush()] == [[0, 1]]


def test_stream_refuses_bad_count() -> None:
    with pytest.raises(ValueError):
        StreamParser(("index",), "n", ticking_clock(), gpu_count=0)


# --- compute apps ---


def test_compute_apps() -> None:
    text = (
        "GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c70, 48211, 70890\n"
        "GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c71, 48212, [N/A]\n"
    )
    assert parse_compute_apps(text, "node-a") == [
        GpuProcess("node-a", "GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c70", 48211, "", 70890.0),
        GpuProcess("node-a", "GPU-5d3a1c2e-8f41-1b7e-9c0d-3e2f4a5b6c71", 48212, "", None),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # A process named "x, 5<LF>GPU-aaa, 1, init" as nvidia-smi would print it, named:
        # read as rows, it would give the process's 30 GB to pid 1.
        "GPU-real, 4242, x, 5\nGPU-aaa, 1, init, 30000\n",
        # Old named output, or any row with one value too many.
        "GPU-real, 4242, python, 30000\n",
        "GPU-real, 4242\n",
    ],
)
def test_compute_apps_takes_no_row_but_three_values(text: str) -> None:
    with pytest.raises(NvsmiParseError, match="expected 3 comma-separated values"):
        parse_compute_apps(text, "n")


@pytest.mark.parametrize("text", ["", "\n", "No running processes found\n"])
def test_compute_apps_none_running(text: str) -> None:
    assert parse_compute_apps(text, "n") == []


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("GPU-a, 12, python, 10\n", "line 1"),
        ("GPU-a, twelve, 10\n", "field 'pid'"),
        ("GPU-a, 12, lots\n", "field 'used_memory'"),
        ("[N/A], 12, 10\n", "field 'gpu_uuid'"),
        ("GPU-a, 12, 10\nGPU-a, 13\n", "line 2"),
    ],
)
def test_compute_apps_garbage(text: str, where: str) -> None:
    with pytest.raises(NvsmiParseError, match=where):
        parse_compute_apps(text, "n")


# --- probing fields ---


def test_rejected_field_from_real_messages() -> None:
    # composable-resource-operator#37: stdout, exit 2, with a trailing blank line.
    assert rejected_field('Field "device_minor" is not a valid field to query.\n\n') == (
        "device_minor"
    )
    # telegraf#6573 (Windows) quotes it typographically.
    assert rejected_field("Field “encoder.stats.sessionCount” is not a valid field to query.") == (
        "encoder.stats.sessionCount"
    )
    assert rejected_field("NVIDIA-SMI has failed because it couldn't communicate") is None
    assert rejected_field("") is None


class FakeSmi:
    """Answers query commands like an nvidia-smi that knows only some fields."""

    def __init__(self, unknown: set[str], failure: CommandResult | None = None) -> None:
        self.unknown = unknown
        self.failure = failure
        self.commands: list[str] = []

    async def __call__(self, command: str) -> CommandResult:
        self.commands.append(command)
        if self.failure is not None:
            return self.failure
        asked = command.split("--query-gpu=")[1].split(" ")[0].split(",")
        for field in asked:
            if field in self.unknown:
                return CommandResult(2, f'Field "{field}" is not a valid field to query.\n\n', "")
        return CommandResult(0, "", "")


async def test_probe_drops_unknown_optional_fields() -> None:
    smi = FakeSmi({"clocks_throttle_reasons.active", "mig.mode.current"})
    kept = await probe(smi)
    assert kept == tuple(
        f for f in QUERY_FIELDS if f not in {"clocks_throttle_reasons.active", "mig.mode.current"}
    )
    assert len(smi.commands) == 3


async def test_probe_first_try() -> None:
    smi = FakeSmi(set())
    assert await probe(smi) == QUERY_FIELDS
    assert smi.commands == [query_command(QUERY_FIELDS)]


async def test_probe_required_field_refused_is_a_fault() -> None:
    smi = FakeSmi({"memory.used"})
    with pytest.raises(NvsmiProbeError, match=r"memory\.used") as caught:
        await probe(smi)
    assert caught.value.health is NodeHealth.GARBAGE


async def test_probe_driver_failure_is_classified() -> None:
    failure = CommandResult(
        9,
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
        "",
    )
    smi = FakeSmi(set(), failure)
    with pytest.raises(NvsmiProbeError, match="not loaded") as caught:
        await probe(smi)
    assert caught.value.health is NodeHealth.DRIVER_NOT_LOADED
    assert len(smi.commands) == 1


async def test_probe_is_bounded_when_node_lies() -> None:
    # A node that keeps rejecting a field we already dropped must not loop for ever.
    async def stubborn(command: str) -> CommandResult:
        return CommandResult(2, 'Field "fan.speed" is not a valid field to query.', "")

    with pytest.raises(NvsmiProbeError):
        await probe(stubborn)


# --- failures ---


@pytest.mark.parametrize(
    ("exit_status", "stdout", "stderr", "health"),
    [
        (127, "", "bash: nvidia-smi: command not found\n", NodeHealth.NO_NVIDIA_SMI),
        (127, "", "sh: 1: nvidia-smi: not found\n", NodeHealth.NO_NVIDIA_SMI),
        (None, "", "/bin/sh: nvidia-smi: command not found\n", NodeHealth.NO_NVIDIA_SMI),
        (
            9,
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n\n",
            "",
            NodeHealth.DRIVER_NOT_LOADED,
        ),
        (  # typographic apostrophe, as qixuema/envs#4 shows it
            None,
            "NVIDIA-SMI has failed because it couldn‘t communicate with the NVIDIA driver.",
            "",
            NodeHealth.DRIVER_NOT_LOADED,
        ),
        (
            18,
            "Failed to initialize NVML: Driver/library version mismatch\n"
            "NVML library version: 535.161\n",
            "",
            NodeHealth.DRIVER_MISMATCH,
        ),
        (None, "", "Driver/library version mismatch\n", NodeHealth.DRIVER_MISMATCH),
        (
            15,
            "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  "
            "Reboot the system to recover this GPU\n",
            "",
            NodeHealth.GPU_LOST,
        ),
        (
            255,
            "Unable to determine the device handle for GPU0000:0B:00.0: Unknown Error\n",
            "",
            NodeHealth.GPU_LOST,
        ),
        (15, "", "", NodeHealth.GPU_LOST),
        (6, "No devices were found\n", "", NodeHealth.GPU_LOST),
        # The driver's library missing (nvidia-docker#107 on 367.27, #1163 on 440.44,
        # gpu-manager#101 on 450.66, dakota#373 in 2026: the same two lines), exit 12.
        (
            12,
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure"
            " that the NVIDIA Display Driver is properly installed and present in your system.\n"
            "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n",
            "",
            NodeHealth.NVML_LIBRARY_MISSING,
        ),
        (  # through a shell that folds stdout into stderr, the exit status lost
            None,
            "",
            "NVIDIA-SMI couldn’t find libnvidia-ml.so library in your system.",
            NodeHealth.NVML_LIBRARY_MISSING,
        ),
        (12, "", "", NodeHealth.NVML_LIBRARY_MISSING),
        # NVML refusing the user (nvidia-docker#676, nvidia-container-toolkit#33 on 515.65,
        # #210 under podman, #268 on 470.103), exit 4.
        (
            4,
            "Failed to initialize NVML: Insufficient Permissions\n",
            "",
            NodeHealth.NVML_PERMISSION,
        ),
        (
            None,
            "",
            "Failed to initialize NVML: Insufficient Permissions",
            NodeHealth.NVML_PERMISSION,
        ),
        (4, "", "", NodeHealth.NVML_PERMISSION),
        # One query refused while nvidia-smi runs (pynvml#19) is not NVML refusing the user.
        (
            1,
            "NVML: Unable to get the NvLink link utilization counter control for link 0: "
            "Insufficient Permissions\n",
            "",
            NodeHealth.GARBAGE,
        ),
        (0, "<html>hello</html>", "", NodeHealth.GARBAGE),
        (1, "", "", NodeHealth.GARBAGE),
    ],
)
def test_classify_failure(
    exit_status: int | None, stdout: str, stderr: str, health: NodeHealth
) -> None:
    assert classify_failure(exit_status, stdout, stderr) is health


def test_every_health_has_a_reason() -> None:
    for health in NodeHealth:
        assert human_reason(health)
    assert human_reason(NodeHealth.DRIVER_MISMATCH) == (
        "driver/library version mismatch: the node needs a reboot"
    )


def test_nvml_faults_say_their_fix() -> None:
    missing = human_reason(NodeHealth.NVML_LIBRARY_MISSING)
    assert "libnvidia-ml.so" in missing
    assert "utils package" in missing and "mount it into the container" in missing
    denied = human_reason(NodeHealth.NVML_PERMISSION)
    assert "/dev/nvidia*" in denied and "video or render group" in denied
    assert "device cgroup" in denied


# --- properties ---

DIGITS = "0123456789"
ALNUM = string.ascii_letters + DIGITS
TOKENS = st.one_of(
    st.sampled_from(
        ["0", "1", "7", "-1", "1.5", "[N/A]", "N/A", "[Not Supported]", "Enabled", "P0", "", "x"]
    ),
    st.text(max_size=6),
    # r"[0-9]{1,3}(\.[0-9]{1,2})?" drawn from plain text strategies: from_regex is slow.
    st.builds(
        lambda whole, fraction: whole + fraction,
        st.text(DIGITS, min_size=1, max_size=3),
        st.one_of(st.just(""), st.text(DIGITS, min_size=1, max_size=2).map(".".__add__)),
    ),
)
CSV_LIKE = st.lists(
    st.lists(TOKENS, min_size=0, max_size=len(QUERY_FIELDS) + 2).map(", ".join), max_size=6
).map("\n".join)
ANY_TEXT = st.one_of(st.text(), CSV_LIKE)


@given(ANY_TEXT)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_any_text_gives_samples_or_parse_error(text: str) -> None:
    for fields in (QUERY_FIELDS, ("index", "utilization.gpu")):
        try:
            samples = parse(text, fields)
        except NvsmiParseError:
            continue
        assert all(isinstance(s, GpuSample) for s in samples)


@given(ANY_TEXT)
@settings(max_examples=200)
def test_any_text_gives_processes_or_parse_error(text: str) -> None:
    try:
        processes = parse_compute_apps(text, "n")
    except NvsmiParseError:
        return
    assert all(isinstance(p, GpuProcess) for p in processes)


@given(ANY_TEXT, st.integers(min_value=1, max_value=40))
@settings(max_examples=200)
def test_any_stream_gives_rounds_or_parse_error(text: str, size: int) -> None:
    parser = StreamParser(("index", "utilization.gpu"), "n", ticking_clock())
    for chunk in [*chunks_of(text, size), None]:
        try:
            rounds = parser.flush() if chunk is None else parser.feed(chunk)
        except NvsmiParseError:
            continue
        assert all(isinstance(s, GpuSample) for r in rounds for s in r)


# Values nvidia-smi could print: plain text without commas or brackets, numbers, unknowns.
# r"[A-Za-z0-9][A-Za-z0-9 ._:/-]{0,20}[A-Za-z0-9]" built from its pieces: the same words as
# st.from_regex gives, at a fraction of its cost (from_regex was most of these tests' time).
WORD = st.builds(
    lambda first, middle, last: first + middle + last,
    st.sampled_from(ALNUM),
    st.text(ALNUM + " ._:/-", max_size=20),
    st.sampled_from(ALNUM),
).filter(lambda w: w.lower() not in {"n/a", "unknown", "not supported"})


# Strategies are built once, not on every draw: building and validating them inside the
# composites below took most of these tests' time.
@functools.cache
def in_bounds(target: str) -> st.SearchStrategy[float | None]:
    """Numbers a real nvidia-smi could print for target (nvsmi.BOUNDS), or unknown."""
    lo, hi = BOUNDS[target]
    return st.one_of(
        st.none(),
        st.integers(min_value=int(lo), max_value=int(hi)).map(float),
        st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False),
    )


_NAMES = st.one_of(st.just(""), WORD)
_PSTATES = st.one_of(st.none(), st.integers(0, 15).map(lambda n: f"P{n}"))
_MIGS = st.one_of(st.none(), st.booleans())
_ECCS = st.one_of(st.none(), st.integers(0, 10**9))
_EXTRAS = st.dictionaries(
    st.sampled_from([EXTRA_BUS_ID, EXTRA_MAX_SM_CLOCK, EXTRA_PERSISTENCE, EXTRA_DRIVER_VERSION]),
    WORD,
)


@st.composite
def gpu_samples(draw: st.DrawFn, index: int) -> GpuSample:
    return GpuSample(
        node="node-a",
        at=AT,
        index=index,
        uuid=draw(st.sampled_from(("", f"GPU-{index:08x}-{draw(WORD)}"))),
        name=draw(_NAMES),
        util_gpu=draw(in_bounds("util_gpu")),
        util_mem=draw(in_bounds("util_mem")),
        mem_used_mib=draw(in_bounds("mem_used_mib")),
        mem_total_mib=draw(in_bounds("mem_total_mib")),
        temp_c=draw(in_bounds("temp_c")),
        power_w=draw(in_bounds("power_w")),
        power_limit_w=draw(in_bounds("power_limit_w")),
        sm_clock_mhz=draw(in_bounds("sm_clock_mhz")),
        pstate=draw(_PSTATES),
        fan_pct=draw(in_bounds("fan_pct")),
        mig=draw(_MIGS),
        ecc_uncorrected=draw(_ECCS),
        extra=draw(_EXTRAS),
    )


def gpu_indexes() -> st.SearchStrategy[list[int]]:
    return st.sets(st.integers(0, 15), min_size=1, max_size=8).map(sorted)


@st.composite
def gpu_rounds(draw: st.DrawFn, indexes: list[int] | None = None) -> list[GpuSample]:
    return [draw(gpu_samples(i)) for i in indexes or draw(gpu_indexes())]


@st.composite
def gpu_streams(draw: st.DrawFn) -> list[list[GpuSample]]:
    # One node always reports the same GPUs, so every round restarts at the same index.
    indexes = draw(gpu_indexes())
    return draw(st.lists(gpu_rounds(indexes), min_size=1, max_size=4))


@given(gpu_rounds())
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_format_then_parse(samples: list[GpuSample]) -> None:
    assert parse(format_query(samples, QUERY_FIELDS)) == samples


@given(gpu_streams(), st.lists(st.integers(1, 400), max_size=8))
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
def test_stream_splitting_never_changes_rounds(
    rounds: list[list[GpuSample]], cuts: list[int]
) -> None:
    text = "".join(format_query(r, QUERY_FIELDS) for r in rounds)
    parser = StreamParser(QUERY_FIELDS, "node-a", lambda: AT)
    got: list[list[GpuSample]] = []
    start = 0
    for cut in sorted(cuts):
        got += parser.feed(text[start:cut])
        start = max(start, cut)
    got += parser.feed(text[start:])
    got += parser.flush()
    assert got == rounds


# --- bounds: a value no real nvidia-smi prints makes the reading garbage, never a crash ---

_ROW_FIELDS = ("index", "uuid", "utilization.gpu", "memory.used", "memory.total", "name")


def _row(index: str = "0", util: str = "5", used: str = "100", name: str = "NVIDIA A100") -> str:
    return f"{index}, GPU-1, {util}, {used}, 81920, {name}\n"


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        (_row(index="256"), "index", "'256' is outside 0..127"),
        (_row(index="-1"), "index", "expected a whole number"),
        (_row(index="9" * 60), "index", "is outside 0..127"),
        (_row(util="101"), "utilization.gpu", "outside 0..100"),
        (_row(util="-3"), "utilization.gpu", "outside 0..100"),
        (_row(util="1e308"), "utilization.gpu", "outside 0..100"),
        (_row(util="nan"), "utilization.gpu", "expected a number"),
        (_row(util="inf"), "utilization.gpu", "expected a number"),
        (_row(used="-5"), "memory.used", "outside 0..16777216"),
        (_row(used="1e12"), "memory.used", "outside"),
        (_row(name="x" * 300), "name", "longer than 256 characters"),
    ],
)
def test_out_of_bounds_values_are_refused_naming_the_field(
    row: str, field: str, words: str
) -> None:
    with pytest.raises(NvsmiParseError) as caught:
        parse_query(row, _ROW_FIELDS, "n", AT)
    assert f"field {field!r}" in str(caught.value) and words in str(caught.value)


def test_the_highest_index_and_count_are_read() -> None:
    text = "".join(_row(index=str(i)).replace("GPU-1", f"GPU-{i}") for i in range(128))
    samples = parse_query(text, _ROW_FIELDS, "n", AT)
    assert len(samples) == 128 and samples[-1].index == 127


def test_a_stream_with_index_256_drops_the_round_and_goes_on() -> None:
    parser = StreamParser(_ROW_FIELDS, "n", lambda: AT, gpu_count=1)
    with pytest.raises(NvsmiParseError, match=r"outside 0\.\.127"):
        parser.feed(_row(index="256"))
    assert [[s.index for s in r] for r in parser.feed(_row())] == [[0]]


@given(st.sampled_from(sorted(BOUNDS)), st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=200)
def test_sample_problem_flags_every_out_of_bounds_value(target: str, value: float) -> None:
    from leases.telemetry.nvsmi import sample_problem

    lo, hi = BOUNDS[target]
    if target in ("pid", "used_mib"):
        return  # fields of GpuProcess, not of a sample
    sample = dataclasses.replace(GpuSample(node="n", at=AT, index=0), **{target: value})
    problem = sample_problem(sample)
    if value == value and lo <= value <= hi:  # finite and inside (NaN != NaN)
        assert problem is None
    else:
        assert problem is not None and target in problem


def test_compute_apps_bounds() -> None:
    with pytest.raises(NvsmiParseError, match="'pid'"):
        parse_compute_apps("GPU-1, 99999999999, 100\n", "n")
    with pytest.raises(NvsmiParseError, match="'used_memory'"):
        parse_compute_apps("GPU-1, 12, -100\n", "n")
    with pytest.raises(NvsmiParseError, match="'gpu_uuid'"):
        parse_compute_apps(f"GPU-{'1' * 5000}, 12, 100\n", "n")


# --- the token memo: a token's value is held by kind and target, never its refusal ---


def test_a_held_token_is_judged_by_its_own_field_bounds() -> None:
    from leases.telemetry import nvsmi

    fields = ("index", "uuid", "name", "temperature.gpu", "utilization.gpu")
    nvsmi._TOKENS.clear()
    (ok,) = parse_query("0, GPU-a, A100, 150, 50", fields, "n", AT)
    assert ok.temp_c == 150.0  # 150 is a temperature a probe can read...
    with pytest.raises(NvsmiParseError, match=r"line 1, field 'utilization\.gpu'.*0\.\.100"):
        parse_query("0, GPU-a, A100, 40, 150", fields, "n", AT)  # ...not a utilisation


def test_a_refused_token_is_refused_every_time_and_is_not_held() -> None:
    from leases.telemetry import nvsmi

    fields = ("index", "uuid", "name", "utilization.gpu")
    nvsmi._TOKENS.clear()
    for line_no in (1, 2):
        text = "\n" * (line_no - 1) + "0, GPU-a, A100, 1e999"
        with pytest.raises(NvsmiParseError, match=f"line {line_no}, field 'utilization.gpu'"):
            parse_query(text, fields, "n", AT)
    assert not any("1e999" in key for key in nvsmi._TOKENS)


def test_the_token_memo_stays_bounded_under_endless_new_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from leases.telemetry import nvsmi

    monkeypatch.setattr(nvsmi, "_TOKENS_MAX", 100)
    nvsmi._TOKENS.clear()
    fields = ("index", "uuid", "name", "power.draw")
    for i in range(1_000):
        (s,) = parse_query(f"0, GPU-a, A100, {i}.5", fields, "n", AT)
        assert s.power_w == i + 0.5
    assert len(nvsmi._TOKENS) <= 100


def test_a_long_unknown_token_is_read_but_never_held() -> None:
    from leases.telemetry import nvsmi

    fields = ("index", "uuid", "name", "utilization.gpu")
    nvsmi._TOKENS.clear()
    for i in range(50):  # each a valid unknown, ~240 KB in memory with its emoji
        token = f"[{i}" + "\U0001f600" * 60_000 + "]"
        (s,) = parse_query(f"0, GPU-a, A100, {token}", fields, "n", AT)
        assert s.util_gpu is None
    assert all(len(key[2]) <= 64 for key in nvsmi._TOKENS)


# A number token as nvidia-smi's grammar reads it, written out plainly: nvsmi._number and
# _whole take a quicker way for plain digits and must agree with this on every token.
_NUMBER_GRAMMAR = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"


def _number_by_grammar(token: str) -> float | str:
    import math
    import re

    if len(token) > 64 or not re.fullmatch(_NUMBER_GRAMMAR, token):
        return "not a number"
    value = float(token)
    return value if math.isfinite(value) else "out of range"


def _whole_by_grammar(token: str) -> int | str:
    import re

    return int(token) if len(token) <= 64 and re.fullmatch("[0-9]+", token) else "not whole"


number_tokens = st.text(
    st.sampled_from([*"0123456789..-+eE _", "٣", "²", "𝟗", "\u00a0", "n", "a", "i", "f"]),
    max_size=70,
) | st.sampled_from(["nan", "inf", "1e999", "9" * 64, "9" * 65, ".", "5.", ".5", "1.2.3"])


@settings(max_examples=3000)
@given(number_tokens)
def test_number_tokens_read_as_nvidia_smis_grammar_says(token: str) -> None:
    from leases.telemetry import nvsmi

    def ours(read: Callable[..., object]) -> object:
        try:
            return read(token, 1, "f")
        except nvsmi.NvsmiParseError as exc:
            return "out of range" if "out of range" in str(exc) else "refused"

    by_grammar = _number_by_grammar(token)
    assert ours(nvsmi._number) == ("refused" if by_grammar == "not a number" else by_grammar)
    whole = _whole_by_grammar(token)
    assert ours(nvsmi._whole) == ("refused" if whole == "not whole" else whole)
