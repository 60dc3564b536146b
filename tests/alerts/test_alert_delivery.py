"""Issue 18, delivery: one owner of "new" (reading alerts never changes what gets sent),
severity-aware delivery (a critical never waits for the rate limit; an escalation within the
hour is sent) and acknowledgement that lasts until the alert clears or worsens.

Notifications go to a real HTTP server on 127.0.0.1 (test_notify's Hook); the ledger is a
real SQLite file; times are fixed, never the wall clock."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from leases.alerts import state as alertstate
from leases.alerts.alert import AlertKind
from leases.alerts.watch import AlertWatch, check
from leases.config.sections import AlertsConfig
from leases.core.models import GpuSample, Node, NodeHealth, NodeStatus
from leases.core.severity import Severity
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.notify.outbox import Notifier
from leases.telemetry.rollups import HistoryStore
from tests.notify.test_notify import Clock, Hook, hook, msg, notifier  # noqa: F401  (hook is a fixture)

CONFIG = AlertsConfig()  # temperature_c 85: warning from 85, critical from 90, clear below 80
T0 = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)


def _lease_ending(ledger: Ledger, now: datetime) -> Node:
    """Node n0 whose monthly lease ends 3 days after `now`: a lease-end alert to send."""
    node = ledger.add_node(records.node_from({"name": "n0", "ssh_host": "127.0.0.1"}))
    ledger.add_lease(records.lease_from({
        "node": "n0", "billing_type": "monthly", "unit_price": "30000",
        "start": (now - timedelta(days=27)).isoformat(),
        "end": (now + timedelta(days=3)).isoformat(),
    }))  # fmt: skip
    return node


def _outbox(path: Path) -> list[tuple[str, str]]:
    """(target, key) of every notify_outbox row."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT target, key FROM notify_outbox ORDER BY id"))
    finally:
        conn.close()


def _collector_pass(ledger: Ledger, n: Notifier, clock: Clock) -> None:
    """What `zuka collect` does on its alert timer: evaluate, then the notifier's round."""
    AlertWatch(ledger, CONFIG, clock=clock, notifier=n, every_s=0.0).tick()
    n.pump()


# -- defect 2: looking at alerts swallows their notifications -------------------------------


@pytest.mark.parametrize("looked_first", [False, True])
def test_reading_alerts_first_never_swallows_their_notification(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
    looked_first: bool,
) -> None:
    """Issue 18's repro: a lease ending in 3 days, then `zuka alerts` (which evaluates and
    stores, as check() does), then the collector's pass: one outbox row per URL, as without
    `zuka alerts` in between (0 rows before the fix)."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    urls = [hook.url("dingtalk"), hook.url("wecom", "/w?key=k")]
    with Ledger.open(path) as ledger:
        _lease_ending(ledger, T0)
        if looked_first:
            # `zuka alerts --json`, polled by a script: twice, a minute apart.
            check(ledger, CONFIG, clock)
            clock.advance(minutes=1)
            check(ledger, CONFIG, clock)
        n = notifier(tmp_path, clock, urls)
        try:
            _collector_pass(ledger, n, clock)
            clock.advance(minutes=1)
            check(ledger, CONFIG, clock)  # `zuka alerts` again: nothing new to tell
            _collector_pass(ledger, n, clock)
        finally:
            n.close()
        [alert] = alertstate.alerts(ledger, clock())
    assert alert.kind == AlertKind.LEASE_ENDING
    rows = _outbox(path)
    assert len(rows) == 2 and {t for t, _ in rows} == {t.ref for t in n.targets}
    assert {k for _, k in rows} == {f"alert:{alert.id}:{alert.severity.value}"}
    got = hook.wait_for(2)
    assert all("n0" in str(g.body) for g in got)


def test_two_notifiers_on_one_ledger_queue_an_alert_once(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """The dashboard's notifier and a collector's, both fed from the alerts' outbox: each
    change is taken by one of them, in the transaction that queues it."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        _lease_ending(ledger, T0)
        check(ledger, CONFIG, clock)  # `zuka alerts check`
        first, second = (notifier(tmp_path, clock, [hook.url("dingtalk")]) for _ in range(2))
        try:
            for n in (first, second):
                AlertWatch(ledger, CONFIG, clock=clock, notifier=n)  # gives n the alert feed
            first.pump()
            second.pump()
        finally:
            first.close()
            second.close()
    assert len(_outbox(path)) == 1
    assert len(hook.wait_for(1)) == 1


