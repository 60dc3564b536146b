"""Who used the cards: each GPU process's owner, read on the node with the process list,
kept in history as busy card-minutes per user per node per hour."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from leases.core.models import GpuProcess, GpuSample, NodeHealth, OwnerHour
from leases.core.textsafe import is_clean
from leases.ledger import records
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.schema import MIGRATIONS
from leases.ledger.store import Ledger
from leases.sim import SIM_USERS, Scenario, SimNode, answer, gpu_user, readings
from leases.sim.ledger import backfill
from leases.ssh.pool import SshPool
from leases.telemetry.attribution import OwnerTracker, gpu_owners, minute_shares
from leases.telemetry.history import GpuMinute, NodeMinute
from leases.telemetry.nvml import NvmlReader
from leases.telemetry.nvsmi import APPS_COMMAND
from leases.telemetry.owners import (
    APPS_OWNERS_COMMAND,
    GPU_PIDS,
    MAX_PROBLEMS,
    MAX_PS_LINES,
    OWNERS_MARK,
    PS_LISTED,
    STAT_LISTED,
    local_owner,
    parse_apps_owners,
    parse_ps,
)
from leases.telemetry.poller import Poller
from leases.telemetry.procinfo import PROCS_MARK
from leases.telemetry.rollups import HistoryStore
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until_sync

KEYS = TestKeys.generate()
T0 = datetime(2025, 3, 3, 10, 0, 30, tzinfo=UTC)
HOUR = int(T0.timestamp()) // 3600
MINUTE = int(T0.timestamp()) // 60


# --- ps output ---


def test_real_shaped_procps_output() -> None:
    # procps-ng 4: `ps -eo pid=,uid=,user:32=`, right-aligned numbers, no header.
    text = (
        "      1       0 root\n"
        "   4242    1001 alice\n"
        "   4243    1002 bob.smith\n"
        "   5000    2000 2000\n"  # a container's uid with no passwd entry
        "   5002    1004 Zhang_San\n"
    )
    owners = parse_ps(text)
    assert owners.by_pid == {
        1: "root",
        4242: "alice",
        4243: "bob.smith",
        5000: "uid:2000",
        5002: "Zhang_San",
    }
    assert owners.problems == ()
    # A name ps cut short ("name+") is not the name: the uid stands for it.
    assert parse_ps(" 5001 1003 averyveryverylongusernameps_cut+\n").by_pid == {5001: "uid:1003"}
    # Only the pids asked for are kept.
    assert parse_ps(text, wanted={4242, 9}).by_pid == {4242: "alice"}


def test_stat_fallback_shape() -> None:
    # `stat -c '%n %u %U' /proc/[0-9]*` where ps is missing; UNKNOWN: no passwd entry.
    owners = parse_ps("/proc/4242 1001 alice\n/proc/5000 2000 UNKNOWN\n/proc/self 0 root\n")
    assert owners.by_pid == {4242: "alice", 5000: "uid:2000"}
    assert len(owners.problems) == 1 and "not a pid" in owners.problems[0]


@pytest.mark.skipif(shutil.which("ps") is None, reason="no ps on this machine")
@pytest.mark.parametrize("lister", [PS_LISTED, STAT_LISTED], ids=["ps", "stat"])
def test_this_machines_ps_and_stat_list_only_the_gpu_pids(lister: str) -> None:
    """A real sh and this machine's ps (or stat): the pids nvidia-smi named are listed,
    ours with its owner, and no other process of the machine is (pid 1 is not on the
    GPUs here); the shell's own pid comes with them, so a working ps always prints."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    apps = f"GPU-a, {os.getpid()}, 10\nGPU-b, [N/A], 1\nGPU-c, 12x, 1\n"
    child = subprocess.run(
        ["sh", "-c", f'{GPU_PIDS}; {lister}; echo "shell $$"'],
        capture_output=True, text=True, check=False, timeout=30, env={**os.environ, "a": apps},
    )  # fmt: skip
    *listed, last = child.stdout.splitlines()
    shell = int(last.removeprefix("shell "))
    assert parse_ps("\n".join(listed)).by_pid == {os.getpid(): me, shell: me}, child
    # Every GPU process gone: the shell's line still says that ps works.
    nothing = subprocess.run(["sh", "-c", f"a=; {GPU_PIDS}; {lister}"], capture_output=True,
                             text=True, check=False, timeout=30)  # fmt: skip
    assert len(nothing.stdout.splitlines()) == 1


