"""What the screens use of the dashboard app (tui.dashboard.app.ZukaApp): its ledger,
clock, config and latest statuses, and the few things they ask of it. Screens type
`self.app` as this, so that no screen imports the app that imports the screens."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from leases.config.sections import Config
from leases.core.clock import Clock
from leases.core.models import NodeStatus
from leases.lab.layout import Lab
from leases.ledger.store import Ledger
from leases.telemetry.history import RecentHistory


@runtime_checkable
class ZukaHost(Protocol):
    ledger: Ledger | None
    config: Config | None
    readonly: bool  # this user may only read the ledger (a lab's viewer)
    lab: Lab | None  # the lab whose ledger it is
    clock: Clock
    refresh_s: float
    recent: RecentHistory

    @property
    def billing_tz(self) -> str: ...

    def status_of(self, name: str) -> NodeStatus | None:
        """The node's status as the last refresh saw it (None: not in the fleet)."""
        ...

    def refresh_view(self, reload: bool = False) -> None: ...

    def action_alerts(self) -> None: ...

    def relabel(self) -> None:
        """The app's own words in the language in use (after a switch from the palette)."""
        ...

    def trust_node(self, name: str) -> Any:
        """Fetch the key the node offers now, show its fingerprint, accept it on y (a
        worker: its result is not awaited)."""
        ...
