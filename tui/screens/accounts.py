"""`$` on the fleet: the accountant's view of this month (prepaid balances, deposits
outstanding, invoiced and uninvoiced charges, the last complete month's bill, the offers
still valid), worked out by leases.app.accountsview on a thread of its own and shown as
plain text that scrolls. `r` reads it again; escape closes it."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, cast

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from leases.app.accountsview import AccountsView, accounts_view
from leases.config.sections import Config
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from tui.dashboard.host import ZukaHost
from tui.widgets.footer import ZukaFooter


class AccountsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", N_("Back"), id="accounts-back",
                tooltip=N_("Back to the fleet")),
        Binding("r", "reload", N_("Reload"), id="accounts-reload",
                tooltip=N_("Work the accounts out again from the ledger")),
    ]  # fmt: skip

    DEFAULT_CSS = """
    #accounts-title { background: $boost; text-style: bold; padding: 0 1; }
    #accounts-body { height: 1fr; }
    .accounts-head { text-style: bold; padding: 1 1 0 1; }
    .accounts-lines { padding: 0 1 0 3; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.view: AccountsView | None = None
        self.problem = ""

    @property
    def zuka(self) -> ZukaHost:
        return cast(ZukaHost, self.app)

    def compose(self) -> ComposeResult:
        yield Static(_("Accounts: reading the ledger..."), id="accounts-title", markup=False)
        yield VerticalScroll(id="accounts-body")
        yield ZukaFooter()

    async def on_mount(self) -> None:
        await self.read_ledger()

    def action_back(self) -> None:
        self.dismiss(None)

    async def action_reload(self) -> None:
        await self.read_ledger()

    async def relabel(self) -> None:
        """In the language in use (tui.dashboard.language): worked out again."""
        await self.read_ledger()

    async def read_ledger(self) -> None:
        ledger, config = self.zuka.ledger, self.zuka.config or Config()
        if ledger is None:
            self._failed(_("no ledger open"))
            return
        at = self.zuka.clock()
        if ledger.path is None:
            # An in-memory ledger has one connection, which only its own thread may use.
            await self._show(accounts_view(ledger, config, at))
            return
        self._read(ledger, config, at)

    @work(thread=True, exclusive=True, exit_on_error=False, group="accounts-read")
    def _read(self, ledger: Ledger, config: Config, at: datetime) -> AccountsView:
        assert ledger.path is not None
        with Ledger.open(ledger.path, readonly=True, clock=ledger.clock) as own:
            return accounts_view(own, config, at)

    async def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "accounts-read":
            return
        if event.state is WorkerState.SUCCESS and isinstance(worker.result, AccountsView):
            await self._show(worker.result)
        elif event.state is WorkerState.ERROR:
            self._failed(
                _("cannot read the ledger: {reason}").format(reason=visible(worker.error, 300))
            )

    def _failed(self, why: str) -> None:
        self.problem = why
        self.query_one("#accounts-title", Static).update(Text(_("Accounts: {why}").format(why=why)))

    async def _show(self, view: AccountsView) -> None:
        self.view, self.problem = view, ""
        title = _("Accounts {month} (billing zone), worked out {at}").format(
            month=view.month, at=view.at
        )
        self.query_one("#accounts-title", Static).update(Text(title))
        body = self.query_one("#accounts-body", VerticalScroll)
        await body.remove_children()
        shown: list[Static] = []
        if view.refused is not None:
            shown += [
                Static(Text(_("No figures shown")), classes="accounts-head"),
                Static(Text(view.refused), classes="accounts-lines", id="accounts-refused"),
            ]
        for s in view.sections:
            shown += [Static(Text(s.title), classes="accounts-head"),
                      Static(Text("\n".join(s.lines)), classes="accounts-lines",
                             id=f"accounts-{s.key}")]  # fmt: skip
        await body.mount_all(shown)

    def text(self) -> str:
        """Everything shown, as plain text (tests)."""
        parts = [str(w.render()) for w in self.query(Static)]
        return "\n".join(parts)
