"""The fleet table: rows diffed by key, so the cursor and the scroll survive every refresh.

Only cells whose text or style changed are updated, with update_width=False (columns have
fixed widths: re-measuring a column costs far more than drawing it); new rows are added,
rows gone are removed (the table is cleared instead when most are gone), and rows are
reordered only when the order changed, the cursor staying on its node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from tui.fleetview import Column

GROUP_PREFIX = "\x00group:"  # row keys of group headings: never a node's name


@dataclass(frozen=True)
class TableRow:
    key: str
    cells: Mapping[str, Text]
    # Every cell's text and style; a row whose sig is what the table shows is skipped
    # whole (most rows, most refreshes). Empty: compare cell by cell.
    sig: tuple[object, ...] = ()


def _same(a: Text, b: Text) -> bool:
    return a.plain == b.plain and a.style == b.style and a.spans == b.spans


class FleetTable(DataTable[Text]):
    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    """
    # Bound here, not on the screen: the focused table would take enter, home and end
    # first (DataTable binds them to select and horizontal scroll), and the footer, help
    # and palette show the binding that wins. Enter runs the screen's open (a node) or
    # fold (a group heading).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.open_node", "Open", id="fleet-open",
                tooltip="Open the selected node (GPUs, charts, lease); fold or unfold a group"),
        Binding("home", "first_row", "First row", id="fleet-first", show=False,
                tooltip="Go to the first row"),
        Binding("end", "last_row", "Last row", id="fleet-last", show=False,
                tooltip="Go to the last row"),
    ]  # fmt: skip

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.shown_columns: tuple[Column, ...] = ()
        self.updates = 0  # cells updated by the last show() (tests read it)
        self._sigs: dict[str, tuple[object, ...]] = {}  # row key -> the sig it shows
        self._cells: dict[str, Mapping[str, Text]] = {}  # row key -> the cells it was given

    @property
    def selected_key(self) -> str | None:
        """The node under the cursor; None on a group heading or in an empty table."""
        if self.row_count == 0:
            return None
        key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        value = key.value
        return None if value is None or value.startswith(GROUP_PREFIX) else value

    def _cursor_key(self) -> str | None:
        if self.row_count == 0:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate)[0].value

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def set_columns(self, columns: Sequence[Column]) -> bool:
        """Show these columns; True when they changed (the rows must be shown again)."""
        cols = tuple(columns)
        if cols == self.shown_columns:
            return False
        self.clear(columns=True)
        self._sigs.clear()
        self._cells.clear()
        for c in cols:
            self.add_column(c.label, width=c.width, key=c.key)
        self.shown_columns = cols
        return True

    def show(self, rows: Sequence[TableRow]) -> None:
        """Make the table hold these rows, in this order, changing only what differs."""
        keys = [c.key for c in self.shown_columns]
        blank = Text("", end="")
        cursor = self._cursor_key()
        wanted = {r.key for r in rows}
        present = {str(k.value) for k in self.rows}
        stale = present - wanted
        self.updates = 0
        with self.app.batch_update():
            if stale and len(stale) * 2 > len(present):
                self.clear()
                self._sigs.clear()
                self._cells.clear()
                present = set()
            else:
                for key in stale:
                    self.remove_row(key)
                    self._sigs.pop(key, None)
                    self._cells.pop(key, None)
                present -= stale
            for row in rows:
                if row.sig and row.key in present and self._sigs.get(row.key) == row.sig:
                    continue
                self._sigs[row.key] = row.sig
                cells = [row.cells.get(k, blank) for k in keys]
                old = self._cells.get(row.key)
                self._cells[row.key] = row.cells
                if row.key not in present:
                    self.add_row(*cells, key=row.key)
                    continue
                for k, cell in zip(keys, cells, strict=True):
                    # What this table was last given for the cell (cheaper than get_cell).
                    was = old.get(k, blank) if old is not None else self.get_cell(row.key, k)
                    if not _same(was, cell):
                        self.update_cell(row.key, k, cell, update_width=False)
                        self.updates += 1
            order = [r.key for r in rows]
            if [str(r.key.value) for r in self.ordered_rows] != order:
                self._reorder(order)
            if cursor is not None and cursor in wanted:
                index = self.get_row_index(cursor)
                if index != self.cursor_row:
                    self.move_cursor(row=index, animate=False, scroll=False)

    def _reorder(self, order: list[str]) -> None:
        # DataTable.sort hands the key function cell values only: rank each row by the
        # identity of its first cell, which is unique to the row.
        first = self.shown_columns[0].key
        rank = {id(self.get_cell(k, first)): i for i, k in enumerate(order)}
        self.sort(first, key=lambda cell: rank[id(cell)])
