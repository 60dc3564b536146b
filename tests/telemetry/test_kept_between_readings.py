"""What the poller keeps of a node between readings, and that keeping it changes no answer:
the memo of its nvidia-smi output (leases.telemetry.rowmemo: whatever outputs a node sends, parsing
with it gives exactly what parsing afresh gives, and a refused output is refused again),
its processes made whole with their owners, and its owner readings (OwnerTracker: only
those no minute can still ask for are dropped)."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ledger.store import Ledger
from leases.ssh.stream import CommandResult
from leases.telemetry import nvsmi
from leases.telemetry.attribution import OwnerTracker
from leases.telemetry.history import RecentHistory
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.rowmemo import RowMemo

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
FIELDS = ("index", "uuid", "utilization.gpu", "memory.used", "power.draw", "driver_version")
ROWS = [
    "0, GPU-a, 87, 40000, 301.25, 550.54.15",
    "0, GPU-a, 88, 40000, 300.5, 550.54.15",
    "1, GPU-b, 0, 3, 61.0, 550.54.15",
    "1, GPU-b, [N/A], 3, [N/A], 550.54.15",
    "1, GPU-a, 0, 3, 61.0, 550.54.15",  # the same uuid as GPU 0: refused beside it
    "0, GPU-c, 12, x, 61.0, 550.54.15",  # text where a number belongs: refused
]
OUTPUTS = st.lists(st.sampled_from(ROWS), min_size=0, max_size=3).map(
    lambda rows: "".join(f"{r}\n" for r in rows)
)


def parsed(text: str, node: str, at: datetime, memo: RowMemo | None) -> object:
    try:
        return nvsmi.parse_query(text, FIELDS, node, at, memo)
    except nvsmi.NvsmiParseError as exc:
        return ("refused", str(exc))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(OUTPUTS, st.sampled_from(["n1", "n2"])), min_size=1, max_size=12))
def test_with_the_memo_every_reading_is_what_a_fresh_parse_gives(
    readings: list[tuple[str, str]],
) -> None:
    memo = RowMemo()
    for step, (text, node) in enumerate(readings):
        at = T0 + timedelta(seconds=5 * step)
        assert parsed(text, node, at, memo) == parsed(text, node, at, None)


def test_the_same_output_again_takes_the_new_time_in_samples_of_its_own() -> None:
    memo = RowMemo()
    text = f"{ROWS[0]}\n{ROWS[2]}\n"
    first = nvsmi.parse_query(text, FIELDS, "n1", T0, memo)
    later = T0 + timedelta(seconds=5)
    again = nvsmi.parse_query(text, FIELDS, "n1", later, memo)
    assert [s.at for s in again] == [later, later]
    assert [s.at for s in first] == [T0, T0]  # the first reading is not changed
    assert [(s.index, s.util_gpu, s.power_w) for s in again] == [(0, 87.0, 301.25), (1, 0.0, 61.0)]
    again[0].extra["driver_version"] = "changed by a reader"
    third = nvsmi.parse_query(text, FIELDS, "n1", later, memo)
    assert first[0].extra["driver_version"] == third[0].extra["driver_version"] == "550.54.15"


def test_the_same_output_under_another_field_list_is_parsed_again() -> None:
    memo = RowMemo()
    nvsmi.parse_query("0, 5\n", ("index", "utilization.gpu"), "n1", T0, memo)
    (other,) = nvsmi.parse_query("0, 5\n", ("utilization.gpu", "index"), "n1", T0, memo)
    assert (other.index, other.util_gpu) == (5, 0.0)


def test_a_refused_output_is_refused_every_time() -> None:
    memo = RowMemo()
    bad = f"{ROWS[0]}\n{ROWS[4]}\n"  # one uuid twice
    for _ in range(2):
        with pytest.raises(nvsmi.NvsmiParseError, match="appears twice"):
            nvsmi.parse_query(bad, FIELDS, "n1", T0, memo)


def test_processes_keep_every_field_nvidia_smi_gave_when_their_owners_are_added() -> None:
    """owners.with_owners makes each process whole (not with dataclasses.replace): a field
    GpuProcess gains must be carried there too, or it is dropped without a word."""
    from dataclasses import fields, replace

    from leases.core.models import GpuProcess
    from leases.telemetry import owners

    assert [f.name for f in fields(GpuProcess)] == [
        "node", "gpu_uuid", "pid", "process_name", "used_mib",
        "owner", "start", "elapsed_s", "cmdline", "visible",
    ], "a new GpuProcess field: carry it in owners.with_owners, then list it here"  # fmt: skip
    given = GpuProcess("n1", "GPU-a", 41, "python", 512.0, "old", "b:1", 9, "x", False)
    (made,) = owners.with_owners([given], None)
    # No /proc section: nothing is known of the process but what nvidia-smi gave.
    assert made == replace(
        given, owner=None, start=None, elapsed_s=None, cmdline=None, visible=False
    )


class _DropsNothing(OwnerTracker):
    """An OwnerTracker that keeps every reading it sees: its answers are what the real
    one's must stay, whatever it drops."""

    def __init__(self) -> None:
        super().__init__()
        self._seen = deque()

    def see(self, at: datetime, owners: dict[int, tuple[str, ...]]) -> None:
        self._seen.append((int(at.timestamp()), owners))


