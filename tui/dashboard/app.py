"""The Textual dashboard: every node's GPUs now and over the last hour, beside its lease.

It polls in-process when it can take the ledger's poller lock; when a `zuka collect` holds
it, the dashboard reads what the collector writes instead (two pollers never poll one fleet).

Every refresh reads the ledger off the UI loop: a FleetReader with its own connection on
one thread of its own (an SQLite connection belongs to its thread), builds the rows there
too, and the UI only diffs cells. One read is the loop's: the first paint's, of the first
60 nodes, at mount, before any frame or key (see _first_paint: ~50 ms with 500 nodes).
A refresh never overlaps the previous one: the next is armed when one ends. Worker
failures are handled in one place (on_worker_state_changed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from importlib.resources import files
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.events import Event, Key
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker, WorkerState

from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core.clock import Clock, utc_now
from leases.core.errors import ConfigError, InputError, LedgerError, said
from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import N_, _
from leases.core.models import Node, NodeStatus
from leases.core.textsafe import visible
from leases.fleet.data import FleetData, FleetReader, ReadRequest
from leases.fleet.live import recent_readings
from leases.fleet.nodestatus import health_summary, stale_after_s
from leases.fleet.sparkline import Reading
from leases.lab.layout import Lab, find_lab
from leases.ledger import labfiles
from leases.ledger.store import Ledger
from leases.money.renewals import BillingNow
from leases.telemetry.history import RecentHistory
from leases.telemetry.housekeeping import Housekeeping
from leases.telemetry.lock import PollerLock
from leases.telemetry.rollups import HistoryStore
from tui.dashboard import gcpolicy
from tui.dashboard.commands import (
    LanguageCommands,
    ZukaCommands,
    ZukaSystemCommands,
    open_palette,
)
from tui.dashboard.host import ZukaHost
from tui.dashboard.interrupt import interrupt
from tui.dashboard.keymap import check_keys
from tui.dashboard.source import Source, check_ledger, source_words
from tui.dashboard.titles import app_title, ledger_label, poller_fault, status_line
from tui.screens.fleet import FleetScreen
from tui.screens.fleetview import Refreshed, RowMemo, build

if TYPE_CHECKING:
    from leases.alerts.state import StoredAlert

    # Only a dashboard that polls, or trusts a key, needs SSH: imported there, not at start
    # (asyncssh and the notifiers cost a few hundred ms before the first paint).
    from leases.alerts.watch import AlertWatch
    from leases.telemetry.cloudstate import CloudWatch
    from leases.telemetry.poller import Poller

# Longest detail line (an SSH error, a node's stderr) shown in a notification.
DETAIL_MAX = 400
# Nodes read and rows built for the first paint (more than a screen holds). The next read
# reads and builds them all, the one after adds the hour, the month's cost, the alerts.
FIRST_ROWS = 60


class ZukaApp(App[None]):
    TITLE = "zuka 租卡"
    # Package data read through importlib.resources, found wherever the package is installed.
    CSS = (files("tui.dashboard") / "zuka.tcss").read_text(encoding="utf-8")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", N_("Quit"), id="app-quit", tooltip=N_("Leave zuka")),
        Binding("question_mark", "help", N_("Help"), id="app-help",
                tooltip=N_("Every key, and its id")),
        # Not Textual's "press ctrl+q": a user's ctrl+c means leave. Text selected in a
        # field or on screen is copied instead (Textual's copy bindings come first and
        # pass the key on when nothing is selected).
        Binding("ctrl+c", "interrupt", N_("Quit"), id="app-interrupt", show=False,
                tooltip=N_("Leave zuka (asks first while an offboarding or check runs); "
                           "with text selected, copies it")),
    ]  # fmt: skip
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        ZukaSystemCommands, ZukaCommands, LanguageCommands}  # fmt: skip

    def __init__(
        self,
        ledger_path: Path | None,
        *,
        clock: Clock = utc_now,
        refresh_s: float = 2.0,
        interval_s: float = 5.0,
        poll: bool = True,
        config: Config | None = None,
        cloud_every_s: float = 300.0,
        readonly: bool = False,
    ) -> None:
        super().__init__()
        # In a lab the service polls: every member's dashboard reads what it collects.
        self.lab: Lab | None = None if ledger_path is None else find_lab(ledger_path)
        # A ledger this user may only read (a lab's viewer, a read-only file): opened
        # read-only, never polled or written from here.
        self.readonly = readonly or (
            self.lab is not None and ledger_path is not None and not labfiles.may_write(ledger_path)
        )
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
        self.billing: dict[int, BillingNow] = {}  # node id -> lease billing now, paid-until
        self.recent = RecentHistory()
        self.poller: Poller | None = None
        self.lock: PollerLock | None = None
        self.collector_pid: int | None = None
        self.alert_watch: AlertWatch | None = None
        self.cloud_every_s = cloud_every_s  # as `zuka collect --cloud-every` (0: never)
        self.clouds: CloudWatch | None = None
        # The writes beside the polling (purges; alerts where nobody polls): on the loop,
        # with the poller's connection, as `zuka collect` runs them. The reader only reads.
        self.housekeeping = Housekeeping()
        self.open_alerts: list[StoredAlert] = []
        self.data: FleetData | None = None
        self._stop = asyncio.Event()
        self._statuses: dict[str, NodeStatus] = {}  # by the names the fleet shows
        # The reader's thread: one, so its connection is only ever used there.
        self._db: ThreadPoolExecutor | None = None
        self._writer: tuple[Ledger, HistoryStore] | None = None  # on the _db thread
        self._reader: FleetReader | None = None
        self._refreshing = False
        self._again = False  # a refresh was asked for while one ran
        self._reload_next = False
        self._timer: Timer | None = None
        self._said: set[str] = set()  # problems already told (told again once cleared)
        self._reads = 0  # refreshes applied: the first two paint before history is read
        self._memo: RowMemo = {}  # rows kept between refreshes (the reader's thread's)
        self.fleet = FleetScreen()

    def on_key(self, event: Key) -> None:
        if self.fleet.typed_before_filter(event):
            event.prevent_default()
            event.stop()
        elif self.fleet.typed_before_covered(event):
            # Typed at the fleet in one burst with the key that opened a screen over it:
            # never a binding of the screen it no longer is, nor of the one now on top (an
            # `a` meant for the fleet is not the offboarding screen's "run all"). Text for
            # a form is typed again where its cursor is now; anything else is dropped.
            event.prevent_default()
            event.stop()
            from tui.widgets.form import FormScreen

            screen = self._top_screen()
            if isinstance(screen, FormScreen):
                screen.type_ahead(event.key, event.character)

    def _top_screen(self) -> Screen[object] | None:
        """The screen on top, or None while the app has none (a key queued in a burst
        can arrive while the app shuts down: self.screen would raise)."""
        return self.screen_stack[-1] if self.screen_stack else None

    async def on_event(self, event: Event) -> None:
        """A key for a form's field is applied when the app takes it, in the order typed
        (tui.widgets.typeahead): a tab in a burst moves on between the texts around it."""
        if isinstance(event, Key) and not event.is_forwarded:
            from tui.widgets.form import FormScreen

            screen = self._top_screen()
            if isinstance(screen, FormScreen) and screen.type_ahead(event.key, event.character):
                return
        await super().on_event(event)

    def action_interrupt(self) -> None:
        interrupt(self)

    def action_command_palette(self) -> None:  # Textual's, its placeholder translated
        open_palette(self)

    def get_default_screen(self) -> Screen[None]:
        """The fleet screen is the app's base: every other screen opens over it."""
        return self.fleet

    @property
    def billing_tz(self) -> str:
        return self.config.billing.tz if self.config is not None else DEFAULT_TZ

    def status_of(self, name: str) -> NodeStatus | None:
        """The node's status as the last refresh saw it (None: not in the fleet)."""
        return self._statuses.get(name)

    def on_mount(self) -> None:
        # The dashboard is where a new user starts: an empty ledger is created, not an error.
        self.ledger = Ledger.open(self.ledger_path, clock=self.clock, readonly=self.readonly)
        self.title = self._title()
        self.store = HistoryStore(self.ledger)
        if self.config is None:
            try:
                self.config = load_user_config(None)
            except ConfigError as exc:
                self.config = Config()
                self._tell(_("config: {problems}").format(problems="; ".join(exc.problems)),
                           severity="error")  # fmt: skip
        self._remap_keys()
        if self.ledger_path is not None:
            self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zuka-ledger")
        else:  # in memory: only this connection sees the ledger; read it on the loop
            self._reader = FleetReader(self.ledger, self.config)
        self._first_paint()
        self.refresh_view(reload=True)

    def _first_paint(self) -> None:
        """The first FIRST_ROWS nodes read and drawn at once, on the loop (~50 ms with
        500 nodes): on the reader's thread the same read fought the app's own start for
        the interpreter and took ~0.3 s. The reads that follow are the thread's."""
        assert self.ledger is not None and self.config is not None
        now = self.clock()
        stale = now - timedelta(seconds=stale_after_s(self.interval_s))
        req = ReadRequest(now, reload=True, stale_before=stale, history=False, first=FIRST_ROWS)
        label = ledger_label(self.ledger_path)
        try:  # a reader of its own: a first read keeps nothing for the next
            data = FleetReader(self.ledger, self.config).read(req)
        except Exception:
            # Whatever failed fails the refresh's read too, which runs next and says
            # it in the one place failures are shown (on_worker_state_changed).
            return
        self._apply(build(data, now, label, FIRST_ROWS))
        self._reads = 1

    def _remap_keys(self) -> None:
        """The config's [keys], all of them or (when one is bad) none."""
        assert self.config is not None
        try:
            self.set_keymap(check_keys(self.config.keys))
        except ConfigError as exc:
            self._tell(_("config: {problems}: no key remapped").format(
                problems="; ".join(exc.problems)), severity="error", timeout=30)  # fmt: skip

    # -- the refresh cycle -----------------------------------------------------------------

    def refresh_view(self, reload: bool = False) -> None:
        """Refresh now (reload: re-read the ledger's nodes and leases too). While one
        refresh runs, another is queued to run when it ends, never beside it."""
        self._reload_next = self._reload_next or reload
        if self._refreshing:
            self._again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._refreshing = True
        self._refresh_worker()

    def _open_reader(self) -> FleetReader:
        # Runs on the reader's thread: the connection is made where it is used.
        assert self.ledger_path is not None and self.config is not None
        if self._reader is None:
            self._reader = FleetReader(
                Ledger.open(
                    self.ledger_path, create=False, clock=self.clock, readonly=self.readonly
                ),
                self.config,
            )
        return self._reader

    def _read(self, req: ReadRequest, limit: int | None = None) -> Refreshed:
        reader = self._open_reader() if self._db is not None else self._reader
        assert reader is not None
        data = reader.read(req)
        return build(data, req.now, ledger_label(self.ledger_path), limit, self._memo)

    @work(exclusive=False, exit_on_error=False, group="refresh")
    async def _refresh_worker(self) -> None:
        try:
            now = self.clock()
            polling = self.poller is not None
            # Nobody polls: evaluate alerts on read. Before the first read it is not known
            # yet whether a collector polls, unless this dashboard never would.
            known = self.data is not None or not self.poll or self.ledger_path is None
            nobody_polls = not polling and self.collector_pid is None and known
            # The first read paints the first FIRST_ROWS nodes' names, states and leases,
            # the second every node's; the hour, the month's cost and the alerts follow at
            # once, in the third (each waits on the one before: a frame comes between).
            limit = FIRST_ROWS if self._reads == 0 else None
            history = self._reads >= 2
            loop = asyncio.get_running_loop()
            if self._db is not None:  # off the UI loop: an alert round reads every node
                problems = await loop.run_in_executor(
                    self._db, self._keep_house, now, polling, nobody_polls and history
                )
            else:
                problems = self._keep_house(now, polling, nobody_polls and history)
            polled = dict(self.poller.statuses) if self.poller is not None else None
            stale = now - timedelta(seconds=stale_after_s(self.interval_s))
            req = ReadRequest(now, reload=self._reload_next, polled=polled,
                              live=self._live(now, polled) if polled is not None else {},
                              stale_before=stale, history=history, first=limit)  # fmt: skip
            self._reload_next = False
            if self._db is not None:
                done = await loop.run_in_executor(self._db, self._read, req, limit)
            else:
                done = self._read(req, limit)
            if problems:
                said = (*problems, *done.data.problems)
                done = replace(done, data=replace(done.data, problems=said))
            self._apply(done)
            self._reads += 1
            if gcpolicy.managed():
                self._settle()
            if not req.history:
                self._again = True
        finally:
            self._refreshing = False
            if self._again:
                self._again = False
                self.refresh_view()
            elif not self._stop.is_set():
                self._timer = self.set_timer(self.refresh_s, self.refresh_view)

    def _settle(self) -> None:
        """A drawn refresh's survivors leave the collector's walks (tui.dashboard.gcpolicy)."""
        self.call_after_refresh(self._keep)

    def _keep(self) -> None:  # not while a screen is up over the fleet, or just closed
        gcpolicy.keep(alone=self.screen is self.fleet and monotonic() - self.fleet.resumed_at >= 5)

    def _open_writer(self) -> tuple[Ledger, HistoryStore]:
        # Runs on the ledger thread, beside the reader but on a connection of its own: the
        # reader only reads, and these writes stay off the UI loop.
        assert self.ledger_path is not None
        if self._writer is None:
            ledger = Ledger.open(self.ledger_path, create=False, clock=self.clock)
            self._writer = (ledger, HistoryStore(ledger))
        return self._writer

    def _keep_house(self, now: datetime, polling: bool, nobody_polls: bool) -> list[str]:
        """The writes that go with polling, before the read that shows them: old minutes
        purged while this process polls; the alert rules evaluated when nobody polls (a
        collector's AlertWatch, or this poller's, evaluates them otherwise). On the ledger
        thread with a connection of its own when the ledger is a file."""
        assert self.store is not None and self.ledger is not None and self.config is not None
        if self.readonly or not (polling or nobody_polls):
            return []  # a reader writes nothing: the collector evaluates the alerts
        # A write refused (locked past the busy timeout, a full disk) is said and the
        # refresh goes on, as when the reader wrote; tried again when next due.
        try:
            ledger, store = (
                self._open_writer() if self._db is not None else (self.ledger, self.store)
            )
        except (InputError, LedgerError) as exc:
            return [_("cannot write the ledger: {reason}").format(reason=said(exc))]
        if polling:
            try:
                self.housekeeping.purge_if_due(store, now)
            except (InputError, LedgerError) as exc:
                return [_("old minutes not purged: {reason}").format(reason=said(exc))]
        if not nobody_polls:
            return []
        problem = self.housekeeping.evaluate_alerts_if_due(ledger, self.config.alerts, now)
        return [] if problem is None else [problem]

    def _live(self, now: datetime, polled: dict[str, NodeStatus]) -> dict[int, list[Reading]]:
        """Readings held in memory (polling here) after each node's last stored minute."""
        data = self.data
        if data is None:
            return {}
        return recent_readings(data.facts.nodes, polled, self.recent, data.last_minute, now,
                               self.interval_s)  # fmt: skip

    def _apply(self, done: Refreshed) -> None:
        data = done.data
        self.data = data
        self._statuses = {n.name: data.statuses[n.id] for n in data.facts.nodes
                          if n.id is not None and n.id in data.statuses}  # fmt: skip
        self.open_alerts = list(data.alerts)
        for problem in data.problems:
            if problem not in self._said:
                self._tell(problem, severity="error")
        self._said = set(data.problems)
        if data.reloaded:
            first = not self.nodes and not self.refused
            self.refused = {n.name: n.problem for n in data.facts.refused}
            self.nodes = data.facts.nodes
            self.billing = dict(data.facts.billing)
        if data.reloaded and data.total is None:  # (not a first paint's first nodes)
            if first and not self.nodes:
                self.notify(
                    _(
                        "No nodes in this ledger yet: add one with "
                        "`zuka node add NAME --ssh '...'` (r reloads), or try `zuka demo`."
                    ),
                    markup=False,
                    timeout=30,
                )
            if self.poller is not None:
                self.poller.set_nodes(list(data.facts.polled))
            else:
                self._choose_source()
        self.sub_title = self._status_line()
        # Redraws wait while another screen is on top; the fleet screen redraws on return.
        self.fleet.show(done.rows, done.header, self.sub_title)

    def _status_line(self) -> str:
        health = health_summary(self._statuses[n.name] for n in self.nodes
                                if n.name in self._statuses)  # fmt: skip
        poller = self.poller
        source = source_words(
            Source(
                polling_every=self.interval_s if poller is not None and poller.running else None,
                fault=poller.last_fault if poller is not None else None,
                starting=poller is not None,
                collector_pid=self.collector_pid,
                lab=self.lab is not None,
                waiting_for_nodes=self.poll and not self.nodes,
            )
        )
        partial = self.data.total if self.data is not None else None
        count = len(self.nodes) if partial is None else partial
        return status_line(count, health, len(self.open_alerts), source)

    def _title(self) -> str:
        return app_title(self.TITLE, self.ledger_path, lab=self.lab is not None,
                         readonly=self.readonly)  # fmt: skip

    def relabel(self) -> None:
        """Its words in the language in use: the fleet's rows at once, from the last read."""
        self.title, self.sub_title = self._title(), self._status_line()
        self._said.clear()
        self.fleet.relabel()
        if self.data is not None and self.data.total is None:  # (not a first paint's)
            done = build(self.data, self.clock(), ledger_label(self.ledger_path))
            self.fleet.show(done.rows, done.header, self.sub_title)
        self.refresh_view(reload=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place a worker's failure is shown; the refresh cycle goes on."""
        if event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        what = event.worker.group or event.worker.name
        self._tell(_("{what} failed: {kind}: {error}").format(
            what=what, kind=type(error).__name__, error=error), severity="error")  # fmt: skip

    # -- polling -------------------------------------------------------------------------

    def _choose_source(self) -> None:
        """Poll here if nobody else polls this ledger; else read what the collector writes.
        Called again on every reload, so the dashboard takes over when a collector stops."""
        if self.poller is not None or self.ledger_path is None:
            return
        if not self.poll or self.lab is not None or self.readonly:
            # Never polls here (in a lab the service does, for every member's dashboard); a
            # collector that does evaluates the alert rules (else this dashboard evaluates
            # them on read, where it may write).
            self.collector_pid = PollerLock(self.ledger_path).holder()
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
        assert self.config is not None and self.data is not None
        from leases.alerts.watch import watch_ledger
        from leases.telemetry.wiring import make_poller

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
        self.poller.set_nodes(list(self.data.facts.polled))
        self.run_poller()
        # And the cloud instances' states, as `zuka collect` reads them (its default
        # pace): a dashboard that polls in place of a collector records their stops too.
        from leases.telemetry.cloudstate import CloudWatch

        self.clouds = CloudWatch(
            self.ledger, self.config, clock=self.clock, every_s=self.cloud_every_s,
            log=self.poller.log,
        )  # fmt: skip
        self.run_clouds()

    @work(exclusive=True, exit_on_error=False, group="clouds")
    async def run_clouds(self) -> None:
        if self.clouds is not None:
            await self.clouds.run(self._stop)

    @work(exclusive=True, exit_on_error=False, group="poller")
    async def run_poller(self) -> None:
        assert self.poller is not None
        # Restarted with backoff when it dies; the status line reads poller.running.
        await self.poller.run_supervised(
            self._stop, mode="stream", flush_s=self.refresh_s, on_fault=self._poller_fault
        )

    def _poller_fault(self, exc: BaseException, retry_in: float) -> None:
        self._tell(poller_fault(exc, retry_in), severity="error", timeout=max(10.0, retry_in))

    @work(exclusive=True, exit_on_error=False, group="trust")
    async def trust_node(self, name: str) -> None:
        """Fetch the key the node offers now, show its fingerprint, accept it on y."""
        assert self.ledger is not None and self.ledger_path is not None
        from tui.dashboard.trusting import trust

        def tell(message: str, severity: SeverityLevel) -> None:
            self._tell(message, severity=severity)

        trusted = await trust(self.ledger, self.ledger_path, name, tell, self.push_screen_wait)
        if trusted and self.poller is not None:
            self.poller.retry_now(name)

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
        from tui.screens.alerts import AlertsScreen

        screen = AlertsScreen(self.ledger, self.clock, self.billing_tz)
        self.push_screen(screen, lambda _: self.refresh_view())

    def action_help(self) -> None:
        from tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    async def on_unmount(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.stop()
        # A worker Textual already cancelled raises from wait(): still close what it held.
        await asyncio.gather(*(w.wait() for w in self.workers), return_exceptions=True)
        if self.poller is not None:
            await self.poller.close()
        if self.alert_watch is not None:
            self.alert_watch.close()
        if self.lock is not None:
            self.lock.release()
        if self._db is not None:
            loop = asyncio.get_running_loop()
            if self._reader is not None:
                await loop.run_in_executor(self._db, self._reader.ledger.close)
            if self._writer is not None:
                await loop.run_in_executor(self._db, self._writer[0].close)
            self._db.shutdown(wait=True)
        if self.ledger is not None:
            self.ledger.close()


def run_dashboard(ledger_path: Path | None, **options: object) -> int:
    if ledger_path is not None and "readonly" not in options:
        options["readonly"] = check_ledger(ledger_path)
    gcpolicy.tune()  # this process is the dashboard's own
    ZukaApp(ledger_path, **options).run()  # type: ignore[arg-type]
    return 0


def _host(app: ZukaApp) -> ZukaHost:
    """Where mypy checks that the app is what its screens take it for (tui.dashboard.host)."""
    return app
