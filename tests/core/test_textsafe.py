"""visible(): nothing that a terminal would obey survives, and clean text is unchanged."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.textsafe import is_clean, last_line, visible


def test_escape_sequences_are_shown_not_obeyed() -> None:
    assert visible("\x1b]0;pwned\x07title") == "␛]0;pwned␇title"
    assert visible("a\nb\rc\td") == "a␊b␍c␉d"
    assert visible("x\x9b2Jy") == "x\\x9b2Jy"
    assert visible("\x7f") == "␡"
    assert visible("evil\u202etxt.exe") == "evil\\u202etxt.exe"


def test_keep_newlines_keeps_only_newlines() -> None:
    assert visible("one\ntwo\x1b[2J", keep_newlines=True) == "one\ntwo␛[2J"


def test_clean_text_is_unchanged() -> None:
    for text in ("NVIDIA H100 80GB HBM3", "登录指令：ssh -p 6666 root@host", "[/]", "café 😀 ñ"):
        assert visible(text) == text


@pytest.mark.parametrize(
    "char",
    ["\u2062", "\u2063", "\u180e", "\u034f", "\ufe0f", "\u200d", "\U000e0041", "\U0001d173",
     "\ufff9", "\u115f", "\u3164", "\u00ad", "\u200b", "\u2800"],
)  # fmt: skip
def test_characters_that_draw_nothing_are_shown(char: str) -> None:
    # 'gpu-\u2063a100-01' would print as 'gpu-a100-01'; a joiner (even in an emoji
    # sequence) makes the terminal's width differ from what the table measured.
    shown = visible(f"gpu-{char}a100")
    assert char not in shown and shown.startswith("gpu-\\") and shown.endswith("a100")


def test_every_format_character_is_shown() -> None:
    import unicodedata

    missed = [hex(c) for c in range(0x110000)
              if unicodedata.category(chr(c)) == "Cf" and visible(chr(c)) == chr(c)]  # fmt: skip
    assert missed == []


def test_max_len_marks_the_cut() -> None:
    assert visible("abcdef", 4) == "abc…"
    assert visible("abc", 4) == "abc"


@given(st.text())
def test_no_control_survives(text: str) -> None:
    shown = visible(text)
    assert is_clean(shown)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in shown)


_MARK = re.compile(r"^@mark ([0-9]{1,3})[ \t\r]*$", re.MULTILINE)


@given(
    st.lists(
        st.sampled_from(
            [
                "@mark 1",
                "@mark 22 ",
                "@mark x",
                "x@mark 3",
                "@mark 4\r",
                "@m",
                "",
                "@mark 1234",
                "a",
            ]
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_last_line_is_the_last_full_match(lines: list[str], end: bool) -> None:
    text = "\n".join(lines) + ("\n" if end else "")
    found = list(_MARK.finditer(text))
    got = last_line(text, "@mark", _MARK)
    want = found[-1] if found else None
    assert (got and (got.start(), got.group(1))) == (want and (want.start(), want.group(1)))