ESC_TITLE = "\x1b]0;pwned\x07"


@pytest.mark.parametrize(
    ("user", "why"),
    [
        (ESC_TITLE, "refused"),
        ("alice\u202egnp.exe", "refused"),  # bidi override
        ("ali\u200bce", "refused"),  # zero-width space
        ("用户", "refused"),
        ("-rf", "refused"),
        ("1alice", "refused"),
        ("a" * 33, "longer than 32"),
        ("a" * 5000, "longer than 32"),
        ("alice;rm", "refused"),
    ],
)
def test_hostile_user_names_become_refused(user: str, why: str) -> None:
    owners = parse_ps(f"  77  1001 {user}\n")
    assert owners.by_pid == {77: "?"}
    assert len(owners.problems) == 1 and why in owners.problems[0]
    assert is_clean(owners.problems[0]) and len(owners.problems[0]) < 120


def test_hostile_lines() -> None:
    text = (
        "abc 0 root\n"  # not a pid
        "99999999999 0 root\n"  # past 32 bits
        "12 x root\n"  # not a uid
        "13\n"  # no uid, no user
        "14 1001 alice\n14 1002 bob\n"  # one pid, two owners
        "15 1001 alice\n15 1001 alice\n"  # listed twice, the same: fine
        "\x00\x1b[2J\n"
    )
    owners = parse_ps(text)
    assert owners.by_pid == {12: "?", 13: "?", 14: "?", 15: "alice"}
    assert all(is_clean(p) for p in owners.problems)
    assert any("listed twice" in p for p in owners.problems)
    assert len(owners.problems) <= MAX_PROBLEMS + 1  # the rest counted, not listed


def test_a_million_processes_and_a_huge_line_are_bounded() -> None:
    lines = "".join(f"{pid} 1001 alice\n" for pid in range(1, 1_000_001))
    started = time.monotonic()
    owners = parse_ps(lines, wanted={5, 999_999})
    assert time.monotonic() - started < 20  # generous: it stops reading at MAX_PS_LINES
    assert owners.by_pid == {5: "alice"}  # the pid past the bound stays unknown
    assert any(f"more than {MAX_PS_LINES}" in p for p in owners.problems)
    huge = parse_ps("7 1001 " + "x" * 10_000_000)
    assert huge.by_pid == {7: "?"} and len(huge.problems[0]) < 120


# --- the owner query: compute apps, marker, ps ---

APPS = (
    "GPU-aaaa, 4242, 30000\n"
    "GPU-aaaa, 4343, 2000\n"
    "GPU-bbbb, 5000, 1000\n"  # not in this pid namespace: /proc does not list it
    "GPU-bbbb, 6000, 1000\n"  # gone before ps ran
)
PS = "    1     0 root\n 4242  1001 alice\n 4343  1002 bob\n 5000     0 root\n"
BOOT = "0f7c4e0a-3b1d-4c2e-9a5f-6d7e8f901234"
PROCS = (
    f"{PROCS_MARK}\nboot {BOOT}\nup 5000.42\nhz 100\n"
    "@p 4242 100: /usr/bin/python3 train.py \n@p 4343 200: python serve.py \n"
)


def test_owner_query_output() -> None:
    reading = parse_apps_owners(f"{APPS}{OWNERS_MARK} 0\n{PS}{PROCS}", "n")
    assert reading.processes is not None
    assert [(p.pid, p.owner, p.process_name, p.visible) for p in reading.processes] == [
        (4242, "alice", "/usr/bin/python3", True),
        (4343, "bob", "python", True),
        (5000, None, "", False),  # a ps match would be another process: unknown stays unknown
        (6000, None, "", False),
    ]
    assert reading.problems == ()
    # Without the /proc section no pid is known to run here: no owner is given.
    bare = parse_apps_owners(f"{APPS}{OWNERS_MARK} 0\n{PS}", "n")
    assert bare.processes is not None
    assert all(p.owner is None and not p.visible for p in bare.processes)