OWNERS = st.sampled_from([{0: ("alice",), 1: ()}, {0: ("bob",), 1: ("?",)}, {0: (), 1: ("carol",)}])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 400), st.none() | OWNERS), min_size=1, max_size=80))
# Two owners 38 s apart in one minute, closed by a reading in the next: both are its owners.
@example([(1, {0: ("alice",), 1: ()}), (39, {0: ("bob",), 1: ("?",)}), (40, None)])
def test_owner_readings_dropped_as_too_old_are_never_the_ones_a_closing_minute_needs(
    steps: list[tuple[int, dict[int, tuple[str, ...]] | None]],
) -> None:
    """The poller asks the tracker for the minute its last GPU reading was in, once a
    reading of a later minute comes (leases.telemetry.nodestate.NodeState.attributed); processes are
    read with some readings only (None: not this one). The answer must be the one every
    process reading ever seen gives, at any spacing (a node quiet for minutes)."""
    tracker, every = OwnerTracker(), _DropsNothing()
    t = int(T0.timestamp())
    for gap, owners in steps:
        t += gap
        closing = (t - gap) // 60  # the minute of the GPU reading before
        if owners is not None:
            tracker.see(datetime.fromtimestamp(t, UTC), dict(owners))
            every.see(datetime.fromtimestamp(t, UTC), dict(owners))
        assert tracker.owners(closing) == every.owners(closing)
        assert tracker.owners(t // 60) == every.owners(t // 60)


def test_a_steady_node_holds_a_few_owner_readings_not_an_hour_of_them() -> None:
    tracker = OwnerTracker()
    for step in range(2_000):  # processes read every 30 s for 16 hours
        tracker.see(T0 + timedelta(seconds=30 * step), {0: ("alice",), 1: ()})
    assert len(tracker._seen) <= 16
    assert len({id(o) for _, o in tracker._seen}) == 1  # the same owners held once


class _Session:
    """A node's session answering each command with the next output in turn (no SSH: the
    in-process and real-sshd tiers are in test_poller.py; here only the poller's record of
    what came back is under test)."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = deque(outputs)

    async def query(self, command: str, timeout: float | None = None) -> CommandResult:
        assert command == nvsmi.query_command(FIELDS)
        return CommandResult(0, self.outputs.popleft(), "")

    def ask_now(self, command: str) -> None:
        return None  # never ready for a sweep's batch (leases.ssh.asks): query() each time


class _Pool:
    def __init__(self, session: _Session) -> None:
        self.session = session

    def add(self, node: Node) -> _Session:
        return self.session

    def __contains__(self, name: object) -> bool:
        return False


async def test_the_same_answer_read_again_is_counted_in_its_minute(tmp_path: Path) -> None:
    """Worked by hand: 86 % read at :00, the same answer at :20 and :40, 90 % at :50, the
    same 90 % answer at 1:05. The first minute holds 4 readings of GPU 0, util mean
    (86 * 3 + 90) / 4 = 87 (a whole percent: minutes are stored to UTIL_STEPS); the
    minute after, one at 90 %."""
    one = "0, GPU-a, 86, 40000, 301.25, 550.54.15\n"
    other = "0, GPU-a, 90, 40000, 301.25, 550.54.15\n"
    times = deque([T0 + timedelta(seconds=s) for s in (0, 20, 40, 50, 65)])
    now = [T0]

    def clock() -> datetime:
        return now[0]

    ledger = Ledger.open(tmp_path / "l.db")
    node = ledger.add_node(Node("n1", SshTarget("127.0.0.1", 22, "root", None), "A100", 1))
    store = HistoryStore(ledger)
    session = _Session([one, one, one, other, other])
    poller = Poller([node], pool=_Pool(session), clock=clock, store=store,  # type: ignore[arg-type]
                    host_stats=False, processes=False)  # fmt: skip
    poller.set_nodes([node])
    poller._nodes["n1"].fields = FIELDS  # known: one query a reading
    while times:
        now[0] = times.popleft()
        status = (await poller.sweep())["n1"]
        assert status.health is NodeHealth.OK and status.at == now[0]
        assert [status.sample_time(s) for s in status.samples] == [now[0]]
    now[0] = T0 + timedelta(minutes=3)
    poller.flush()
    minutes = store.minutes("n1", T0, T0 + timedelta(minutes=3))
    assert [(m.gpus[0].readings, m.gpus[0].util_mean) for m in minutes] == [(4, 87.0), (1, 90.0)]
    ledger.close()


# Token by token: each field's own good and unknown words, and bad ones now and then, so
# that a GPU's row read again changes in any field, to any of them (a row that changed is
# read only where it changed: nvsmi.row_values). The second list names the throttle reasons
# twice (one target): there every token is read.
WORDS = {
    "index": (["0", "1", "00"], ["[N/A]", "x", "200"]),
    "uuid": (["GPU-a", "GPU-b", "", "[N/A]"], ["u" * 300]),
    "utilization.gpu": (["87", "88", "[N/A]", "Not Supported"], ["1e999", "-1", "9" * 70]),
    "power.draw": (["301.25", "61.0", "[Unknown Error]"], ["x"]),
    "pstate": (["P0", "P8", "[N/A]", ""], ["p" * 300]),
    "mig.mode.current": (["Enabled", "Disabled", "[N/A]"], ["maybe"]),
    "ecc.errors.uncorrected.volatile.total": (["0", "3", "[N/A]"], ["1.5"]),
    "pci.bus_id": (["00000000:18:00.0", "00000000:2A:00.0", "[N/A]"], ["b" * 300]),
    "driver_version": (["550.54.15", "", "N/A"], ["d" * 300]),
    "clocks_throttle_reasons.active": (["0x0000000000000004", "[N/A]"], ["t" * 300]),
    "clocks_event_reasons.active": (["0x0000000000000000", "[Not Supported]"], ["e" * 300]),
}
TOKEN_FIELDS = (
    ("index", "uuid", "utilization.gpu", "power.draw", "pstate", "mig.mode.current",
     "ecc.errors.uncorrected.volatile.total", "pci.bus_id", "driver_version"),
    ("index", "clocks_throttle_reasons.active", "utilization.gpu",
     "clocks_event_reasons.active"),
)  # fmt: skip


@st.composite
def token_row(draw: st.DrawFn, fields: tuple[str, ...]) -> str:
    row = [draw(st.sampled_from(WORDS[f][0])) for f in fields]
    bad = draw(st.integers(0, 4 * len(fields)))  # one bad token a row, now and then
    if bad < len(fields):
        row[bad] = draw(st.sampled_from(WORDS[fields[bad]][1]))
    return ", ".join(row) + "\n"


@settings(max_examples=400, deadline=None)
@given(st.data(), st.sampled_from(TOKEN_FIELDS))
def test_a_row_read_again_only_where_it_changed_is_what_a_fresh_parse_gives(
    data: st.DataObject, fields: tuple[str, ...]
) -> None:
    memo = RowMemo()
    for step in range(data.draw(st.integers(1, 10))):
        text = "".join(data.draw(st.lists(token_row(fields), max_size=3)))
        at = T0 + timedelta(seconds=5 * step)
        try:
            fresh: object = nvsmi.parse_query(text, fields, "n1", at)
        except nvsmi.NvsmiParseError as exc:
            fresh = ("refused", str(exc))
        try:
            kept: object = nvsmi.parse_query(text, fields, "n1", at, memo)
        except nvsmi.NvsmiParseError as exc:
            kept = ("refused", str(exc))
        assert kept == fresh
        assert repr(kept) == repr(fresh)  # the extra keys too, none left over


async def test_an_answer_read_again_is_written_and_drawn_at_its_own_time(tmp_path: Path) -> None:
    """The same answer at :20 keeps the samples read at :00 (no copy made for a new time),
    read again at :20: the status says so, the ledger's latest reading and the last hour's
    points are at :20. A changed answer at :40 has samples of its own, at :40."""
    one = "0, GPU-a, 86, 40000, 301.25, 550.54.15\n"
    other = "0, GPU-a, 90, 40000, 301.25, 550.54.15\n"
    now = [T0]
    ledger = Ledger.open(tmp_path / "l.db")
    node = ledger.add_node(Node("n1", SshTarget("127.0.0.1", 22, "root", None), "A100", 1))
    store, recent = HistoryStore(ledger), RecentHistory()
    poller = Poller([node], pool=_Pool(_Session([one, one, other])),  # type: ignore[arg-type]
                    clock=lambda: now[0], store=store, recent=recent, host_stats=False,
                    processes=False)  # fmt: skip
    poller._nodes["n1"].fields = FIELDS
    assert node.id is not None
    first = (await poller.sweep())["n1"]
    now[0] = T0 + timedelta(seconds=20)
    again = (await poller.sweep())["n1"]
    assert again.samples is first.samples and again.samples_at == now[0] == again.at
    assert [again.sample_time(s) for s in again.samples] == [now[0]]
    (stored,) = store.latest_by_id([node.id]).values()
    assert [s.at for s in stored.samples] == [now[0]]  # written at the reading's time
    assert [(s.util_gpu, s.power_w) for s in stored.samples] == [(86.0, 301.25)]
    now[0] = T0 + timedelta(seconds=40)
    changed = (await poller.sweep())["n1"]
    assert changed.samples_at is None and [s.at for s in changed.samples] == [now[0]]
    assert changed.samples[0].util_gpu == 90.0
    points = recent.series("n1", 0)
    assert [(p.at, p.util) for p in points] == [
        (T0.timestamp(), 86.0), (T0.timestamp() + 20, 86.0), (T0.timestamp() + 40, 90.0),
    ]  # fmt: skip
    ledger.close()
