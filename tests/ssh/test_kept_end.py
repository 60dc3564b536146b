"""What a stream keeps for the error it may end with (leases.ssh.stream.KeptEnd): the end of
everything it printed, and never much more than that however long it runs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from leases.ssh.stream import KeptEnd


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64), st.lists(st.text(max_size=100), max_size=60))
def test_the_end_of_what_was_printed_and_no_more_than_twice_that(
    keep: int, pieces: list[str]
) -> None:
    kept = KeptEnd(keep)
    printed = ""
    for piece in pieces:
        kept.add(piece)
        printed += piece
        assert kept.text == printed[-keep:]
        assert sum(len(p) for p in kept._parts) < 2 * keep + 1


def test_a_collector_holds_a_few_kilobytes_a_node_after_hours_of_rounds() -> None:
    kept = KeptEnd(4096)
    for round_no in range(10_000):  # about 14 hours of rounds every 5 s
        kept.add(f"{round_no}, " + "87, 40000, 301.25\n" * 100)
    assert len(kept.text) == 4096 and kept.text.endswith("301.25\n")
    assert sum(len(p) for p in kept._parts) <= 2 * 4096
