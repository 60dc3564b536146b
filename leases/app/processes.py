"""The GPU processes across the fleet, and stopping one (`zuka ps`, `zuka kill`, the
dashboard's processes screen `P`).

The list is what the poller last wrote of each node (node_latest): per process its node,
GPU index, user, memory, share of the GPU's utilisation, elapsed time and command line.
Sorting and filtering are pure functions over those rows.

Stopping a process: the person types its pid to confirm (as offboarding has the node's
name typed: the name of what goes), then SIGTERM, up to grace_s for it to end, SIGKILL,
and a last look that it is gone. Before each signal the node reads the pid's boot id,
start ticks and command line again in the same command as the signal, and the signal goes
only when they still match the confirmed row (leases.telemetry.procstop): a reused pid is
refused and nothing is signalled. Each step is audited (entity "process": who, node, pid,
user, command line, what happened); such entries cannot be undone.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from leases.core import spoken
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import GpuProcess, NodeStatus
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.ssh.errors import SshError
from leases.ssh.stream import CommandResult
from leases.telemetry import procstop
from leases.telemetry.procstop import Seen

# The command line as shown (rows keep it whole; each front end cuts to its width).
SHOWN_CMDLINE = 400
# How often the stop looks whether the process ended, and how long it waits after SIGKILL.
POLL_S = 0.5
AFTER_KILL_S = 5.0
MAX_GRACE_S = 600.0
NOT_VISIBLE = N_(
    "the login cannot see this pid (a container's host PID): stop it from inside the container"
)


@dataclass(frozen=True)
class ProcessRow:
    """One GPU process as the fleet's list shows it."""

    node: str
    gpu: int | None  # the GPU's index (None: nvidia-smi named a GPU the reading lacks)
    pid: int
    user: str  # "uid:N" for a user without a name, "?" unknown
    used_mib: float | None
    share_pct: float | None
    elapsed_s: int | None
    command: str  # made safe to show, bounded
    visible: bool
    process: GpuProcess  # as read: what a stop is checked against


def elapsed_words(seconds: int | None) -> str:
    """ "3d04h", "2h05m", "4m07s" / "3天04时", "2时05分", "4分07秒"; "?" when unknown:
    short enough for a narrow column (leases.core.spoken.elapsed)."""
    return spoken.elapsed(seconds)


def row_json(row: ProcessRow) -> dict[str, object]:
    """A row for `zuka ps --json`: exact values (JSON escapes controls itself)."""
    p = row.process
    return {
        "node": row.node,
        "gpu": row.gpu,
        "pid": row.pid,
        "user": row.user,
        "memory_mib": row.used_mib,
        "gpu_share_pct": None if row.share_pct is None else round(row.share_pct, 1),
        "elapsed_s": row.elapsed_s,
        "command": p.cmdline if p.cmdline is not None else p.process_name,
        "start": p.start,
        "visible": row.visible,
    }


def gpu_share(util: float | None, used: float | None, on_gpu: Sequence[GpuProcess]) -> float | None:
    """The GPU's utilisation attributed to one of its processes, in percent.

    nvidia-smi gives utilisation per GPU, not per process: the GPU's utilisation is split
    between its processes by their share of the memory they hold (a process alone on its
    GPU gets all of it). An estimate, shown as such; None when the GPU's utilisation or
    the memory is unknown.
    """
    if util is None:
        return None
    if len(on_gpu) == 1:
        return util
    mems = [p.used_mib for p in on_gpu]
    if used is None or any(m is None for m in mems):
        return None
    total = sum(m for m in mems if m is not None)
    return util * used / total if total > 0 else util / len(on_gpu)


def rows_of(statuses: Iterable[NodeStatus]) -> list[ProcessRow]:
    """Every GPU process of these statuses, by node then GPU then pid."""
    out: list[ProcessRow] = []
    for status in statuses:
        by_uuid = {s.uuid: s for s in status.samples if s.uuid}
        for p in status.processes:
            sample = by_uuid.get(p.gpu_uuid)
            on_gpu = [q for q in status.processes if q.gpu_uuid == p.gpu_uuid]
            util = sample.util_gpu if sample is not None else None
            command = p.cmdline.strip() if p.cmdline else p.process_name
            out.append(
                ProcessRow(
                    node=status.node,
                    gpu=sample.index if sample is not None else None,
                    pid=p.pid,
                    user=p.owner or "?",
                    used_mib=p.used_mib,
                    share_pct=gpu_share(util, p.used_mib, on_gpu),
                    elapsed_s=p.elapsed_s,
                    command=visible(command, SHOWN_CMDLINE),
                    visible=p.visible,
                    process=p,
                )
            )
    out.sort(key=lambda r: (r.node, -1 if r.gpu is None else r.gpu, r.pid))
    return out


