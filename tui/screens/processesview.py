"""What the processes screen shows, computed without Textual: its columns at a width, each
row's cells (made safe to show and cut to fit), and the words of a stop's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len

from leases.app.processes import ProcessRow, Stopped
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from tui.screens.fleetview import shorten_cells
from tui.widgets.valuewords import elapsed_cell

SORTS = ("node", "user", "memory", "share", "elapsed", "command")
# The title's words for each sort (SORTS stays English: it is compared).
SORT_WORDS = {
    "node": N_("by node"), "user": N_("by user"), "memory": N_("by memory"),
    "share": N_("by share"), "elapsed": N_("by elapsed"), "command": N_("by command"),
}  # fmt: skip
# (key, heading, width); the command takes what the others leave. Headings marked: shown
# as _(heading), the column never narrower than it.
FIXED = (
    ("node", N_("Node"), 14),
    ("gpu", N_("GPU"), 3),
    ("pid", N_("PID"), 7),
    ("user", N_("User"), 10),
    ("memory", "MiB", 6),
    ("share", N_("Share"), 5),
    ("elapsed", N_("Elapsed"), 7),
)
COMMAND = N_("Command")
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
    cols = [Column(k, _(h), max(w, cell_len(_(h)))) for k, h, w in FIXED]

    def left() -> int:
        return width - sum(c.width + PAD for c in cols) - PAD - 2  # the scrollbar

    for key in DROP_FIRST:
        if left() < WANT_COMMAND:
            cols = [c for c in cols if c.key != key]
    grow = min(max(longest_node, FIXED[0][2]), MAX_NODE) - FIXED[0][2]
    grow = max(min(grow, left() - ROOMY_COMMAND), 0)
    cols[0] = Column("node", cols[0].heading, cols[0].width + grow)
    cols.append(Column("command", _(COMMAND), max(left(), MIN_COMMAND)))
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
        "elapsed": elapsed_cell(row.elapsed_s),
        "command": row.command,
    }
    out = [visible(values[c.key], c.width) for c in cols]
    # A Chinese character is two cells: cut again to the column's cells.
    return [v if cell_len(v) <= c.width else shorten_cells(v, c.width)
            for v, c in zip(out, cols, strict=True)]  # fmt: skip


def row_key(row: ProcessRow) -> str:
    return f"{row.node}\t{row.pid}"


def describe(row: ProcessRow) -> str:
    """The row as the stop's confirmation and the line under the table name it, with the
    whole command line (safe to show; the row keeps SHOWN_CMDLINE characters of it)."""
    gpu = "?" if row.gpu is None else str(row.gpu)
    said = (
        _("{node} GPU {gpu} pid {pid} of {user}: {command}")
        if row.visible
        else _("{node} GPU {gpu} pid {pid} (not visible to the login) of {user}: {command}")
    )
    return visible(
        said.format(node=row.node, gpu=gpu, pid=row.pid, user=row.user, command=row.command), 500
    )


def outcome_words(row: ProcessRow, stopped: Stopped) -> str:
    return visible(
        _("{node} pid {pid}: {outcome}").format(
            # leases.app.processes' words (translated when that module marks them)
            node=row.node, pid=row.pid, outcome=_(stopped.outcome.value)),
        300,
    )  # fmt: skip


def summary(
    shown: int, total: int, sort: str, query: str, age: str = "", *, marked: bool = False
) -> str:
    """The title line; age: how old the readings are (leases.app.processes.readings_age);
    the legend of `*` only where a row shown is marked so."""
    parts = [
        _("{shown} of {total} GPU processes").format(shown=shown, total=total),
        _(SORT_WORDS[sort]) if sort in SORT_WORDS else sort,
    ]
    if query:
        parts.append(_("filter {text}").format(text=visible(query, 60)))
    if age:
        parts.append(age)
    if marked:
        parts.append(_("* not visible to the login"))
    return " · ".join(parts)


__all__ = ["SORTS", "Column", "cells", "columns", "describe", "outcome_words", "row_key", "summary"]
