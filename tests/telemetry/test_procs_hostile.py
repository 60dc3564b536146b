"""A tenant's process names itself to fool the owner query or a stop: real processes,
the real commands run by a real /bin/sh, this machine's /proc. A process may set its
short name (comm, 15 bytes: prctl) to anything, line breaks, `)` and glob characters
included, and rewrite its own command line at any moment."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from leases.accept.localrun import LocalRunner
from leases.app.processes import Outcome, stop_process
from leases.core.models import GpuProcess
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.ssh.posixsh import under_sh
from leases.telemetry.owners import APPS_OWNERS_COMMAND, parse_apps_owners
from leases.telemetry.procinfo import BOOT_ID_FILE, PROCS_MARK, parse_procs, split_procs
from leases.telemetry.procstop import stop_command
from tests.support.waiting import wait_until

# Renames itself (comm) to argv[1] (an escape: "\n" for a line break), then sleeps.
RENAMED = (
    "import ctypes, sys, time\n"
    "ctypes.CDLL(None).prctl(15, sys.argv[1].encode().decode('unicode_escape').encode(), 0, 0, 0)\n"
    "time.sleep(298)\n"
)
# Ignores SIGTERM and, when it comes, hides: argv[1] "comm" renames itself "x\n", "argv"
# rewrites the first byte of its command line in place (through /proc/self/mem).
EVADES = (
    "import ctypes, signal, sys, time\n"
    "def on_term(*_):\n"
    "    if sys.argv[1] == 'comm':\n"
    "        ctypes.CDLL(None).prctl(15, b'x\\n', 0, 0, 0)\n"
    "    else:\n"
    "        fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()\n"
    "        with open('/proc/self/mem', 'r+b', buffering=0) as mem:\n"
    "            mem.seek(int(fields[45]))\n"
    "            mem.write(b'Q')\n"
    "    open(sys.argv[2], 'w').close()\n"
    "signal.signal(signal.SIGTERM, on_term)\n"
    "open(sys.argv[2] + '.up', 'w').close()\n"
    "while True:\n"
    "    time.sleep(1)\n"
)


def me() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-c", *args)


async def owner_query(tmp: Path, pid: int) -> GpuProcess:
    """The owner query as a node runs it, a stand-in nvidia-smi naming `pid` alone."""
    smi = tmp / "bin" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text(f"#!/bin/sh\necho 'GPU-a, {pid}, 30000'\n")
    smi.chmod(0o755)
    result = await LocalRunner().run(f"PATH={smi.parent}:$PATH; {APPS_OWNERS_COMMAND}")
    reading = parse_apps_owners(result.stdout, "n1")
    assert reading.problems == (), result.stdout
    (p,) = reading.processes or ()
    return p


@pytest.fixture
async def renamed(request: pytest.FixtureRequest) -> AsyncIterator[asyncio.subprocess.Process]:
    child = await spawn(RENAMED, request.param)
    comm = Path(f"/proc/{child.pid}/comm")
    await wait_until(lambda: comm.read_text() != "python3\n" and "sleep" not in comm.read_text()
                     and not comm.read_text().startswith("python"), what="the rename")  # fmt: skip
    yield child
    child.kill()
    await child.wait()


def real_start(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    ticks = stat.rpartition(")")[2].split()[19]
    return f"{Path(BOOT_ID_FILE).read_text().strip()}:{ticks}"


@pytest.mark.parametrize("renamed", ["x\\n1 2 3", ")\\n)) ) 1 2", "x\\n"], indirect=True)
async def test_a_name_with_line_breaks_reads_as_itself(
    renamed: asyncio.subprocess.Process, tmp_path: Path
) -> None:
    """The whole of stat is read: its start, owner and command line are the process's."""
    p = await owner_query(tmp_path, renamed.pid)
    assert p.visible and p.owner == me()
    assert p.start is not None and p.start.startswith(real_start(renamed.pid) + ":")
    assert p.cmdline is not None and p.cmdline.startswith(sys.executable)
    said = await LocalRunner().run(stop_command(renamed.pid, p.start, p.cmdline, None))
    assert said.stdout.strip() == "@zuka-stop alive"