def read_rows(ledger: Ledger) -> list[ProcessRow]:
    """The fleet's GPU processes as the poller last wrote them."""
    return rows_of(read_statuses(ledger))


def read_statuses(ledger: Ledger) -> list[NodeStatus]:
    """Each node's latest status as the poller last wrote it (node_latest)."""
    from leases.telemetry.rollups import HistoryStore

    return list(HistoryStore(ledger).latest_by_id().values())


def age_words(seconds: float) -> str:
    """How old a reading is: "40 s", "12 min", "3 h", "2 days"."""
    s = max(int(seconds), 0)
    if s < 120:
        return _("{n} s").format(n=s)
    if s < 2 * 3600:
        return _("{n} min").format(n=s // 60)
    if s < 2 * 86400:
        return _("{n} h").format(n=s // 3600)
    return _("{n} days").format(n=s // 86400)


STALE_S = 60  # a node read this much before the newest is named on its own
_NAMED = 3


def readings_age(statuses: Iterable[NodeStatus], now: datetime) -> str:
    """How old the readings the list comes from are, from each node's last good reading
    (NodeStatus.at): "read 40 s ago", and the nodes read well before the others named
    ("read 5 s ago; older: sim-003 12 min ago"), since a list read long ago may show a
    process that has ended. "" when no node was ever read."""
    ages: list[tuple[float, str]] = []
    never: list[str] = []
    for st in statuses:
        if st.at is None:
            never.append(visible(st.node, 30))
        else:
            ages.append(((now - st.at).total_seconds(), visible(st.node, 30)))
    ages.sort()
    unread = _("never read: {nodes}").format(nodes=", ".join(never[:_NAMED])) if never else ""
    if not ages:
        return unread
    newest = ages[0][0]
    words = _("read {age} ago").format(age=age_words(newest))
    older = [(age, node) for age, node in reversed(ages) if age - newest >= STALE_S]
    if older:
        named = ", ".join(
            _("{node} {age} ago").format(node=node, age=age_words(age))
            for age, node in older[:_NAMED]
        )
        if len(older) > _NAMED:
            named = _("{nodes} and {n} more").format(nodes=named, n=len(older) - _NAMED)
        words = _("{said}; older: {nodes}").format(said=words, nodes=named)
    return _("{said}; {never}").format(said=words, never=unread) if unread else words


SORT_KEYS: dict[str, Callable[[ProcessRow], tuple[object, ...]]] = {
    "node": lambda r: (r.node, r.gpu if r.gpu is not None else -1, r.pid),
    "user": lambda r: (r.user, r.node, r.pid),
    "memory": lambda r: (-(r.used_mib or 0.0), r.node, r.pid),
    "share": lambda r: (-(r.share_pct or 0.0), r.node, r.pid),
    "elapsed": lambda r: (-(r.elapsed_s or 0), r.node, r.pid),
    "command": lambda r: (r.command, r.node, r.pid),
}


def sort_rows(rows: Iterable[ProcessRow], by: str) -> list[ProcessRow]:
    """Rows sorted by one of SORT_KEYS (memory, share and elapsed: largest first)."""
    key = SORT_KEYS.get(by)
    if key is None:
        raise InputError("sort", by, _("one of {choices}").format(choices=", ".join(SORT_KEYS)))
    return sorted(rows, key=key)


def filter_rows(rows: Iterable[ProcessRow], query: str) -> list[ProcessRow]:
    """Rows matching every word of query, case-insensitive: `user:U` and `node:N` (a
    prefix), `cmd:TEXT` (anywhere in the command line), or free text found in the node,
    user, command or pid."""
    words = query.split()
    out = []
    for row in rows:
        if all(_matches(row, w) for w in words):
            out.append(row)
    return out


def _matches(row: ProcessRow, word: str) -> bool:
    key, sep, value = word.partition(":")
    low = value.lower()
    if sep and key == "user":
        return row.user.lower().startswith(low)
    if sep and key == "node":
        return row.node.lower().startswith(low)
    if sep and key in ("cmd", "command"):
        return low in row.command.lower()
    text = word.lower()
    return any(text in f.lower() for f in (row.node, row.user, row.command, str(row.pid)))


# -- stopping a process ---------------------------------------------------------------------


class Runner(Protocol):
    """What the stop needs of a node: leases.ssh.session.NodeSession, or a local shell."""

    async def run(self, cmd: str, timeout: float | None = None) -> CommandResult: ...


class Outcome(enum.Enum):
    """How a stop ended; its value is English (the audit's words) and marked: a front end
    shows _(value)."""

    STOPPED = N_("stopped after SIGTERM")
    KILLED = N_("killed after SIGKILL")
    ALREADY_GONE = N_("already gone: nothing signalled")
    REUSED = N_("refused: the pid is another process now (reused): nothing signalled")
    NOT_VISIBLE = N_(
        "refused: the login cannot see this pid (a container's host PID): stop it from inside"
        " the container"
    )
    DENIED = N_("refused by the node: permission denied (another user's process)")
    STILL_RUNNING = N_("still running after SIGKILL")
    FAILED = N_("failed")


@dataclass(frozen=True)
class Stopped:
    outcome: Outcome
    steps: tuple[str, ...]  # what was done, in order, as audited

    @property
    def ok(self) -> bool:
        return self.outcome in (Outcome.STOPPED, Outcome.KILLED, Outcome.ALREADY_GONE)

    @property
    def words(self) -> str:
        return self.steps[-1] if self.steps else self.outcome.value


def check_confirmation(pid: int, typed: str | None) -> None:
    """The pid typed, as offboarding has the node's name typed."""
    if (typed or "").strip() != str(pid):
        raise InputError(
            "confirm", typed, _("type the process's pid, {pid}, to confirm").format(pid=pid)
        )


def check_grace(grace_s: float) -> float:
    if not 0 <= grace_s <= MAX_GRACE_S:
        raise InputError(
            "grace", grace_s, _("seconds from 0 to {most}").format(most=f"{MAX_GRACE_S:g}")
        )
    return grace_s


@dataclass
class _Stop:
    ledger: Ledger
    node: str
    pid: int
    user: str | None
    start: str
    cmdline: str
    runner: Runner
    steps: list[str]
    node_id: int | None = None

    def audit(self, step: str, outcome: str) -> None:
        after = {
            "node": self.node,
            # The node's row id: `zuka log NODE` and the node screen's Audit tab find
            # process stops by it (leases.ledger.nodelog), across renames.
            "node_id": self.node_id,
            "pid": self.pid,
            "user": self.user,
            "cmdline": self.cmdline,
            "start": self.start,
            "step": step,
            "outcome": outcome,
        }
        with self.ledger.transaction() as conn:
            self.ledger.audit(conn, f"process.{step}", "process", None, self.node, None, after)
        self.steps.append(f"{step}: {outcome}")

    async def send(self, signal: str | None) -> procstop.Answer:
        cmd = procstop.stop_command(self.pid, self.start, self.cmdline, signal)
        try:
            result = await self.runner.run(cmd)
        except (SshError, OSError) as exc:  # the node unreachable: audited, not a crash
            return procstop.Answer(Seen.FAILED, visible(str(exc), 200))
        return procstop.parse_answer(result.stdout)

    def done(self, outcome: Outcome) -> Stopped:
        return Stopped(outcome, tuple(self.steps))


async def stop_process(
    node: str,
    pid: int,
    expected_start: str | None,
    expected_cmdline: str | None,
    confirmation: str | None,
    grace_s: float,
    runner: Runner,
    clock: Callable[[], float],
    ledger: Ledger,
    *,
    user: str | None = None,
    visible_to_login: bool = True,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Stopped:
    """SIGTERM, up to grace_s, SIGKILL, each only while the pid is still the confirmed
    process (started at expected_start, running expected_cmdline). clock: monotonic
    seconds; sleep: how to wait (both injected for tests). Raises InputError for a wrong
    confirmation or values zuka did not read; every step after that is audited."""
    node_id = ledger.node(node).id  # UnknownNode (an InputError) when it is not in the ledger
    procstop.check_pid(pid)
    check_confirmation(pid, confirmation)
    grace_s = check_grace(grace_s)
    if not visible_to_login:
        hidden = _Stop(ledger, node, pid, user, expected_start or "", expected_cmdline or "",
                       runner, [], node_id)  # fmt: skip
        hidden.audit("refused", NOT_VISIBLE)
        return hidden.done(Outcome.NOT_VISIBLE)
    if expected_start is None or expected_cmdline is None:
        raise InputError(
            "pid",
            pid,
            _("its start time and command line are unknown: wait for the next reading"),
        )
    if procstop.split_start(expected_start)[2] is None:  # no cksum: the text is compared
        procstop.check_cmdline(expected_cmdline)
    stop = _Stop(ledger, node, pid, user, expected_start, expected_cmdline, runner, [], node_id)
    try:
        return await _signals(stop, grace_s, clock, sleep)
    except BaseException as exc:  # cancelled or crashed half way: what happened is audited
        why = "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
        stop.audit("failed", f"interrupted ({why}) after: {'; '.join(stop.steps) or 'nothing'}")
        raise


async def _signals(
    stop: _Stop,
    grace_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
) -> Stopped:
    first = await stop.send("TERM")
    early = _settled(stop, first, "term")
    if early is not None:
        return early
    deadline = clock() + grace_s
    while clock() < deadline:
        await sleep(min(POLL_S, max(deadline - clock(), 0.0)))
        seen = await stop.send(None)
        if seen.seen in (Seen.GONE, Seen.CHANGED):
            stop.audit("gone", "ended after SIGTERM")
            return stop.done(Outcome.STOPPED)
    second = await stop.send("KILL")
    if second.seen in (Seen.GONE, Seen.CHANGED):
        stop.audit("gone", "ended after SIGTERM, before SIGKILL")
        return stop.done(Outcome.STOPPED)
    late = _settled(stop, second, "kill")
    if late is not None:
        return late
    deadline = clock() + AFTER_KILL_S
    while True:
        seen = await stop.send(None)
        if seen.seen in (Seen.GONE, Seen.CHANGED):
            stop.audit("gone", "ended after SIGKILL")
            return stop.done(Outcome.KILLED)
        if clock() >= deadline:
            stop.audit("failed", "still running after SIGKILL")
            return stop.done(Outcome.STILL_RUNNING)
        await sleep(POLL_S)


def _settled(stop: _Stop, answer: procstop.Answer, step: str) -> Stopped | None:
    """The outcome when a signal was not sent; None when it was (audited either way)."""
    signal = "SIGTERM" if step == "term" else "SIGKILL"
    if answer.seen is Seen.SENT:
        stop.audit(step, f"{signal} sent")
        return None
    if answer.seen is Seen.GONE:
        stop.audit(step, "already gone: nothing signalled")
        return stop.done(Outcome.ALREADY_GONE)
    if answer.seen is Seen.CHANGED:
        stop.audit("refused", "the pid is another process now (its start time differs):"
                   " nothing signalled")  # fmt: skip
        return stop.done(Outcome.REUSED)
    if answer.seen is Seen.DENIED:
        stop.audit("refused", f"permission denied: {answer.said}")
        return stop.done(Outcome.DENIED)
    stop.audit("failed", f"{signal} not sent: {answer.said or answer.seen.value}")
    return stop.done(Outcome.FAILED)


def runner_for(ledger: Ledger, node: str) -> Runner:
    """How to reach a node for a stop: a local shell for a local node, else an SSH session
    through the same trust store and jump hosts as the poller (close it after)."""
    found = ledger.node(node)
    if found.local:
        from leases.accept.localrun import LocalRunner

        return LocalRunner()
    if ledger.path is None:
        raise InputError("ledger", None, _("stopping a process on a node needs a ledger file"))
    from leases.ssh.session import NodeSession
    from leases.telemetry.wiring import ssh_options

    return NodeSession(found, ssh_options(ledger.path))


def find_row(rows: Iterable[ProcessRow], node: str, pid: int) -> ProcessRow:
    for row in rows:
        if row.node == node and row.pid == pid:
            return row
    raise InputError(
        "pid",
        pid,
        _("no GPU process {pid} on {node} in the last reading: zuka ps").format(pid=pid, node=node),
    )


__all__ = [
    "NOT_VISIBLE",
    "SORT_KEYS",
    "Outcome",
    "ProcessRow",
    "Runner",
    "Stopped",
    "check_confirmation",
    "elapsed_words",
    "filter_rows",
    "find_row",
    "gpu_share",
    "read_rows",
    "row_json",
    "rows_of",
    "runner_for",
    "sort_rows",
    "stop_process",
]
