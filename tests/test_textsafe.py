"""visible(): nothing that a terminal would obey survives, and clean text is unchanged."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leases.textsafe import is_clean, visible


def test_escape_sequences_are_shown_not_obeyed() -> None:
    assert visible("\x1b]0;pwned\x07title") == "␛]0;pwned␇title"
    assert visible("a\nb\rc\td") == "a␊b␍c␉d"
    assert visible("x\x9b2Jy") == "x\\x9b2Jy"
    assert visible("\x7f") == "␡"
    assert visible("evil\u202etxt.exe") == "evil\\u202etxt.exe"


def test_keep_newlines_keeps_only_newlines() -> None:
    assert visible("one\ntwo\x1b[2J", keep_newlines=True) == "one\ntwo␛[2J"


def test_clean_text_is_unchanged() -> None:
    for text in ("NVIDIA H100 80GB HBM3", "登录指令：ssh -p 6666 root@host", "[/]", "café 👩‍🔬"):
        assert visible(text) == text


def test_max_len_marks_the_cut() -> None:
    assert visible("abcdef", 4) == "abc…"
    assert visible("abc", 4) == "abc"


@given(st.text())
def test_no_control_survives(text: str) -> None:
    shown = visible(text)
    assert is_clean(shown)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)
