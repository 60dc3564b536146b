"""The POSIX cksum in Python equals the `cksum` program (random bytes, empty, long), and a
process whose command line is not UTF-8 (`caf\\xe9`) or is cut mid-character at 2048 bytes
(a long Chinese command line) is read and stopped on a real local process: the stop
compares the raw bytes' cksum, not the decoded text."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leases.accept.localrun import LocalRunner
from leases.app.processes import Outcome, stop_process
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.telemetry.cksum import cksum_word, posix_cksum
from leases.telemetry.procinfo import MAX_CMDLINE, PROCS_COMMAND, local_info, parse_procs


def _program(data: bytes) -> str:
    out = subprocess.run(["cksum"], input=data, capture_output=True, check=True).stdout
    return out.decode().strip().replace(" ", "-")


def test_equals_the_cksum_program() -> None:
    rng = random.Random(22)
    samples = [b"", b"a", b"caf\xe9", "训练".encode() * 500, bytes(range(256)) * 9]
    samples += [rng.randbytes(rng.randrange(0, 5000)) for _ in range(40)]
    for data in samples:
        assert cksum_word(data) == _program(data), data[:20]
    assert posix_cksum(b"") == 4294967295  # `printf '' | cksum`


CODE = "import time; time.sleep(299)"


def _chinese() -> bytes:
    # ASCII padding so that byte MAX_CMDLINE falls inside a 3-byte character.
    before = len(sys.executable.encode()) + 1 + len("-c") + 1 + len(CODE) + 1
    pad = (MAX_CMDLINE - before - 1) % 3
    return b"x" * pad + "训练模型中文语料".encode() * 120


@pytest.mark.parametrize("arg", [b"caf\xe9", _chinese()], ids=["latin1", "chinese-cut"])
async def test_a_local_process_with_such_a_command_line_is_stopped(
    tmp_path: Path, arg: bytes
) -> None:
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", CODE, arg)
    try:
        raw = Path(f"/proc/{child.pid}/cmdline").read_bytes()
        await_read = time.monotonic() + 5
        while arg not in raw and time.monotonic() < await_read:  # exec not yet done
            await asyncio.sleep(0.01)
            raw = Path(f"/proc/{child.pid}/cmdline").read_bytes()
        if len(arg) > MAX_CMDLINE:
            cut = raw[:MAX_CMDLINE]
            with pytest.raises(UnicodeDecodeError):
                cut.decode()  # really cut in the middle of a character
        info = local_info(child.pid)
        assert info is not None and "\ufffd" in info.cmdline
        assert info is not None and info.start.endswith(":" + _program(raw[:MAX_CMDLINE]))
        # The node's own reading (the shell) gives the same token as Python's.
        shell = f"a='GPU-x, {child.pid}, python, 1'; {PROCS_COMMAND}"
        out = subprocess.run(["sh", "-c", shell], capture_output=True, check=True).stdout
        section = parse_procs(out.decode("utf-8", "replace").partition("\n")[2])
        assert section.by_pid[child.pid].start == info.start
        ledger = Ledger.open(tmp_path / "l.db")
        ledger.add_node(records.node_from({"name": "local", "ssh_host": "10.0.0.1"}))
        stopped = await stop_process("local", child.pid, info.start, info.cmdline,
                                     str(child.pid), 5.0, LocalRunner(), time.monotonic,
                                     ledger)  # fmt: skip
        assert stopped.outcome is Outcome.STOPPED, stopped.steps
        assert await asyncio.wait_for(child.wait(), 5) == -15
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


async def test_through_the_sim_a_long_chinese_command_line_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulated node reads and answers the cksum as a real shell would: a command
    line past MAX_CMDLINE bytes of Chinese (cut mid-character) is stopped, and a start
    that does not match is refused as another process (a command line that changed is not:
    the start tells processes apart, procstop.stop_command)."""
    from datetime import UTC, datetime

    from leases.core.models import GpuProcess
    from leases.sim import procs as simprocs
    from leases.sim.commands import answer
    from leases.sim.gpu import SimNode
    from leases.ssh.stream import CommandResult
    from leases.telemetry.owners import APPS_OWNERS_COMMAND, parse_apps_owners

    now = datetime(2026, 12, 2, 13, 30, tzinfo=UTC)
    long = "python 训练.py " + "--数据 /autodl-tmp/中文语料 " * 100
    monkeypatch.setitem(simprocs._COMMANDS, "alice", long)
    node = SimNode("sim-0", "A800", count=2, seed=0)

    class Runner:
        async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
            out, err, status = answer(node, cmd, now)
            return CommandResult(status, out, err)

    found = parse_apps_owners(answer(node, APPS_OWNERS_COMMAND, now).stdout, node.name)
    p = (found.processes or ())[0]
    assert p.start is not None and p.cmdline is not None and p.cmdline.startswith("python 训练")
    assert p.start.count(":") == 2  # the cksum carried
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({"name": node.name, "ssh_host": "10.0.0.1"}))
    boot, ticks, ck = p.start.split(":")
    wrong = GpuProcess(**{**p.__dict__, "start": f"{boot}:{int(ticks) + 1}:{ck}"})
    for proc, outcome in ((wrong, Outcome.REUSED), (p, Outcome.STOPPED)):
        stopped = await stop_process(node.name, proc.pid, proc.start, proc.cmdline,
                                     str(proc.pid), 0.0, Runner(), time.monotonic,
                                     ledger)  # fmt: skip
        assert stopped.outcome is outcome, stopped.steps
    assert p.pid in node.killed
