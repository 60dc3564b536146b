"""The GPU processes' start, command line and visibility read in the owner round trip
(hostile output included), and stopping one (leases.app.processes) with the simulated node
as the runner: confirmation, reuse, a process that traps SIGTERM, permission denied."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.app import processes
from leases.app.processes import Outcome, stop_process
from leases.core.errors import InputError
from leases.core.models import GpuProcess, NodeStatus
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.sim.commands import answer
from leases.sim.gpu import SimNode, readings
from leases.sim.procs import gpu_processes
from leases.ssh.stream import CommandResult
from leases.telemetry.cksum import cksum_word
from leases.telemetry.owners import APPS_OWNERS_COMMAND, OWNERS_MARK, parse_apps_owners
from leases.telemetry.procinfo import PROCS_MARK, parse_procs
from leases.telemetry.procstop import check_pid, stop_command

NOW = datetime(2026, 12, 2, 13, 30, tzinfo=UTC)
BOOT = "096f545b-8e67-4809-af91-f2a8e5a8b94f"


def _out(procs: str) -> str:
    return (
        "GPU-a, 4242, 500\nGPU-a, 77, 100\nGPU-b, 3145000, 900\n"
        f"{OWNERS_MARK} 0\n   4242  1001 alice\n     77     0 root\n{PROCS_MARK}\n{procs}"
    )


def test_start_cmdline_and_visibility_read() -> None:
    text = _out(f"boot {BOOT}\nup 5000.12\nhz 100\n@p 4242 300000 python train.py --lr 3e-4 \n")
    procs = {p.pid: p for p in parse_apps_owners(text, "n1").processes or ()}
    assert procs[4242].start == f"{BOOT}:300000"
    assert procs[4242].elapsed_s == 2000
    assert procs[4242].cmdline == "python train.py --lr 3e-4 "
    assert procs[4242].owner == "alice" and procs[4242].visible
    assert procs[4242].process_name == "python"  # from /proc, never from nvidia-smi
    # Listed by ps but not in this /proc: another pid namespace's pid that a process here
    # happens to share: not visible, no owner, nothing to check a stop against.
    assert not procs[77].visible and procs[77].start is None and procs[77].owner is None
    # Not in this /proc (another pid namespace): not visible.
    assert not procs[3145000].visible


def test_hostile_proc_section() -> None:
    hostile = (
        "boot not-a-uuid\n@p 77 1 before the boot line is known\n"
        f"boot {BOOT}\nup 12x\nhz 0\n"
        "@p 4242 ١٢٣ arabic digits\n@p -5 10 negative\n@p 99999999999 1 long\n"
        "@p 4242 123 \x1b]0;owned\x07" + "A" * 5000 + "\n"
    )
    section = parse_procs(hostile)
    assert set(section.by_pid) == {4242}
    assert section.present == {77, 4242}
    info = section.by_pid[4242]
    assert info.start == f"{BOOT}:123" and info.elapsed_s is None
    assert len(info.cmdline) == 2048  # bounded
    # Shown safely: the escape is a visible stand-in, never obeyed.
    row = processes.rows_of([NodeStatus("n1", processes=(GpuProcess("n1", "GPU-a", 4242,
                            "python", 1.0, "alice", info.start, None, info.cmdline),))])[0]  # fmt: skip
    assert "\x1b" not in row.command and "\x07" not in row.command


def test_output_without_proc_section_knows_no_pid_to_run_here() -> None:
    # A node that printed no /proc section (a wrapper, an output cut short): whether the
    # pid is this namespace's is unknown, so is its owner; the process itself still reads.
    text = f"GPU-a, 4242, 500\n{OWNERS_MARK} 0\n   4242  1001 alice\n"
    (p,) = parse_apps_owners(text, "n1").processes or ()
    assert (p.pid, p.used_mib, p.owner, p.visible, p.start) == (4242, 500.0, None, False, None)


def test_present_pids_without_a_start() -> None:
    """A pid whose stat did not read ("@e") or read before any boot id: present (it runs
    here, its owner is kept) with no start; a malformed line adds nothing."""
    section = parse_procs("@p 10 5 before boot \n@e 11\n@e 1x\n@e \n@e 12 13\n")
    assert section.present == {10, 11} and section.by_pid == {}
    text = (
        f"GPU-a, 11, 500\nGPU-a, 12, 1\n{OWNERS_MARK} 0\n 11 1001 alice\n 12 1002 bob\n"
        f"{PROCS_MARK}\nboot {BOOT}\n@e 11\n"
    )
    procs = parse_apps_owners(text, "n1").processes or ()
    assert [(p.pid, p.owner, p.visible, p.start) for p in procs] == [
        (11, "alice", True, None),
        (12, None, False, None),
    ]


def test_stop_snippet_refuses_bad_values() -> None:
    for pid in (1, 0, -1, -4242, 1 << 23):
        with pytest.raises(InputError):
            check_pid(pid)
    with pytest.raises(InputError):
        stop_command(4242, "x:1", "python", "TERM")
    with pytest.raises(InputError):
        stop_command(4242, f"{BOOT}:1", "python\nrm -rf /", "TERM")
    with pytest.raises(InputError):
        stop_command(4242, f"{BOOT}:1", "python", "HUP")
    cmd = stop_command(4242, f"{BOOT}:1", "python '$(reboot)'; x", "TERM")
    assert "reboot" not in cmd  # the command line is never part of the snippet


class SimRunner:
    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.commands: list[str] = []

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(cmd)
        out, err, status = answer(self.node, cmd, NOW)
        return CommandResult(status, out, err)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += max(s, 0.01)


def _setup(tmp_path: Path, seed: int) -> tuple[Ledger, SimNode, list[GpuProcess]]:
    ledger = Ledger.open(tmp_path / "l.db")
    node = SimNode(f"sim-{seed}", "A800", count=2, seed=seed)
    ledger.add_node(records.node_from({"name": node.name, "ssh_host": "10.0.0.1"}))
    out = answer(node, APPS_OWNERS_COMMAND, NOW).stdout
    return ledger, node, list(parse_apps_owners(out, node.name).processes or ())


async def _stop(
    ledger: Ledger, node: SimNode, p: GpuProcess, typed: str | None = None
) -> tuple[processes.Stopped, SimRunner]:
    runner, clock = SimRunner(node), Clock()
    stopped = await stop_process(
        node.name, p.pid, p.start, p.cmdline, str(p.pid) if typed is None else typed,
        3.0, runner, clock, ledger, user=p.owner, sleep=clock.sleep,
    )  # fmt: skip
    return stopped, runner


def _audit(ledger: Ledger) -> list[str]:
    return [f"{e.action} {e.after['outcome']}" for e in ledger.history() if e.entity == "process"]


async def test_stop_term_audited_and_gone(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 0)  # alice's
    stopped, _ = await _stop(ledger, node, procs[0])
    assert stopped.outcome is Outcome.STOPPED
    assert _audit(ledger) == ["process.term SIGTERM sent", "process.gone ended after SIGTERM"]
    after = parse_apps_owners(answer(node, APPS_OWNERS_COMMAND, NOW).stdout, node.name)
    assert procs[0].pid not in {p.pid for p in after.processes or ()}
    entry = ledger.history()[-1]
    assert entry.after is not None and entry.after["cmdline"] == procs[0].cmdline
    assert entry.after["user"] == "alice" and entry.actor


async def test_wrong_confirmation_refused_nothing_sent(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 0)
    for typed in ("", "sim-0", str(procs[0].pid + 1), " "):
        with pytest.raises(InputError, match="type the process's pid"):
            await _stop(ledger, node, procs[0], typed)
    assert not node.killed and _audit(ledger) == []


async def test_term_trapped_then_killed(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 1)  # bob traps SIGTERM
    bob = next(p for p in procs if p.owner == "bob")
    stopped, runner = await _stop(ledger, node, bob)
    assert stopped.outcome is Outcome.KILLED
    assert _audit(ledger)[0] == "process.term SIGTERM sent"
    assert "process.kill SIGKILL sent" in _audit(ledger)
    assert any("kill -s KILL" in c for c in runner.commands)


async def test_permission_denied(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 2)  # carol's: EPERM
    stopped, _ = await _stop(ledger, node, procs[0])
    assert stopped.outcome is Outcome.DENIED and not stopped.ok
    assert _audit(ledger)[0].startswith("process.refused permission denied")


async def test_reused_pid_refused(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 0)
    # Another start: the pid is another process now.
    boot, ticks, ck = procs[0].start.split(":")  # type: ignore[union-attr]
    other = GpuProcess(**{**procs[0].__dict__, "start": f"{boot}:{int(ticks) + 1}:{ck}"})
    stopped, runner = await _stop(ledger, node, other)
    assert stopped.outcome is Outcome.REUSED and not node.killed
    assert len(runner.commands) == 1
    assert _audit(ledger)[0].startswith("process.refused the pid is another process")


async def test_a_process_that_retitled_itself_is_still_itself(tmp_path: Path) -> None:
    """Its command line changed since the reading (setproctitle, a Ray worker naming its
    task): the same start, the same process; it is stopped, never refused as reused."""
    ledger, node, procs = _setup(tmp_path, 0)
    boot, ticks, _ = procs[0].start.split(":")  # type: ignore[union-attr]
    retitled = GpuProcess(
        **{
            **procs[0].__dict__,
            "cmdline": "ray::train_step ",
            "start": f"{boot}:{ticks}:{cksum_word(b'ray::train_step')}",
        }
    )
    stopped, _ = await _stop(ledger, node, retitled)
    assert stopped.outcome is Outcome.STOPPED and procs[0].pid in node.killed


async def test_not_visible_refused_without_a_command(tmp_path: Path) -> None:
    ledger, node, procs = _setup(tmp_path, 0)
    runner, clock = SimRunner(node), Clock()
    p = procs[0]
    # Refused as not visible even where nothing else is known of it (no start read).
    stopped = await stop_process(node.name, p.pid, None, None, str(p.pid), 1.0, runner,
                                 clock, ledger, visible_to_login=False)  # fmt: skip
    assert stopped.outcome is Outcome.NOT_VISIBLE and runner.commands == []
    assert "inside the container" in stopped.words


def test_share_filter_sort() -> None:
    from leases.core.models import GpuSample

    s = NodeStatus(
        "n1",
        samples=(GpuSample("n1", NOW, 0, uuid="GPU-a", util_gpu=90.0),),
        processes=(
            GpuProcess("n1", "GPU-a", 10, "python", 300.0, "alice", cmdline="python a.py "),
            GpuProcess("n1", "GPU-a", 11, "python", 600.0, "bob", cmdline="torchrun b.py "),
        ),
    )
    rows = processes.rows_of([s])
    assert [round(r.share_pct or 0) for r in rows] == [30, 60]
    assert [r.pid for r in processes.filter_rows(rows, "user:bo")] == [11]
    assert [r.pid for r in processes.filter_rows(rows, "cmd:A.PY")] == [10]
    assert [r.pid for r in processes.sort_rows(rows, "memory")] == [11, 10]
    with pytest.raises(InputError):
        processes.sort_rows(rows, "nope")


def test_persisted_with_the_new_fields_and_old_rows_still_load(tmp_path: Path) -> None:
    from leases.telemetry.rollups import HistoryStore

    ledger, node, procs = _setup(tmp_path, 0)
    store = HistoryStore(ledger)
    store.write_latest([NodeStatus(node.name, checked=NOW, at=NOW, processes=tuple(procs))])
    (status,) = store.latest_by_id().values()
    assert list(status.processes) == procs and procs[0].cmdline and procs[0].start
    # A row written before these fields existed.
    old = '[{"gpu_uuid": "GPU-a", "pid": 7, "process_name": "python", "used_mib": 1.0,' \
          ' "owner": "alice"}]'  # fmt: skip
    with ledger.transaction() as conn:
        conn.execute("UPDATE node_latest SET processes = ?", [old])
    (status,) = store.latest_by_id().values()
    (p,) = status.processes
    assert p.owner == "alice" and p.start is None and p.cmdline is None and p.visible


async def test_local_process_read_and_stopped_as_a_node_would(tmp_path: Path) -> None:
    """A local node: /proc read in Python gives the very token and command line the
    shell snippet checks, so the stop goes through a local shell (and a real SIGTERM)."""
    import asyncio
    import time

    from leases.accept.localrun import LocalRunner
    from leases.telemetry.procinfo import local_info

    child = await asyncio.create_subprocess_exec("sleep", "299")
    try:
        info = local_info(child.pid)
        assert info is not None and info.cmdline == "sleep 299 "
        ledger = Ledger.open(tmp_path / "l.db")
        ledger.add_node(records.node_from({"name": "local", "ssh_host": "10.0.0.1"}))
        stopped = await stop_process("local", child.pid, info.start, info.cmdline,
                                     str(child.pid), 5.0, LocalRunner(), time.monotonic,
                                     ledger)  # fmt: skip
        assert stopped.outcome is Outcome.STOPPED
        assert await asyncio.wait_for(child.wait(), 5) == -15
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


def test_sim_proc_files_and_kill_by_hand() -> None:
    """The simulated node's /proc agrees with what the owner query said, and a `kill`
    typed by hand ends the process (the GPU's memory and utilisation drop)."""
    node = SimNode("sim-h", "A800", count=2, seed=0)
    (p, _) = parse_apps_owners(answer(node, APPS_OWNERS_COMMAND, NOW).stdout, node.name).processes
    assert p.start is not None and p.cmdline is not None
    stat = answer(node, f"cat /proc/{p.pid}/stat", NOW).stdout
    assert stat.rpartition(")")[2].split()[19] == p.start.split(":")[1]
    cmdline = answer(node, f"cat /proc/{p.pid}/cmdline", NOW).stdout
    assert cmdline.replace("\0", " ") == p.cmdline
    assert answer(node, "cat /proc/sys/kernel/random/boot_id", NOW).stdout.strip() == p.start[:36]
    gpu = next(r for r in readings(node, NOW) if any(q[0] == p.pid for q in r.processes))
    assert answer(node, f"kill -TERM {p.pid}", NOW).exit_status == 0
    after = next(r for r in readings(node, NOW) if r.gpu.index == gpu.gpu.index)
    assert after.processes == () and after.util_gpu == 0 and after.mem_used_mib < gpu.mem_used_mib
    assert "No such process" in answer(node, f"kill -9 {p.pid}", NOW).stderr


def test_stat_fallback_with_the_proc_section() -> None:
    """Where ps is missing, stat names the owners; the /proc part reads on as before."""
    text = (
        "GPU-a, 4242, 500\n"
        f"{OWNERS_MARK} 0\n/proc/1 0 root\n/proc/4242 2000 UNKNOWN\n{PROCS_MARK}\n"
        f"boot {BOOT}\nup 100\nhz 100\n@p 4242 5000 python3 /workspace/main.py \n"
    )
    (p,) = parse_apps_owners(text, "n1").processes or ()
    assert p.owner == "uid:2000" and p.elapsed_s == 50 and p.visible
    assert p.cmdline == "python3 /workspace/main.py "


def test_sim_ps_new_columns() -> None:
    node = SimNode("sim-p", "A800", count=2, seed=1)
    out = answer(node, "ps -eo pid=,user:32=,etimes=,args=", NOW).stdout
    assert "bob" in out and "torchrun --nproc_per_node=8" in out and "/sbin/init" in out
    assert answer(node, "ps -eo pid=,lstart=", NOW).exit_status == 1  # not simulated: said


def test_sim_ps_of_listed_pids_as_procps_answers() -> None:
    node = SimNode("sim-p", "A800", count=2, seed=1)
    pid = gpu_processes(node, NOW)[0].pid
    listed = answer(node, f"ps -o pid=,user:32= -p {pid},1", NOW)
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["1", str(pid)]
    assert answer(node, "ps -o pid= -p 99999", NOW)[1:] == ("", 1)  # none of them: exit 1
    assert "improper list" in answer(node, "ps -o pid= -p 1,", NOW).stderr
    # The owner query lists the GPU processes' pids and the shell's, no other process.
    out = answer(node, APPS_OWNERS_COMMAND, NOW).stdout
    ps = out.split(f"{OWNERS_MARK} 0\n")[1].split(PROCS_MARK)[0]
    assert "/sbin/init" not in ps and " 412 " not in f" {ps} "
    assert {int(line.split()[0]) for line in ps.splitlines()} == {
        *(p.pid for p in gpu_processes(node, NOW)),
        1290,
    }


async def test_an_unreachable_node_is_a_failed_stop_audited(tmp_path: Path) -> None:
    from leases.core.models import NodeHealth
    from leases.ssh.errors import SshError

    class Down:
        async def run(self, cmd: str, timeout: float | None = None) -> CommandResult:
            raise SshError("sim-0", NodeHealth.UNREACHABLE, "connection refused")

    ledger, _, procs = _setup(tmp_path, 0)
    p = procs[0]
    stopped = await stop_process("sim-0", p.pid, p.start, p.cmdline, str(p.pid), 1.0, Down(),
                                 Clock(), ledger)  # fmt: skip
    assert stopped.outcome is Outcome.FAILED and not stopped.ok
    assert _audit(ledger) == ["process.failed SIGTERM not sent: sim-0: connection refused"]


async def test_a_cancelled_stop_audits_what_it_did(tmp_path: Path) -> None:
    """Cancelled during the grace period (after SIGTERM): the audit says so, naming the
    steps done, and the entries carry the node's row id (found by `zuka log NODE`)."""
    import asyncio

    ledger, node, procs = _setup(tmp_path, 1)  # bob traps SIGTERM
    bob = next(p for p in procs if p.owner == "bob")
    runner, clock = SimRunner(node), Clock()
    waiting = asyncio.Event()

    async def sleep(s: float) -> None:
        waiting.set()
        await asyncio.Event().wait()  # never: cancelled here

    task = asyncio.create_task(
        stop_process(
            node.name,
            bob.pid,
            bob.start,
            bob.cmdline,
            str(bob.pid),
            3.0,
            runner,
            clock,
            ledger,
            user=bob.owner,
            sleep=sleep,
        )
    )
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    audit = _audit(ledger)
    assert audit[0] == "process.term SIGTERM sent"
    assert audit[1].startswith("process.failed interrupted (cancelled) after: term: SIGTERM sent")
    node_id = ledger.node(node.name).id
    assert all(e.after and e.after["node_id"] == node_id for e in ledger.history(node.name)
               if e.entity == "process")  # fmt: skip
    assert [e.action for e in ledger.history(node.name) if e.entity == "process"] == [
        "process.term",
        "process.failed",
    ]