def test_owner_query_failures() -> None:
    # nvidia-smi failed: no process reading at all.
    assert parse_apps_owners(f"NVIDIA-SMI has failed\n{OWNERS_MARK} 9\n{PS}", "n").processes is None
    # No marker (the shell printed something else): nothing trusted.
    no_marker = parse_apps_owners(APPS + PS, "n")
    assert no_marker.processes is None and "marker" in no_marker.problems[0]
    # ps and stat both missing: processes known, owners not.
    bare = parse_apps_owners(f"{APPS}{OWNERS_MARK} 0\n{PROCS}", "n")
    assert bare.processes is not None and all(p.owner is None for p in bare.processes)
    assert "owners unknown" in bare.problems[0]
    # No processes: nothing to ask ps about.
    assert parse_apps_owners(f"{OWNERS_MARK} 0\n{PS}", "n").processes == ()


def test_a_forged_marker_before_the_real_one_does_not_split_the_output() -> None:
    forged = f"GPU-aaaa, 4242, 1\n{OWNERS_MARK} 0\n 4242 0 root\nx, 100\n"
    reading_or_error: object
    try:
        reading_or_error = parse_apps_owners(f"{forged}{OWNERS_MARK} 0\n{PS}{PROCS}", "n")
    except ValueError as exc:  # NvsmiParseError: the forged lines are not compute apps
        reading_or_error = exc
    assert not (
        hasattr(reading_or_error, "processes")
        and any(p.owner == "root" for p in reading_or_error.processes or ())
    )


# A stand-in nvidia-smi that answers --query-compute-apps as the real one does: each field
# asked for, in order, the process name printed raw from /proc/PID/cmdline's argv[0].
SMI_LIKE = """\
import pathlib, sys
fields = next(a for a in sys.argv if a.startswith("--query-compute-apps=")).split("=")[1]
pid = int(sys.argv[-1].split("#")[1])
argv0 = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0")[0].decode()
row = {"gpu_uuid": "GPU-real", "pid": str(pid), "process_name": argv0, "used_memory": "30000"}
print(", ".join(row[f] for f in fields.split(",")))
"""


