"""Attacker review of issue 19's restructure: the dashboard's writes beside the reads.

Before the restructure the purge of old minutes ran inside the reader's facts read, where a
refused write (the ledger locked past the busy timeout, a full disk) was said ("cannot read
the ledger: ...") and the rest of the refresh went on. Now the purge runs before the read,
outside any handler: a LedgerError fails the whole refresh, every refresh (the purge stays
due), so a polling dashboard stops updating."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from leases.core.errors import LedgerError
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.telemetry.rollups import HistoryStore
from tests.support.waiting import wait_until
from tests.tui.test_tui import until_all_ok
from tui.dashboard.app import ZukaApp
from tui.widgets.fleet_table import FleetTable


async def test_a_refused_purge_is_said_and_the_polling_fleet_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def purge(self: HistoryStore, now: datetime, minute_days: int = 0) -> int:
        raise LedgerError("purge.db: cannot write: database is locked")

    monkeypatch.setattr(HistoryStore, "purge", purge)
    path = tmp_path / "purge.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 2, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, path, nodes)
    try:
        app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
        # Every toast, kept: a loaded machine's toast may time out before it is looked at.
        told: list[str] = []
        toast = app.notify

        def notify(message: str, *args: Any, **kwargs: Any) -> None:
            told.append(str(message))
            toast(message, *args, **kwargs)

        app.notify = notify  # type: ignore[method-assign]
        async with app.run_test(size=(150, 40)) as pilot:
            fleet = app.screen.query_one("#fleet", FleetTable)
            await wait_until(lambda: app.poller is not None, what="polling here")
            await until_all_ok(pilot, fleet)  # new: never, every refresh fails
            await wait_until(
                lambda: any("database is locked" in m for m in told),
                what="the refused purge said",
            )  # said, not hidden
            assert not any("refresh failed" in m for m in told), told
            await pilot.press("q")
    finally:
        runner.stop()
