"""A help laid out by terminal cells: Chinese characters take two cells each, so a help
in Chinese is wrapped by its width on screen (rich.cells.cell_len), not by its count of
characters as argparse does; a line may break between two Chinese characters, never
inside a Latin word, an option (--metrics-token-file) or before closing punctuation.
English help is argparse's own, unchanged."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len

from leases.core.i18n import _, is_chinese

# A unit a line never breaks inside: a run of non-space characters that are not wide,
# or one wide character; punctuation that closes stays with what it closes, one that
# opens with what it opens.
_CLOSING = "，。、：；！？）」』】》…"
_OPENING = "（「『【《"
_UNIT_RE = re.compile(
    rf"[{_OPENING}]*(?:[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+)[{_CLOSING}]*"
)
_SPACE_RE = re.compile(r"\s+")
_HEADING_RE = re.compile(r"(?m)^(\S[^\n]*[^\x00-\x7f]):$")


def wrap(text: str, width: int) -> list[str]:
    """text's words filled into lines of at most width cells (a unit wider than width
    has a line of its own)."""
    text = _SPACE_RE.sub(" ", text).strip()
    lines: list[str] = []
    line = ""
    pos = 0
    for m in _UNIT_RE.finditer(text):
        gap = " " if text[pos : m.start()] else ""
        pos = m.end()
        unit = m.group()
        if line and cell_len(line + gap + unit) > width:
            lines.append(line)
            line = unit
        else:
            line = line + gap + unit if line else unit
    if line:
        lines.append(line)
    return lines


class CellFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a help in Chinese is wrapped and its usage indented by
    cells."""

    def format_help(self) -> str:
        shown = super().format_help()
        if not is_chinese():
            return shown
        # A section's heading ("位置参数:"), argparse's colon made the full-width one.
        return _HEADING_RE.sub(r"\1：", shown)

    def _split_lines(self, text: str, width: int) -> list[str]:
        if not is_chinese():
            return super()._split_lines(text, width)
        return wrap(text, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if not is_chinese():
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in wrap(text, width - len(indent)))

    def _format_usage(
        self, usage: str | None, actions: Iterable[Any], groups: Iterable[Any], prefix: str | None
    ) -> str:
        said = _("usage: ") if prefix is None else prefix
        if cell_len(said) == len(said):
            return super()._format_usage(usage, actions, groups, said)
        # argparse indents the usage's next lines by len(prefix): lay it out with a
        # stand-in as wide as the prefix on screen, then put the prefix back.
        stand_in = "\0" * cell_len(said)
        shown: str = super()._format_usage(usage, actions, groups, stand_in)
        return shown.replace(stand_in, said, 1)