def test_a_process_naming_itself_like_rows_cannot_forge_one(tmp_path: Path) -> None:
    """A real process whose argv[0] holds a line break and commas, shaped as a second
    compute-apps row (pid 1, owner root, 30 GB), the real owner query run by a real sh:
    one process comes back, its own pid, memory and owner, its name read from /proc."""
    forged = "x, 5\nGPU-aaa, 1, init"
    victim = subprocess.Popen(
        ["bash", "-c", f'exec -a "{forged}" sleep 60'], stdin=subprocess.DEVNULL
    )
    try:
        wait_until_sync(
            lambda: Path(f"/proc/{victim.pid}/cmdline").read_bytes().startswith(b"x,"),
            timeout=30,
            what="the process to name itself",
        )
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f"#!{sys.executable}\n{SMI_LIKE}")
        smi.chmod(0o755)
        # The stand-in is told the victim's pid through a trailing "#PID" argument.
        command = APPS_OWNERS_COMMAND.replace(
            "--format=csv,noheader,nounits", f"--format=csv,noheader,nounits '#{victim.pid}'"
        )
        done = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, check=False, timeout=30,
            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        )  # fmt: skip
        reading = parse_apps_owners(done.stdout, "n")
        # Asked for the name, the same stand-in prints the forged row: what the old query read.
        named = subprocess.run(
            [str(smi), "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
             f"#{victim.pid}"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    finally:
        victim.kill()
        victim.wait()
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert reading.processes is not None, (done.stdout, done.stderr)
    assert [(p.gpu_uuid, p.pid, p.used_mib, p.owner, p.visible) for p in reading.processes] == [
        ("GPU-real", victim.pid, 30000.0, me, True)
    ]
    (process,) = reading.processes
    assert process.process_name == "x," and process.cmdline is not None
    assert process.cmdline == "x, 5 GPU-aaa, 1, init 60 "  # NULs and line breaks as spaces
    assert named.stdout.splitlines()[1] == "GPU-aaa, 1, init, 30000"


def test_the_simulated_node_answers_the_same_command_through_the_same_parser() -> None:
    sim = SimNode("n4", "A100", 4, Scenario.BUSY, seed=5)  # seed 5: two users
    for at in (T0, T0 + timedelta(days=9, hours=7)):
        out = answer(sim, APPS_OWNERS_COMMAND, at)
        assert out.exit_status == 0
        reading = parse_apps_owners(out.stdout, sim.name)
        assert reading.processes and reading.problems == ()
        index = {g.uuid: g.index for g in sim.gpus}
        assert [p.owner for p in reading.processes] == [
            gpu_user(sim, index[p.gpu_uuid]).owner for p in reading.processes
        ]
    owners = {gpu_user(sim, i).owner for i in range(4)}
    assert len(owners) == 2  # the upper half of the cards belongs to a second user
    assert answer(sim, "ps -eo pid=,comm=", T0).exit_status == 1  # unknown column refused


def test_the_simulated_fleet_has_several_users() -> None:
    sims = [SimNode(f"s{i}", "H100", 8, seed=i) for i in range(10)]
    owners = {gpu_user(s, g).owner for s in sims for g in range(8)}
    assert owners == {u.owner for u in SIM_USERS} == {"alice", "bob", "carol", "uid:2000", "root"}


# --- attribution ---


def gm(index: int, util: float | None) -> GpuMinute:
    return GpuMinute(index, 12, util, util, 1000.0, 100.0)


def test_busy_minutes_split_between_owners() -> None:
    gpus = (gm(0, 90), gm(1, 80), gm(2, 0), gm(3, None), gm(4, 95))
    owners = {0: ("alice", "bob"), 1: (), 2: ("carol",), 3: ("carol",), 4: ("?", "alice")}
    assert minute_shares(gpus, owners) == {"alice": 1.0, "bob": 0.5, "?": 1.5}
    # No process reading covers the minute: every busy card-minute is unknown.
    assert minute_shares(gpus, None) == {"?": 3.0}


def test_gpu_owners_and_the_tracker() -> None:
    samples = [GpuSample("n", T0, 0, uuid="GPU-a"), GpuSample("n", T0, 1, uuid="GPU-b")]
    procs = [
        GpuProcess("n", "GPU-a", 1, "p", owner="bob"),
        GpuProcess("n", "GPU-a", 2, "p", owner="alice"),
        GpuProcess("n", "GPU-a", 3, "p", owner="alice"),
        GpuProcess("n", "GPU-b", 4, "p", owner=None),
        GpuProcess("n", "GPU-zz", 5, "p", owner="carol"),  # a GPU not in the reading
    ]
    seen = gpu_owners(samples, procs)
    assert seen == {0: ("alice", "bob"), 1: ("?",)}
    tracker = OwnerTracker(fresh_s=300)
    tracker.see(T0, seen)
    tracker.see(T0 + timedelta(seconds=20), {0: ("carol",), 1: ()})
    assert tracker.owners(MINUTE) == {0: ("alice", "bob", "carol"), 1: ("?",)}
    assert tracker.owners(MINUTE + 3) == {0: ("carol",), 1: ()}  # carried forward
    assert tracker.owners(MINUTE + 7) is None  # too old to stand for that minute
    assert tracker.owners(MINUTE - 1) is None


# --- end to end: an SSH node, the poller, history ---


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Rig:
    node: FakeNode
    poller: Poller
    ledger: Ledger
    store: HistoryStore
    clock: Clock
    pids: list[int] = field(default_factory=list)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    sim = SimNode("n0", "A100", 2, Scenario.BUSY, seed=4)
    node = await FakeNode(KEYS, sim=sim, sim_clock=lambda: T0).start()
    ledger = Ledger.open(tmp_path / "l.db")
    record = records.node_record(node.as_node("n0"))
    added = ledger.add_node(records.node_from({**record, "gpu_count": 2}))
    clock = Clock()
    store = HistoryStore(ledger)
    options = node_options(KEYS, tmp_path, [node], command_timeout=5.0)
    poller = Poller([added], pool=SshPool(options), clock=clock, store=store, apps_every=1)
    pids = [pid for r in readings(sim, T0) for pid, _, _ in r.processes]
    yield Rig(node, poller, ledger, store, clock, pids)
    await poller.close()
    await node.stop()
    ledger.close()


async def sweep_at(rig: Rig, at: datetime, ps: str | None) -> None:
    rig.clock.now = at
    rig.node.ps_output = ps
    result = await rig.poller.sweep()
    assert result["n0"].health is NodeHealth.OK, result["n0"]


async def test_owners_travel_from_the_node_into_history(rig: Rig) -> None:
    gpu0, gpu1 = rig.pids
    # Minute 0: GPU 0 alice, GPU 1 bob. Minute 1: both pids now carol's (the pids were
    # reused by another user's job): owners are read every time, never cached by pid.
    await sweep_at(rig, T0, f"{gpu0} 1001 alice\n{gpu1} 1002 bob\n")
    processes = rig.poller.statuses["n0"].processes
    assert [p.owner for p in processes] == ["alice", "bob"]
    await sweep_at(rig, T0 + timedelta(seconds=60), f"{gpu0} 1003 carol\n{gpu1} 1003 carol\n")
    # Minute 2: ps lists neither pid: owners unknown, the busy minutes go to "?".
    await sweep_at(rig, T0 + timedelta(seconds=120), "1 0 root\n")
    rig.clock.now = T0 + timedelta(seconds=180)
    rig.poller.flush()
    rows = rig.store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    n0 = rig.store.node_id("n0")  # rows carry the node's id: a name may be reused
    assert rows == [
        OwnerHour("n0", "?", HOUR, 2.0, n0),
        OwnerHour("n0", "alice", HOUR, 1.0, n0),
        OwnerHour("n0", "bob", HOUR, 1.0, n0),
        OwnerHour("n0", "carol", HOUR, 2.0, n0),
    ]
    # The owners' minutes add up to the hour's busy card-minutes.
    (hour,) = rig.store.hours("n0", T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert sum(r.busy_card_minutes for r in rows) == hour.busy_card_minutes == 6
    # A stored latest reading keeps the owners for the dashboard.
    (latest,) = [r for r in rig.store.latest_by_id().values() if r.node == "n0"]
    assert [p.owner for p in latest.processes] == [None, None]


async def test_the_real_simulated_process_table_attributes_by_default(rig: Rig) -> None:
    await sweep_at(rig, T0, None)
    await sweep_at(rig, T0 + timedelta(seconds=60), None)
    user = gpu_user(rig.node.sim, 0).owner  # type: ignore[arg-type]
    assert [p.owner for p in rig.poller.statuses["n0"].processes] == [user, user]
    rows = rig.store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1), ["n0"])
    assert rows == [OwnerHour("n0", user, HOUR, 2.0, rig.store.node_id("n0"))]
    assert rig.store.busy_by_owner(T0, T0 + timedelta(hours=1), ["other"]) == []
    assert rig.store.busy_by_owner(T0, T0 + timedelta(hours=1), []) == []


async def test_a_hostile_user_name_is_refused_and_said_safely(rig: Rig) -> None:
    gpu0, gpu1 = rig.pids
    await sweep_at(rig, T0, f"{gpu0} 1001 {ESC_TITLE}\n{gpu1} 1002 bob\n")
    status = rig.poller.statuses["n0"]
    assert [p.owner for p in status.processes] == ["?", "bob"]
    assert status.health is NodeHealth.OK
    assert "process owners: user name refused" in status.detail and is_clean(status.detail)
    await sweep_at(rig, T0 + timedelta(seconds=60), f"{gpu0} 1001 alice\n{gpu1} 1002 bob\n")
    assert rig.poller.statuses["n0"].detail == ""  # said while it lasts, not after
    rows = rig.store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert {(r.owner, r.busy_card_minutes) for r in rows} == {("?", 1.0), ("bob", 1.0)}


# --- the local node through NVML ---


class FakeNvml:
    """A FAKE pynvml: the machines these tests run on have no GPU (the real one is tried
    in tests/telemetry/test_nvml.py). Two GPUs; GPU 0 runs three processes."""

    NVMLError = pynvml.NVMLError

    def __init__(self, running: dict[int, list[tuple[int, int | None]]]) -> None:
        self.running = running

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.running.get(handle, [])]

    def nvmlSystemGetProcessName(self, pid: int) -> bytes:
        if pid == 103:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return b"python"


