"""The fleet table: rows diffed by key, so the cursor and the scroll survive every refresh.

Only cells whose text or style changed are updated, with update_width=False (columns have
fixed widths: re-measuring a column costs far more than drawing it); new rows are added,
rows gone are removed (the table is cleared instead when most are gone), and rows are
reordered only when the order changed, the cursor staying on its node.

Three costs of DataTable are kept off the UI loop's longest stall (issue 9: under 50 ms
with 500 rows), through its internals (textual is pinned to the versions tested):
- Adding a row costs it ~0.4 ms: a first fill of 500 rows is added ADD_PER_PASS at a time,
  one pass a frame apart, the newest rows asked for always winning; the cursor's row,
  when a rebuild has not added it yet, gets the cursor back once it is (select_key).
- update_cell asks for a refresh of the whole table each time: changed cells are written
  into its data and one refresh asked per update, for UPDATE_PER_PASS changed rows a pass
  (1,000 rows all changed took a 20-30 ms pass; the rest follow a frame later).
- Any cell update makes it render every visible cell again (its caches are keyed by one
  update counter for the whole table): here a rendered cell is kept until that cell, its
  place or its look changes, so a refresh renders only the cells that changed.
"""

from __future__ import annotations

import operator
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.timer import Timer
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from leases.core.i18n import N_
from tui.screens.fleetview import Cell, Column, fit

# Row keys of group headings. A stored node name may be anything (a ledger edited by hand):
# a number drawn per process keeps one from posing as a heading (or a heading's key).
GROUP_PREFIX = f"\x00group:{secrets.token_hex(8)}:"
ADD_PER_PASS = 60  # rows added to the table per pass (more than a screen holds)
UPDATE_PER_PASS = 300  # rows whose cells change, per pass
PASS_GAP_S = 0.02  # between passes: the loop gets a turn, a frame may be drawn
# Rendered cells kept: a few screens of 13 columns, with and without the cursor.
CELL_CACHE = 2048
HEADING = Style(bold=True)  # a group heading's label


@dataclass(frozen=True)
class TableRow:
    key: str
    cells: Mapping[str, Cell | Text]  # Text: a group heading's
    # Every cell's text and style; a row whose sig is what the table shows is skipped
    # whole (most rows, most refreshes). Empty: compare cell by cell.
    sig: tuple[object, ...] = ()


def _same(a: Cell | Text, b: Cell | Text) -> bool:
    return a.plain == b.plain and a.style == b.style and list(a.spans) == list(b.spans)


def same_rows(new: Sequence[object], old: Sequence[object]) -> bool:
    """The very same row objects, in the same order: a refresh that brought nothing new (the
    reader hands on each row it did not build again) has nothing to draw."""
    return len(new) == len(old) and all(map(operator.is_, new, old))


