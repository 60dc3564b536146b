"""What the fleet screen shows of each node, computed without Textual (easy to test).

A row is built from the node, its status, its lease billing now, its last hour and its
alerts; its cells are Cells (text, never markup, drawn as Rich Text) with a style where
the style says something (the countdown's urgency, a node in trouble). Columns carry a
priority: at a narrow terminal the least important go first (name, state, GPUs, util,
lease end and alerts stay); a value wider than its column is shortened by word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.text import Text

from leases.core.i18n import N_, _, is_chinese, language, pgettext
from leases.core.models import Node, NodeHealth, NodeStatus
from leases.core.textsafe import visible
from leases.fleet.data import FleetData
from leases.fleet.filter import RowFacts
from leases.fleet.header import countdown, header, header_line, short_path
from leases.fleet.nodestatus import STALE_STATE, Figures, health_label, is_stale, status_figures
from leases.fleet.sparkline import CELLS, bars
from leases.money.amounts import whole
from leases.money.renewals import BillingNow, starts_in
from leases.offboard.evidence import Progress
from leases.offboard.status import short as offboard_short
from tui.widgets.valuewords import value_words
from tui.words import disk_cell, ram_cell

if TYPE_CHECKING:
    from leases.alerts.state import StoredAlert

# Longest a value from a node or the ledger may make one table cell.
CELL_MAX = 48
SPARK_CELLS = CELLS  # 5 minutes a cell over the hour
NO_HOUR: tuple[float | None, ...] = (None,) * CELLS  # a node read no hour of: all gaps
STALE = STALE_STATE  # a node's state when its last reading is old (shown as _(state))


def plain(value: object, max_len: int | None = None, *, wrap: bool = False) -> Text:
    """How the dashboard shows any text: controls made visible, never read as markup
    (a `[/]` in a GPU name would otherwise stop the dashboard)."""
    return Text(visible(value, max_len), no_wrap=not wrap, end="")


class Cell:
    """One table cell: its text (made visible, never markup) and one style, made Rich Text
    only when drawn. A Text is three objects the garbage collector walks (itself, its text
    list, its span list); 500 rows of 13 cells renewed every refresh were most of what a
    full collection walked, and a full collection holds the UI loop."""

    __slots__ = ("justify", "plain", "style")
    spans = ()  # what Text has too: a cell has one style, no spans

    def __init__(self, plain: str, style: str = "", justify: JustifyMethod | None = None) -> None:
        self.plain = plain
        self.style = style
        self.justify = justify

    def __rich__(self) -> Text:
        return Text(self.plain, style=self.style, justify=self.justify, no_wrap=True, end="")

    def __str__(self) -> str:
        return self.plain

    def __repr__(self) -> str:
        return f"Cell({self.plain!r}, {self.style!r})"


def cell(value: object, max_len: int | None = CELL_MAX, style: str = "") -> Cell:
    """Any text from a node or the ledger as a cell: controls made visible, cut."""
    return Cell(visible(value, max_len), style)


CELL_PADDING = 2  # DataTable's padding: one cell each side


@dataclass(frozen=True)
class Column:
    """A fleet column. priority: 0 is kept longest at a narrow terminal (a new column says
    where it ranks, nothing else to change); width: its values', never less than its
    label's less CELL_PADDING (a header is never cut: one wider than its values is drawn
    over the column's padding by FleetTable, so 利用率 over 'Util' costs Chinese no room
    English has, and both show the same columns at every width); short: words replaced,
    in order, while a value is wider than the column (see `shorten`)."""

    key: str
    label: str  # marked with N_: shown as _(label), measured so by `visible_columns`
    width: int
    priority: float
    short: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", max(self.width, cell_len(self.label) - CELL_PADDING))


# In the order shown. Widths are fixed: a cell that changes never re-measures its column.
# What a user looks for first stays longest: the node, its state, its cards and whether
# they work, when its lease ends and what it costs; alerts beside; the rest as room allows.
COLUMNS: tuple[Column, ...] = (
    Column("node", N_("Node"), 16, 0),
    Column("channel", N_("Channel/provider"), 16, 10),
    Column("gpus", N_("GPUs"), 12, 2),
    Column("state", N_("State"), 13, 1),
    Column("util", N_("Util"), 4, 3),
    Column("hour", N_("Last hour"), SPARK_CELLS, 9),
    Column("mem", N_("Memory"), 9, 6),
    Column("temp", N_("Temp"), 4, 12),
    Column("power", N_("Power"), 6, 11),
    Column("cost", N_("Month"), 11, 7),
    Column("ends", N_("Lease end"), 14, 4,
           (("starts in ", "in "), (" days", " d"), (" day", " d"))),
    Column("alerts", N_("Alert"), 5, 5),
    Column("offboard", N_("Offboard"), 12, 13),
    # The node beyond its GPUs (tui.screens.hostview): the fullest data disk, memory used.
    Column("disk", N_("Disk"), 4, 10.5),
    Column("ram", N_("RAM"), 4, 14),
)  # fmt: skip


def shorten(text: str, width: int, short: Sequence[tuple[str, str]] = ()) -> str:
    """`text` in `width` terminal cells, shortened meaningfully, never cut mid-word: the
    column's own short words first ('starts in 1 day' -> 'in 1 d'), then whole words off
    the end ('8×A800 80GB SXM' -> '8×A800 80GB'), and only a single word too long for the
    column is cut, marked '…'."""
    for long, brief in short:
        if cell_len(text) <= width:
            break
        text = text.replace(long, brief)
    words = text.split(" ")
    while cell_len(text) > width and len(words) > 1:
        words.pop()
        text = " ".join(words).rstrip()
    if cell_len(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        if used + cell_len(ch) > width - 1:
            break
        out += ch
        used += cell_len(ch)
    return out + "…"


COLUMN_KEYS = tuple(c.key for c in COLUMNS)
NODE_WIDTH = (8, 24)  # the name column fits the longest name within these bounds


def node_width(names: Sequence[str]) -> int:
    """The name column's width: the longest name in terminal cells (a Chinese character
    is two), within NODE_WIDTH."""
    widest = max((cell_len(visible(n, CELL_MAX)) for n in names), default=0)
    return max(NODE_WIDTH[0], min(NODE_WIDTH[1], widest))


# Where a terminal has room to spare, these columns grow (in this order) up to these widths:
# their text is cut at the fixed width ('colo/Jiangning I', 'stopped: gpu').
WIDER = (("channel", 32), ("offboard", 28), ("gpus", 20), ("state", 16))
# The Offboard column's priority while some node has an offboarding plan in force (it then
# comes right after the lease end); with none, it is the first to go.
OFFBOARDING_PRIORITY = 4.5


def channel_shorts() -> tuple[tuple[str, str], ...]:
    """The channels' words, and their short words where the column is narrow ('算力租赁平台'
    -> '平台'); English has no shorter words."""
    shorts = {
        "cloud": pgettext("channel short", "cloud"),
        "platform": pgettext("channel short", "platform"),
        "colo": pgettext("channel short", "colo"),
    }
    return tuple((value_words(v), s) for v, s in shorts.items() if value_words(v) != s)


def visible_columns(
    width: int, name_width: int, *, offboarding: bool = False
) -> tuple[Column, ...]:
    """The columns that fit `width` cells, most important first, shown in table order;
    room left over widens the columns whose text is cut (WIDER). offboarding: some node
    has an offboarding plan in force, so its column ranks high."""
    cols = []
    for c in COLUMNS:
        # The label in the language in use: its width is measured again (a Chinese
        # label is two cells a character; one wider than the values takes the padding).
        c = replace(c, label=_(c.label))
        if c.key == "channel":
            c = replace(c, short=channel_shorts())
        if c.key == "node":
            c = replace(c, width=name_width)
        elif c.key == "offboard" and offboarding:
            c = replace(c, priority=OFFBOARDING_PRIORITY)
        cols.append(c)
    used = 0
    keep: set[str] = set()
    for c in sorted(cols, key=lambda c: c.priority):
        need = c.width + CELL_PADDING
        if used + need > width and keep:
            continue
        keep.add(c.key)
        used += need
    widths = {c.key: c.width for c in cols}
    room = width - used
    for key, most in WIDER:
        # No plan in force: the offboard column shows dashes, which need no room.
        if key in keep and room > 0 and (key != "offboard" or offboarding):
            grow = min(room, most - widths[key])
            widths[key] += max(0, grow)
            room -= max(0, grow)
    return tuple(replace(c, width=widths[c.key]) for c in cols if c.key in keep)


def fit(value: Cell | Text, column: Column) -> Cell | Text:
    """A cell as its column shows it: shortened (see `shorten`) when wider than it."""
    if isinstance(value, Cell) and cell_len(value.plain) > column.width:
        return Cell(shorten(value.plain, column.width, column.short), value.style, value.justify)
    return value


def fit_header(line: str, width: int, *, path: bool = True) -> str:
    """The header in `width` cells: the ledger path (its last part) always whole at its
    end; the figures before it whole items, those that do not fit dropped, marked '…'
    (fit_items: a figure is never cut). path=False: a line without a path (the status
    line), its items kept from the first."""
    if cell_len(line) <= width or not path:
        return fit_items(line, width)
    figures, sep, end = line.rpartition(" · ")
    if not sep:
        figures, end = line, ""
    most = max(16, width // 4)  # a long path keeps its end: the file and its folder
    if cell_len(end) > most:
        end = "…" + end[-(most - 1) :]
    room = width - cell_len(end) - len(sep)
    if room < 8:  # too narrow for both: the figures first
        return fit_items(line, width)
    return fit_items(figures, room) + sep + end


def fit_items(line: str, width: int) -> str:
    """A line of items joined by ' · ' in `width` cells: whole items, as many from the
    first as fit, then '…' for those dropped. An item is never cut: "闲置 ¥14,70…" reads
    as another amount. A first item alone too wide keeps its first words, whole."""
    if cell_len(line) <= width:
        return line
    items = line.split(" · ")
    kept: list[str] = []
    for item in items:
        if cell_len(" · ".join([*kept, item, "…"])) > width:
            break
        kept.append(item)
    if kept:
        return " · ".join([*kept, "…"])
    words: list[str] = []
    for word in items[0].split(" "):
        if cell_len(" ".join([*words, word])) + 1 > width:
            break
        words.append(word)
    return " ".join(words) + "…" if words else shorten_cells(items[0], width)


def shorten_cells(text: str, width: int) -> str:
    """`text` in `width` terminal cells: cut, marked '…', when longer."""
    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        if used + cell_len(ch) > width - 1:
            break
        out.append(ch)
        used += cell_len(ch)
    return "".join(out).rstrip(" ·") + "…"


HEALTH_STYLE = {
    NodeHealth.OK: "green",
    NodeHealth.CONNECTING: "dim",
    NodeHealth.HOSTKEY_CHANGED: "bold red",
    NodeHealth.UNTRUSTED: "yellow",
    NodeHealth.REFUSED: "red",
}
HEALTH_RANK = {h: i for i, h in enumerate(NodeHealth)}


def urgency_style(seconds_left: float | None) -> str:
    """The countdown's colour: red when past or within a day, orange within three days,
    yellow within a week; unstyled beyond."""
    if seconds_left is None:
        return "dim"
    days = seconds_left / 86400
    if days < 1:
        return "bold red"
    if days < 3:
        return "dark_orange"
    if days < 7:
        return "yellow"
    return ""


@dataclass(frozen=True)
class FleetRow:
    key: str
    cells: Mapping[str, Cell]  # by column key: safe to show (made visible, never markup)
    sort: Mapping[str, Any]  # by column key: what sorting compares; None: unknown, last
    facts: RowFacts
    sig: tuple[tuple[str, str], ...] = ()  # every cell's text and style: equal, nothing to draw


# Within this many days a lease end reads as '2 Jun' (the countdown beside it says which
# year); further away as 'Jun 2028'. Never '27-06-02', which reads as YY-MM-DD or MM-DD.
DAY_MONTH_DAYS = 300


def end_day(at: datetime, now: datetime) -> str:
    """'16 Dec' or 'Jun 2028': the day a lease ends, beside its countdown."""
    near = abs((at - now).days) < DAY_MONTH_DAYS
    if is_chinese():  # month names are English words: Chinese reads ISO's 12-16, 2028-06
        return f"{at:%m-%d}" if near else f"{at:%Y-%m}"
    if near:
        return f"{at.day} {at:%b}"
    return f"{at:%b %Y}"


def lease_end(billing: BillingNow | None, now: datetime) -> tuple[str, float | None]:
    """The lease-end cell and the seconds of paid-for time left (None: no end).
    A renewed chain shows the end of what is paid for, marked ↻."""
    lease = billing.lease if billing else None
    if billing is None or lease is None:
        return "-", None
    if not billing.started:
        return starts_in(lease, now), None  # booked, not billing yet
    if lease.end is None:
        return pgettext("lease end", "open"), None
    paid = billing.paid_until or lease.end
    left = (paid - now).total_seconds()
    mark = "↻" if paid != lease.end else ""
    return f"{mark}{countdown(paid, now)} {end_day(paid, now)}", left


def alert_marker(alerts: list[StoredAlert]) -> str:
    """A fleet table cell: how many open alerts, ! for warnings, !! if any is critical."""
    if not alerts:
        return ""
    worst = max(a.severity.rank for a in alerts)
    return f"{'!!' if worst >= 2 else '!'}{len(alerts)}"


def _cell(value: float | None, fmt: str) -> Cell:
    return Cell("-" if value is None else fmt.format(value))


@dataclass(frozen=True)
class LeasePart:
    """What a row shows of its node's lease, provider, alerts, month's cost and
    offboarding: the same while they are (and the minute and the language), whatever the
    node's readings do, so kept between refreshes that bring new readings only."""

    cells: Mapping[str, Cell]
    sort: Mapping[str, Any]
    left: float | None  # paid-for time left (None: no end)
    alerts: int


