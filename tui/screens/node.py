"""One node (Enter on the fleet): its GPUs and processes now, its history as charts over
the last hour, day, week or its lease's life, its lease chain and cost, its resources,
acceptance results, open alerts and audit log.

Live figures come from the app (status_of, recent: in memory) every refresh; everything
from the ledger is read by a thread worker on a connection of its own, never on the UI
loop, and read again RELOAD_S after the last read finished (reads never overlap).
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Static, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from leases.app import acceptance
from leases.app.acceptance import Stored
from leases.core.errors import UnknownNode
from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import N_, _, is_chinese
from leases.core.models import NodeStatus
from leases.core.textsafe import visible
from leases.fleet import nodefacts
from leases.fleet.nodefacts import NodeFacts
from leases.fleet.nodestatus import health_label
from leases.ledger.store import Ledger
from leases.telemetry import series
from leases.telemetry.history import NodeMinute
from leases.telemetry.series import Span
from leases.telemetry.words import detail_said
from tui.dashboard.host import ZukaHost
from tui.screens import acceptview, hostview, nodeview
from tui.screens.fleetview import plain
from tui.widgets.charts import HistoryChart
from tui.widgets.footer import ZukaFooter

# Seconds between two reads of the ledger, counted from the end of the last one.
RELOAD_S = 10.0
TABS = ("tab-now", "tab-history", "tab-lease", "tab-checks", "tab-log")
SPAN_WORDS = {Span.HOUR: N_("1 h"), Span.DAY: N_("24 h"), Span.WEEK: N_("7 days"),
              Span.LEASE: N_("lease")}  # fmt: skip
# The tabs' titles, in TABS' order (shown as _(title), again after a language switch).
TAB_TITLES = (N_("1 GPUs"), N_("2 History"), N_("3 Lease"), N_("4 Checks & alerts"),
              N_("5 Audit log"))  # fmt: skip
PROM = "readings: Prometheus"  # how leases.fleet.nodefacts says a node read from Prometheus
RANGE_KEYS = {Span.HOUR: "h", Span.DAY: "d", Span.WEEK: "w", Span.LEASE: "f"}


@dataclass(frozen=True)
class NodeRead:
    """One read of the ledger: the node's facts and its last acceptance run."""

    facts: NodeFacts
    accepted: Stored | None
    accept_problem: str = ""  # why the last run could not be read


def read_node(
    ledger: Ledger, name: str, at: datetime, span: Span, live: list[NodeMinute]
) -> NodeRead:
    facts = nodefacts.read(ledger, name, at, span, live)
    try:
        return NodeRead(facts, acceptance.last(ledger, name))
    except Exception as exc:  # a run changed outside zuka, say: said, the rest still shown
        return NodeRead(
            facts, None, _("cannot read the last check: {reason}").format(reason=visible(exc, 200))
        )


def _health(status: NodeStatus) -> str:
    """The node's health in words: English says its value ('hostkey changed'); another
    language the fleet's label for it, in that language."""
    if is_chinese():
        return health_label(status.health)
    return status.health.value.replace("_", " ")


def _tab(key: str, n: int, title: str, tooltip: str) -> Binding:
    return Binding(
        key, f"tab('{TABS[n]}')", title, id=f"node-tab-{TABS[n][4:]}", show=False,
        tooltip=tooltip,
    )  # fmt: skip


def _range(span: Span, title: str, tooltip: str) -> Binding:
    return Binding(
        RANGE_KEYS[span], f"span('{span.value}')", title, id=f"node-range-{span.value}",
        tooltip=tooltip,
    )  # fmt: skip