class FleetTable(DataTable[Cell | Text]):
    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    """
    # Bound here, not on the screen: the focused table would take enter, home and end
    # first (DataTable binds them to select and horizontal scroll), and the footer, help
    # and palette show the binding that wins. Enter runs the screen's open (a node) or
    # fold (a group heading).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "screen.open_node", N_("Open"), id="fleet-open",
                tooltip=N_("Open the selected node (GPUs, charts, lease); fold or unfold a group")),
        Binding("home", "first_row", N_("First row"), id="fleet-first", show=False,
                tooltip=N_("Go to the first row")),
        Binding("end", "last_row", N_("Last row"), id="fleet-last", show=False,
                tooltip=N_("Go to the last row")),
    ]  # fmt: skip

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.shown_columns: tuple[Column, ...] = ()
        self.updates = 0  # cells updated by the last show() (tests read it)
        self._sigs: dict[str, tuple[object, ...]] = {}  # row key -> the sig it shows
        self._cells: dict[str, Mapping[str, Cell | Text]] = {}  # row key -> the cells it was given
        self._wanted: Sequence[TableRow] = ()  # what the last show() asked for
        self._pass: Timer | None = None  # the next pass, while rows are still to be added
        self.pending = 0  # rows still to be added (tests and benchmarks read it)
        self._wish: str | None = None  # a row to put the cursor on once it is added
        # (row key, column key) -> a number that changes whenever that cell's value does
        self._version: dict[tuple[str, str], int] = {}
        self._versions = count()
        self._rendered: LRUCache[tuple[object, ...], list[list[Segment]]] = LRUCache(CELL_CACHE)
        # DataTable's own caches, keyed by its update counter, go stale at every update:
        # kept to about a screen so their dead entries do not pile up (memory, GC time).
        self._cell_render_cache = LRUCache(256)
        self._row_renderable_cache = LRUCache(128)
        self._line_cache = LRUCache(256)
        self._row_render_cache = LRUCache(256)

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

    def select_key(self, key: str | None) -> None:
        """Put the cursor on this row, in view; a row still to be added gets it once it
        is (the table rebuilt after a resize adds its rows a pass at a time)."""
        self._wish = None
        if key is None:
            return
        if key in self.rows:
            self.move_cursor(row=self.get_row_index(key), animate=False, scroll=True)
        elif self.pending or self._pass is not None:
            self._wish = key

    @property
    def cursor_target(self) -> str | None:
        """The row the cursor is on, or the one it waits for (see select_key)."""
        return self._wish if self._wish is not None else self._cursor_key()

    def forget_wish(self) -> None:
        """The user moved the cursor: a row asked for earlier no longer is."""
        self._wish = None

    def set_columns(self, columns: Sequence[Column]) -> bool:
        """Show these columns; True when they changed (the rows must be shown again)."""
        cols = tuple(columns)
        if cols == self.shown_columns:
            return False
        self.clear(columns=True)
        self._forget()
        for c in cols:
            self.add_column(c.label, width=c.width, key=c.key)
        self.shown_columns = cols
        return True

    def _forget(self) -> None:
        self._sigs.clear()
        self._cells.clear()
        self._version.clear()
        self._rendered.clear()

    def show(self, rows: Sequence[TableRow]) -> None:
        """Make the table hold these rows, in this order, changing only what differs.
        Rows to add beyond ADD_PER_PASS follow in later passes (pending says how many);
        a later show() replaces what is left to do."""
        self._wanted = rows
        if self._pass is not None:
            self._pass.stop()
            self._pass = None
        self._show_pass()

    def _next_pass(self) -> None:
        self._pass = None
        self._show_pass()

    def _show_pass(self) -> None:
        rows = self._wanted
        keys = [c.key for c in self.shown_columns]
        blank = Cell("")
        cursor = self._cursor_key()
        wanted = {r.key for r in rows}
        present = {str(k.value) for k in self.rows}
        stale = present - wanted
        self.updates = 0
        added = changed = 0
        later = False  # changed rows left for the next pass
        # Rows in view (and a little around): a pass that changes none of them asks no
        # redraw (each would send the whole visible table to the terminal again).
        top = int(self.scroll_y)
        view = range(top - 2, top + self.size.height + 2)
        seen = False
        with self.app.batch_update():
            if stale and len(stale) * 2 > len(present):
                self.clear()
                self._forget()
                present = set()
            else:
                for key in stale:
                    self.remove_row(key)
                    self._sigs.pop(key, None)
                    self._cells.pop(key, None)
                    for k in keys:
                        self._version.pop((key, k), None)
                present -= stale
            for row in rows:
                if row.sig and row.key in present and self._sigs.get(row.key) == row.sig:
                    continue
                if row.key not in present and added >= ADD_PER_PASS:
                    continue  # the next pass adds it
                if row.key in present and row.sig:  # (one without is compared cell by cell)
                    if changed >= UPDATE_PER_PASS:
                        later = True  # the next pass updates it (its sig still the old)
                        continue
                    changed += 1
                self._sigs[row.key] = row.sig
                given = [row.cells.get(k, blank) for k in keys]
                # As shown: a value wider than its column shortened by word (not cut).
                cells = [fit(v, c) for v, c in zip(given, self.shown_columns, strict=True)]
                old = self._cells.get(row.key)
                self._cells[row.key] = row.cells
                if row.key not in present:
                    self.add_row(*cells, key=row.key)
                    for k in keys:
                        self._version[row.key, k] = next(self._versions)
                    present.add(row.key)
                    added += 1
                    continue
                data = self._data[RowKey(row.key)]
                before = self.updates
                for k, value, cell in zip(keys, given, cells, strict=True):
                    # What this table was last given for the cell (cheaper than get_cell).
                    if old is not None:
                        same = _same(old.get(k, blank), value)
                    else:
                        same = _same(self.get_cell(row.key, k), cell)
                    if not same:
                        # What update_cell(update_width=False) does, but for the refresh
                        # it asks each time (2,000 cells: two thirds of a 500-row update):
                        # asked once below.
                        data[ColumnKey(k)] = cell
                        self._version[row.key, k] = next(self._versions)
                        self.updates += 1
                if self.updates > before and not seen:
                    seen = self._row_locations.get(RowKey(row.key)) in view
            if self.updates:
                self._update_count += 1  # the table's own caches: stale lines not reused
                if seen:
                    self.refresh()
            order = [r.key for r in rows if r.key in present]
            if [str(r.key.value) for r in self.ordered_rows] != order:
                self._reorder(order)
            if self._wish is not None and self._wish in present:
                cursor, self._wish = self._wish, None
                self.move_cursor(row=self.get_row_index(cursor), animate=False, scroll=True)
            elif cursor is not None and cursor in present:
                index = self.get_row_index(cursor)
                if index != self.cursor_row:
                    self.move_cursor(row=index, animate=False, scroll=False)
        self.pending = len(wanted - present)
        if self._wish is not None and self._wish not in wanted:
            self._wish = None  # gone (filtered out, removed): the cursor stays
        if self.pending or later:
            self._pass = self.set_timer(PASS_GAP_S, self._next_pass)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """DataTable's rendering of a cell, kept while the cell's value, place (its row
        index is in the segments' meta, for the mouse), width and look stay the same."""
        if row_index == -1 and column_index >= 0:
            return self._header_cell(column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_index < 0 or column_index < 0 or row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if str(row_key.value).startswith(GROUP_PREFIX):
            return self._heading_cell(row_key, row_index, column_index, base_style, width,
                                      cursor, hover)  # fmt: skip
        version = self._version.get((str(row_key.value), str(column_key.value)))
        key = (row_key, column_key, version, row_index, column_index, width, base_style,
               cursor, hover, self._show_hover_cursor, self.show_cursor,
               self._pseudo_class_state)  # fmt: skip
        lines = self._rendered.get(key) if version is not None else None
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            if version is not None:
                self._rendered[key] = lines
        return lines

    def _header_cell(
        self, column_index: int, base_style: Style, width: int, cursor: bool, hover: bool
    ) -> list[list[Segment]]:
        """A column's header: DataTable's, but a label wider than the column's values
        (Column.width: 利用率 over a 4-cell percentage) is drawn whole over the column's
        padding, centred, where DataTable would cut it."""
        lines = super()._render_cell(-1, column_index, base_style, width, cursor, hover)
        label = self.ordered_columns[column_index].label.plain
        if cell_len(label) <= width - 2 * self.cell_padding or not lines or not lines[0]:
            return lines
        style = lines[0][0].style
        left = max(0, (width - cell_len(label)) // 2)
        line = [Segment(" " * left + label, style)]
        return [Segment.adjust_line_length(line, width, style), *lines[1:]]

    def _heading_cell(
        self,
        row_key: RowKey,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool,
        hover: bool,
    ) -> list[list[Segment]]:
        """A group heading is one cell across the row (a DataTable cell cannot span): its
        label, in the first column's cell, drawn by that cell as one line as wide as all
        the columns (a Chinese character is never split between cells); the other cells
        draw nothing."""
        if column_index > 0:
            return [[]]
        blank = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        style = blank[0][0].style if blank and blank[0] else None
        first = self._cells.get(str(row_key.value), {}).get(self.shown_columns[0].key)
        label = first.plain if first is not None else ""
        total = sum(c.get_render_width(self) for c in self.ordered_columns)
        line = [Segment(" " * self.cell_padding + label, (style or Style()) + HEADING)]
        return [Segment.adjust_line_length(line, total, style)]

    def notify_style_update(self) -> None:
        # A new theme or CSS: every cell looks different.
        super().notify_style_update()
        self._rendered.clear()

    def _reorder(self, order: list[str]) -> None:
        # DataTable.sort hands the key function cell values only: rank each row by the
        # identity of its first cell, which is unique to the row.
        first = self.shown_columns[0].key
        rank = {id(self.get_cell(k, first)): i for i, k in enumerate(order)}
        self.sort(first, key=lambda cell: rank[id(cell)])
