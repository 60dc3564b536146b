"""A node's owner-query output read again unchanged is not parsed again (leases.telemetry.
owners.OwnersMemo): the uptime, the one line that moves on a steady node, comes last and
only moves the elapsed times. Whatever the node prints, the memo gives what a fresh parse
gives; what changed (an owner, a command line, a pid) is read at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leases.sim import Scenario, SimNode
from leases.sim.procs import owners_answer
from leases.telemetry import owners
from leases.telemetry.owners import OWNERS_MARK, OwnersMemo, parse_apps_owners
from leases.telemetry.procinfo import PROCS_MARK, parse_procs, split_uptime

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
NODE = SimNode("n1", "A100", 8, Scenario.BUSY, seed=3)
BOOT = "0f7c4e0a-3b1d-4c2e-9a5f-6d7e8f901234"
SMALL = (
    f"GPU-aaaa, 4242, 1000\nGPU-bbbb, 4343, 2000\n{OWNERS_MARK} 0\n"
    " 4242  1001 alice\n 4343  1002 bob\n"
    f"{PROCS_MARK}\nboot {BOOT}\nhz 100\n"
    "@p 4242 100000: python train.py \n@p 4343 250000: python serve.py \n"
)


def _at(seconds: int) -> str:
    return owners_answer(NODE, T0 + timedelta(seconds=seconds)).stdout


def test_the_simulated_node_prints_its_uptime_last() -> None:
    body, uptime = split_uptime(_at(0))
    assert uptime is not None and uptime.endswith(".42")
    assert "\nup " not in body


def test_a_steady_node_is_parsed_once_and_its_elapsed_times_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    parsed = owners._parsed

    def counted(body: str, uptime: str | None, node: str) -> object:
        calls.append(body)
        return parsed(body, uptime, node)

    # A spy on the parse the memo skips: without it the memo could parse every time and
    # every other assertion here would still hold.
    monkeypatch.setattr(owners, "_parsed", counted)
    memo = OwnersMemo("n1")
    first, later = _at(0), _at(30)
    assert split_uptime(first)[0] == split_uptime(later)[0]  # only the uptime moved
    a = memo.parse(first)
    b = memo.parse(later)
    again = memo.parse(later)
    assert len(calls) == 1
    assert a.processes and b.processes
    assert [p.elapsed_s for p in b.processes] == [(p.elapsed_s or 0) + 30 for p in a.processes]
    assert again == b == parse_apps_owners(later, "n1")
    assert a == parse_apps_owners(first, "n1")


def test_what_changed_is_read_at_once() -> None:
    memo = OwnersMemo("n")
    before = memo.parse(SMALL + "up 5000.42\n")
    assert [p.owner for p in before.processes or ()] == ["alice", "bob"]
    # Another user now owns pid 4343 (ps says so): the same uptime, another answer.
    edited = SMALL.replace("1002 bob", "1003 carol") + "up 5000.42\n"
    assert [p.owner for p in memo.parse(edited).processes or ()] == ["alice", "carol"]
    # A new command line for 4242 (the pid reused), read at another uptime.
    reused = SMALL.replace("100000: python train.py", "400000: bash -c evil") + "up 5010\n"
    got = {p.pid: p for p in memo.parse(reused).processes or ()}
    assert got[4242].cmdline == "bash -c evil " and got[4242].elapsed_s == 5010 - 4000
    assert memo.parse(reused) == parse_apps_owners(reused, "n")


def test_an_uptime_that_went_back_reads_as_a_fresh_parse_reads_it() -> None:
    # The same processes read again at an uptime before they started (a clock that went
    # back, a forged line): each has run 0 s, as parse_procs says, not a negative time.
    memo = OwnersMemo("n")
    memo.parse(SMALL + "up 5000\n")
    for up in ("500", "1000.5", "2600", "soon"):
        again = SMALL + f"up {up}\n"
        assert memo.parse(again) == parse_apps_owners(again, "n")
    assert [p.elapsed_s for p in memo.parse(SMALL + "up 500\n").processes or ()] == [0, 0]


def test_the_uptime_on_the_last_line_or_the_sections_own() -> None:
    # The last line wins; where it does not read as an uptime, the section's own line.
    section = f"boot {BOOT}\nup 900\nhz 100\n@p 7 10000: x \n"
    assert parse_procs(section).by_pid[7].elapsed_s == 800
    assert parse_procs(section, "1000.5").by_pid[7].elapsed_s == 900
    assert parse_procs(section, "soon").by_pid[7].elapsed_s == 800
    # Older nodes' answers (the uptime second, as zuka asked before) read as they did.
    old = f"{SMALL.replace('hz 100', 'up 5000.42' + chr(10) + 'hz 100')}"
    elapsed = [p.elapsed_s for p in parse_apps_owners(old, "n").processes or ()]
    assert elapsed == [4000, 2500]
    # No uptime anywhere: no elapsed time, the start still known.
    (p, _) = parse_apps_owners(SMALL, "n").processes or ()
    assert p.elapsed_s is None and p.start == f"{BOOT}:100000"


_LINES = st.sampled_from(
    [
        "up 5000.42",
        "up 5030",
        "up 12x",
        "up ",
        "up 9999999999999",
        "up 1000.5",  # as long as the first process has run: 0 s
        "up 500",  # before the processes started (a clock that went back): 0 s, not less
        f"{OWNERS_MARK} 0",
        f"{OWNERS_MARK} 3",
        PROCS_MARK,
        "@p 4242 100000: python train.py ",
        "@p 4242 100001: python train.py ",
        "@p 4343 250000:12-3 python serve.py ",
        "@e 4343",
        "hz 250",
        f"boot {BOOT}",
        " 4242  1001 alice",
        " 4343  0 root",
        "GPU-cccc, 4444, 10",
        "GPU-aaaa, 4242, oops",
        "",
        "up 5000.42\r",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    answers=st.lists(
        st.tuples(
            st.sampled_from([SMALL, SMALL.replace("alice", "dave"), ""]),
            st.lists(_LINES, max_size=4),
            st.sampled_from(["\n", ""]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_memo_gives_what_a_fresh_parse_gives(
    answers: list[tuple[str, list[str], str]],
) -> None:
    memo = OwnersMemo("n")
    for base, tail, end in answers:
        stdout = base + "\n".join(tail) + (end if tail else "")
        want = _outcome(lambda s=stdout: parse_apps_owners(s, "n"))
        assert _outcome(lambda s=stdout: memo.parse(s)) == want


def _outcome(parse: object) -> object:
    try:
        return parse()  # type: ignore[operator]
    except Exception as exc:  # a parse error is an outcome to compare too
        return (type(exc), str(exc))


def test_what_a_node_makes_the_memo_hold_is_bounded() -> None:
    """A node answering with megabytes (a ps of every process, say) is parsed every time:
    the poller holds no copy of it between readings."""
    huge = SMALL.replace(" 4343  1002 bob\n", " 4343  1002 bob\n" + " 9 0 x😀\n" * 20_000)
    memo = OwnersMemo("n")
    first = memo.parse(huge + "up 5000\n")
    assert first == parse_apps_owners(huge + "up 5000\n", "n")
    assert memo._body is None  # nothing kept: a fresh parse next time too
    assert memo.parse(huge + "up 5001\n") == parse_apps_owners(huge + "up 5001\n", "n")
    assert len(huge) > owners.MEMO_MAX_CHARS
