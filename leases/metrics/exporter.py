"""The exporter as `zuka collect` runs it: its options checked before anything starts,
then the registry, the collector of gauges and the server, fed by the poller's statuses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import NodeStatus
from leases.ledger.store import Ledger
from leases.metrics.gauges import Gauges, Place
from leases.metrics.listen import (
    FIELD,
    MONEY_FIELD,
    TOKEN_FIELD,
    Listen,
    access,
    parse_listen,
)
from leases.metrics.money import MoneyCache, places
from leases.metrics.server import MetricsServer


@dataclass(frozen=True)
class Settings:
    """What --metrics-listen, --metrics-token-file and --metrics-money asked for."""

    listen: Listen
    token: bytes | None
    money: bool


def settings(listen: str | None, token_file: str | None, money: bool) -> Settings | None:
    """The exporter's settings (None: no --metrics-listen), or InputError for options
    that do not go together or an address, token file or access that is refused."""
    if listen is None:
        if token_file is not None or money:
            which = TOKEN_FIELD if token_file is not None else MONEY_FIELD
            raise InputError(which, None, _("needs {option} ADDRESS").format(option=FIELD))
        return None
    where = parse_listen(listen)
    return Settings(where, access(where, Path(token_file) if token_file else None, money), money)


class Exporter:
    """The registry and server of one collector; `refresh` re-reads the nodes' labels
    (the collector's housekeeping calls it with its node list)."""

    def __init__(
        self,
        wanted: Settings,
        ledger: Ledger,
        statuses: Callable[[], Mapping[str, NodeStatus]],
        clock: Callable[[], datetime],
    ) -> None:
        self._places: Mapping[str, Place] = places(ledger)
        self.money = MoneyCache(ledger, clock) if wanted.money else None
        self.gauges = Gauges(statuses, lambda: self._places, clock, self.money)
        self.server = MetricsServer(wanted.listen, self.gauges.render, wanted.token)

    def refresh(self, ledger: Ledger) -> None:
        self._places = places(ledger)

    def where(self) -> str:
        """Where a scrape goes, in words for the start line."""
        listen = self.server.listen
        if listen.unix:
            return f"{listen} (mode 0600), path /metrics"
        host = f"[{listen.host}]" if ":" in listen.host else listen.host
        return f"http://{host}:{self.server.port}/metrics"

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()