async def test_a_name_that_is_a_glob_is_never_expanded(tmp_path: Path) -> None:
    """A name ")/tmp/zq*/*" left stat's fields as a file pattern: a file there named
    with line breaks printed forged /proc lines (another user's process shown with a
    borrowed start token). Expansion is off, and the fields after the last ")" are
    the kernel's."""
    bait = Path(tempfile.mkdtemp(prefix="zq", dir="/tmp"))
    try:
        forged = f"x\n{PROCS_MARK}\nboot 00000000-0000-4000-8000-000000000000\n@p 1 5:1-1 forged\n"
        for i in range(30):  # whatever number of fields the pattern must fill
            (bait / f"{i:02d}{forged}").write_text("")
        child = await spawn(RENAMED, ")/tmp/zq*/*\\n")  # 12 bytes: comm keeps 15
        try:
            comm = Path(f"/proc/{child.pid}/comm")
            await wait_until(lambda: comm.read_text().startswith(")"), what="the rename")
            p = await owner_query(tmp_path, child.pid)
            assert p.visible and p.owner == me()
            assert p.start is not None and p.start.startswith(real_start(child.pid) + ":")
            assert "forged" not in (p.cmdline or "")
        finally:
            child.kill()
            await child.wait()
    finally:
        for f in bait.iterdir():
            f.unlink()
        bait.rmdir()


def test_a_second_section_or_a_pid_twice_is_not_trusted() -> None:
    boot = "0f7c4e0a-3b1d-4c2e-9a5f-6d7e8f901234"
    section = f"boot {boot}\nup 100\nhz 100\n@p 7 50:1-1 a\n@p 7 60:2-2 b\n@p 8 10: c\n@e 8\n"
    parsed = parse_procs(section)
    assert parsed.present == {7, 8} and parsed.by_pid == {}  # no start of either is kept
    # A process on two GPUs: nvidia-smi lists it twice, the /proc part reads it twice,
    # the same: its start is kept (else a two-GPU job could never be stopped).
    both = parse_procs(f"boot {boot}\nup 100\nhz 100\n@p 7 50:1-1 a\n@p 7 50:1-1 a\n")
    assert both.by_pid[7].start == f"{boot}:50:1-1"
    ps, procs = split_procs(f" 7 0 root\n{PROCS_MARK}\n{section}{PROCS_MARK}\n@p 9 1: x\n")
    assert procs is None and ps.startswith(" 7 0 root\n")


async def stop_of(child: asyncio.subprocess.Process, tmp_path: Path) -> Outcome:
    p = await owner_query(tmp_path, child.pid)
    assert p.start is not None and p.cmdline is not None
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.1"}))
    try:
        stopped = await stop_process("n1", child.pid, p.start, p.cmdline, str(child.pid), 1.0,
                                     LocalRunner(), time.monotonic, ledger)  # fmt: skip
    finally:
        ledger.close()
    return stopped.outcome


@pytest.mark.parametrize("how", ["comm", "argv"])
async def test_a_process_that_hides_when_told_to_stop_is_killed(how: str, tmp_path: Path) -> None:
    """On SIGTERM it renames itself or rewrites its command line and goes on: once
    signalled it is known by its start alone, so it is neither "gone" nor "another
    process", and SIGKILL follows."""
    flag = tmp_path / "termed"
    child = await spawn(EVADES, how, str(flag))
    try:
        await wait_until(lambda: Path(f"{flag}.up").exists(), what="the handler")
        outcome = await stop_of(child, tmp_path)
        assert flag.exists()  # it did hide
        assert outcome is Outcome.KILLED
        assert await asyncio.wait_for(child.wait(), 10) == -9
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


async def test_a_zombie_is_gone(tmp_path: Path) -> None:
    """Ended but not yet reaped (its parent busy): its stat still reads, start unchanged;
    it is gone, not still running."""
    import subprocess

    child = subprocess.Popen(["sleep", "298"])  # not waited on until the end: a zombie
    try:
        p = await owner_query(tmp_path, child.pid)
        assert p.start is not None and p.cmdline is not None
        ledger = Ledger.open(tmp_path / "l.db")
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.1"}))
        stopped = await stop_process("n1", child.pid, p.start, p.cmdline, str(child.pid), 5.0,
                                     LocalRunner(), time.monotonic, ledger)  # fmt: skip
        ledger.close()
        assert stopped.outcome is Outcome.STOPPED
        assert (
            Path(f"/proc/{child.pid}/stat")
            .read_text(errors="replace")
            .rpartition(")")[2]
            .split()[0]
            == "Z"
        )
    finally:
        child.kill()
        child.wait()


