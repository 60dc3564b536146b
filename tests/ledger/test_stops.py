"""Stops (issue 17, item 4): recorded by hand, audited, undone, refused when they cannot
be, applied by every money figure per the lease's stopped_billing, and asked about when a
node goes unread for hours. Real SQLite files; the clock is injected where it matters."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from leases.alerts import state as alertstate
from leases.alerts.alert import AlertKind
from leases.alerts.facts import gather
from leases.alerts.rules import evaluate
from leases.config.sections import AlertsConfig
from leases.core.errors import InputError
from leases.core.models import NodeHealth
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.store import Ledger
from leases.telemetry.rollups import HistoryStore
from tests.support.cli import Cli

SH = ZoneInfo("Asia/Shanghai")


def _sh(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=SH)


def _node(cli: Cli, *lease: str) -> None:
    assert cli("provider", "add", "P", "--kind", "platform").code == 0
    added = cli("node", "add", "n", "--ssh", "ssh root@10.0.0.1", "--provider", "P",
                "--gpus", "8", "--gpu-model", "A100")  # fmt: skip
    assert added.code == 0, added.err
    if lease:
        done = cli("lease", "add", "n", *lease)
        assert done.code == 0, done.err


def _report(cli: Cli, month: str = "2026-11") -> dict[str, object]:
    result = cli("report", "--month", month, "--json")
    assert result.code == 0, result.err
    rows = json.loads(result.out)["leases"]
    assert len(rows) == 1, rows
    row: dict[str, object] = rows[0]
    return row


def _head(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM audit").fetchone()[0])


# -- the repros: billing applies the stops ----------------------------------------------------


def test_an_hourly_lease_stopped_for_half_its_time_bills_half(cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    assert cli("lease", "resume", "n", "--at", "2026-11-03").code == 0
    assert cli("lease", "end", "n", "--at", "2026-11-03T00:00").code == 0
    row = _report(cli)
    # 48 hours leased, 24 of them stopped: 24 h x ¥10 = ¥240.00 (in full it was ¥480.00)
    assert row["cost"] == "240.00" and row["charged_in_month"] == "240.00"
    # 24 h x 8 cards paid for
    assert row["paid_card_hours"] == "192.00"


def test_a_card_hour_node_stopped_13_days_bills_storage_only_then(cli: Cli) -> None:
    _node(cli, "--billing", "card_hour", "--price", "1.98", "--cards", "8",
          "--start", "2026-11-01", "--stopped-billing", "storage_only")  # fmt: skip
    disk = cli("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--price", "0.5",
               "--price-per", "day", "--created", "2026-11-01")  # fmt: skip
    assert disk.code == 0, disk.err
    assert cli("lease", "stop", "n", "--at", "2026-11-10").code == 0
    assert cli("lease", "resume", "n", "--at", "2026-11-23").code == 0
    assert cli("lease", "end", "n", "--at", "2026-12-01T00:00").code == 0
    row = _report(cli)
    # 30 days leased, 13 stopped: 17 d x 24 h x 8 cards x ¥1.98 = 408 h x ¥15.84 = ¥6,462.72
    # (in full: 720 h x ¥15.84 = ¥11,404.80); the disk bills all 30 days: 30 x ¥0.5 = ¥15.00
    assert row["cost"] == "6462.72"
    assert row["storage"] == "15.00"
    assert row["total"] == "6477.72"


def test_a_lease_billing_in_full_while_stopped_is_not_changed_by_a_stop(cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    assert cli("lease", "end", "n", "--at", "2026-11-03T00:00").code == 0
    # 48 h x ¥10, stopped or not (stopped_billing full)
    assert _report(cli)["cost"] == "480.00"


def test_none_pauses_storage_too_until_the_lease_ends(cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "none")  # fmt: skip
    assert cli("resource", "add", "n", "--kind", "disk", "--id", "d-1", "--price", "1",
               "--price-per", "day").code == 0  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    assert cli("lease", "end", "n", "--at", "2026-11-04T00:00").code == 0
    row = _report(cli)
    # Stopped from the 2nd, never resumed, until the lease ended on the 4th (its end closes
    # the stop): 24 h x ¥10 = ¥240.00; the disk 1 day x ¥1, paused while stopped under
    # `none`, then billed as a storage line after the lease, 11-04 -> 12-01: 27 x ¥1 = ¥28.00
    assert row["cost"] == "240.00" and row["storage"] == "28.00"


def test_zuka_cost_and_node_show_apply_an_open_stop(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-02").code == 0
    result = cli("cost", "--json")
    assert result.code == 0, result.err
    (c,) = json.loads(result.out)["leases"]
    # Stopped since the 2nd and still stopped now: 24 h x ¥10 = ¥240, whenever it runs
    assert c["to_date"] == "240.00"
    assert any("assumes n ran whenever no stop is recorded (1 stop recorded)" in n
               for n in c["unknown"])  # fmt: skip
    shown = cli("node", "show", "n")
    assert "cost: CNY 240.00 to date" in shown.out, shown.out


def test_a_figure_whose_stops_are_unknown_says_it_assumes_the_node_ran(cli: Cli) -> None:
    _node(cli, "--billing", "card_hour", "--price", "2", "--cards", "1", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    assert cli("lease", "end", "n", "--at", "2026-11-02T00:00").code == 0
    row = _report(cli)
    assert row["cost"] == "48.00"  # 24 h x 1 card x ¥2, as if it ran: no stop recorded
    assert row["notes"] == [
        "assumes n ran whenever no stop is recorded (no stop recorded); record one with"
        " zuka lease stop n --at TIME"
    ]


def test_a_prepaid_lease_or_one_billing_in_full_needs_no_such_note(cli: Cli) -> None:
    _node(cli, "--billing", "monthly", "--price", "30000", "--start", "2026-11-01",
          "--end", "2026-12-01", "--stopped-billing", "storage_only")  # fmt: skip
    assert _report(cli)["notes"] == []


# -- recorded, audited, undone, refused ---------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "refused", "says"),
    [
        ([], ["lease", "resume", "n", "--at", "2026-11-05"], "is not recorded as stopped"),
        ([["lease", "stop", "n", "--at", "2026-11-05"]],
         ["lease", "stop", "n", "--at", "2026-11-06"], "is already stopped since 2026-11-05 00:00"),
        ([["lease", "stop", "n", "--at", "2026-11-05"],
          ["lease", "resume", "n", "--at", "2026-11-07"]],
         ["lease", "stop", "n", "--at", "2026-11-06"],
         "overlaps the stop recorded from 2026-11-05 00:00 to 2026-11-07 00:00"),
        ([["lease", "stop", "n", "--at", "2026-11-05"]],
         ["lease", "resume", "n", "--at", "2026-11-05"], "is not after the stop's start"),
        ([], ["lease", "stop", "n", "--at", "2026-10-31T23:00"],
         "is before the lease's start 2026-11-01 00:00"),
        ([["lease", "end", "n", "--at", "2026-11-20"]], ["lease", "stop", "n", "--at",
          "2026-11-20T12:00"], "is after the lease's end 2026-11-20 00:00"),
        ([], ["lease", "stop", "n", "--at", "2099-01-01"], "is in the future"),
        ([["lease", "stop", "n", "--at", "2026-11-05"]],
         ["lease", "resume", "n", "--at", "2099-01-01"], "is in the future"),
        ([], ["lease", "stop", "n", "--at", "2026-11-31"], "--at"),
    ],
)  # fmt: skip
def test_an_impossible_stop_or_resume_is_refused_and_changes_nothing(
    cli: Cli, ledger_path: Path, steps: list[list[str]], refused: list[str], says: str
) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    for step in steps:
        assert cli(*step).code == 0
    with Ledger.open(ledger_path) as ledger:
        before = ledger.stops("n")
    head = _head(ledger_path)
    result = cli(*refused)
    assert result.code != 0 and says in result.err, result.err
    assert _head(ledger_path) == head
    with Ledger.open(ledger_path) as ledger:
        assert ledger.stops("n") == before


def test_a_stop_with_no_lease_is_refused(cli: Cli) -> None:
    _node(cli)
    result = cli("lease", "stop", "n", "--at", "2026-11-05")
    assert result.code != 0 and "has no lease" in result.err


def test_stops_are_audited_by_ids_and_undone_and_redone(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    assert cli("lease", "resume", "n", "--at", "2026-11-06T08:30").code == 0
    with Ledger.open(ledger_path) as ledger:
        (stop,) = ledger.stops("n")
        lease = ledger.current_lease("n")
        assert lease is not None and stop.lease_id == lease.id
        assert stop.node_id == ledger.node("n").id and stop.source == "hand" and stop.who
        assert (stop.start, stop.end) == (_sh("2026-11-05T00:00"), _sh("2026-11-06T08:30"))
        entries = ledger.last_entries(2)
        assert [e.action for e in entries] == ["stop.add", "stop.resume"]
        assert entries[1].before is not None and entries[1].before["end"] is None
        assert ledger.verify_audit().ok
    assert "stop.resume" in cli("log", "n").out
    assert cli("undo").code == 0  # the resume: stopped again
    with Ledger.open(ledger_path) as ledger:
        assert [s.end for s in ledger.stops("n")] == [None]
    assert cli("undo").code == 0  # redo the resume
    with Ledger.open(ledger_path) as ledger:
        assert [s.end for s in ledger.stops("n")] == [_sh("2026-11-06T08:30")]
        assert ledger.verify_audit().ok


def test_undo_of_a_stop_removes_it(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    assert cli("undo").code == 0
    with Ledger.open(ledger_path) as ledger:
        assert ledger.stops("n") == []


def test_a_deleted_lease_takes_its_stops_and_undo_brings_them_back(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    assert cli("lease", "resume", "n", "--at", "2026-11-06").code == 0
    assert cli("lease", "delete", "n", "--start", "2026-11-01").code == 0
    with Ledger.open(ledger_path) as ledger:
        assert ledger.stops("n") == []
    assert cli("undo").code == 0
    with Ledger.open(ledger_path) as ledger:
        (stop,) = ledger.stops("n")
        assert stop.end == _sh("2026-11-06T00:00")


def test_a_stop_row_edited_behind_zukas_back_is_refused_naming_it(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    with sqlite3.connect(ledger_path) as conn:
        conn.execute("UPDATE stops SET start = 'yesterday'")
    result = cli("report", "--month", "2026-11")
    assert result.code == 2, result.err
    assert "stop 1 of node 'n' was edited outside zuka and does not read: start" in result.err
    # It cannot be taken as it is either: its start does not read.
    assert cli("audit", "accept", "stop", "1").code == 2


# -- the alert: unread for hours, was it stopped? ---------------------------------------------


def test_a_node_unread_for_hours_is_asked_about_once_a_gap(ledger_path: Path, cli: Cli) -> None:
    _node(cli, "--billing", "card_hour", "--price", "1.98", "--cards", "8",
          "--start", "2026-11-01", "--stopped-billing", "storage_only")  # fmt: skip
    gap = _sh("2026-11-10T21:15")
    config = AlertsConfig()  # stopped_question_hours = 3
    with Ledger.open(ledger_path) as ledger:
        HistoryStore(ledger).open_gap("n", gap, NodeHealth.UNREACHABLE, "no route to host")

        def kinds(now: datetime) -> list[str]:
            alerts = evaluate(gather(ledger, config, now), config, now)
            alertstate.reconcile(ledger, alerts, now)
            return [a.kind.value for a in alerts]

        assert "stopped_question" not in kinds(gap + timedelta(hours=2, minutes=59))
        for h in (3, 4, 5):  # every evaluation keeps the one alert open
            assert "stopped_question" in kinds(gap + timedelta(hours=h))
        stored = [a for a in alertstate.alerts(ledger, gap + timedelta(hours=5))
                  if a.kind == AlertKind.STOPPED_QUESTION]  # fmt: skip
        assert len(stored) == 1
        assert "was it stopped?" in stored[0].message
        assert "zuka lease stop n --at '2026-11-10 21:15'" in stored[0].action
        # The command it gives records the stop; then nothing is asked.
        ledger.stop_node("n", gap)
        assert "stopped_question" not in kinds(gap + timedelta(hours=6))
        # A second gap, later, is asked about again: once.
        ledger.resume_node("n", gap + timedelta(hours=7))
        HistoryStore(ledger).close_gap("n", gap + timedelta(hours=7))
        gap2 = gap + timedelta(days=1)
        HistoryStore(ledger).open_gap("n", gap2, NodeHealth.TIMEOUT, "")
        assert "stopped_question" in kinds(gap2 + timedelta(hours=4))
        asked = [a for a in alertstate.alerts(ledger, gap2 + timedelta(hours=4), everything=True)
                 if a.kind == AlertKind.STOPPED_QUESTION]  # fmt: skip
        assert len(asked) == 2 and len({a.key for a in asked}) == 2


def test_the_question_waits_for_the_configured_hours(ledger_path: Path, cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "none")  # fmt: skip
    gap = datetime(2026, 11, 10, 13, 0, tzinfo=UTC)
    config = AlertsConfig(stopped_question_hours=8)
    with Ledger.open(ledger_path) as ledger:
        HistoryStore(ledger).open_gap("n", gap, NodeHealth.UNREACHABLE, "")
        for hours, asked in ((7, False), (8, True)):
            now = gap + timedelta(hours=hours)
            found = {a.kind for a in evaluate(gather(ledger, config, now), config, now)}
            assert (AlertKind.STOPPED_QUESTION in found) is asked


def test_no_question_for_a_lease_billing_in_full_while_stopped(ledger_path: Path, cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    gap = datetime(2026, 11, 10, 13, 0, tzinfo=UTC)
    with Ledger.open(ledger_path) as ledger:
        HistoryStore(ledger).open_gap("n", gap, NodeHealth.UNREACHABLE, "")
        now = gap + timedelta(hours=10)
        found = {a.kind for a in evaluate(gather(ledger, AlertsConfig(), now), AlertsConfig(), now)}
    assert AlertKind.UNREACHABLE in found and AlertKind.STOPPED_QUESTION not in found


def test_ledger_refuses_directly_too(ledger_path: Path, cli: Cli) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    with Ledger.open(ledger_path) as ledger, pytest.raises(InputError, match="in the future"):
        ledger.stop_node("n", ledger.clock() + timedelta(hours=1))


# -- the dashboard: z and Z on the fleet ---------------------------------------------------------


async def test_the_dashboard_records_a_stop_and_a_resume(cli: Cli, ledger_path: Path) -> None:
    from textual.widgets import Input

    from tests.support.waiting import wait_until
    from tui.dashboard.app import ZukaApp
    from tui.screens.fleet import FleetScreen
    from tui.widgets.form import FormScreen

    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "storage_only")  # fmt: skip
    now = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
    app = ZukaApp(ledger_path, clock=lambda: now, poll=False, refresh_s=3600)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(lambda: app._reads >= 3, what="the third read")
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key, at in (("z", "2026-11-29 21:00"), ("Z", "2026-11-30 08:00")):
            await pilot.press(key)
            await wait_until(lambda: isinstance(app.screen, FormScreen), what=f"{key}'s form")
            await app.workers.wait_for_complete()
            await pilot.pause()
            form = app.screen
            assert isinstance(form, FormScreen)
            box = form.query_one(Input)
            box.value = at
            await pilot.press("ctrl+s")
            await wait_until(lambda: isinstance(app.screen, FleetScreen), what="the form closed")
        assert app.ledger is not None
        (stop,) = app.ledger.stops("n")
    assert (stop.start, stop.end) == (_sh("2026-11-29T21:00"), _sh("2026-11-30T08:00"))


def test_a_version_13_ledger_is_upgraded_with_the_stops_table(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01")
    with Ledger.open(ledger_path) as ledger:
        ledger.conn.executescript(
            "DROP TABLE stops; DELETE FROM _sqlite_migrations WHERE name = 'm014_stops';"
            " PRAGMA user_version = 13;"
        )
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    with Ledger.open(ledger_path) as ledger:
        assert ledger.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert [s.start for s in ledger.stops("n")] == [_sh("2026-11-05T00:00")]
        assert ledger.verify_audit().ok


def test_an_open_stop_ends_with_its_lease_and_never_zeroes_the_next(
    cli: Cli, ledger_path: Path
) -> None:
    """Review of issue 17: a stop left open when its lease ended ran on into the node's next
    lease, which then billed ¥0. Now the end closes it (audited, undone with the end), a
    new lease on a node still recorded stopped is refused with the resume command, and an
    end before a recorded stop is refused. The next lease: 11-20 -> 12-01, 11 days x 24 h x
    8 cards x 2 = 4,224.00 in November."""
    base = ("--billing", "card_hour", "--price", "2", "--cards", "8", "--stopped-billing",
            "storage_only")  # fmt: skip
    _node(cli, *base, "--start", "2026-11-10")
    assert cli("lease", "stop", "n", "--at", "2026-11-18").code == 0
    r = cli("lease", "end", "n", "--at", "2026-11-17")
    assert r.code == 2 and "recorded stopped from 2026-11-18 00:00, after this end" in r.err
    assert cli("lease", "end", "n", "--at", "2026-11-19").code == 0
    with Ledger.open(ledger_path) as ledger:
        (stop,) = ledger.stops("n")
    assert (stop.start, stop.end) == (_sh("2026-11-18T00:00"), _sh("2026-11-19T00:00"))
    assert cli("lease", "add", "n", *base, "--start", "2026-11-20").code == 0
    doc = json.loads(cli("report", "--month", "2026-11", "--format", "json").out)
    rows = sorted(doc["leases"], key=lambda r: r["start"])
    # The first: 11-10 -> 11-19 = 216 h less the 24 h stopped = 192 h x 16 = 3,072.00.
    assert [r["cost"] for r in rows] == ["3072.00", "4224.00"]


def test_a_lease_is_not_added_to_a_node_recorded_stopped(cli: Cli, ledger_path: Path) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01", "--end",
          "2026-11-10", "--on-expiry", "released", "--stopped-billing", "none")  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    r = cli("lease", "add", "n", "--billing", "hourly", "--price", "10", "--start", "2026-11-12")
    assert r.code == 2 and "recorded stopped since 2026-11-05 00:00" in r.err, r.err
    assert "zuka lease resume n --at TIME" in r.err
    with Ledger.open(ledger_path) as ledger:
        assert len(ledger.leases("n")) == 1


def test_a_stop_moved_to_another_node_behind_zukas_back_is_refused(
    cli: Cli, ledger_path: Path
) -> None:
    _node(cli, "--billing", "hourly", "--price", "10", "--start", "2026-11-01",
          "--stopped-billing", "none")  # fmt: skip
    assert cli("node", "add", "m", "--ssh", "root@10.0.0.8", "--gpus", "8").code == 0
    assert cli("lease", "add", "m", "--billing", "hourly", "--price", "10", "--start",
               "2026-11-01", "--stopped-billing", "none").code == 0  # fmt: skip
    assert cli("lease", "stop", "n", "--at", "2026-11-05").code == 0
    with Ledger.open(ledger_path) as ledger:
        other = ledger.node("m").id
        ledger.conn.execute("UPDATE stops SET node_id = ?", [other])
        ledger.conn.commit()
    drift = cli("report", "--month", "2026-11")
    assert drift.code == 2 and "stop 1 of node 'm' was edited outside zuka" in drift.err
    # Even taken on the chain as it is, the stop never bills another node's lease.
    assert cli("audit", "accept", "stop", "1").code == 0
    r = cli("report", "--month", "2026-11")
    assert r.code != 0 and "is not the node of its lease" in r.err, (r.code, r.out, r.err)