def lease_part(
    node: Node,
    billing: BillingNow | None,
    now: datetime,
    alerts: Sequence[StoredAlert] = (),
    channel: str = "",
    month_cost: Decimal | None = None,
    currency: str = "CNY",
    offboard: Progress | None = None,
) -> LeasePart:
    """The cells of a row that do not come from the node's readings (see fleet_row)."""
    lease = billing.lease if billing else None
    ends, left = lease_end(billing, now)
    worst = max((a.severity.rank for a in alerts), default=0)
    provider = node.provider or ""
    cells = {
        "node": cell(node.name),
        # The channel in words ('算力租赁平台'); the filter compares facts.channel (English).
        "channel": cell(f"{value_words(channel) if channel else '-'}/{provider or '-'}"),
        "cost": Cell(
            # "several": the node's leases this month are in two currencies (never added).
            _("several")
            if currency == "several"
            else "-"
            if month_cost is None
            else whole(month_cost, currency),
            justify="right",
        ),
        "ends": Cell(ends, urgency_style(left) if lease else "dim"),
        "alerts": Cell(alert_marker(list(alerts)), "bold red" if worst >= 2 else "yellow"),
        "offboard": Cell(
            offboard_short(offboard), "red" if offboard is not None and offboard.stopped else ""
        ),
    }
    sort = {
        "node": node.name.casefold(),
        "channel": (channel, provider.casefold(), node.name.casefold()),
        "cost": month_cost,
        "ends": left,
        "alerts": (worst, len(alerts)),
        "offboard": None if offboard is None else (offboard.finished, offboard.passed),
    }
    return LeasePart(cells, sort, left, len(alerts))