def test_an_outbox_row_nobody_took_for_a_day_is_not_sent(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """A collector started after days without one does not replay old news; what waited
    less than a day is sent."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        _lease_ending(ledger, T0)
        check(ledger, CONFIG, clock)
        clock.advance(hours=25)
        n = notifier(tmp_path, clock, [hook.url("dingtalk")])
        try:
            AlertWatch(ledger, CONFIG, clock=clock, notifier=n)
            n.pump()
        finally:
            n.close()
        waiting = ledger.conn.execute(
            "SELECT count(*) FROM alert_outbox WHERE taken_at IS NULL"
        ).fetchone()
    assert _outbox(path) == [] and waiting == (0,)


# -- defect 3: the rate limit ignores severity -------------------------------------------------


def test_a_critical_is_never_held_by_the_rate_limit(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """Issue 18: with 5 an hour, five warnings went out and the critical "host key changed"
    waited an hour. It goes at once (and first, beside warnings still waiting)."""
    clock = Clock(T0)
    n = notifier(tmp_path, clock, [hook.url("dingtalk")], rate_limit_per_hour=5)
    try:
        for i in range(5):
            n.submit(msg(f"w{i}"))
        n.pump()
        assert len(hook.wait_for(5)) == 5
        clock.advance(minutes=1)
        n.submit(msg("w5"))
        n.submit(msg("hostkey", Severity.CRITICAL))
        n.pump()
        got = hook.wait_for(6)
        assert "alert hostkey" in got[5].body["text"]["content"]
        states = {r["key"]: r["state"] for r in n.outbox_rows()}
        assert states["hostkey"] == "sent" and states["w5"] == "pending"
    finally:
        n.close()


def test_a_critical_is_never_held_by_the_digest(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    from datetime import time as dtime

    clock = Clock(T0)  # 08:30 in Shanghai, the digest at 09:00
    n = notifier(tmp_path, clock, [hook.url("dingtalk")], digest_at=dtime(9, 0),
                 rate_limit_per_hour=1)  # fmt: skip
    try:
        n.submit(msg("quiet"))
        n.submit(msg("loud", Severity.CRITICAL))
        n.submit(msg("burning", Severity.CRITICAL))
        n.pump()
        got = hook.wait_for(2)
        texts = [g.body["text"]["content"] for g in got]
        assert "alert loud" in texts[0] and "alert burning" in texts[1]
        assert {r["key"]: r["state"] for r in n.outbox_rows()}["quiet"] == "digest"
    finally:
        n.close()


def _reading(node: Node, at: datetime, temp: float) -> NodeStatus:
    gpu = GpuSample(node.name, at, 0, "GPU-0", "A100", util_gpu=90.0, temp_c=temp)
    return NodeStatus(node.name, NodeHealth.OK, "", checked=at, samples=(gpu,))


def test_an_escalation_within_the_hour_is_sent(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """Issue 18: temperature 86 (a warning), cleared, then 95 (critical) within the hour
    re-opens the same alert, at a higher severity: sent (it was never sent before). A
    flicker back at the same severity is not sent again."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        node = ledger.add_node(
            records.node_from({"name": "hot", "ssh_host": "127.0.0.1", "gpu_count": 1})
        )
        store = HistoryStore(ledger)
        n = notifier(tmp_path, clock, [hook.url("dingtalk")])
        try:
            for temp in (86.0, 79.0, 95.0, 79.0, 95.0):
                store.write_latest([_reading(node, clock(), temp)])
                _collector_pass(ledger, n, clock)
                clock.advance(minutes=5)
        finally:
            n.close()
    got = [g.body["text"]["content"] for g in hook.wait_for(2)]
    assert len(got) == 2, got
    assert "warning" in got[0] and "86 °C" in got[0]
    assert "critical" in got[1] and "95 °C" in got[1]


# -- defect 4: acknowledged means hidden even after it cleared and came back --------------------


def _temperature(ledger: Ledger, node: Node, at: datetime, temp: float) -> None:
    """An evaluation at `at` with this GPU temperature, stored as any caller's would be."""
    HistoryStore(ledger).write_latest([_reading(node, at, temp)])
    check(ledger, CONFIG, lambda: at)


def _hot(ledger: Ledger) -> Node:
    return ledger.add_node(
        records.node_from({"name": "hot", "ssh_host": "127.0.0.1", "gpu_count": 1})
    )


