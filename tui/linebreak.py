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


def _number_along(line: str, word: str, room: int, lines: list[str]) -> tuple[str, str]:
    """(line, word) with the number that ends line moved to the start of word, when word
    begins with a wide character that cannot go on the line: a number's unit ("天",
    "小时", "元") never starts the line after it. The line before it goes to lines."""
    if not line or not word or width(word[0]) < 2 or not _digit(line[-1]):
        return line, word
    if _head(f"{line} {word}", room) > len(line) + 1:
        return line, word  # some of word fits on the line: the number keeps its unit
    head, _sep, number = line.rpartition(" ")
    if head:
        lines.append(head)
    return "", f"{number} {word}"


def _head(word: str, room: int) -> int:
    """The longest head of word that ends where a line may break and fits in room cells
    (0: none)."""
    best, used = 0, 0
    for i in range(1, len(word)):
        used += width(word[i - 1])
        if used > room:
            break
        if _breakable(word, i):
            best = i
    return best


def _by_characters(word: str, room: int, lines: list[str]) -> str:
    """word cut as characters into lines of room cells; what is left for the next line."""
    line = ""
    for char in word:
        if width(line + char) > room:
            lines.append(line)
            line = ""
        line += char
    return line


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """text (already made visible) in lines of at most `columns` terminal cells, each
    after `indent`; broken at spaces, and in Chinese also between two of its characters
    (not before a closing mark, not inside an ASCII word or a name); a word longer than a
    line at a character. Nothing is dropped; a CJK character counts two cells."""
    room = max(10, columns - width(indent))
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if width(candidate) <= room:
            line = candidate
            continue
        if width(word) != len(word):  # wide characters: fill the line, break inside
            line, word = _number_along(line, word, room, lines)
            prefix = f"{line} " if line else ""
            cut = _head(word, room - width(prefix))
            if cut or line:
                lines.append(prefix + word[:cut] if cut else line)
                word = word[cut:]
            while width(word) > room and (cut := _head(word, room)):
                lines.append(word[:cut])
                word = word[cut:]
            line = word if width(word) <= room else _by_characters(word, room, lines)
            continue
        if line:
            lines.append(line)
        line = _by_characters(word, room, lines)
    if line or not lines:
        lines.append(line)
    return [indent + x for x in lines]