def _free_uid() -> int:
    uid = 4242
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def test_local_processes_and_owners_from_proc(tmp_path: Path) -> None:
    free = _free_uid()
    for pid, uid in ((100, 0), (101, free)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(
            f"Name:\tpython\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t0\t0\t0\t0\n"
        )
    fake = FakeNvml({0: [(100, 2 * 1024**3), (101, None), (103, 1024**2)], 1: []})
    samples = [GpuSample("me", T0, 0, uuid="GPU-a"), GpuSample("me", T0, 1, uuid="GPU-b")]
    with NvmlReader(fake, proc=tmp_path) as reader:
        procs = reader.processes("me", samples)
    assert [(p.pid, p.gpu_uuid, p.process_name, p.used_mib, p.owner) for p in procs] == [
        (100, "GPU-a", "python", 2048.0, "root"),
        (101, "GPU-a", "python", None, f"uid:{free}"),
        (103, "GPU-a", "", 1.0, None),  # gone: no /proc entry, owner unknown
    ]


def test_local_owner_reads_the_real_proc() -> None:
    assert local_owner(os.getpid()) == pwd.getpwuid(os.geteuid()).pw_name
    assert local_owner(2**22 + 12345) is None  # no such pid (above the default pid_max)


# --- storage: schema, rewrites, retention, deletion, a simulated month ---


def _ledger(tmp_path: Path, names: tuple[str, ...] = ("n1",)) -> Ledger:
    ledger = Ledger.open(tmp_path / "l.db")
    for name in names:
        ledger.add_node(records.node_from({"name": name, "ssh_host": "h", "gpu_count": 2}))
    return ledger


def test_schema_has_the_owner_tables(tmp_path: Path) -> None:
    assert len(MIGRATIONS._migrations) == SCHEMA_VERSION
    assert "m007_gpu_owners" in {m.name for m in MIGRATIONS._migrations}
    ledger = _ledger(tmp_path)
    tables = {r[0] for r in ledger.conn.execute("SELECT name FROM sqlite_master")}
    assert {"gpu_owner_minute", "gpu_owner_hour"} <= tables


def _minute(i: int, owners: Any) -> NodeMinute:
    return NodeMinute("n1", MINUTE + i, (gm(0, 90), gm(1, 50)), owners)


def test_rewrites_retention_and_deletion(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    store = HistoryStore(ledger)
    both = ((0, ("alice",)), (1, ("alice", "bob")))
    store.write_minutes([_minute(i, both) for i in range(10)])
    # The same minutes again (a collector restarted): replaced, never counted twice.
    store.write_minutes([_minute(i, both) for i in range(5)])
    # Minute 9 rewritten idle: its attribution goes.
    store.write_minutes([NodeMinute("n1", MINUTE + 9, (gm(0, 0), gm(1, 0)), both)])
    rows = store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert [(r.owner, r.busy_card_minutes) for r in rows] == [("alice", 13.5), ("bob", 4.5)]
    # Retention: owner minutes go with the minute roll-ups; owner hours stay like hours.
    store.purge(T0 + timedelta(days=15), minute_days=14)
    assert ledger.conn.execute("SELECT count(*) FROM gpu_owner_minute").fetchone()[0] == 0
    assert store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1)) == rows
    # Deleting the node deletes its attribution with the rest of its history.
    ledger.delete_node("n1", force=True)
    assert ledger.conn.execute("SELECT count(*) FROM gpu_owner_hour").fetchone()[0] == 0