def test_an_acknowledgement_lasts_until_the_alert_clears(tmp_path: Path) -> None:
    """README: `zuka alerts ack ID` hides it until it clears. Back within the hour, the
    alert is open again (the same row), not hidden by the old acknowledgement."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        node = _hot(ledger)
        _temperature(ledger, node, T0, 86.0)
        [alert] = alertstate.alerts(ledger, T0)
        alertstate.ack(ledger, alert.id, T0, "alice")
        assert alertstate.alerts(ledger, T0) == []
        _temperature(ledger, node, T0 + timedelta(minutes=5), 87.0)  # still there: hidden
        assert alertstate.alerts(ledger, T0 + timedelta(minutes=5)) == []
        _temperature(ledger, node, T0 + timedelta(minutes=10), 79.0)  # cleared
        back = T0 + timedelta(minutes=20)
        _temperature(ledger, node, back, 86.0)
        [again] = alertstate.alerts(ledger, back)
    assert again.id == alert.id and again.state(back) is alertstate.State.OPEN
    assert again.acked_at is None and again.acked_by is None


def test_an_escalation_of_an_acknowledged_alert_shows_again(tmp_path: Path) -> None:
    """Issue 18: a critical escalation of an acknowledged warning was sent but stayed
    hidden in `zuka alerts` and the header. It shows while it is worse than what was
    acknowledged; back at the acknowledged severity it is hidden again."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        node = _hot(ledger)
        _temperature(ledger, node, T0, 86.0)
        [alert] = alertstate.alerts(ledger, T0)
        alertstate.ack(ledger, alert.id, T0, "alice")
        later = T0 + timedelta(minutes=5)
        _temperature(ledger, node, later, 95.0)
        [shown] = alertstate.alerts(ledger, later)
        assert shown.id == alert.id and shown.severity is Severity.CRITICAL
        assert shown.acked_by == "alice"  # who acknowledged the warning is kept
        calmer = later + timedelta(minutes=5)
        _temperature(ledger, node, calmer, 87.0)
        assert alertstate.alerts(ledger, calmer) == []


