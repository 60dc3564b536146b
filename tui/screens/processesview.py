"""What the processes screen shows, computed without Textual: its columns at a width, each
row's cells (made safe to show and cut to fit), and the words of a stop's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leases.app.processes import ProcessRow, Stopped, elapsed_words
from leases.core.textsafe import visible

SORTS = ("node", "user", "memory", "share", "elapsed", "command")
# (key, heading, width); the command takes what the others leave.
FIXED = (
    ("node", "Node", 14),
    ("gpu", "GPU", 3),
    ("pid", "PID", 7),
    ("user", "User", 10),
    ("memory", "MiB", 6),
    ("share", "Share", 5),
    ("elapsed", "Elapsed", 7),
)
PAD = 2  # a DataTable cell's padding, left and right
MIN_COMMAND = 16
# Where the width is short, these go first (in this order) so the command keeps WANT_COMMAND.
DROP_FIRST = ("elapsed", "share")
WANT_COMMAND = 24
# The node column grows to the longest node name (up to MAX_NODE) while the command
# keeps ROOMY_COMMAND.
MAX_NODE = 32
ROOMY_COMMAND = 30


@dataclass(frozen=True)
class Column:
    key: str
    heading: str
    width: int


def columns(width: int, longest_node: int = 0) -> list[Column]:
    """The columns at a terminal width: the fixed ones (Elapsed, then Share, dropped where
    the command would be left under WANT_COMMAND; the node column as wide as the longest
    node name where the command keeps ROOMY_COMMAND), then the command in the rest."""
    cols = [Column(k, h, w) for k, h, w in FIXED]

    def left() -> int:
        return width - sum(c.width + PAD for c in cols) - PAD - 2  # the scrollbar

    for key in DROP_FIRST:
        if left() < WANT_COMMAND:
            cols = [c for c in cols if c.key != key]
    grow = min(max(longest_node, FIXED[0][2]), MAX_NODE) - FIXED[0][2]
    grow = max(min(grow, left() - ROOMY_COMMAND), 0)
    cols[0] = Column("node", "Node", FIXED[0][2] + grow)
    cols.append(Column("command", "Command", max(left(), MIN_COMMAND)))
    return cols


def cells(row: ProcessRow, cols: Sequence[Column]) -> list[str]:
    """One row's cells, each safe to show and no wider than its column."""
    values = {
        "node": row.node,
        "gpu": "?" if row.gpu is None else str(row.gpu),
        "pid": str(row.pid),
        "user": row.user + ("" if row.visible else "*"),
        "memory": "?" if row.used_mib is None else f"{row.used_mib:.0f}",
        "share": "?" if row.share_pct is None else f"{row.share_pct:.0f}%",
        "elapsed": elapsed_words(row.elapsed_s),
        "command": row.command,
    }
    return [visible(values[c.key], c.width) for c in cols]


def row_key(row: ProcessRow) -> str:
    return f"{row.node}\t{row.pid}"


def describe(row: ProcessRow) -> str:
    """The row as the stop's confirmation and the line under the table name it, with the
    whole command line (safe to show; the row keeps SHOWN_CMDLINE characters of it)."""
    gpu = "?" if row.gpu is None else str(row.gpu)
    hidden = "" if row.visible else " (not visible to the login)"
    return visible(f"{row.node} GPU {gpu} pid {row.pid}{hidden} of {row.user}: {row.command}", 500)


def outcome_words(row: ProcessRow, stopped: Stopped) -> str:
    return visible(f"{row.node} pid {row.pid}: {stopped.outcome.value}", 300)


def summary(
    shown: int, total: int, sort: str, query: str, age: str = "", *, marked: bool = False
) -> str:
    """The title line; age: how old the readings are (leases.app.processes.readings_age);
    the legend of `*` only where a row shown is marked so."""
    filtered = f" · filter {visible(query, 60)}" if query else ""
    aged = f" · {age}" if age else ""
    legend = " · * not visible to the login" if marked else ""
    return f"{shown} of {total} GPU processes · by {sort}{filtered}{aged}{legend}"


__all__ = ["SORTS", "Column", "cells", "columns", "describe", "outcome_words", "row_key", "summary"]