def test_a_simulated_month_is_attributed_to_several_users(tmp_path: Path) -> None:
    names = tuple(f"s{i}" for i in range(4))
    ledger = _ledger(tmp_path, names)
    store = HistoryStore(ledger)
    end = T0.replace(minute=0, second=0)
    start = end - timedelta(days=30)
    for i, name in enumerate(names):
        backfill(store, SimNode(name, "A100", 2, Scenario.BUSY, seed=i), start, end)
    rows = store.busy_by_owner(start, end)
    owners = {r.owner for r in rows}
    assert {"alice", "bob", "carol", "uid:2000"} <= owners and "?" not in owners
    for name in names:
        hours = store.hours(name, start, end)
        attributed = sum(r.busy_card_minutes for r in rows if r.node == name)
        assert attributed == pytest.approx(sum(h.busy_card_minutes for h in hours))
        assert attributed > 0


def test_backfilled_owner_hours_replace_not_add(tmp_path: Path) -> None:
    store = HistoryStore(_ledger(tmp_path))
    row = OwnerHour("n1", "alice", HOUR, 30.0)
    store.write_owner_hours([row])
    store.write_owner_hours([row, OwnerHour("n1", "bob", HOUR, 10.0)])
    got = store.busy_by_owner(T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    assert [(r.owner, r.busy_card_minutes) for r in got] == [("alice", 30.0), ("bob", 10.0)]


def test_the_fake_node_answers_the_owner_query_with_a_given_ps() -> None:
    node = FakeNode(KEYS, sim=SimNode("x", "A10", 1, seed=1), sim_clock=lambda: T0)
    node.ps_output = "1 0 root\n"
    out, _, status = node.answer(APPS_OWNERS_COMMAND)
    apps = answer(SimNode("x", "A10", 1, seed=1), APPS_COMMAND, T0).stdout
    assert status == 0 and out.startswith(f"{apps}{OWNERS_MARK} 0\n1 0 root\n{PROCS_MARK}\n")
