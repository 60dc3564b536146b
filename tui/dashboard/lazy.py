"""The screens the dashboard opens on a key, imported when first opened (not before the
first paint): one typed loader each, whose body imports its module by name, so mypy checks
the screen and its arguments. The fleet screen's keys and the command palette open them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from leases.core.clock import Clock
from leases.core.models import NodeStatus
from leases.ledger.store import Ledger

if TYPE_CHECKING:
    from tui.screens.acceptance import AcceptanceScreen
    from tui.screens.accounts import AccountsScreen
    from tui.screens.lease_form import LeaseFormScreen, Mode
    from tui.screens.node import NodeScreen
    from tui.screens.node_form import NodeFormScreen
    from tui.screens.processes import ProcessesScreen
    from tui.screens.resource_form import ResourceFormScreen


def node_screen(name: str) -> NodeScreen:
    from tui.screens.node import NodeScreen

    return NodeScreen(name)


def node_form(ledger: Ledger, *, name: str | None = None, paste: bool = False) -> NodeFormScreen:
    from tui.screens.node_form import NodeFormScreen

    return NodeFormScreen(ledger, name=name, paste=paste)


def lease_form(ledger: Ledger, node: str, *, mode: Mode, clock: Clock, tz: str) -> LeaseFormScreen:
    from tui.screens.lease_form import LeaseFormScreen

    return LeaseFormScreen(ledger, node, mode=mode, clock=clock, tz=tz)


def resource_form(ledger: Ledger, node: str) -> ResourceFormScreen:
    from tui.screens.resource_form import ResourceFormScreen

    return ResourceFormScreen(ledger, node)


def accounts_screen() -> AccountsScreen:
    from tui.screens.accounts import AccountsScreen

    return AccountsScreen()


def acceptance_screen(name: str) -> AcceptanceScreen:
    from tui.screens.acceptance import AcceptanceScreen

    return AcceptanceScreen(name)


def processes_screen(
    statuses: Callable[[], Iterable[NodeStatus]], ledger: Ledger | None
) -> ProcessesScreen:
    from tui.screens.processes import ProcessesScreen

    return ProcessesScreen(statuses, ledger)
