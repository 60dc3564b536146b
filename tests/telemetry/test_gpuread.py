"""The sweep that reads the processes sends the GPU query and the owner query (and the host
snippet) as one command (leases.telemetry.gpuread.with_apps), run here by a real /bin/sh
with a stand-in nvidia-smi on its PATH and this machine's ps, /proc and df: one round trip,
each part read from its own marker, and nothing a process name prints can move a part."""

from __future__ import annotations

import os
import pwd
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.accept.localrun import LocalRunner
from leases.ssh.stream import CommandResult
from leases.telemetry import gpuread, hoststats, nvsmi
from leases.telemetry.owners import OwnersMemo

FIELDS = ("index", "uuid", "name", "memory.total", "utilization.gpu", "memory.used")
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
ROW = "0, GPU-aaa, NVIDIA A100-SXM4-80GB, 81920, 87, 61234\n"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("ps") is None, reason="needs /proc, ps"
)


class Sh:
    """Runs each command with /bin/sh, a stand-in nvidia-smi first on PATH; counts them."""

    def __init__(self, tmp: Path, apps: str, gpu_status: int = 0, gpu_out: str = ROW) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (tmp / "apps").write_text(apps)
        (tmp / "gpus").write_text(gpu_out)
        smi = self.bin / "nvidia-smi"
        smi.write_text(
            "#!/bin/sh\n"
            'case "$*" in\n'
            f"  *--query-compute-apps=*) cat '{tmp / 'apps'}'; exit 0 ;;\n"
            f"  *--query-gpu=*) cat '{tmp / 'gpus'}'; exit {gpu_status} ;;\n"
            "esac\nexit 2\n"
        )
        smi.chmod(0o755)
        self.commands: list[str] = []

    async def run(self, cmd: str) -> CommandResult:
        self.commands.append(cmd)
        return await LocalRunner().run(f"PATH={self.bin}:$PATH; {cmd}", timeout=30)


def me() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


async def test_one_command_brings_the_gpus_the_processes_and_the_host(tmp_path: Path) -> None:
    sh = Sh(tmp_path, f"GPU-aaa, {os.getpid()}, 1024\n")
    read = await gpuread.read_gpus(sh.run, FIELDS, with_host=True, apps_of=OwnersMemo("n0"))
    assert len(sh.commands) == 1
    assert (read.result.exit_status, read.result.stdout, read.probed) == (0, ROW, False)
    (sample,) = nvsmi.parse_query(read.result.stdout, FIELDS, "n0", T0)
    assert (sample.mem_used_mib, sample.util_gpu) == (61234, 87)
    assert read.apps is not None and read.apps.reading is not None
    (p,) = read.apps.reading.processes or ()
    assert (p.pid, p.owner, p.node, p.used_mib, p.visible) == (os.getpid(), me(), "n0", 1024, True)
    assert p.cmdline == Path("/proc/self/cmdline").read_bytes()[:2048].decode().replace("\0", " ")
    assert read.apps.host_read is False  # the host part went to GpuRead.host
    host = hoststats.parse_host(read.host)
    assert host.problems == () and host.mem["MemTotal"] > 0


async def test_without_the_host_the_apps_end_the_output(tmp_path: Path) -> None:
    sh = Sh(tmp_path, f"GPU-aaa, {os.getpid()}, 1024\n")
    read = await gpuread.read_gpus(sh.run, FIELDS, with_host=False, apps_of=OwnersMemo("n0"))
    assert "@zuka-host" not in sh.commands[0] and read.host is None
    assert read.apps is not None and read.apps.reading is not None
    assert [p.owner for p in read.apps.reading.processes or ()] == [me()]


async def test_a_failed_gpu_query_keeps_its_status_and_runs_no_second_nvidia_smi(
    tmp_path: Path,
) -> None:
    # A driver failure (exit 9) printed without a final newline: the status is still the
    # GPU query's own; the apps' nvidia-smi, which would fail the same way (and as slowly,
    # inside the same timeout), is not run; the host figures still are.
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    sh = Sh(tmp_path, f"GPU-aaa, {os.getpid()}, 1024\n", gpu_status=9, gpu_out=said)
    calls = tmp_path / "calls"
    smi = sh.bin / "nvidia-smi"
    smi.write_text(smi.read_text().replace("#!/bin/sh\n", f"#!/bin/sh\necho \"$*\" >> '{calls}'\n"))
    read = await gpuread.read_gpus(sh.run, FIELDS, with_host=True, apps_of=OwnersMemo("n0"))
    assert (read.result.exit_status, read.result.stdout) == (9, said)
    assert read.apps is not None and read.apps.reading is not None
    assert read.apps.reading.processes is None  # not read, never misread
    assert len(calls.read_text().splitlines()) == 1  # the GPU query alone
    assert hoststats.parse_host(read.host).mem["MemTotal"] > 0


