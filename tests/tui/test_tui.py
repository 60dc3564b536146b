"""The dashboard, driven by Textual's Pilot, on real ledgers and a real simulated fleet."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.pilot import Pilot

from leases.core.models import NodeHealth
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.telemetry.rollups import HistoryStore
from tests.support.fleetledger import NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.screens.yesno import TrustScreen
from tui.widgets.fleet_table import FleetTable


def row_of(table: FleetTable, row: int) -> dict[str, str]:
    """A row as the user reads it (every cell is Rich Text, never markup), by column key:
    which columns show depends on the terminal's width."""
    return {c.key: v.plain for c, v in zip(table.shown_columns, table.get_row_at(row), strict=True)}


async def until_all_ok(pilot: Pilot[None], fleet: FleetTable) -> None:
    """Let the live poller work until every row reads ok."""

    def health() -> list[str] | None:
        rows = [row_of(fleet, i)["state"] for i in range(fleet.row_count)]
        return rows if rows and all(h == "ok" for h in rows) else None

    await wait_until(health, interval=0.05, what="every row to read ok")
    await pilot.pause()


async def test_dashboard_lists_the_ledger_and_shows_gpus(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        fleet = app.screen.query_one("#fleet", FleetTable)
        assert fleet.row_count == 12
        first = row_of(fleet, 0)
        assert first["node"] == "a100-monthly-1" and first["state"] == "ok"
        assert first["cost"].startswith("CNY ")  # this month so far
        await pilot.press("down", "down", "down", "down")
        await pilot.pause()
        row = row_of(fleet, fleet.cursor_row)
        assert row["node"] == "colo-njidc-4090" and row["state"] == "needs reboot"
        assert "reboot" in str(app.screen.query_one("#fleet-detail").render())
        await pilot.press("q")


async def test_dashboard_polls_a_live_fleet(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 3, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, path, nodes)
    try:
        app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
        async with app.run_test(size=(150, 40)) as pilot:
            fleet = app.screen.query_one("#fleet", FleetTable)
            await until_all_ok(pilot, fleet)
            assert [row_of(fleet, i)["state"] for i in range(3)] == ["ok", "ok", "ok"]
            assert "polling every 0.5 s" in app.sub_title
            # No minute is stored yet: the live readings draw the slice in progress.
            await wait_until(lambda: fleet.get_cell("sim-001", "hour").plain[-1] != " ",
                             what="live readings on the sparkline")  # fmt: skip
            assert fleet.get_cell("sim-001", "hour").plain[:-2].strip() == ""
            key_before = fleet.cursor_row
            await pilot.press("down")
            app.refresh_view()  # what the refresh timer calls
            await pilot.pause()
            assert fleet.cursor_row == key_before + 1  # refreshes keep the cursor
            await pilot.press("q")
    finally:
        runner.stop()
    with Ledger.open(path, create=False) as ledger:
        assert (
            HistoryStore(ledger).latest_by_id()[ledger.node("sim-001").id or 0].health
            is NodeHealth.OK
        )


def test_minutes_span(tmp_path: Path) -> None:
    """The sparkline reads the last hour of minute roll-ups."""
    path = tmp_path / "m.db"
    frozen_ledger(path)
    with Ledger.open(path, create=False) as ledger:
        minutes = HistoryStore(ledger).minutes("autodl-4090-a", NOW - timedelta(hours=1), NOW)
        assert len(minutes) == 60


async def test_dashboard_takes_over_when_the_collector_stops(tmp_path: Path) -> None:
    from leases.telemetry.lock import PollerLock

    path = tmp_path / "takeover.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 2, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, path, nodes)
    collector = PollerLock(path)  # stands in for a running `zuka collect`
    assert collector.acquire()
    try:
        app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_until(lambda: "reading collector pid" in app.sub_title)
            assert app.poller is None
            collector.release()
            await pilot.press("r")
            fleet = app.screen.query_one("#fleet", FleetTable)
            await until_all_ok(pilot, fleet)
            assert "polling every 0.5 s" in app.sub_title
            assert [row_of(fleet, i)["state"] for i in range(2)] == ["ok", "ok"]
            await pilot.press("q")
    finally:
        collector.release()
        runner.stop()


async def test_a_dashboard_that_never_polls_leaves_the_alert_rules_to_the_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import leases.alerts.watch
    from leases.telemetry.lock import PollerLock

    checked: list[tuple[str, object]] = []

    def check(ledger: Ledger, *args: object) -> list[object]:
        # Where it runs: never the UI loop (an alert round reads every node), and on a
        # connection of its own (the reader only reads).
        checked.append((threading.current_thread().name, ledger))
        return []

    monkeypatch.setattr(leases.alerts.watch, "check", check)
    path = tmp_path / "readonly.db"
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 2, datetime.now(UTC))
    collector = PollerLock(path)  # stands in for a running `zuka collect`
    assert collector.acquire()
    try:
        app = ZukaApp(path, refresh_s=0.1, interval_s=0.5, poll=False)
        async with app.run_test(size=(150, 40)) as pilot:
            await wait_until(lambda: app._reads >= 4, what="the history reads")
            assert "reading collector pid" in app.sub_title
            assert checked == []  # the collector's AlertWatch evaluates them
            collector.release()
            await pilot.press("r")  # a reload sees nobody polls: evaluated here now
            await wait_until(lambda: checked, what="the alert rules evaluated on read")
            assert "not polling" in app.sub_title
            thread, ledger = checked[0]
            assert thread.startswith("zuka-ledger") and thread != threading.main_thread().name
            assert ledger is not app.ledger and ledger is not app._reader.ledger
    finally:
        collector.release()


async def test_dashboard_on_a_new_ledger_picks_up_nodes_added_later(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: "no nodes yet" in app.sub_title)
        assert path.exists()
        with Ledger.open(path) as ledger:
            nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))
            runner = serve_ledger_nodes(ledger, path, nodes)
        try:
            await pilot.press("r")
            fleet = app.screen.query_one("#fleet", FleetTable)
            await until_all_ok(pilot, fleet)
            assert row_of(fleet, 0)["node"] == "sim-001" and row_of(fleet, 0)["state"] == "ok"
            assert "1 nodes" in app.sub_title and "polling" in app.sub_title
            await pilot.press("q")
        finally:
            runner.stop()


async def test_trusting_a_new_host_key_from_the_dashboard(tmp_path: Path) -> None:
    from leases.ledger.paths import sim_trust_store

    path = tmp_path / "trust.db"
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 1, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, path, nodes)
    sim_trust_store(path).unlink()  # as if the node were new: its key is known nowhere
    try:
        app = ZukaApp(path, refresh_s=0.2, interval_s=0.5)
        async with app.run_test(size=(150, 40)) as pilot:
            fleet = app.screen.query_one("#fleet", FleetTable)
            await wait_until(
                lambda: fleet.row_count and row_of(fleet, 0)["state"].startswith("untrusted"),
                what="the node to read untrusted",
            )
            await pilot.press("t")
            await wait_until(lambda: isinstance(app.screen, TrustScreen), what="the trust screen")
            await pilot.pause()
            assert isinstance(app.screen, TrustScreen)
            shown = str(app.screen.query_one("#fingerprint").render())
            assert app.screen.offered.fingerprint in shown
            await pilot.press("y")
            await until_all_ok(pilot, fleet)
            assert row_of(fleet, 0)["state"] == "ok"
            await pilot.press("q")
    finally:
        runner.stop()
    assert (tmp_path / "known_hosts").exists()  # zuka's trust store beside the ledger
