"""The kept-open shell's answer read chunk by chunk (leases.ssh.shell.read_answer) and the
caps counted without splitting lines (Capped.check): each gives what the line-by-line
reading it replaced gave (kept here, as the specification), for any text cut anywhere.

The channel is a list of chunks: what asyncssh's reader hands out is any cut of the bytes
the node sent, and the cuts are what these tests vary. Real channels: tests/ssh/test_ssh.py
and the simulated fleets run the same function on real asyncssh connections."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leases.ssh.shell import Shell, read_answer
from leases.ssh.stream import Capped, OverCap

MARKER = "__zuka_done_0123456789ab__"


@dataclass
class _Reader:
    chunks: list[str]

    async def read(self, n: int) -> str:
        assert n > 0
        return self.chunks.pop(0) if self.chunks else ""


@dataclass
class _Process:
    stdout: _Reader


@dataclass
class _Answered:
    answered: bool = False
    process: _Process = field(default_factory=lambda: _Process(_Reader([])))


def _shell(chunks: list[str]) -> Shell:
    # Only .process.stdout and .answered are used by read_answer.
    return _Answered(process=_Process(_Reader(list(chunks))))  # type: ignore[return-value]


def _line_by_line(chunks: list[str], capped: Capped) -> tuple[str, int | None] | None:
    """The reading read_answer replaced: every chunk split into lines, each searched."""
    out: list[str] = []
    pending: deque[str] = deque()
    feed = itertools.chain(chunks, itertools.repeat(""))
    while True:
        if not pending:
            chunk = next(feed)
            pending.extend(capped.feed(chunk))
            if chunk and not pending:
                continue
            if not chunk and (rest := capped.rest()):
                pending.append(rest)
        line = pending.popleft() if pending else ""
        if not line:
            return None
        at = line.find(MARKER)
        if at < 0:
            out.append(line)
            continue
        out.append(line[:at])
        word = line[at + len(MARKER) :].strip()
        return "".join(out), int(word) if word.isascii() and word.isdigit() and len(
            word
        ) <= 3 else None


def _outcome(run: object) -> object:
    try:
        return run() if callable(run) else run
    except OverCap as exc:
        return ("over", str(exc))


def _cuts(text: str, points: list[int]) -> list[str]:
    points = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


_TEXT = st.text(alphabet=st.sampled_from("ab \n\r0²x_"), max_size=60)


@settings(max_examples=400)
@given(
    before=_TEXT,
    status=st.sampled_from(["0", "1", "255", "1000", "", " 7 ", "²", "x"]),
    after=_TEXT,
    marker=st.booleans(),
    newline=st.booleans(),
    points=st.lists(st.integers(0, 200), max_size=8),
    max_line=st.integers(1, 40),
)
@example(before="out", status="0", after="", marker=True, newline=True, points=[], max_line=64)
def test_read_answer_gives_what_line_by_line_reading_gave(
    before: str,
    status: str,
    after: str,
    marker: bool,
    newline: bool,
    points: list[int],
    max_line: int,
) -> None:
    sent = before + (MARKER + status + ("\n" if newline else "") if marker else "") + after
    chunks = _cuts(sent, points)
    want = _outcome(lambda: _line_by_line(chunks, Capped(10_000, max_line)))
    shell = _shell(chunks)
    got = _outcome(lambda: asyncio.run(read_answer(shell, MARKER, Capped(10_000, max_line))))
    assert got == want
    assert shell.answered == (isinstance(got, tuple) and got[0] != "over")


def test_a_marker_cut_between_two_chunks_is_found() -> None:
    sent = f"line one\npartial{MARKER} 3\n"
    for cut in range(1, len(sent)):
        shell = _shell([sent[:cut], sent[cut:]])
        assert asyncio.run(read_answer(shell, MARKER, Capped(None, 100))) == (
            "line one\npartial",
            3,
        )


def test_the_channel_ending_before_the_marker_is_none() -> None:
    assert (
        asyncio.run(read_answer(_shell(["half a mark", "er", ""]), MARKER, Capped(None, 99)))
        is None
    )
    assert asyncio.run(read_answer(_shell([MARKER[:-1]]), MARKER, Capped(None, 99))) is None


def test_a_status_word_in_other_digits_is_no_status() -> None:
    # A hostile shell prints what it likes after the marker: "²" is a digit to str.isdigit
    # and not to int().
    got = asyncio.run(read_answer(_shell([f"x{MARKER} ²\n"]), MARKER, Capped(None, 99)))
    assert got == ("x", None)


@settings(max_examples=300)
@given(
    chunks=st.lists(st.text(alphabet="ab\n", max_size=30), max_size=6),
    max_line=st.integers(0, 12),
    max_output=st.one_of(st.none(), st.integers(0, 80)),
)
def test_check_refuses_what_feed_refuses(
    chunks: list[str], max_line: int, max_output: int | None
) -> None:
    fed, checked = Capped(max_output, max_line), Capped(max_output, max_line)
    for chunk in chunks:
        want = _outcome(lambda c=chunk: [fed.feed(c), None][1])
        got = _outcome(lambda c=chunk: checked.check(c))
        assert got == want
        if want is not None:
            break


def test_check_finds_a_long_line_between_short_ones_in_one_chunk() -> None:
    capped = Capped(None, 5)
    capped.check("ab\n")
    with pytest.raises(OverCap, match="a line over"):
        capped.check("x\n" + "y" * 6 + "\nz\n")