async def test_a_process_name_cannot_forge_the_gpu_or_host_part(tmp_path: Path) -> None:
    # zuka does not ask for process names, which nvidia-smi prints raw; were one printed
    # anyway (a wrapper that ignores the field list), one holding line breaks and markers:
    forged = (
        f"GPU-aaa, {os.getpid()}, evil\n@zuka-gpus 0\n0, GPU-fake, X, 1, 1, 1\n"
        "@zuka-host 0\n@zh mem\nMemTotal: 1 kB\n@zh end\n, 7\n"
    )
    sh = Sh(tmp_path, forged)
    read = await gpuread.read_gpus(sh.run, FIELDS, with_host=True, apps_of=OwnersMemo("n0"))
    assert (read.result.exit_status, read.result.stdout) == (0, ROW)  # the first marker's
    host = hoststats.parse_host(read.host)  # the last marker's: this machine's own
    assert host.mem["MemTotal"] > 1 and host.problems == ()
    # The apps part did not parse (a line with no pid): not read, never misread.
    assert read.apps is not None and read.apps.reading is None


async def test_a_node_that_printed_no_marker_is_asked_the_gpu_query_alone() -> None:
    # A forced command or wrapper that runs only the GPU query: nothing of the first
    # answer is taken for the GPU query's; it is asked alone (the poller then asks for the
    # apps on their own).
    asked: list[str] = []

    async def wrapper(cmd: str) -> CommandResult:
        asked.append(cmd)
        return CommandResult(0, ROW, "")

    read = await gpuread.read_gpus(wrapper, FIELDS, with_host=False, apps_of=OwnersMemo("n0"))
    assert (read.result.stdout, read.apps, read.host) == (ROW, None, None)
    assert len(asked) == 2 and asked[1] == nvsmi.query_command(FIELDS)


def test_the_simulator_reads_the_command_as_sh_does() -> None:
    command = gpuread.with_apps(nvsmi.query_command(FIELDS), host=True)
    assert gpuread.unwrap_apps(command) == (nvsmi.query_command(FIELDS), True)
    assert gpuread.unwrap_apps(command.replace("zuka_s", "other")) is None
    assert gpuread.unwrap_apps(nvsmi.query_command(FIELDS)) is None


async def test_a_mount_named_with_line_breaks_cannot_forge_owners_or_host(tmp_path: Path) -> None:
    """busybox df prints mount paths raw: a tenant's FUSE mount named with line breaks,
    a fake /proc line, a fake host marker and a fake memory size. Lines of df starting
    with "@" are dropped on the node, so the last host marker is the real one."""
    mount = (
        "/m\n3999999 1001 alice\n@zuka-procs\n@p 3999999 5:1-1 forged\n"
        "@zuka-host 0\n@zh mem\nMemTotal: 999 kB\n@zh end"
    )
    sh = Sh(tmp_path, f"GPU-aaa, {os.getpid()}, 1024\nGPU-aaa, 3999999, 7\n")
    df = sh.bin / "df"
    df.write_text(
        "#!/bin/sh\necho 'Filesystem Type 1024-blocks Used Available Capacity Mounted on'\n"
        f"printf 'fuse fuse 100 1 99 1%% %s\\n' '{mount}'\n"
    )
    df.chmod(0o755)
    read = await gpuread.read_gpus(sh.run, FIELDS, with_host=True, apps_of=OwnersMemo("n0"))
    assert read.apps is not None and read.apps.reading is not None
    by_pid = {p.pid: p for p in read.apps.reading.processes or ()}
    assert by_pid[os.getpid()].owner == me() and by_pid[os.getpid()].visible
    assert by_pid[3999999].owner is None and by_pid[3999999].cmdline is None
    assert hoststats.parse_host(read.host).mem["MemTotal"] > 999
