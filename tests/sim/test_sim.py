"""Simulated GPU nodes: the GPU model, command emulation, and the in-process SSH fleet."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncssh
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.models import GpuSample
from leases.sim import (
    MODELS,
    Scenario,
    SimFleet,
    SimNode,
    answer,
    default_demo_fleet,
    history,
    loop_interval,
    readings,
    row_samples,
)
from leases.sim.__main__ import main as sim_main
from leases.telemetry.nvsmi import QUERY_FIELDS
from tests.support.waiting import wait_until

NOW = datetime(2025, 6, 2, 6, 30, tzinfo=UTC)  # a Monday, 14:30 in Shanghai
ALL_FIELDS = list(QUERY_FIELDS)  # the simulator answers exactly what the poller asks
QUERY = "nvidia-smi --query-gpu={} --format=csv,noheader,nounits"


def query(node: SimNode, fields: list[str], now: datetime = NOW) -> list[list[str]]:
    out, err, status = answer(node, QUERY.format(",".join(fields)), now)
    assert (err, status) == ("", 0)
    return [line.split(", ") for line in out.splitlines()]


# --- the GPU model ---------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(MODELS))
def test_busy_readings_are_plausible(model: str) -> None:
    node = SimNode("n", model, 8, Scenario.BUSY, seed=7)
    for minute in range(0, 600, 7):
        for r in readings(node, NOW + timedelta(minutes=minute)):
            assert 0 <= r.util_gpu <= 100
            assert 0 < r.mem_used_mib < r.gpu.memory_total_mib
            assert 0 < r.power_w <= r.gpu.power_limit_w
            assert 25 <= r.temp_c <= 90
            assert 0 < r.sm_clock_mhz <= r.gpu.model.max_sm_mhz
            assert r.pstate == "P0"


def test_busy_node_trains_hard() -> None:
    node = SimNode("n", "H800", 8, Scenario.BUSY, seed=1)
    rows = list(history(node, NOW - timedelta(days=1), NOW))
    utils = [u for row in rows for u in row.util_gpu]
    mem = [m / 81559 for row in rows for m in row.mem_used_mib]
    power = [p / 700 for row in rows for p in row.power_w]
    assert sum(85 <= u <= 100 for u in utils) / len(utils) > 0.9
    assert all(0.6 <= f <= 0.95 for f in mem)
    assert sum(p > 0.8 for p in power) / len(power) > 0.9


def test_idle_readings_look_like_a_parked_gpu() -> None:
    node = SimNode("n", "A100", 8, Scenario.IDLE_MONTHLY, seed=0)
    # seed 0 is busy on days 0 and 3 (mod 7); 03:00 in Shanghai is idle on any day.
    night = datetime(2025, 6, 1, 19, 0, tzinfo=UTC)
    for r in readings(node, night):
        assert r.util_gpu <= 3
        assert 300 <= r.mem_used_mib <= 1000  # driver reservation, not a tenant
        assert 55 <= r.power_w <= 80
        assert r.pstate == "P8"
        assert r.processes == ()


def test_readings_are_deterministic_per_seed_and_move_over_time() -> None:
    a = SimNode("n", "A100", 8, Scenario.BURSTY, seed=3)
    assert readings(a, NOW) == readings(SimNode("other", "A100", 8, Scenario.BURSTY, seed=3), NOW)
    b = SimNode("n", "A100", 8, Scenario.BUSY, seed=4)
    c = SimNode("n", "A100", 8, Scenario.BUSY, seed=5)
    assert readings(b, NOW) != readings(c, NOW)
    seen = {readings(b, NOW + timedelta(seconds=10 * i))[0].util_gpu for i in range(60)}
    assert len(seen) > 5


def test_idle_monthly_is_idle_most_days_over_a_week() -> None:
    node = SimNode("n", "H800", 8, Scenario.IDLE_MONTHLY, seed=11)
    start = datetime(2025, 5, 25, 16, 0, tzinfo=UTC)  # midnight in Shanghai
    rows = list(history(node, start, start + timedelta(days=7)))
    assert len(rows) == 7 * 24 * 60
    idle = [max(r.util_gpu) <= 3 for r in rows]
    assert sum(idle) / len(idle) > 0.75
    busy_days = {i // 1440 for i, is_idle in enumerate(idle) if not is_idle}
    assert len(busy_days) == 2


def test_bursty_has_both_sweeps_and_gaps_in_a_day() -> None:
    node = SimNode("n", "V100", 8, Scenario.BURSTY, seed=2)
    rows = list(history(node, NOW - timedelta(days=1), NOW, timedelta(minutes=5)))
    busy = [min(r.util_gpu) >= 20 for r in rows]
    assert 0.2 < sum(busy) / len(busy) < 0.8


def test_history_agrees_with_live_readings() -> None:
    node = SimNode("n", "RTX 4090", 4, Scenario.BURSTY, seed=9)
    for row in history(node, NOW - timedelta(hours=3), NOW, timedelta(minutes=13)):
        live = readings(node, row.at)
        assert row.util_gpu == tuple(r.util_gpu for r in live)
        assert row.mem_used_mib == tuple(r.mem_used_mib for r in live)
        assert row.power_w == tuple(r.power_w for r in live)
        assert row.temp_c == tuple(r.temp_c for r in live)


def test_history_rows_become_samples() -> None:
    node = SimNode("n", "A10", 1, Scenario.BUSY, seed=1)
    row = next(history(node, NOW, NOW + timedelta(minutes=1)))
    (sample,) = row_samples(node, row)
    assert isinstance(sample, GpuSample)
    assert (sample.node, sample.at, sample.index, sample.mem_total_mib) == ("n", NOW, 0, 23028)


def test_history_rejects_naive_times_and_empty_steps() -> None:
    node = SimNode("n", "A10", 1)
    with pytest.raises(ValueError, match="timezone"):
        list(history(node, datetime(2025, 1, 1), datetime(2025, 1, 2)))
    with pytest.raises(ValueError, match="step"):
        list(history(node, NOW, NOW + timedelta(hours=1), timedelta(0)))


def test_node_spec_is_validated() -> None:
    with pytest.raises(ValueError, match="gpu_model"):
        SimNode("n", "B200")
    with pytest.raises(ValueError, match="count"):
        SimNode("n", "A100", 0)
    with pytest.raises(ValueError):
        SimNode("n", "A100", scenario="sleepy")  # type: ignore[arg-type]


# --- scenario signatures ---------------------------------------------------------------


def test_fake_vram_reports_a_24gb_card_sold_as_80gb() -> None:
    node = SimNode("n", "A100", 8, Scenario.FAKE_VRAM, seed=1, vram_gib=80)
    rows = query(node, ["name", "memory.total"])
    assert rows == [["NVIDIA GeForce RTX 4090", "24564"]] * 8
    assert node.nominal_gib == 80
    assert node.gpus[0].nominal_mib == 80 * 1024
    spoofed = SimNode("n", "A100", 8, Scenario.FAKE_VRAM, seed=1, spoof_name=True)
    assert query(spoofed, ["name", "memory.total"])[0] == ["NVIDIA A100-SXM4-80GB", "24564"]
    assert answer(node, "cat /etc/ld.so.preload", NOW) == ("/usr/local/vgpu/libvgpu.so\n", "", 0)
    assert "CUDA_DEVICE_MEMORY_LIMIT_0=24564m" in answer(node, "env", NOW).stdout


def test_honest_node_has_empty_preload_and_no_memory_limit() -> None:
    node = SimNode("n", "A100", 8, Scenario.BUSY)
    assert answer(node, "cat /etc/ld.so.preload", NOW) == ("", "", 0)
    assert "CUDA_DEVICE_MEMORY_LIMIT" not in answer(node, "env", NOW).stdout
    assert query(node, ["memory.total"])[0] == ["81920"]


def test_driver_mismatch() -> None:
    node = SimNode("n", "H800", 8, Scenario.DRIVER_MISMATCH)
    for command in (QUERY.format("index"), "nvidia-smi -L", "nvidia-smi"):
        out, _, status = answer(node, command, NOW)
        assert status == 18
        assert out.startswith("Failed to initialize NVML: Driver/library version mismatch\n")
        assert "NVML library version: 550." in out


def test_no_driver() -> None:
    out, _, status = answer(SimNode("n", "A10", 1, Scenario.NO_DRIVER), QUERY.format("index"), NOW)
    assert status == 9
    assert out.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA")


# --- nvidia-smi emulation --------------------------------------------------------------


@pytest.mark.parametrize("field", ALL_FIELDS)
@pytest.mark.parametrize("model", ["H100", "RTX 4090", "A10"])
def test_every_field_prints_one_bare_value_per_gpu(field: str, model: str) -> None:
    rows = query(SimNode("n", model, 4, Scenario.BUSY, seed=1), [field])
    assert len(rows) == 4
    for (value,) in rows:
        assert value
        assert not value.endswith((" %", " MiB", " W", " MHz")), value


def test_special_values() -> None:
    dc = query(SimNode("n", "H100", 2), ["fan.speed", "ecc.errors.uncorrected.volatile.total",
                                         "mig.mode.current", "persistence_mode"])  # fmt: skip
    assert dc[0] == ["[N/A]", "0", "Disabled", "Enabled"]
    gaming = query(SimNode("n", "RTX 4090", 2), ["fan.speed", "ecc.errors.uncorrected.volatile.total",
                                                 "mig.mode.current", "persistence_mode"])  # fmt: skip
    assert gaming[0][0].isdigit()
    assert gaming[0][1:] == ["[Not Supported]", "[N/A]", "Disabled"]


def test_all_fields_in_one_query_line_up() -> None:
    node = SimNode("n", "H800", 8, Scenario.BUSY, seed=5)
    rows = query(node, ALL_FIELDS)
    assert [r[0] for r in rows] == [str(i) for i in range(8)]
    first = dict(zip(ALL_FIELDS, rows[0], strict=True))
    assert first["name"] == "NVIDIA H800"
    assert first["uuid"].startswith("GPU-")
    assert first["pci.bus_id"] == "00000000:18:00.0"
    assert first["memory.total"] == "81559"
    assert first["power.limit"] == "700.00"
    assert first["pstate"] == "P0"
    assert first["clocks_throttle_reasons.active"].startswith("0x")


@given(st.lists(st.sampled_from(ALL_FIELDS), min_size=1, max_size=25))
def test_any_subset_and_order_of_fields(fields: list[str]) -> None:
    rows = query(SimNode("n", "A100", 3, Scenario.BURSTY, seed=2), fields)
    assert len(rows) == 3
    assert all(len(r) == len(fields) for r in rows)
    if fields[0] == "index":
        assert [r[0] for r in rows] == ["0", "1", "2"]


def test_header_and_units_when_asked() -> None:
    out, _, _ = answer(
        SimNode("n", "H100", 1),
        "nvidia-smi --query-gpu=index,memory.used,power.draw,fan.speed --format=csv",
        NOW,
    )
    header, row = out.splitlines()
    assert header == "index, memory.used [MiB], power.draw [W], fan.speed [%]"
    _, mem, power, fan = row.split(", ")
    assert mem.endswith(" MiB") and power.endswith(" W") and fan == "[N/A]"


def test_unknown_field_is_refused_like_the_real_one() -> None:
    out, err, status = answer(SimNode("n", "A100"), QUERY.format("index,foo"), NOW)
    assert (out, err, status) == ('Field "foo" is not a valid field to query.\n\n', "", 2)
    assert answer(SimNode("n", "A100"), "nvidia-smi --bogus", NOW).exit_status == 2
    # --query-gpu without --format is not a combination nvidia-smi accepts either.
    assert answer(SimNode("n", "A100"), "nvidia-smi --query-gpu=index", NOW).exit_status == 2


def test_select_gpus_with_i() -> None:
    node = SimNode("n", "A100", 8)
    out, _, _ = answer(node, "nvidia-smi -i 2,5 --query-gpu=index --format=csv,noheader", NOW)
    assert out == "2\n5\n"
    assert answer(node, "nvidia-smi -i 9 -L", NOW) == ("No devices were found\n", "", 6)


def test_compute_apps() -> None:
    busy = SimNode("n", "A100", 4, Scenario.BUSY, seed=1)
    out, _, status = answer(
        busy,
        "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory "
        "--format=csv,noheader,nounits",
        NOW,
    )
    rows = [line.split(", ") for line in out.splitlines()]
    assert status == 0
    assert [r[0] for r in rows] == [g.uuid for g in busy.gpus]
    assert all(r[1].isdigit() and r[2] == "python" and int(r[3]) > 10000 for r in rows)
    idle = SimNode("n", "A100", 4, Scenario.IDLE_MONTHLY, seed=0)
    night = datetime(2025, 6, 1, 19, 0, tzinfo=UTC)
    apps = "nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader,nounits"
    assert answer(idle, apps, night) == ("", "", 0)
    bad = answer(busy, "nvidia-smi --query-compute-apps=pid,bar --format=csv", NOW)
    assert bad.exit_status == 2


def test_list_gpus() -> None:
    node = SimNode("n", "A10", 1, seed=3)
    out, _, status = answer(node, "nvidia-smi -L", NOW)
    assert out == f"GPU 0: NVIDIA A10 (UUID: {node.gpus[0].uuid})\n"
    assert status == 0


def test_default_screen() -> None:
    out, _, status = answer(SimNode("n", "H800", 2, seed=1), "nvidia-smi", NOW)
    assert status == 0
    assert "Driver Version: 550.54.15" in out
    assert "NVIDIA H800" in out and "/ 81559MiB" in out
    assert {len(line) for line in out.splitlines() if line.startswith(("|", "+"))} == {91}


def test_loop_interval() -> None:
    assert loop_interval(QUERY.format("index") + " -lms 100") == 0.1
    assert loop_interval(QUERY.format("index") + " -l 2") == 2.0
    assert loop_interval("nvidia-smi --loop-ms=250 --query-gpu=index --format=csv") == 0.25
    assert loop_interval(QUERY.format("index")) is None
    assert loop_interval("uptime -l 5") is None
    # One round of a loop through answer() is one round of output.
    node = SimNode("n", "A100", 8)
    once = answer(node, QUERY.format("index") + " -lms 100", NOW)
    assert once.stdout.count("\n") == 8


# --- topology --------------------------------------------------------------------------


def topo(model: str, count: int = 8) -> tuple[list[str], list[list[str]], str]:
    out, _, status = answer(SimNode("n", model, count), "nvidia-smi topo -m", NOW)
    assert status == 0
    lines = out.splitlines()
    header = lines[0].split("\t")[1:]
    gpu_rows = [line.split("\t") for line in lines[1:] if line.startswith("GPU")]
    return header, gpu_rows, out


@pytest.mark.parametrize(("model", "link"), [("H100", "NV18"), ("A100", "NV12"), ("A800", "NV8"),
                                             ("H800", "NV8")])  # fmt: skip
def test_topo_sxm_boxes_link_every_pair(model: str, link: str) -> None:
    header, rows, out = topo(model)
    assert header[:8] == [f"GPU{i}" for i in range(8)]
    assert header[-3:] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert len(rows) == 8
    for i, row in enumerate(rows):
        cells = row[1:9]
        assert cells[i] == " X "
        assert all(c == link for j, c in enumerate(cells) if j != i)
        assert len(row) == len(header) + 2  # row label, and the empty cell before GPU NUMA ID
    assert "NV#  = Connection traversing a bonded set of # NVLinks" in out
    assert "NIC0: mlx5_0" in out


def test_topo_pcie_4090_box() -> None:
    header, rows, out = topo("RTX 4090")
    assert "NIC0" not in header
    links = {c for i, row in enumerate(rows) for j, c in enumerate(row[1:9]) if i != j}
    assert links == {"PIX", "NODE", "SYS"}
    assert rows[0][2] == "PIX" and rows[0][3] == "NODE" and rows[0][5] == "SYS"
    assert [row[-3] for row in rows] == ["0"] * 4 + ["1"] * 4  # NUMA affinity
    assert "SYS  = Connection traversing PCIe as well as the SMP interconnect" in out


def test_topo_v100_hybrid_cube_mesh_and_single_gpu() -> None:
    _, rows, _ = topo("V100")
    cells = [row[1:9] for row in rows]
    assert all(cells[i][j] == cells[j][i] for i in range(8) for j in range(8))
    assert {c for row in cells for c in row} == {" X ", "NV1", "NV2", "SYS"}
    header, rows, _ = topo("A10", 1)
    assert header == ["GPU0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert rows[0][1] == " X "


def test_topo_refuses_other_subcommands() -> None:
    assert answer(SimNode("n", "A100"), "nvidia-smi topo -p2p r", NOW).exit_status == 2


# --- the rest of the shell -------------------------------------------------------------


def test_shred_removes_the_file() -> None:
    node = SimNode("n", "A100")
    path = "/data/ckpt/step-20000.pt"
    assert answer(node, f"test -e {path}", NOW).exit_status == 0
    assert answer(node, f"shred -n 1 -z -u -- {path}", NOW) == ("", "", 0)
    assert path not in node.files
    assert answer(node, f"test -e {path}", NOW).exit_status == 1
    again = answer(node, f"shred -n 1 -z -u -- {path}", NOW)
    assert again == (
        "",
        f"shred: {path}: failed to open for writing: No such file or directory\n",
        1,
    )
    on_dir = answer(node, "shred -n 1 -z -u -- /data", NOW)
    assert on_dir.exit_status == 1 and "Is a directory" in on_dir.stderr
    # Each node has its own files.
    assert path in SimNode("m", "A100").files


def test_ls_test_and_chains() -> None:
    node = SimNode("n", "A100")
    assert answer(node, "ls /data", NOW) == ("ckpt\ndatasets\n", "", 0)
    assert answer(node, "ls /root/.netrc", NOW).stdout == "/root/.netrc\n"
    missing = answer(node, "ls /nope", NOW)
    assert missing == ("", "ls: cannot access '/nope': No such file or directory\n", 2)
    assert answer(node, "test -d /data && echo dir", NOW).stdout == "dir\n"
    assert answer(node, "test -e /nope || echo absent", NOW).stdout == "absent\n"
    assert answer(node, "[ ! -e /nope ]", NOW).exit_status == 0
    assert answer(node, "false; echo $ok", NOW).stdout == "$ok\n"  # no expansion, like '...'
    assert answer(node, "ls /nope 2>/dev/null", NOW) == ("", "", 2)
    chain = "shred -u -- /root/.netrc && test ! -e /root/.netrc && echo gone"
    assert answer(node, chain, NOW).stdout == "gone\n"


def test_small_commands() -> None:
    node = SimNode("gpu-7", "A100", seed=3)
    assert answer(node, "hostname", NOW) == ("gpu-7\n", "", 0)
    assert answer(node, "true", NOW) == ("", "", 0)
    up = answer(node, "uptime", NOW)
    assert up.exit_status == 0 and "load average:" in up.stdout and " up 6 days" in up.stdout
    assert answer(node, "cat /nope", NOW).exit_status == 1


def test_unknown_command() -> None:
    assert answer(SimNode("n", "A100"), "rocm-smi --json", NOW) == (
        "",
        "sh: 1: rocm-smi: not found\n",
        127,
    )
    assert answer(SimNode("n", "A100"), "echo 'open", NOW).exit_status == 2


def test_demo_fleet() -> None:
    nodes = default_demo_fleet()
    assert len(nodes) == 12
    assert len({n.name for n in nodes}) == 12
    assert len({n.seed for n in nodes}) == 12
    scenarios = [n.scenario for n in nodes]
    for needed in (Scenario.FAKE_VRAM, Scenario.FLAKY, Scenario.DRIVER_MISMATCH):
        assert scenarios.count(needed) == 1
    common = (Scenario.BUSY, Scenario.IDLE_MONTHLY, Scenario.BURSTY)
    assert sum(s in common for s in scenarios) == 9
    fake = next(n for n in nodes if n.scenario is Scenario.FAKE_VRAM)
    assert fake.nominal_gib == 80 and fake.gpus[0].memory_total_mib == 24564


# --- the fake nvidia-smi entry point ---------------------------------------------------


ENV = {"ZUKA_SIM_MODEL": "RTX 4090", "ZUKA_SIM_COUNT": "2", "ZUKA_SIM_SEED": "4",
       "ZUKA_SIM_NAME": "box", "ZUKA_SIM_TIME": NOW.isoformat()}  # fmt: skip


def test_entry_point_prints_what_answer_prints(capsys: pytest.CaptureFixture[str]) -> None:
    status = sim_main(["nvidia-smi", "--query-gpu=index,memory.total",
                       "--format=csv,noheader,nounits"], ENV)  # fmt: skip
    assert status == 0
    assert capsys.readouterr().out == "0, 24564\n1, 24564\n"
    env = {**ENV, "ZUKA_SIM_SCENARIO": "no_driver"}
    assert sim_main(["nvidia-smi", "-L"], env) == 9
    assert sim_main(["nvidia-smi", "--query-gpu=foo", "--format=csv"], ENV) == 2


def test_entry_point_runs_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "leases.sim", "nvidia-smi", "--query-gpu=index", "--format=csv"],
        env={**os.environ, **ENV, "ZUKA_SIM_SCENARIO": "driver_mismatch"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 18
    assert "Driver/library version mismatch" in proc.stdout


# --- the SSH fleet ---------------------------------------------------------------------


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[SimFleet]:
    nodes = [SimNode(f"node-{i:02}", "A100" if i % 2 else "RTX 4090", 1 + i % 8, seed=i)
             for i in range(20)]  # fmt: skip
    nodes += [
        SimNode("flaky", "A10", 1, Scenario.FLAKY, seed=1),
        SimNode("down", "A10", 1, Scenario.UNREACHABLE, seed=2),
        SimNode("rekeyed", "A10", 1, Scenario.CHANGED_HOSTKEY, seed=3),
        SimNode("broken", "H800", 8, Scenario.DRIVER_MISMATCH, seed=4),
    ]
    async with SimFleet(nodes, clock=lambda: NOW) as f:
        f.write_known_hosts(tmp_path / "known_hosts")
        f.write_client_key(tmp_path)
        yield f


def connect(
    fleet: SimFleet, name: str, tmp_path: Path, **kw: object
) -> asyncssh.SSHClientConnection:
    ep = fleet[name]
    options: dict[str, object] = {
        "username": "root",
        "known_hosts": str(tmp_path / "known_hosts"),
        "client_keys": [str(tmp_path / "id_ed25519")],
        "agent_path": None,
        "config": [],
        "connect_timeout": 10,
        **kw,
    }
    return asyncssh.connect(ep.host, ep.port, **options)  # type: ignore[arg-type, return-value]


async def test_fleet_files(fleet: SimFleet, tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "id_ed25519.pub").read_text().startswith("ssh-ed25519 ")
    lines = (tmp_path / "known_hosts").read_text().splitlines()
    assert len(lines) == len(fleet) == 24
    assert lines[0] == f"[127.0.0.1]:{fleet['node-00'].port} {fleet['node-00'].host_public_key}"
    assert len({ep.host_public_key for ep in fleet}) == 24
    assert fleet["node-03"].ssh_target("/k").command() == (
        f"ssh -p {fleet['node-03'].port} -i /k root@127.0.0.1"
    )


async def test_twenty_nodes_answer_over_ssh(fleet: SimFleet, tmp_path: Path) -> None:
    async def poll(i: int) -> str:
        async with connect(fleet, f"node-{i:02}", tmp_path) as conn:
            result = await conn.run(QUERY.format("index,utilization.gpu"), check=True)
            return str(result.stdout)

    outputs = await asyncio.gather(*(poll(i) for i in range(20)))
    for i, out in enumerate(outputs):
        rows = [line.split(", ") for line in out.splitlines()]
        assert [r[0] for r in rows] == [str(g) for g in range(1 + i % 8)]
        assert all(85 <= int(r[1]) <= 100 or int(r[1]) < 50 for r in rows)
        assert (
            out
            == answer(fleet[f"node-{i:02}"].node, QUERY.format("index,utilization.gpu"), NOW).stdout
        )


async def test_exit_status_and_stderr_travel(fleet: SimFleet, tmp_path: Path) -> None:
    async with connect(fleet, "broken", tmp_path) as conn:
        result = await conn.run(QUERY.format("index"))
        assert result.exit_status == 18
        assert "Driver/library version mismatch" in str(result.stdout)
        missing = await conn.run("nvtop")
        assert (missing.exit_status, missing.stderr) == (127, "sh: 1: nvtop: not found\n")


async def test_streaming_delivers_rounds(fleet: SimFleet, tmp_path: Path) -> None:
    async with connect(fleet, "node-03", tmp_path) as conn:
        process = await conn.create_process(QUERY.format("index,utilization.gpu") + " -lms 100")
        lines: list[str] = []

        async def read() -> None:
            async for line in process.stdout:
                lines.append(line)

        reader = asyncio.create_task(read())
        await wait_until(lambda: len(lines) >= 3 * 4, what="three rounds of 4 GPUs")
        process.close()
        await asyncio.wait_for(reader, 5)
        # node-03 has 4 GPUs; closing may cut the last round short.
        assert len(lines) >= 3 * 4
        assert [line.split(", ")[0] for line in lines[:12]] == ["0", "1", "2", "3"] * 3


async def test_streaming_follows_a_scenario_change(fleet: SimFleet, tmp_path: Path) -> None:
    async with connect(fleet, "node-01", tmp_path) as conn:
        process = await conn.create_process(QUERY.format("index") + " -lms 50")
        first = await asyncio.wait_for(process.stdout.readline(), 5)
        assert first == "0\n"
        await fleet.set_scenario("node-01", Scenario.NO_DRIVER)
        await asyncio.wait_for(process.wait(), 5)
        assert process.exit_status == 9


async def test_shell_channel_runs_each_line(fleet: SimFleet, tmp_path: Path) -> None:
    async with connect(fleet, "node-02", tmp_path) as conn:
        process = await conn.create_process()
        process.stdin.write("hostname\n" + QUERY.format("index") + "\necho __end__\n")
        assert await process.stdout.readline() == "node-02\n"
        assert await process.stdout.readline() == "0\n"
        assert await process.stdout.readline() == "1\n"
        process.stdin.write("exit\n")
        rest = await asyncio.wait_for(process.stdout.read(), 5)
        assert rest == "2\n__end__\n"  # node-02 has 3 GPUs
        assert process.exit_status == 0


async def test_changed_host_key_is_not_verifiable(fleet: SimFleet, tmp_path: Path) -> None:
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with connect(fleet, "rekeyed", tmp_path):
            pass
    port = fleet["node-04"].port
    async with connect(fleet, "node-04", tmp_path) as conn:
        await conn.run("true", check=True)
    await fleet.rotate_host_key("node-04")
    assert fleet["node-04"].port == port
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with connect(fleet, "node-04", tmp_path):
            pass
    # Once the user accepts the new key, known_hosts follows it.
    await fleet.rotate_host_key("node-04", trust=True)
    fleet.write_known_hosts(tmp_path / "known_hosts")
    async with connect(fleet, "node-04", tmp_path) as conn:
        await conn.run("true", check=True)


async def test_set_scenario_changed_hostkey(fleet: SimFleet, tmp_path: Path) -> None:
    await fleet.set_scenario("node-05", Scenario.CHANGED_HOSTKEY)
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with connect(fleet, "node-05", tmp_path):
            pass


async def test_unreachable_refuses_until_it_comes_back(fleet: SimFleet, tmp_path: Path) -> None:
    with pytest.raises(ConnectionRefusedError):
        async with connect(fleet, "down", tmp_path):
            pass
    await fleet.set_scenario("down", Scenario.BUSY)
    async with connect(fleet, "down", tmp_path) as conn:
        assert (await conn.run("hostname")).stdout == "down\n"
    await fleet.set_scenario("down", Scenario.UNREACHABLE)
    with pytest.raises(ConnectionRefusedError):
        async with connect(fleet, "down", tmp_path):
            pass


async def test_flaky_fails_some_but_not_all(fleet: SimFleet, tmp_path: Path) -> None:
    good = bad = 0
    for _ in range(30):
        try:
            async with connect(fleet, "flaky", tmp_path) as conn:
                result = await conn.run(QUERY.format("index,utilization.gpu"))
        except (OSError, asyncssh.Error):
            bad += 1
            continue
        if result.exit_status == 0 and str(result.stdout).endswith("\n"):
            good += 1
        else:
            bad += 1  # closed mid-output: no exit status, a partial line
    assert good > 5
    assert bad > 5


async def test_unknown_client_key_is_denied(fleet: SimFleet, tmp_path: Path) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    with pytest.raises(asyncssh.PermissionDenied):
        async with connect(fleet, "node-00", tmp_path, client_keys=[stranger]):
            pass


async def test_shred_over_ssh_changes_the_node(fleet: SimFleet, tmp_path: Path) -> None:
    path = "/root/.cache/huggingface/token"
    async with connect(fleet, "node-06", tmp_path) as conn:
        assert (await conn.run(f"shred -n 1 -z -u -- {path}")).exit_status == 0
        assert (await conn.run(f"test -e {path}")).exit_status == 1
    assert path not in fleet["node-06"].node.files
    assert path in fleet["node-07"].node.files