def test_a_snoozed_alert_that_escalates_shows_again(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        node = _hot(ledger)
        _temperature(ledger, node, T0, 86.0)
        [alert] = alertstate.alerts(ledger, T0)
        alertstate.snooze(ledger, alert.id, T0 + timedelta(days=1))
        later = T0 + timedelta(minutes=5)
        _temperature(ledger, node, later, 95.0)
        assert [a.id for a in alertstate.alerts(ledger, later)] == [alert.id]


async def test_the_header_counts_an_escalated_acknowledged_alert(tmp_path: Path) -> None:
    """The dashboard (not polling: it evaluates the rules itself) counts the escalation of
    an acknowledged alert in its header."""
    from tests.support.waiting import wait_until
    from tui.dashboard.app import ZukaApp

    path = tmp_path / "l.db"
    now = T0 + timedelta(minutes=5)
    with Ledger.open(path) as ledger:
        node = _hot(ledger)
        _temperature(ledger, node, T0, 86.0)
        [alert] = alertstate.alerts(ledger, T0)
        alertstate.ack(ledger, alert.id, T0, "alice")
        HistoryStore(ledger).write_latest([_reading(node, now, 95.0)])
    app = ZukaApp(path, clock=lambda: now, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the alerts read (the third)")
        await pilot.pause()
        assert "1 alert" in str(app.sub_title)
    with Ledger.open(path) as ledger:
        [shown] = alertstate.alerts(ledger, now)
    assert shown.id == alert.id and shown.severity is Severity.CRITICAL


def test_m016_keeps_an_acknowledgement_at_the_severity_it_had(tmp_path: Path) -> None:
    """A ledger from before m016: an acknowledged alert stays acknowledged at its severity
    (hidden), and shows again if it escalates."""
    from sqlite_utils import Database

    from leases.ledger.schema import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    MIGRATIONS.apply(Database(conn), stop_before="m016_alert_outbox")
    conn.execute("PRAGMA user_version = 15")
    node = conn.execute(
        "INSERT INTO nodes (name, ssh_host, gpu_count) VALUES ('hot', '127.0.0.1', 1)"
    ).lastrowid
    conn.execute(
        "INSERT INTO alerts (kind, node_id, node, key, severity, message, first_seen,"
        " last_seen, acked_at, acked_by) VALUES ('temperature', ?, 'hot', 'gpu0', 'warning',"
        " 'hot: GPU 0 at 86 °C', ?, ?, ?, 'alice')",
        (node, T0.isoformat(), T0.isoformat(), T0.isoformat()),
    )
    conn.commit()
    conn.close()
    with Ledger.open(path) as ledger:
        [old] = alertstate.alerts(ledger, T0, everything=True)
        assert old.acked_severity is Severity.WARNING and old.state(T0).value == "acked"
        later = T0 + timedelta(minutes=1)
        _temperature(ledger, ledger.node("hot"), later, 95.0)
        # (The node inserted in SQLite above is an alert of its own: rowaudit.)
        shown = alertstate.alerts(ledger, later)
        assert [a.id for a in shown if a.kind != "edited_outside_zuka"] == [old.id]


def test_an_outbox_row_edited_behind_zukas_back_is_skipped_not_the_round(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """A row with no such alert or an unreadable time (the ledger edited by hand) is taken
    and skipped; the real alert beside it is sent."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        _lease_ending(ledger, T0)
        check(ledger, CONFIG, clock)
    conn = sqlite3.connect(path)  # foreign keys off, as in a hand edit
    conn.executemany(
        "INSERT INTO alert_outbox (alert_id, change, severity, message, at) VALUES (?, ?, ?, ?, ?)",
        [(999, "new", "critical", "no such alert", T0.isoformat()),
         (1, "escalated", "critical", "when?", "yesterday-ish")],
    )  # fmt: skip
    conn.commit()
    conn.close()
    with Ledger.open(path) as ledger:
        n = notifier(tmp_path, clock, [hook.url("dingtalk")])
        try:
            _collector_pass(ledger, n, clock)
        finally:
            n.close()
        waiting = ledger.conn.execute(
            "SELECT count(*) FROM alert_outbox WHERE taken_at IS NULL"
        ).fetchone()
    [got] = hook.wait_for(1)
    assert "n0" in got.body["text"]["content"] and waiting == (0,)


def test_a_clock_that_stands_still_still_tells_an_escalation(tmp_path: Path) -> None:
    """Two evaluations at one instant (a frozen clock): new at 86 °C, then escalated at
    95 °C, are two outbox rows; the same evaluation again adds none."""
    with Ledger.open(tmp_path / "l.db") as ledger:
        node = _hot(ledger)
        for temp in (86.0, 95.0, 95.0):
            _temperature(ledger, node, T0, temp)
        told = ledger.conn.execute(
            "SELECT change, severity FROM alert_outbox ORDER BY id"
        ).fetchall()
    assert told == [("new", "warning"), ("escalated", "critical")]


def test_a_message_held_by_the_rate_limit_goes_as_it_stands_or_not_at_all(
    tmp_path: Path,
    hook: Hook,  # noqa: F811
) -> None:
    """With 1 an hour, two lease-end warnings: one went, one waited. When it could go, it
    went in the words it was queued with ("in 3 days", 13 hours later), and one whose
    alert cleared before it could go was sent all the same. Now: as it stands, or not."""
    clock = Clock(T0)
    path = tmp_path / "ledger.db"
    with Ledger.open(path, clock=clock) as ledger:
        for name in ("n0", "n1"):
            ledger.add_node(records.node_from({"name": name, "ssh_host": "127.0.0.1"}))
            ledger.add_lease(records.lease_from({
                "node": name, "billing_type": "monthly", "unit_price": "30000",
                "start": (T0 - timedelta(days=27)).isoformat(),
                "end": (T0 + timedelta(days=3)).isoformat(),
            }))  # fmt: skip
        n = notifier(tmp_path, clock, [hook.url("dingtalk")], rate_limit_per_hour=1)
        try:
            _collector_pass(ledger, n, clock)
            (first,) = hook.wait_for(1)
            sent = first.body["text"]["content"]
            held = "n1" if "n0" in sent else "n0"
            clock.advance(minutes=30)
            _collector_pass(ledger, n, clock)
            assert len(hook.got) == 1
            clock.advance(hours=13)  # the hour is long over (a collector stopped meanwhile)
            _collector_pass(ledger, n, clock)
            (_, late) = hook.wait_for(2)
            text = late.body["text"]["content"]
            assert held in text and "in 2 days" in text  # as it stands, not 61 min old
            # Two more, both held (the hour's room is used); n2's lease is renewed before
            # they can go: its alert cleared, its message is never sent; n3's is.
            for name in ("n2", "n3"):
                ledger.add_node(records.node_from({"name": name, "ssh_host": "127.0.0.1"}))
                ledger.add_lease(records.lease_from({
                    "node": name, "billing_type": "monthly", "unit_price": "30000",
                    "start": (clock() - timedelta(days=27)).isoformat(),
                    "end": (clock() + timedelta(days=3)).isoformat(),
                }))  # fmt: skip
            _collector_pass(ledger, n, clock)
            assert len(hook.got) == 2
            ledger.renew_lease("n2", (clock() + timedelta(days=33)).isoformat())
            clock.advance(minutes=61)
            _collector_pass(ledger, n, clock)
            (_, _, last) = hook.wait_for(3)
            assert "lease ending on n3" in last.body["text"]["content"]
            failed = [r for r in n.outbox_rows() if r["state"] == "failed"]
        finally:
            n.close()
    assert len(hook.got) == 3
    (dropped,) = failed
    assert "no longer true" in dropped["last_error"]
