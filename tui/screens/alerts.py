"""The alert list: every alert not cleared, acknowledged with k, snoozed for a day with z,
open again with u (undoes either)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from leases.alerts import state as alertstate
from leases.alerts.state import State, StoredAlert
from leases.core.errors import InputError, LedgerError
from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from leases.money.amounts import bare
from tui.screens.alertwords import kind_words, severity_words, state_words
from tui.screens.fleetview import plain
from tui.screens.nodeview import alert_amount
from tui.widgets.footer import ZukaFooter

# The yuan in a column of its own: a long message is cut at the table's edge.
COLUMNS = (N_("ID"), N_("Severity"), N_("State"), N_("Node"), N_("Kind"), N_("Since"), "¥",
           N_("Message"))  # fmt: skip
# Below this width Since and ¥ leave the table (they are said under it) for the message.
NARROW = 100
AMOUNT = N_("Amount")
SNOOZE = timedelta(days=1)


def _width(cell: str | Text) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


class AlertsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,a", "back", N_("Back"), id="alerts-back",
                tooltip=N_("Back to the fleet")),
        Binding("k", "ack", N_("Acknowledge"), id="alerts-ack",
                tooltip=N_("Hide until it clears")),
        Binding("z", "snooze", N_("Snooze 1 day"), id="alerts-snooze",
                tooltip=N_("Hide for a day")),
        Binding("u", "reopen", N_("Reopen"), id="alerts-reopen",
                tooltip=N_("Undo acknowledge or snooze")),
    ]  # fmt: skip

    DEFAULT_CSS = """
    #alerts { height: auto; max-height: 1fr; }
    #alerts-title { background: $boost; text-style: bold; padding: 0 1; }
    #alerts-action { padding: 1 1 0 1; }
    """

    def __init__(self, ledger: Ledger, clock: Callable[[], datetime], tz: str = DEFAULT_TZ) -> None:
        super().__init__()
        self.ledger = ledger
        self.clock = clock
        # Times in the billing zone, as `zuka alerts` prints them.
        self.zone = ZoneInfo(tz)

    def compose(self) -> ComposeResult:
        yield Static(id="alerts-title")
        yield DataTable(id="alerts", cursor_type="row", zebra_stripes=True)
        yield Static(id="alerts-action")
        yield ZukaFooter()

    def on_mount(self) -> None:
        self.refresh_list()

    def on_resize(self) -> None:
        self.refresh_list()

    def relabel(self) -> None:
        """In the language in use (tui.dashboard.language)."""
        self.refresh_list()

    def _rows(self) -> list[StoredAlert]:
        now = self.clock()
        return [a for a in alertstate.alerts(self.ledger, now, everything=True)
                if a.state(now) is not State.CLEARED]  # fmt: skip

    def refresh_list(self) -> None:
        now = self.clock()
        rows = self._rows()
        table = self.query_one("#alerts", DataTable)
        cursor = table.cursor_row
        # As a report does: a column of one currency names it (¥) over bare amounts;
        # among several (a USD lease's alert), each amount says its own.
        in_cny = all(a.yuan is None or a.currency == "CNY" for a in rows)
        columns = tuple(_(c) for c in (COLUMNS if in_cny else (*COLUMNS[:6], AMOUNT, COLUMNS[-1])))
        cells = [
            (
                str(a.id),
                severity_words(a.severity.value),
                state_words(a.state(now).value),
                plain(a.node, 30),
                kind_words(a.kind),
                f"{a.first_seen.astimezone(self.zone):%m-%d %H:%M}",
                ("" if a.yuan is None else bare(a.yuan)) if in_cny else alert_amount(a),
            )
            for a in rows
        ]
        # The message takes the width the other columns leave (sized to the longest
        # message it was cut at the table's edge: 3 characters at 80 columns); the whole
        # message of the selected alert is under the table.
        keep = len(columns) - 1 if self.app.size.width >= NARROW else 5
        pad = 2 * table.cell_padding
        widths = [
            max([cell_len(name), *(_width(r[i]) for r in cells)]) + pad
            for i, name in enumerate(columns[:keep])
        ]
        room = max(12, self.app.size.width - sum(widths) - pad - 2)  # 2: the scrollbar
        table.clear(columns=True)
        for name, width in zip(columns[:keep], widths, strict=True):
            table.add_column(name, width=width - pad)
        table.add_column(columns[-1], width=room, key="message")
        for a, row in zip(rows, cells, strict=True):
            table.add_row(*row[:keep], plain(a.message, 200), key=str(a.id))
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))
        shown = sum(1 for a in rows if a.state(now) is State.OPEN)
        # The keys are in the footer (and in help): the title says only what is listed.
        title = _("Alerts: {open} open, {other} acknowledged or snoozed").format(
            open=shown, other=len(rows) - shown
        )
        self.query_one("#alerts-title", Static).update(plain(title))
        self._show_action()

    def _selected(self) -> int | None:
        table = self.query_one("#alerts", DataTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return None if key.value is None else int(key.value)

    def _show_action(self) -> None:
        chosen = self._selected()
        found = [a for a in self._rows() if a.id == chosen]
        # The whole message and what to do, under the table: at 80 columns the message
        # column is cut at the table's edge.
        text = ""
        if found:
            a = found[0]
            since = _("since {time}").format(
                time=f"{a.first_seen.astimezone(self.zone):%m-%d %H:%M}"
            )
            money = "" if a.yuan is None else f" · {alert_amount(a)}"
            text = f"{since}{money} · {visible(a.message, 400)}"
            if a.action:
                text += f"\n→ {visible(a.action, 400)}"
        self.query_one("#alerts-action", Static).update(Text(text))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_action()

    def _act(self, act: Callable[[int], StoredAlert], said: str) -> None:
        chosen = self._selected()
        if chosen is None:
            return
        try:
            done = act(chosen)
        except InputError as exc:
            self.notify(f"{exc.field}: {exc.reason}", markup=False, severity="warning")
            return
        except LedgerError as exc:  # read-only, full, locked: said, and nothing changed
            self.notify(visible(exc, 300), markup=False, severity="error")
            return
        self.notify(
            _(said).format(id=done.id, kind=kind_words(done.kind), node=visible(done.node, 60)),
            markup=False,
        )
        self.refresh_list()

    def action_back(self) -> None:
        self.dismiss(None)

    def action_ack(self) -> None:
        self._act(
            lambda i: alertstate.ack(self.ledger, i, self.clock(), self.ledger.actor or "?"),
            N_("acknowledged #{id} ({kind} on {node})"),
        )

    def action_snooze(self) -> None:
        self._act(lambda i: alertstate.snooze(self.ledger, i, self.clock() + SNOOZE),
                  N_("snoozed #{id} ({kind} on {node})"))  # fmt: skip

    def action_reopen(self) -> None:
        self._act(lambda i: alertstate.reopen(self.ledger, i),
                  N_("opened again #{id} ({kind} on {node})"))  # fmt: skip
