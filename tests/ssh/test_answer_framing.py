"""The kept-open shell's answer read chunk by chunk (leases.ssh.shell.AnswerReader), and the
caps counted without splitting lines (Capped.check): each gives what the specification
below gives for any text cut anywhere. The specification reads the whole text with one
regular expression for the frame's end (output, its status line, the marker line), where
AnswerReader searches chunks as they come.

The channel is a list of chunks: the packets asyncssh hands the channel are any cut of the
bytes the node sent, and the cuts are what these tests vary. Real shells: tests/ssh/
test_shell_frame.py; real channels: tests/ssh/test_ssh.py and the simulated fleets."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leases.ssh.shell import AnswerReader
from leases.ssh.stream import Capped, OverCap

MARKER = "__zuka_done_0123456789ab__"


def _read(chunks: list[str], capped: Capped) -> tuple[str, int | None] | None:
    """What the kept shell's channel gives for these packets (leases.ssh.shell.ShellChannel
    feeds each to the answer's reader); "" or the end of the list: the channel ended."""
    reader = AnswerReader(MARKER, capped)
    for chunk in chunks:
        if not chunk:
            break
        got = reader.feed(chunk)
        if got is not None:
            return got
    return reader.end()


NONCE = "0123456789ab"  # the marker's random part: the status line carries it too
_FRAME_END = re.compile(rf"(.*)\n(0|[1-9][0-9]{{0,2}}) {NONCE}\n", re.DOTALL | re.ASCII)


def _specified(chunks: list[str], capped: Capped) -> tuple[str, int | None] | None:
    """Chunks read (each through the caps) until the marker's line has ended, or the
    channel did; then the frame's end matched on the whole text before the marker: a
    status (0 to 255) only from a whole status line with the nonce, the marker alone on
    its line, nothing read after it."""
    text = ""
    for chunk in chunks:
        capped.feed(chunk)
        text += chunk
        at = text.find(MARKER)
        if at >= 0 and "\n" in text[at + len(MARKER) :]:
            break
    at = text.find(MARKER)
    if at < 0:
        return None
    before, rest = text[:at], text[at + len(MARKER) :]
    match = _FRAME_END.fullmatch(before)
    if match is None or int(match[2]) > 255 or rest != "\n":
        return before, None
    return match[1], int(match[2])


def _outcome(run: object) -> object:
    try:
        return run() if callable(run) else run
    except OverCap as exc:
        return ("over", str(exc))


def _cuts(text: str, points: list[int]) -> list[str]:
    points = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


_TEXT = st.text(alphabet=st.sampled_from("ab \n\r0²x_"), max_size=60)


# A whole answer: output, status line with the nonce, marker line.
_WHOLE = {
    "out": "out",
    "status": "0",
    "nonce": NONCE,
    "junk": "",
    "after": "",
    "marker": True,
    "newline": True,
    "points": [],
    "max_line": 64,
}


@settings(max_examples=500)
@given(
    out=_TEXT,
    status=st.sampled_from(["0", "1", "255", "256", "007", "1000", "", " 7", "²", "x", None]),
    nonce=st.sampled_from([NONCE, "", "0123456789ac", NONCE + " "]),
    junk=st.sampled_from(["", " 0", "x", "\r"]),
    after=_TEXT,
    marker=st.booleans(),
    newline=st.booleans(),
    points=st.lists(st.integers(0, 200), max_size=8),
    max_line=st.integers(1, 40),
)
@example(**_WHOLE)
@example(**{**_WHOLE, "newline": False})  # the channel ends right after the marker: no status
def test_the_answer_read_is_what_the_specification_gives(
    out: str,
    status: str | None,
    nonce: str,
    junk: str,
    after: str,
    marker: bool,
    newline: bool,
    points: list[int],
    max_line: int,
) -> None:
    end = MARKER + junk + ("\n" if newline else "") if marker else ""
    sent = out + (f"\n{status} {nonce}\n" if status is not None else "") + end + after
    chunks = _cuts(sent, points)
    want = _outcome(lambda: _specified(chunks, Capped(10_000, max_line)))
    got = _outcome(lambda: _read(chunks, Capped(10_000, max_line)))
    assert got == want


def test_a_marker_cut_between_two_chunks_is_found() -> None:
    sent = f"line one\npartial\n3 {NONCE}\n{MARKER}\n"
    for cut in range(1, len(sent)):
        assert _read([sent[:cut], sent[cut:]], Capped(None, 100)) == (
            "line one\npartial",
            3,
        )


def test_the_channel_ending_before_the_marker_is_none() -> None:
    assert _read(["half a mark", "er", ""], Capped(None, 99)) is None
    assert _read([MARKER[:-1]], Capped(None, 99)) is None


def test_a_status_word_in_other_digits_is_no_status() -> None:
    # A hostile shell prints what it likes before the marker: "²" is a digit to
    # str.isdigit and not to int().
    got = _read([f"x\n² {NONCE}\n{MARKER}\n"], Capped(None, 99))
    assert got == (f"x\n² {NONCE}\n", None)


def test_an_output_the_shell_cut_is_over_the_cap() -> None:
    """sh holds at most 4 bytes a character past the cap (leases.ssh.session): an output
    it cut, with no status line, is refused by the cap before any of it is parsed."""
    cap = 10
    held = ("é" * 100).encode()[: 4 * (cap + 1)].decode(errors="replace")
    with pytest.raises(OverCap):
        _read([held, f"\n{MARKER}\n"], Capped(cap, 99))


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