def fleet_row(
    node: Node,
    status: NodeStatus | None,
    billing: BillingNow | None,
    hour: Sequence[float | None],
    now: datetime,
    alerts: Sequence[StoredAlert] = (),
    channel: str = "",
    month_cost: Decimal | None = None,
    currency: str = "CNY",
    offboard: Progress | None = None,
    lease: LeasePart | None = None,
    spark: tuple[Cell, float | None] | None = None,
) -> FleetRow:
    """One node's row. hour: its last hour, a mean a sparkline cell (leases.fleet.sparkline:
    stored minutes and live readings on one scale; None a gap); alerts: its open alerts;
    channel: its provider's kind; month_cost: what its leases cost this month so far
    (leases.fleet.header.MonthMoney.by_node); offboard: its offboarding plan in force.
    lease: lease_part of the same arguments, where it was kept (made here otherwise);
    spark: the hour's cell and its sort value, kept while the node's hour is the same."""
    if lease is None:
        lease = lease_part(node, billing, now, alerts, channel, month_cost, currency, offboard)
    health = status.health if status else NodeHealth.CONNECTING
    fig: Figures | None = status_figures(status)
    samples = status.samples if fig is not None and status else ()
    stale = bool(status and is_stale(status))
    state = STALE if stale else health_label(health)
    gpus = f"{len(samples) or node.gpu_count}×{node.gpu_model}" if node.gpu_model else (
        f"{len(samples) or node.gpu_count}×")  # fmt: skip
    util = fig.util if fig else None
    mem = (
        f"{fig.mem_used_gib:.0f}/{fig.mem_total_gib:.0f}G"
        if fig and fig.mem_used_gib is not None and fig.mem_total_gib is not None
        else "-"
    )
    host = status.host if status else None
    fullest = host.fullest_data if host else None
    disk_pct = fullest.used_pct if fullest else None
    if spark is None:
        known = [v for v in hour if v is not None]
        spark = (Cell(bars(hour), "cyan"), sum(known) / len(known) if known else None)
    held = lease.cells
    cells = {
        "node": held["node"],
        "channel": held["channel"],
        "gpus": cell(gpus),
        # The filter compares facts.state (the stored value, or stale); shown translated.
        "state": Cell(_(state), HEALTH_STYLE.get(health, "red")),
        "util": Cell("-" if util is None else f"{util:3.0f}%"),
        "hour": spark[0],
        "mem": Cell(mem),
        "temp": _cell(None if fig is None else fig.temp_max, "{:.0f}°"),
        "power": _cell(None if fig is None else fig.power_w, "{:.0f}W"),
        "cost": held["cost"],
        "ends": held["ends"],
        "alerts": held["alerts"],
        "offboard": held["offboard"],
        "disk": Cell(disk_cell(host) or "-", "red" if disk_pct and disk_pct >= 90 else ""),
        "ram": Cell(ram_cell(host) or "-"),
    }
    kept = lease.sort
    sort = {
        "node": kept["node"],
        "channel": kept["channel"],
        "gpus": (len(samples) or node.gpu_count, node.gpu_model),
        "state": HEALTH_RANK.get(health, 0),
        "util": util,
        "hour": spark[1],
        "mem": fig.mem_used_gib if fig else None,
        "temp": fig.temp_max if fig else None,
        "power": fig.power_w if fig else None,
        "cost": kept["cost"],
        "ends": kept["ends"],
        "alerts": kept["alerts"],
        "offboard": kept["offboard"],
        "disk": disk_pct,
        "ram": host.mem_used_pct if host else None,
    }
    facts = RowFacts(
        name=node.name,
        channel=channel,
        provider=node.provider or "",
        model=node.gpu_model,
        tags=node.tags,
        notes=node.notes,
        state=STALE if stale else health.value,
        idle=fig is not None and fig.gpus > 0 and fig.idle == fig.gpus,
        busy=fig is not None and fig.busy > 0,
        ends_in_s=lease.left,
        alerts=lease.alerts,
    )
    sig = tuple([(c.plain, c.style) for c in cells.values()])
    return FleetRow(node.name, cells, sort, facts, sig)