class NodeScreen(Screen[None]):
    # Here rather than in zuka.tcss: the layout this screen needs to fit 80x24.
    DEFAULT_CSS = """
    NodeScreen #node-tabs { height: 1fr; }
    NodeScreen #node-tabs ContentSwitcher { height: 1fr; }
    NodeScreen TabPane { padding: 0; height: 1fr; }
    NodeScreen DataTable { height: auto; max-height: 100%; }
    NodeScreen .node-caption { margin-top: 1; text-style: bold; }
    NodeScreen .node-host { margin-top: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", N_("Back"), id="node-back", tooltip=N_("Back to the fleet")),
        _range(Span.HOUR, N_("1 h"), N_("Charts over the last hour")),
        _range(Span.DAY, N_("24 h"), N_("Charts over the last 24 hours")),
        _range(Span.WEEK, N_("7 d"), N_("Charts over the last 7 days")),
        _range(Span.LEASE, N_("Lease"), N_("Charts over the lease's life")),
        Binding(
            "i",
            "shell",
            N_("Shell"),
            id="node-shell",
            show=False,
            tooltip=N_("Open a shell on this node, the way zuka polls it"),
        ),
        Binding(
            "I",
            "tmux",
            N_("tmux"),
            id="node-tmux",
            show=False,
            tooltip=N_("Attach or create tmux session zuka (or one named) on the node"),
        ),
        Binding("r", "reload", N_("Reload"), id="node-reload",
                tooltip=N_("Read the ledger again now")),
        _tab("1", 0, N_("GPUs"), N_("Show the GPUs tab")),
        _tab("2", 1, N_("History"), N_("Show the History tab")),
        _tab("3", 2, N_("Lease"), N_("Show the Lease tab")),
        _tab("4", 3, N_("Checks & alerts"), N_("Show the Checks & alerts tab")),
        _tab("5", 4, N_("Audit log"), N_("Show the Audit log tab")),
    ]  # fmt: skip

    def __init__(self, name: str) -> None:
        super().__init__()
        self.node_name = name
        self.span = Span.HOUR
        self.facts: NodeFacts | None = None
        self.accepted: Stored | None = None
        self.problem = ""  # why the ledger could not be read (shown in the title)
        self._shown: dict[str, list[tuple[str, ...]]] = {}
        self._next_read: Timer | None = None
        self._last: NodeRead | None = None  # the last read shown

    @property
    def zuka(self) -> ZukaHost:
        return cast(ZukaHost, self.app)

    def compose(self) -> ComposeResult:
        yield Static(id="node-title")
        with TabbedContent(initial=TABS[0], id="node-tabs"):
            with TabPane(_(TAB_TITLES[0]), id=TABS[0]), VerticalScroll():
                yield DataTable(id="node-gpus", cursor_type="none", zebra_stripes=True)
                yield Static(id="node-procs-caption", classes="node-caption")
                yield DataTable(id="node-procs", cursor_type="none", zebra_stripes=True)
                # The node beyond its GPUs (tui.screens.hostview), below: scroll for it.
                yield Static(id="node-host", classes="node-host")
            with TabPane(_(TAB_TITLES[1]), id=TABS[1]):
                yield Static(id="node-span")
                yield HistoryChart(id="chart-util", color="green", xticks=False)
                yield HistoryChart(id="chart-mem", color="cyan", xticks=False)
                yield HistoryChart(id="chart-power", color="orange")
            with TabPane(_(TAB_TITLES[2]), id=TABS[2]), VerticalScroll():
                yield Static(id="node-billing")
                yield DataTable(id="node-leases", cursor_type="none", zebra_stripes=True)
                yield Static(id="node-resources-caption", classes="node-caption")
                yield DataTable(id="node-resources", cursor_type="none", zebra_stripes=True)
            with TabPane(_(TAB_TITLES[3]), id=TABS[3]), VerticalScroll():
                yield Static(id="node-acceptance")
                yield Static(id="node-alerts-caption", classes="node-caption")
                yield DataTable(id="node-alerts", cursor_type="none", zebra_stripes=True)
            with TabPane(_(TAB_TITLES[4]), id=TABS[4]):
                yield DataTable(id="node-log", cursor_type="row", zebra_stripes=True)
        yield ZukaFooter()

    def on_mount(self) -> None:
        self._columns()
        self.show_live()
        self.read_ledger()
        self.set_interval(self.zuka.refresh_s, self.show_live)

    def relabel(self) -> None:
        """Every word in the language in use (tui.dashboard.language): tabs, columns,
        captions; the ledger read again for the rest."""
        tabs = self.query_one("#node-tabs", TabbedContent)
        for tab_id, title in zip(TABS, TAB_TITLES, strict=True):
            tabs.get_tab(tab_id).label = _(title)
        self._shown.clear()
        self._columns()
        self.show_live()
        if self._last is not None:  # at once, from the last read; then read anew
            self._read_done(self._last)
        self.read_ledger()

    def _columns(self) -> None:
        columns = {
            "node-gpus": nodeview.GPU_COLUMNS,
            "node-procs": nodeview.PROCESS_COLUMNS,
            "node-leases": nodeview.LEASE_COLUMNS,
            "node-resources": nodeview.RESOURCE_COLUMNS,
            "node-alerts": nodeview.ALERT_COLUMNS,
            "node-log": nodeview.log_columns(self._tz(), self.zuka.clock()),
        }
        for table_id, names in columns.items():
            table = self.query_one(f"#{table_id}", DataTable)
            table.clear(columns=True)
            table.add_columns(*(_(n) for n in names))
        self.query_one("#node-acceptance", Static).update(
            plain(_("acceptance: {said}").format(said=_(nodeview.NO_ACCEPTANCE)))
        )

    # -- live: from memory, every refresh --------------------------------------------------

    def _status(self) -> NodeStatus | None:
        return self.zuka.status_of(self.node_name)

    def show_live(self) -> None:
        status = self._status()
        readings = self.facts.readings if self.facts else ""
        prom = readings.startswith(PROM)  # SSH reads processes and host
        self._fill("node-gpus", nodeview.gpu_rows(status, processes_read=not prom))
        procs = nodeview.process_rows(status)
        self._fill("node-procs", procs)
        none = _("none reported") if status and status.samples else _("not read yet")
        if prom:
            none = _("not read: they are read over SSH, this node's GPUs from Prometheus")
        self._caption("node-procs-caption", N_("processes"), procs, none)
        host = hostview.host_lines(status.host if status else None)
        if prom and (status is None or status.host is None):
            host = [_("host: not read: CPU, memory, disks and network are read over SSH")]
        host = [*host, readings] if prom else host  # SSH, the default, unsaid
        joined = Text("\n", no_wrap=True, overflow="ellipsis").join(plain(x) for x in host)
        self.query_one("#node-host", Static).update(joined)
        self._show_title(status)

    def _show_title(self, status: NodeStatus | None) -> None:
        parts = [visible(self.node_name, 60)]
        parts.append(_health(status) if status else _("no reading yet"))
        node = self.facts.node if self.facts else None
        samples = status.samples if status else ()
        if node is not None:
            if node.gpu_count:  # as declared; else as read (a count never said is not 0)
                parts.append(visible(f"{node.gpu_count}× {node.gpu_model}".strip(), 40))
            elif samples:
                read = _("{count}× {model} (read)").format(
                    count=len(samples), model=samples[0].name
                )
                parts.append(visible(read, 40))
            if node.provider:
                parts.append(visible(node.provider, 30))
            short = nodeview.vram_mismatch(node.vram_gib, [x.mem_total_mib for x in samples])
            if short:
                parts.append(short)
        text = " · ".join(parts)
        if status and status.detail:
            text += f" — {visible(detail_said(status.detail), 200)}"
        if self.problem:
            text += f" — {self.problem}"
        self.query_one("#node-title", Static).update(plain(text))

    def _caption(self, caption_id: str, what: str, rows: Sized, none: str) -> None:
        """what: marked with N_ ('processes'), said in the language in use."""
        if rows:
            text = _("{what} ({count})").format(what=_(what), count=len(rows))
        else:
            text = _("{what}: {none}").format(what=_(what), none=none)
        self.query_one(f"#{caption_id}", Static).update(plain(text))

    def _fill(self, table_id: str, rows: list[tuple[str, ...]]) -> None:
        """Rewrite a table only when its rows changed (a refresh that changes nothing
        writes nothing to the terminal); the cursor stays where it was."""
        if self._shown.get(table_id) == rows:
            return
        self._shown[table_id] = rows
        table = self.query_one(f"#{table_id}", DataTable)
        cursor = table.cursor_row
        table.clear()
        for row in rows:
            table.add_row(*(plain(v) for v in row))
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    # -- from the ledger: a thread worker ----------------------------------------------------

    def _live_minutes(self) -> list[NodeMinute]:
        """The live readings of the last hour, rolled up per minute (UI thread: the app's
        RecentHistory is not shared with threads)."""
        status = self._status()
        indices = {s.index for s in status.samples} if status else set()
        if self.facts is not None:
            indices |= set(range(self.facts.node.gpu_count))
        live = {i: self.zuka.recent.series(self.node_name, i) for i in sorted(indices)}
        return series.live_minutes(self.node_name, {i: p for i, p in live.items() if p})

    def read_ledger(self) -> None:
        if self._next_read is not None:
            self._next_read.stop()
            self._next_read = None
        ledger = self.zuka.ledger
        if ledger is None:
            return
        at = self.zuka.clock()
        live = self._live_minutes() if self.span is Span.HOUR else []
        if ledger.path is None:
            # An in-memory ledger has one connection, which only its own thread may use.
            try:
                read = read_node(ledger, self.node_name, at, self.span, live)
            except UnknownNode:
                self._read_failed(UnknownNode(self.node_name))
                return
            self._read_done(read)
            return
        self._read(ledger, at, self.span, live)

    @work(thread=True, exclusive=True, exit_on_error=False, group="node-read")
    def _read(self, ledger: Ledger, at: datetime, span: Span, live: list[NodeMinute]) -> NodeRead:
        assert ledger.path is not None
        with Ledger.open(ledger.path, readonly=True, clock=ledger.clock) as own:
            return read_node(own, self.node_name, at, span, live)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "node-read":
            return
        if event.state is WorkerState.SUCCESS and isinstance(worker.result, NodeRead):
            self._read_done(worker.result)
        elif event.state is WorkerState.ERROR:
            self._read_failed(worker.error)

    def _read_failed(self, exc: BaseException | None) -> None:
        """Any failure of a read is said in the title, and the next read is tried."""
        if isinstance(exc, UnknownNode):
            self.problem = _("no such node in the ledger any more (deleted or renamed?)")
        else:
            self.problem = _("cannot read the ledger: {reason}").format(reason=visible(exc, 200))
        self._show_title(self._status())
        self._arm()

    def _arm(self) -> None:
        if self._next_read is not None:
            self._next_read.stop()
        if self.is_attached:
            self._next_read = self.set_timer(RELOAD_S, self.read_ledger)

    def _read_done(self, read: NodeRead) -> None:
        facts = read.facts
        if facts.series is not None and facts.series.span is not self.span:
            return  # the range changed while reading: a read of the new one is under way
        self._last, self.facts = read, facts
        self.accepted = read.accepted
        self._show_acceptance(read.accept_problem)
        self.problem = ""
        tz = self._tz()
        self._show_title(self._status())
        self._fill("node-leases", nodeview.lease_rows(facts))
        self._fill("node-resources", nodeview.resource_rows(facts))
        self._fill("node-alerts", nodeview.alert_rows(facts, tz))
        self._fill("node-log", nodeview.log_rows(facts, tz))
        lines = [plain(line, wrap=True) for line in nodeview.lease_summary(facts)]
        self.query_one("#node-billing", Static).update(Text("\n").join(lines))
        self._caption("node-resources-caption", N_("resources"), facts.resources,
                      _("none recorded"))  # fmt: skip
        self._caption("node-alerts-caption", N_("open alerts"), facts.alerts, _("none"))
        self._show_charts()
        if facts.readings.startswith(PROM):
            self.show_live()  # where its readings come from, at once
        self._arm()

    def _show_acceptance(self, problem: str) -> None:
        lines = acceptview.summary_lines(self.accepted, self._tz())
        if not lines:
            lines = [_("acceptance: {said} (c on the fleet runs one)").format(
                said=_(nodeview.NO_ACCEPTANCE))]  # fmt: skip
        if problem:
            lines.append(_("acceptance: {said}").format(said=problem))
        self.query_one("#node-acceptance", Static).update(
            Text("\n").join(plain(line, wrap=True) for line in lines)
        )

    def _tz(self) -> str:
        config = self.zuka.config
        return config.billing.tz if config is not None else DEFAULT_TZ

    def _show_charts(self) -> None:
        spans = " ".join(
            f"[{RANGE_KEYS[s]}] {_(SPAN_WORDS[s])}" + ("◀" if s is self.span else "") for s in Span
        )
        span_line = self.query_one("#node-span", Static)
        facts = self.facts
        if facts is None or facts.series is None:
            span_line.update(plain(spans + "\n" + _("no lease recorded: no lease's life to chart")))
            for chart in self.query(HistoryChart):
                chart.display = False
            return
        status = self._status()
        samples = status.samples if status else ()
        mem_top = sum(s.mem_total_mib or 0.0 for s in samples) / 1024
        power_top = sum(s.power_limit_w or 0.0 for s in samples)
        drawn = nodeview.charts(
            facts.series, facts.at, mem_top, power_top, facts.node.gpu_count, self._tz()
        )
        x = _("x: {axis}").format(axis=_(series.axis(self.span).label))
        span_line.update(plain(f"{spans} · {x}", 200))
        for drawing, widget_id in zip(
            drawn, ("chart-util", "chart-mem", "chart-power"), strict=True
        ):
            widget = self.query_one(f"#{widget_id}", HistoryChart)
            widget.display = True
            widget.draw(drawing)

    # -- keys ---------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.dismiss(None)

    def action_tab(self, tab: str) -> None:
        self.query_one("#node-tabs", TabbedContent).active = tab

    def action_span(self, value: str) -> None:
        self.span = Span(value)
        self.action_tab(TABS[1])
        self._show_charts()  # the range marker at once; the new series when read
        self.read_ledger()

    def action_shell(self) -> None:
        from tui.dashboard.cockpit import shell_on

        shell_on(self.app, self.zuka.ledger, self.node_name, ask_tmux=False)

    def action_tmux(self) -> None:
        from tui.dashboard.cockpit import shell_on

        shell_on(self.app, self.zuka.ledger, self.node_name, ask_tmux=True)

    def action_reload(self) -> None:
        self.read_ledger()
