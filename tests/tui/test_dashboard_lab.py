"""A dashboard on a lab's ledger: the service polls for every member, so no dashboard does;
it says whose readings it shows; one opened read-only (a viewer's) writes nothing."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

import leases.alerts.watch
from leases.lab.layout import Lab
from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes
from leases.telemetry.lock import PollerLock
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp
from tui.dashboard.source import Source, source_words


def _lab(folder: Path) -> Path:
    """A ledger with two nodes in a folder marked as a lab's (root's marker: the tests run
    as root, else skipped)."""
    if os.geteuid() != 0:
        pytest.skip("a lab's marker counts only when root owns it")
    lab = Lab(folder)
    with Ledger.open(lab.ledger) as ledger:  # before the marker: only lab init makes one after
        register_sim_nodes(ledger, 2, datetime(2026, 12, 1, tzinfo=UTC))
    lab.marker.write_text(lab.marker_text())
    lab.marker.chmod(0o644)
    return lab.ledger


async def test_a_lab_dashboard_never_polls_and_says_whose_readings_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _lab(tmp_path)
    evaluated: list[object] = []
    monkeypatch.setattr(leases.alerts.watch, "check", lambda *a: evaluated.append(a) or [])
    app = ZukaApp(path, refresh_s=0.1, interval_s=0.5)  # poll=True: the lab still wins
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: app._reads >= 4, what="the history reads")
        assert app.poller is None and app.lock is None
        assert "the lab's collector is not running" in app.sub_title
        assert "the lab's ledger" in app.title
        service = PollerLock(path)  # stands in for zuka-collect.service
        assert service.acquire()
        try:
            await pilot.press("r")
            await wait_until(
                lambda: f"reading the lab's collector (pid {os.getpid()})" in app.sub_title,
                what="the collector named",
            )
        finally:
            service.release()
        await pilot.press("q")
    assert app.poller is None


async def test_a_read_only_dashboard_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _lab(tmp_path)
    evaluated: list[object] = []
    monkeypatch.setattr(leases.alerts.watch, "check", lambda *a: evaluated.append(a) or [])
    with Ledger.open(path) as ledger:
        before = ledger.conn.execute("SELECT count(*) FROM audit").fetchone()[0]
    app = ZukaApp(path, refresh_s=0.1, interval_s=0.5, readonly=True)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: app._reads >= 4, what="the history reads")
        assert "(read-only for you)" in app.title
        await pilot.press("q")
    # Nobody polls, but a reader evaluates no alert rule: that would write.
    assert evaluated == []
    with Ledger.open(path) as ledger:
        assert ledger.conn.execute("SELECT count(*) FROM audit").fetchone()[0] == before


@pytest.mark.parametrize(
    ("source", "words"),
    [
        (Source(0.5, None, True, None, False, False), "polling every 0.5 s"),
        (Source(None, "boom", True, None, False, False), "NOT polling (boom): restarting"),
        (Source(None, None, True, None, False, False), "starting the poller"),
        (Source(None, None, False, 12, True, True), "reading the lab's collector (pid 12)"),
        (Source(None, None, False, None, True, True), "the lab's collector is not running"),
        (Source(None, None, False, -1, True, True), "reading the lab's collector"),
        (Source(None, None, False, 12, False, False), "reading collector pid 12"),
        (Source(None, None, False, None, False, True), "no nodes yet"),
        (Source(None, None, False, None, False, False), "not polling"),
    ],
)
def test_the_source_in_words(source: Source, words: str) -> None:
    assert source_words(source).startswith(words)


async def test_a_viewers_keys_that_would_write_are_refused_naming_the_group(
    tmp_path: Path,
) -> None:
    """A form is never opened only to be refused when saved: the key says at once which
    group it needs (and nothing is written)."""
    path = _lab(tmp_path)
    app = ZukaApp(path, refresh_s=0.1, interval_s=0.5, readonly=True)
    async with app.run_test(size=(150, 40)) as pilot:
        await wait_until(lambda: app._reads >= 2, what="the fleet read")
        fleet = app.screen
        for key, words, group in (("n", "adding a node", "zuka-editors"),
                                  ("l", "changing a lease", "zuka-editors"),
                                  ("o", "offboarding", "zuka-offboard")):  # fmt: skip
            await pilot.press(key)
            await wait_until(
                lambda w=words: any(w in n.message for n in app._notifications),
                what=f"the refusal of {words}",
            )
            said = [n.message for n in app._notifications if words in n.message][-1]
            assert f"{words} from the dashboard needs group {group}" in said
            assert f"--folder {tmp_path}" in said
            assert app.screen is fleet  # no form opened
        await pilot.press("q")
