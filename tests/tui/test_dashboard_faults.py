"""Bad rows and bad luck the dashboard meets, from an attacker review: one unreadable
alert row, a write the ledger refuses, a huge paste into the filter. Real ledger files
(the demo fleet); Pilot. One test replaces alertstate.ack to raise LedgerError: as root
(CI) a file cannot be made unwritable, so the failure is stood in for, and says so."""

from __future__ import annotations

import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from leases.alerts import state as alertstate
from leases.config.sections import Config
from leases.core.errors import InputError, LedgerError
from leases.fleet import filter as fleetfilter
from leases.fleet.filter import RowFacts
from leases.sim.demoledger import build_demo_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp

NOW = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "faults.db"
    build_demo_ledger(path, date(2026, 11, 30)).close()
    return path


def _app(path: Path) -> ZukaApp:
    return ZukaApp(path, clock=lambda: NOW, poll=False, refresh_s=3600, config=Config())


def _sql(path: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(sql, params)
    conn.close()


def _told(app: ZukaApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_one_unreadable_alert_row_is_said_and_the_fleet_goes_on(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    _sql(path, "INSERT INTO alerts (kind, node, severity, message, first_seen, last_seen)"
               " VALUES ('idle', 'x', 'warning', 'm', 'garbage', 'garbage')")  # fmt: skip
    app = _app(path)
    async with app.run_test(size=(120, 36)):
        await wait_until(lambda: app.data is not None, what="the first read")
        await wait_until(lambda: any("alerts not read" in m for m in _told(app)),
                         what="the bad row said")  # fmt: skip
        assert app.query_one("#fleet").row_count == 12  # type: ignore[attr-defined]


async def test_a_refused_acknowledge_is_said_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _ledger(tmp_path)
    _sql(path, "INSERT INTO alerts (kind, node, severity, message, first_seen, last_seen)"
               " VALUES ('idle', 'x', 'warning', 'm', ?, ?)",
         (NOW.isoformat(), NOW.isoformat()))  # fmt: skip

    def refused(*_: object, **__: object) -> None:
        raise LedgerError("faults.db: cannot write: attempt to write a readonly database")

    monkeypatch.setattr(alertstate, "ack", refused)
    app = _app(path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app.data is not None, what="the first read")
        await pilot.press("a")
        await wait_until(lambda: type(app.screen).__name__ == "AlertsScreen", what="alerts")
        await pilot.press("k")
        await wait_until(lambda: any("readonly" in m for m in _told(app)), what="said")
        assert app._exception is None, repr(app._exception)
        assert type(app.screen).__name__ == "AlertsScreen"


def test_a_huge_paste_into_the_filter_is_refused_at_once() -> None:
    with pytest.raises(InputError) as caught:
        fleetfilter.parse("a " * 2_000)
    assert caught.value.field == "filter" and "longer than" in caught.value.reason
    # What may be typed is matched against 500 rows quickly.
    f = fleetfilter.parse("a " * 99)
    rows = [RowFacts(name=f"node-{i}-a", notes="a") for i in range(500)]
    assert all(fleetfilter.matches(f, r) for r in rows)