# Its first thread exits (pthread_exit) while another runs on: /proc/PID/stat says Z for
# the thread group, which is alive (ctypes lets go of the GIL for the call).
LEADER_EXITS = (
    "import ctypes, sys, threading, time\n"
    "def work():\n"
    "    while True:\n"
    "        time.sleep(0.1)\n"
    "threading.Thread(target=work, daemon=True).start()\n"
    "open(sys.argv[1], 'w').close()\n"
    "ctypes.CDLL(None).pthread_exit(None)\n"
)


async def test_a_thread_group_whose_first_thread_ended_is_not_gone(tmp_path: Path) -> None:
    """Z with threads left is not a zombie: the stop signals it (before, it read as
    already gone and nothing was sent while the job ran on)."""
    flag = tmp_path / "up"
    child = await spawn(LEADER_EXITS, str(flag))
    try:
        stat = Path(f"/proc/{child.pid}/stat")
        await wait_until(
            lambda: flag.exists() and stat.read_bytes().rpartition(b")")[2].split()[0] == b"Z",
            what="the first thread to exit",
        )
        ledger = Ledger.open(tmp_path / "l.db")
        ledger.add_node(records.node_from({"name": "n1", "ssh_host": "10.0.0.1"}))
        stopped = await stop_process("n1", child.pid, real_start(child.pid), "", str(child.pid),
                                     5.0, LocalRunner(), time.monotonic, ledger)  # fmt: skip
        ledger.close()
        assert stopped.outcome in (Outcome.STOPPED, Outcome.KILLED), stopped.steps
        assert await asyncio.wait_for(child.wait(), 10) in (-15, -9)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed (.ci/run installs it)")
@pytest.mark.parametrize("signal", [None, "TERM"])
def test_a_stop_reads_the_same_under_a_zsh_login(signal: str | None) -> None:
    """An exec runs under the login's shell: zsh does not split `set -- $t`, so the
    snippet is handed to sh (before, every stop on a zsh login failed)."""
    import subprocess

    child = subprocess.Popen(["sleep", "298"])
    try:
        said = subprocess.run(
            ["zsh", "-c", stop_command(child.pid, real_start(child.pid), "", signal)],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert said.stdout.strip() == f"@zuka-stop {'alive' if signal is None else 'sent'}"
        if signal:
            assert child.wait(timeout=10) == -15
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh not installed (.ci/run installs it)")
def test_the_owner_query_execd_under_a_zsh_login_reads_each_start(tmp_path: Path) -> None:
    """`zuka poll --once` and the offboarding exec the owner query: the login's shell runs
    it, and zsh does not split `set -- $t`: handed to sh (leases.ssh.posixsh), the
    process's start and command line are read as sh reads them (before: none)."""
    import subprocess

    smi = tmp_path / "nvidia-smi"
    child = subprocess.Popen(["sleep", "297"])
    try:
        smi.write_text(f"#!/bin/sh\necho 'GPU-a, {child.pid}, 30000'\n")
        smi.chmod(0o755)
        env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

        def under_zsh(command: str) -> GpuProcess:
            said = subprocess.run(
                ["zsh", "-c", command], capture_output=True, text=True, check=False,
                timeout=30, env=env,
            )  # fmt: skip
            (p,) = parse_apps_owners(said.stdout, "n1").processes or ()
            return p

        bare = under_zsh(APPS_OWNERS_COMMAND)
        assert bare.visible and bare.start is None  # what zsh alone made of it
        wrapped = under_zsh(under_sh(APPS_OWNERS_COMMAND))
        assert (wrapped.start or "").startswith(f"{real_start(child.pid)}:")  # with its cksum
        assert wrapped.cmdline == "sleep 297 " and wrapped.owner == me()
    finally:
        child.kill()
        child.wait()