@dataclass(frozen=True)
class Refreshed:
    """What one refresh read and built, handed from the reader's thread to the UI."""

    data: FleetData
    rows: list[FleetRow]
    header: str


# node name -> (the row's inputs, the row, the lease part's inputs, the lease part): the
# reader's, between refreshes.
RowMemo = dict[str, tuple[tuple[object, ...], FleetRow, tuple[object, ...], LeasePart]]


def build(
    data: FleetData,
    now: datetime,
    ledger_label: str,
    limit: int | None = None,
    memo: RowMemo | None = None,
) -> Refreshed:
    """The rows and the header from what was read, joined by the fleet read model
    (leases.fleet.data: pure but for `memo`: runs on the reader's thread). limit: rows for
    the first nodes by name only (a first paint; the header counts all). memo: a row whose
    inputs equal those of the last refresh (and the same minute: countdowns count
    minutes; and the same language) is that refresh's row, not built again."""
    facts = data.facts
    statuses = data.statuses
    by_node: dict[int | None, list[StoredAlert]] = {}
    for a in data.alerts:
        by_node.setdefault(a.node_id, []).append(a)
    nodes = facts.nodes
    minute, lang = int(now.timestamp()) // 60, language()
    rows = []
    for n in nodes[:limit]:
        i = n.id if n.id is not None else -1
        args = (n, statuses.get(i), facts.billing.get(i), data.hour.get(i, NO_HOUR),
                tuple(by_node.get(n.id, ())), facts.channels.get(n.provider or "", ""),
                data.money.by_node.get(n.id) if data.money and n.id is not None else None,
                (data.money.node_currency.get(n.id or -1, data.money.currency) or "several")
                if data.money else "CNY",
                facts.offboard.get(n.id) if n.id is not None else None)  # fmt: skip
        node, status, billing, hour, alerts, channel, cost, currency, offboard = args
        # A row is words: built again in another language (and countdowns each minute).
        key = (minute, lang, *args)
        held = (minute, lang, node, billing, alerts, channel, cost, currency, offboard)
        hit = memo.get(n.name) if memo is not None else None
        if hit is not None and hit[0] == key:
            rows.append(hit[1])
            continue
        # New readings alone (every refresh after a write): the lease's cells are kept.
        if hit is not None and hit[2] == held:
            lease = hit[3]
        else:
            lease = lease_part(node, billing, now, alerts, channel, cost, currency, offboard)
        # The same hour (the reader hands on one tuple while its minutes stand): its cell.
        spark = (hit[1].cells["hour"], hit[1].sort["hour"]) if hit and hit[0][5] is hour else None
        row = fleet_row(node, status, billing, hour, now, alerts, channel, cost, currency,
                        offboard, lease, spark)  # fmt: skip
        if memo is not None:
            memo[n.name] = (key, row, held, lease)
        rows.append(row)
    if memo is not None and limit is None:  # nodes gone from the ledger are forgotten
        for name in memo.keys() - {n.name for n in nodes}:
            del memo[name]
    if data.total is not None:  # the first nodes only: the header waits for them all
        reading = _("reading {count} nodes…").format(count=data.total)
        line = f"{reading} · {short_path(visible(ledger_label))}"
        return Refreshed(data, rows, line)
    head = header(nodes, statuses, facts.billing, data.money, ledger_label, now)
    return Refreshed(data, rows, header_line(head, now))
