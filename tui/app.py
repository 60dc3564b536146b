"""The Textual dashboard: every node's GPUs now and over the last hour, beside its lease.

It polls in-process when it can take the ledger's poller lock; when a `zuka collect` holds
it, the dashboard reads what the collector writes instead (two pollers never poll one fleet).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Footer, Header, Static

from leases import alertstate
from leases.alertstate import StoredAlert
from leases.alertwatch import AlertWatch, check, watch_ledger
from leases.config import Config, load_user_config
from leases.errors import ConfigError, InputError, LedgerError
from leases.fleet import fleet_nodes, make_poller, ssh_options
from leases.history import RecentHistory
from leases.hostkeys import HostKeyStatus
from leases.ledger import Clock, Ledger, utc_now
from leases.lock import PollerLock
from leases.models import Node, NodeHealth
from leases.poller import NodeStatus, Poller
from leases.renewals import BillingNow
from leases.rollups import HistoryStore
from leases.ssh import SshError, SshPool, offered_host_key
from leases.textsafe import visible
from tui.commands import ZukaCommands
from tui.fleetview import COLUMNS, GPU_COLUMNS, fleet_row, gpu_rows, plain
from tui.keymap import check_keys
from tui.screens.alerts import AlertsScreen, alert_marker
from tui.trust import TrustScreen

# How often the ledger is re-read for new nodes and leases, and for a stopped collector.
RELOAD_S = 15.0
# Longest detail line (an SSH error, a node's stderr) shown under the table.
DETAIL_MAX = 400


class ZukaApp(App[None]):
    TITLE = "zuka 租卡"
    # Package data read through importlib.resources, found wherever the package is installed.
    CSS = (files("tui") / "zuka.tcss").read_text(encoding="utf-8")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Leave zuka"),
        Binding("question_mark", "help", "Help", id="app-help", tooltip="Every key, and its id"),
        Binding("r", "reload", "Reload ledger", id="reload", tooltip="Re-read nodes and leases"),
        Binding("a", "alerts", "Alerts", id="alerts", tooltip="Open alerts: acknowledge, snooze"),
        Binding(
            "t",
            "trust",
            "Trust host key",
            id="trust",
            tooltip="Check and accept the selected node's new SSH host key",
        ),
    ]
    COMMANDS = App.COMMANDS | {ZukaCommands}

    def __init__(
        self,
        ledger_path: Path | None,
        *,
        clock: Clock = utc_now,
        refresh_s: float = 2.0,
        interval_s: float = 5.0,
        poll: bool = True,
        config: Config | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.ledger_path = ledger_path
        self.clock = clock
        self.refresh_s = refresh_s
        self.interval_s = interval_s
        self.poll = poll
        self.ledger: Ledger | None = None
        self.store: HistoryStore | None = None
        self.nodes: list[Node] = []
        self.refused: dict[str, str] = {}  # node name -> why zuka will not poll it
        self.billing: dict[str, BillingNow] = {}  # node -> lease billing now, paid-until
        self.recent = RecentHistory()
        self.poller: Poller | None = None
        self.lock: PollerLock | None = None
        self.collector_pid: int | None = None
        self._stop = asyncio.Event()
        self._statuses: dict[str, NodeStatus] = {}
        self._ledger_error = ""
        self.alert_watch: AlertWatch | None = None
        self.open_alerts: list[StoredAlert] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Static(id="detail-title")
        yield DataTable(id="gpus", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        fleet = self.query_one("#fleet", DataTable)
        for col in COLUMNS:
            fleet.add_column(col, key=col)
        self.query_one("#gpus", DataTable).add_columns(*GPU_COLUMNS)
        # The dashboard is where a new user starts: an empty ledger is created, not an error.
        self.ledger = Ledger.open(self.ledger_path, clock=self.clock)
        where = "in memory" if self.ledger_path is None else str(self.ledger_path)
        self.title = f"{self.TITLE} · {visible(where, 120)}"
        self.store = HistoryStore(self.ledger)
        if self.config is None:
            try:
                self.config = load_user_config(None)
            except ConfigError as exc:
                self.config = Config()
                self._tell("config: " + "; ".join(exc.problems), severity="error")
        self._remap_keys()
        self._load_ledger()
        if not self.nodes:
            self.notify(
                "No nodes in this ledger yet: add one with `zuka node add NAME --ssh '...'` "
                "(r reloads), or try `zuka demo`.",
                markup=False,
                timeout=30,
            )
        self._choose_source()
        self._evaluate_alerts()
        self.refresh_view()
        self.set_interval(self.refresh_s, self.refresh_view)
        self.set_interval(RELOAD_S, self._reload_quietly)

    def _remap_keys(self) -> None:
        """The config's [keys], all of them or (when one is bad) none."""
        assert self.config is not None
        try:
            self.set_keymap(check_keys(self.config.keys))
        except ConfigError as exc:
            self._tell("config: " + "; ".join(exc.problems) + ": no key remapped",
                       severity="error", timeout=30)  # fmt: skip

    def _choose_source(self) -> None:
        """Poll here if nobody else polls this ledger; else read what the collector writes.
        Called again on every reload, so the dashboard takes over when a collector stops."""
        if self.poller is not None or not self.poll or self.ledger_path is None:
            return
        if not self.nodes:
            return
        assert self.ledger is not None
        lock = PollerLock(self.ledger_path)
        if not lock.acquire():
            self.collector_pid = lock.holder()
            return
        self.lock = lock
        self.collector_pid = None
        assert self.config is not None
        # The same alert evaluation and notifications as `zuka collect` runs.
        self.alert_watch = watch_ledger(
            self.ledger, self.ledger_path, self.config, clock=self.clock
        )
        self.poller = make_poller(
            self.ledger,
            self.ledger_path,
            clock=self.clock,
            interval_s=self.interval_s,
            recent=self.recent,
            alerts=self.alert_watch,
        )
        self.run_poller()

    def _load_ledger(self) -> None:
        assert self.ledger is not None
        try:
            nodes, refused = fleet_nodes(self.ledger)
            billing = self.ledger.billing()
        except (InputError, LedgerError) as exc:
            # A row the ledger refuses to read (an old or imported ledger): say which, once,
            # and keep showing what was read before rather than stopping the dashboard.
            said = (
                f"{exc.field}: {exc.reason} (got '{exc.value}')"
                if isinstance(exc, InputError)
                else str(exc)
            )
            if said != self._ledger_error:
                self._ledger_error = said
                self._tell(f"cannot read the ledger: {said}", severity="error")
            return
        self._ledger_error = ""
        # A node whose stored row holds a refused value is listed with its problem and
        # never polled, until `zuka node edit NAME --ssh ...` fixes it.
        self.refused = {n.name: n.problem for n in refused}
        self.nodes = sorted([*nodes, *refused], key=lambda n: n.name)
        self.billing = billing
        if self.poller is not None:
            self.poller.set_nodes(nodes)

    def _reload_quietly(self) -> None:
        self._load_ledger()
        self._choose_source()
        self._evaluate_alerts()

    def _evaluate_alerts(self) -> None:
        """When nobody polls (no collector, no poller here), evaluate alerts on read, so
        that what the dashboard shows holds now; a poller evaluates them itself."""
        if self.poller is not None or self.collector_pid is not None or self.ledger is None:
            return
        assert self.config is not None
        try:
            check(self.ledger, self.config.alerts, self.clock)
        except (InputError, LedgerError) as exc:
            self._tell(f"alerts not evaluated: {exc}", severity="warning")

    @work(exclusive=True, exit_on_error=False, group="poller")
    async def run_poller(self) -> None:
        assert self.poller is not None
        # Restarted with backoff when it dies; the header reads poller.running.
        await self.poller.run_supervised(
            self._stop, mode="stream", flush_s=self.refresh_s, on_fault=self._poller_fault
        )

    def _poller_fault(self, exc: BaseException, retry_in: float) -> None:
        self._tell(
            f"The poller stopped ({visible(exc, 200)}); restarting in {retry_in:g} s. "
            "Details in the fault log beside the ledger.",
            severity="error",
            timeout=max(10.0, retry_in),
        )

    def _current(self) -> dict[str, NodeStatus]:
        out = {
            name: NodeStatus(name, NodeHealth.REFUSED, f"not polled: {problem}")
            for name, problem in self.refused.items()
        }
        if self.poller is not None:
            return {**dict(self.poller.statuses), **out}
        if self.store is None:
            return out
        stale_before = self.clock() - timedelta(seconds=max(30.0, 6 * self.interval_s))
        for name, row in self.store.latest().items():
            if name in out:
                continue
            if row.at < stale_before:
                # Nobody has read this node lately (the collector stopped?): say so.
                out[name] = NodeStatus(
                    name,
                    NodeHealth.CONNECTING,
                    f"stale: last reading {row.at.astimezone():%H:%M:%S}",
                )
                continue
            ok = row.health is NodeHealth.OK
            out[name] = NodeStatus(
                name, row.health, row.detail, row.at, row.at if ok else None, row.gpus,
                row.processes, row.fingerprint,
            )  # fmt: skip
        return out

    def status_of(self, name: str) -> NodeStatus | None:
        """The node's status as the fleet table last showed it (None: no reading yet)."""
        return self._statuses.get(name)

    def _history(self, node: str, now: datetime) -> list[float | None]:
        """Mean utilization per minute over the last hour (from the ledger's roll-ups),
        then the readings of the minute in progress (from memory, when polling here)."""
        out: list[float | None] = []
        if self.store is not None:
            since = now - timedelta(hours=1)
            for m in self.store.minutes(node, since, now + timedelta(minutes=1)):
                known = [g.util_mean for g in m.gpus if g.util_mean is not None]
                out.append(sum(known) / len(known) if known else None)
        if self.poller is not None:
            this_minute = int(now.timestamp()) // 60 * 60
            points = self.recent.node_points(node, since=this_minute)
            out.extend(points)
        return out

    def refresh_view(self) -> None:
        now = self.clock()
        self._statuses = self._current()
        table = self.query_one("#fleet", DataTable)
        by_node: dict[int | None, list[StoredAlert]] = {}
        if self.ledger is not None:
            self.open_alerts = alertstate.alerts(self.ledger, now)
        for a in self.open_alerts:
            by_node.setdefault(a.node_id, []).append(a)
        wanted = [
            fleet_row(n, self._statuses.get(n.name), self.billing.get(n.name),
                      self._history(n.name, now), now, alert_marker(by_node.get(n.id, [])))
            for n in self.nodes
        ]  # fmt: skip
        with self.batch_update():
            present = {str(k.value) for k in table.rows}
            for row in wanted:
                if row.key in present:
                    for col, value in zip(COLUMNS, row.cells, strict=True):
                        if table.get_cell(row.key, col).plain != value:
                            table.update_cell(row.key, col, plain(value), update_width=True)
                else:
                    table.add_row(*(plain(v) for v in row.cells), key=row.key)
            for stale in present - {r.key for r in wanted}:
                table.remove_row(stale)
        counts: dict[str, int] = {}
        for st in (self._statuses.get(n.name) for n in self.nodes):
            if st is None:
                continue
            counts[st.health.value] = counts.get(st.health.value, 0) + 1
        health = ", ".join(f"{n} {h}" for h, n in sorted(counts.items())) or "no readings yet"
        if self.poller is not None and self.poller.running:
            source = f"polling every {self.interval_s:g} s"
        elif self.poller is not None and self.poller.last_fault:  # died: restarting
            source = f"NOT polling ({visible(self.poller.last_fault, 60)}): restarting"
        elif self.poller is not None:
            source = "starting the poller"
        elif self.collector_pid is not None:
            source = f"reading collector pid {self.collector_pid}"
        elif self.poll and not self.nodes:
            source = "no nodes yet"
        else:
            source = "not polling"
        alerts = len(self.open_alerts)
        said = f" · {alerts} alert{'s' if alerts != 1 else ''} (a)" if alerts else ""
        self.sub_title = f"{len(self.nodes)} nodes · {health}{said} · {source}"
        self._show_detail()

    def _selected(self) -> str | None:
        table = self.query_one("#fleet", DataTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return None if key.value is None else str(key.value)

    def _show_detail(self) -> None:
        name = self._selected()
        status = self._statuses.get(name) if name else None
        title = self.query_one("#detail-title", Static)
        gpus = self.query_one("#gpus", DataTable)
        gpus.clear()
        if name is None:
            title.update("")
            return
        text = f"{visible(name)}: {status.health.value if status else 'connecting'}"
        if status and status.detail:
            text += f" — {visible(status.detail, DETAIL_MAX)}"
        if status and status.fingerprint:
            text += f" (key {visible(status.fingerprint)})"
        title.update(plain(text))
        for row in gpu_rows(status):
            gpus.add_row(*(plain(v) for v in row))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "fleet":
            self._show_detail()

    def action_trust(self) -> None:
        name = self._selected()
        status = self._statuses.get(name) if name else None
        if name is None or status is None or status.health is not NodeHealth.UNTRUSTED:
            self.notify(
                "Only a node whose host key is new (untrusted) can be trusted here; "
                "a changed key is never replaced.",
                markup=False,
                severity="warning",
            )
            return
        self.trust_node(name)

    @work(exclusive=True, exit_on_error=False, group="trust")
    async def trust_node(self, name: str) -> None:
        """Fetch the key the node offers now, show its fingerprint, accept it on y."""
        assert self.ledger is not None and self.ledger_path is not None
        pool = SshPool(ssh_options(self.ledger_path))
        session = pool.add(self.ledger.node(name))
        try:
            try:
                offered = await offered_host_key(session)
            except SshError as exc:
                self._tell(f"{name}: {exc.message}", severity="error")
                return
            if offered is None:
                self._tell(f"{name}: host key already trusted")
            elif offered.status is not HostKeyStatus.UNKNOWN:
                self._tell(
                    f"{name}: the host key CHANGED ({offered.fingerprint}): refused",
                    severity="error",
                )
                return
            elif await self.push_screen_wait(TrustScreen(name, offered)):
                session.accept_host_key(offered.fingerprint)
                self._tell(f"trusted {offered.fingerprint} for {name}")
            else:
                return
            if self.poller is not None:
                self.poller.retry_now(name)
        finally:
            await pool.close()

    def _tell(
        self,
        message: str,
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None:
        """A notification that may hold text from a node or the ledger: shown, not obeyed."""
        self.notify(visible(message, DETAIL_MAX), markup=False, severity=severity, timeout=timeout)

    def action_alerts(self) -> None:
        if self.ledger is None:
            return
        tz = self.config.billing.tz if self.config is not None else "Asia/Shanghai"
        screen = AlertsScreen(self.ledger, self.clock, tz)
        self.push_screen(screen, lambda _: self.refresh_view())

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_reload(self) -> None:
        self._reload_quietly()
        self.refresh_view()
        self.notify("ledger re-read", markup=False)

    async def on_unmount(self) -> None:
        self._stop.set()
        # A worker Textual already cancelled raises from wait(): still close what it held.
        await asyncio.gather(*(w.wait() for w in self.workers), return_exceptions=True)
        if self.poller is not None:
            await self.poller.close()
        if self.alert_watch is not None:
            self.alert_watch.close()
        if self.lock is not None:
            self.lock.release()
        if self.ledger is not None:
            self.ledger.close()


def run_dashboard(ledger_path: Path | None, **options: object) -> int:
    if ledger_path is not None:
        # A file that is not a zuka ledger is refused here, in plain words, not in a
        # traceback from inside the running app.
        Ledger.open(ledger_path).close()
    ZukaApp(ledger_path, **options).run()  # type: ignore[arg-type]
    return 0
