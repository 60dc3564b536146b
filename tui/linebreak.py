"""Where a line of text may break: between words, and in Chinese also between two of its
characters, never before a closing mark (禁则). The command line's wrap (tui.cli.output)
and the dashboard's refusals (tui.widgets.form) break lines alike."""

from __future__ import annotations

from rich.cells import cell_len as width

# Chinese breaks a line between any two of its characters, but never before closing
# punctuation nor after opening punctuation (禁则); never inside a run of narrow
# characters (an ASCII word, a node's name, a path).
_NO_LINE_START = frozenset("，。、：；！？）」』》】〉”’…%,.:;!?)]}")
_NO_LINE_END = frozenset("（「『《【〈“‘([{")


def _breakable(word: str, i: int) -> bool:
    """May a line break between word[i-1] and word[i]? Never between a number and the
    unit or measure word after it ("30.06天", "30.06 天", "1小时")."""
    before, after = word[i - 1], word[i]
    if width(before) < 2 and width(after) < 2:
        return False
    if width(after) == 2 and _after_number(word, i):
        return False
    for unit in _UNITS:  # "56分|钟": a unit of two characters after a number stays whole
        for j in range(1, len(unit)):
            if word.startswith(unit, i - j) and _after_number(word, i - j):
                return False
    return after not in _NO_LINE_START and before not in _NO_LINE_END


def _digit(char: str) -> bool:
    return "0" <= char <= "9"


# Units of more than one character that follow a number ("56分钟", "1.5小时").
_UNITS = ("分钟", "小时", "卡时", "个月", "秒钟")


def _after_number(word: str, i: int) -> bool:
    """Does word[i] come right after a number ("30天", "30 天")?"""
    if i < 1:
        return False
    before = word[i - 1]
    return _digit(before) or (before == " " and i > 1 and _digit(word[i - 2]))


def _space_breaks(text: str, i: int, after: int) -> bool:
    """May a line break at the spaces text[i:after] (dropped where it does)? Not before
    closing punctuation nor after opening punctuation, and never between a number and the
    wide word after it ("30 天", "224 忙碌"): a unit never starts a line. Between narrow
    words always, as English always did."""
    before = text[i - 1]
    nxt = text[after] if after < len(text) else ""
    if not nxt:
        return False
    if width(nxt) == 2 and (nxt in _NO_LINE_START or _digit(before)):
        return False
    return not (width(before) == 2 and before in _NO_LINE_END)


def _pieces(text: str) -> list[tuple[str, str]]:
    """text as (separator, piece) pairs: a line may break before each piece but the first,
    and drops its separator (spaces, or "" between two Chinese characters) where it does."""
    pieces: list[tuple[str, str]] = []
    sep, piece = "", ""
    i = 0
    while i < len(text):
        if text[i] == " " and piece:
            after = i
            while after < len(text) and text[after] == " ":
                after += 1
            if _space_breaks(text, i, after):
                pieces.append((sep, piece))
                sep, piece = text[i:after], ""
            else:
                piece += text[i:after]
            i = after
            continue
        if piece and text[i - 1] != " " and _breakable(text, i):
            pieces.append((sep, piece))
            sep, piece = "", ""
        piece += text[i]
        i += 1
    pieces.append((sep, piece))
    return pieces


def _by_characters(word: str, room: int, lines: list[str]) -> str:
    """word cut as characters into lines of room cells; what is left for the next line.
    In a word with Chinese in it, closing punctuation takes the character before it along
    ("(--price)" / "：" never); an ASCII word is cut as English always was."""
    chinese = width(word) != len(word)
    line = ""
    for char in word:
        if width(line + char) > room:
            cut = len(line)
            while (
                chinese
                and char in _NO_LINE_START
                and cut > 1
                and (cut == len(line) or line[cut] in _NO_LINE_START)
            ):
                cut -= 1
            lines.append(line[:cut])
            line = line[cut:]
        line += char
    return line


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text (already made visible) in lines of at most `columns` terminal cells, each
    after `indent`, each filled: broken at spaces, and in Chinese also between two of its
    characters (not before a closing mark nor after an opening one, not between a number
    and its unit, not inside an ASCII word or a name); a piece longer than a line at a
    character. Nothing is dropped; a CJK character counts two cells."""
    room = max(10, columns - width(indent))
    lines: list[str] = []
    line: str | None = None
    for sep, piece in _pieces(text):
        candidate = piece if line is None else line + sep + piece
        if width(candidate) <= room:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = piece if width(piece) <= room else _by_characters(piece, room, lines)
    if line or not lines:
        lines.append(line or "")
    return [indent + x for x in lines]
