"""Leases as people use them: resources on ended leases, --lease-start as `lease list`
prints it, no open lease on an archived node by any path, and renewal chains shown with
their paid-until date. Real ledger files; the CLI in-process; the dashboard by Pilot."""

from __future__ import annotations

import json
import shlex
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable

from leases.core.errors import InputError
from leases.core.models import Lease, NodeState
from leases.ledger import records
from leases.ledger.release import check_lease_on, check_release
from leases.ledger.store import Ledger
from leases.money.renewals import billing_now, chains
from tests.support.cli import Cli
from tests.support.waiting import wait_until
from tui.dashboard.app import ZukaApp

README = Path(__file__).resolve().parent.parent.parent / "README.md"
SHANGHAI = ZoneInfo("Asia/Shanghai")


def _readme_line(prefix: str) -> list[str]:
    """The README's own command line that starts with `prefix`, as words (comment cut)."""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix):
            return shlex.split(line, comments=True)[1:]  # without the leading `zuka`
    raise AssertionError(f"README has no line starting {prefix!r}")


def _audit_count(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM audit").fetchone()[0])


def _day(offset: int) -> str:
    """A day relative to today in the billing time zone (the CLI runs on the real clock)."""
    return (datetime.now(SHANGHAI).date() + timedelta(days=offset)).isoformat()


# -- resources attach to any lease of the node -------------------------------------------


def test_readme_sequence_end_the_lease_then_record_its_snapshot(cli: Cli) -> None:
    assert cli("node", "add", "aliyun-a10-burst", "--ssh", "ssh root@47.96.0.18").code == 0
    start = _day(-3)
    assert cli("lease", "add", "aliyun-a10-burst", "--billing", "hourly", "--price", "10.50",
               "--start", start).code == 0  # fmt: skip
    end = cli(*_readme_line("zuka lease end aliyun-a10-burst"))
    assert end.code == 0, end.err
    add = cli(*_readme_line("zuka resource add aliyun-a10-burst"))
    assert add.code == 0, add.err
    # It says which lease took the snapshot: the latest one, which has ended.
    assert "latest lease" in add.out and f"from {start} 00:00" in add.out
    assert "ended" in add.out
    listed = json.loads(cli("resource", "list", "aliyun-a10-burst", "--json").out)
    assert [(r["kind"], r["native_id"], r["lease_start"]) for r in listed] == [
        ("snapshot", "s-bp1ahz3n9f0q5m6kdd2c", f"{start}T00:00:00+08:00")
    ]


def _two_ended_leases(cli: Cli) -> None:
    assert cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", "m1", "--billing", "hourly", "--price", "9",
               "--start", "2026-03-01T09:30", "--tz", "Europe/Berlin").code == 0  # fmt: skip
    assert cli("lease", "end", "m1", "--at", "2026-03-05T12:00").code == 0
    assert cli("lease", "add", "m1", "--billing", "hourly", "--price", "11",
               "--start", "2026-04-01 08:00").code == 0  # fmt: skip
    assert cli("lease", "end", "m1", "--at", "2026-04-02").code == 0


def test_resource_goes_to_the_open_lease_else_the_latest(cli: Cli) -> None:
    _two_ended_leases(cli)
    r = cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1")
    assert r.code == 0, r.err
    assert "latest lease, from 2026-04-01 08:00" in r.out
    assert cli("lease", "add", "m1", "--billing", "hourly", "--price", "12",
               "--start", "2026-05-01").code == 0  # fmt: skip
    r = cli("resource", "add", "m1", "--kind", "disk", "--id", "d-2", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["lease_start"] == "2026-05-01T00:00:00+08:00"
    r = cli("resource", "add", "m1", "--kind", "disk", "--id", "d-3")
    assert "the lease billing now (from 2026-05-01 00:00)" in r.out


def test_lease_start_takes_what_lease_list_prints(cli: Cli) -> None:
    _two_ended_leases(cli)
    table = cli("lease", "list", "m1").out.splitlines()
    first_row = next(line for line in table if "CNY 9.00" in line)
    printed = "2026-03-01 09:30"
    assert printed in first_row  # the table shows the start in the lease's own zone
    as_json = json.loads(cli("lease", "list", "m1", "--json").out)[0]["start"]
    assert as_json == "2026-03-01T09:30:00+01:00"
    given = [
        printed,  # the table's value
        as_json,  # the --json value
        "2026-03-01",  # a date: the lease starting that day in its billing zone
        "2026-03-01T09:30",  # a naive time in the lease's billing zone (Berlin)
        "2026-03-01T09:30:00",
        "2026-03-01T08:30Z",  # the same instant with an offset
        "2026-03-01T16:30:00+08:00",
    ]
    for i, value in enumerate(given):
        r = cli("resource", "add", "m1", "--kind", "disk", "--id", f"d-{i}",
                "--lease-start", value, "--json")  # fmt: skip
        assert r.code == 0, (value, r.err)
        assert json.loads(r.out)["lease_start"] == as_json, value


def test_naive_lease_start_is_read_in_the_billing_zone_not_shanghai(cli: Cli) -> None:
    _two_ended_leases(cli)
    # 09:30 Shanghai is 02:30 Berlin: no lease starts then.
    r = cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1",
            "--lease-start", "2026-03-01T09:30+08:00")  # fmt: skip
    assert r.code == 2
    assert "--lease-start" in r.err and "2026-03-01 09:30" in r.err  # lists the starts there are


@pytest.mark.parametrize(
    "value",
    [
        "",
        " ",
        "x",
        "2026-13-01",
        "2026-01-01T25:00",
        "2026-02-30",
        "3026-01-01",
        "9999-12-31T23:59:59+14:00",
        "0001-01-01T00:00:00-14:00",
        "2026-03-01T09:30+99:00",
        "2026-06-01",  # a good date on which no lease starts
    ],
)
def test_bad_lease_start_is_refused_naming_the_field(
    cli: Cli, ledger_path: Path, value: str
) -> None:
    _two_ended_leases(cli)
    before = _audit_count(ledger_path)
    r = cli("resource", "add", "m1", "--kind", "disk", "--id", "d-1", "--lease-start", value)
    assert r.code == 2
    assert r.err.startswith("zuka: error: --lease-start")
    assert "Traceback" not in r.err
    assert _audit_count(ledger_path) == before


def test_lease_for_keeps_its_signature_and_refuses_in_the_ledger(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add_node(records.node_from({"name": "n", "ssh_host": "10.0.0.1"}))
        with pytest.raises(InputError) as exc:
            ledger.lease_for("n", None)
        assert exc.value.field == "node" and "zuka lease add n" in exc.value.reason
        lease = ledger.add_lease(records.lease_from(
            {"node": "n", "billing_type": "hourly", "unit_price": "1", "start": "2026-01-01"}
        ))  # fmt: skip
        assert ledger.lease_for("n", "2026-01-01 00:00") == lease
        assert ledger.lease_for("n", lease.start) == lease
        with pytest.raises(InputError) as exc:
            ledger.lease_for("n", "x")
        assert exc.value.field == "lease_start"


# -- no open lease on an archived node, by any path -------------------------------------


def _open_lease(cli: Cli, name: str = "m1") -> None:
    assert cli("node", "add", name, "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("lease", "add", name, "--billing", "monthly", "--price", "50000",
               "--start", _day(-10), "--end", _day(20)).code == 0  # fmt: skip


def test_node_edit_state_released_is_refused_while_a_lease_is_open(
    cli: Cli, ledger_path: Path
) -> None:
    _open_lease(cli)
    before = _audit_count(ledger_path)
    r = cli("node", "edit", "m1", "--state", "released")
    assert r.code == 2
    assert "open lease" in r.err and "zuka lease end m1" in r.err
    r = cli("node", "archive", "m1")
    assert r.code == 2
    assert "open lease" in r.err and "zuka lease end m1" in r.err
    assert json.loads(cli("node", "show", "m1", "--json").out)["node"]["state"] == "active"
    assert _audit_count(ledger_path) == before
    # Offboarding is not released: allowed.
    assert cli("node", "edit", "m1", "--state", "offboarding").code == 0
    assert cli("node", "edit", "m1", "--state", "released").code == 2


def test_a_renewed_lease_keeps_the_node_from_being_released(cli: Cli) -> None:
    _open_lease(cli)
    assert cli("lease", "renew", "m1", "--until", _day(50)).code == 0
    assert cli("node", "archive", "m1").code == 2


def test_update_node_refuses_release_while_a_lease_is_open(tmp_path: Path) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    with Ledger.open(tmp_path / "l.db", clock=lambda: now) as ledger:
        ledger.add_node(records.node_from({"name": "n", "ssh_host": "10.0.0.1"}))
        ledger.add_lease(records.lease_from(
            {"node": "n", "billing_type": "hourly", "unit_price": "1", "start": "2026-11-01"}
        ))  # fmt: skip
        with pytest.raises(InputError) as exc:
            ledger.update_node("n", {"state": "released", "notes": "gone"})
        assert "zuka lease end n" in exc.value.reason
        with pytest.raises(InputError):
            ledger.archive_node("n")
        assert ledger.node("n").state is NodeState.ACTIVE and ledger.node("n").notes == ""
        ledger.end_lease("n", now)
        assert ledger.archive_node("n").state is NodeState.RELEASED


def _export_with(cli: Cli, node_state: str, ended_at: str | None) -> dict[str, object]:
    _open_lease(cli, "x1")
    doc = json.loads(cli("export").out)
    doc["nodes"][0]["state"] = node_state
    doc["leases"][0]["ended_at"] = ended_at
    return doc


def test_import_of_a_released_node_with_an_open_lease_is_refused(cli: Cli, tmp_path: Path) -> None:
    doc = _export_with(cli, "released", None)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    other = tmp_path / "other.db"
    r = cli("import", str(path), ledger=other)
    assert r.code == 2
    assert f"lease 1 in {path}" in r.err and "archived" in r.err and "x1" in r.err
    assert json.loads(cli("node", "list", "--all", "--json", ledger=other).out) == []


def test_import_of_a_released_node_with_ended_leases_works(cli: Cli, tmp_path: Path) -> None:
    doc = _export_with(cli, "released", f"{_day(-1)}T00:00:00+08:00")
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc))
    other = tmp_path / "other.db"
    assert cli("import", str(path), ledger=other).code == 0


def test_no_lease_is_added_to_or_renewed_on_an_archived_node(cli: Cli, ledger_path: Path) -> None:
    assert cli("node", "add", "m1", "--ssh", "ssh root@10.0.0.1").code == 0
    assert cli("node", "archive", "m1").code == 0
    before = _audit_count(ledger_path)
    r = cli("lease", "add", "m1", "--billing", "hourly", "--price", "9")
    assert r.code == 2
    assert "archived" in r.err and "zuka node restore m1" in r.err
    assert _audit_count(ledger_path) == before
    # The command the refusal names is the fix.
    assert cli("node", "restore", "m1").code == 0
    assert cli("lease", "add", "m1", "--billing", "hourly", "--price", "9").code == 0
    assert cli("lease", "delete", "m1", "--start", json.loads(
        cli("lease", "list", "m1", "--json").out)[0]["start"]).code == 0  # fmt: skip
    # A ledger from before this rule: an archived node that still has an open lease.
    assert cli("lease", "add", "m1", "--billing", "monthly", "--price", "50000",
               "--start", _day(-10), "--end", _day(20)).code == 0  # fmt: skip
    conn = sqlite3.connect(ledger_path)
    with conn:
        conn.execute("UPDATE nodes SET state = 'released' WHERE name = 'm1'")
    conn.close()
    before = _audit_count(ledger_path)
    r = cli("lease", "renew", "m1", "--until", _day(50))
    assert r.code == 2
    assert "archived" in r.err and "zuka node restore m1" in r.err
    assert _audit_count(ledger_path) == before
    assert len(json.loads(cli("lease", "list", "m1", "--json").out)) == 1


# -- after a renewal: the lease billing now and the chain's paid-until ----------------


def _renewed(cli: Cli) -> tuple[str, str, str]:
    """m1: a monthly lease from 10 days ago to in 20 days, renewed twice, early."""
    _open_lease(cli)
    assert cli("lease", "renew", "m1", "--until", _day(50), "--price", "48000").code == 0
    assert cli("lease", "renew", "m1", "--until", _day(80)).code == 0
    return _day(-10), _day(20), _day(80)


def test_node_list_shows_the_lease_billing_now_and_the_paid_until(cli: Cli) -> None:
    start, end, paid = _renewed(cli)
    table = cli("node", "list").out.splitlines()
    assert "PAID UNTIL" in table[0]
    row = next(line for line in table if line.startswith("m1"))
    assert "CNY 50,000.00" in row  # the first lease still bills: it runs until its end
    assert f"{end} 00:00" in row and f"{paid} 00:00" in row
    listed = json.loads(cli("node", "list", "--json").out)[0]
    assert listed["lease"]["start"] == f"{start}T00:00:00+08:00"
    assert listed["paid_until"] == f"{paid}T00:00:00+08:00"


def test_node_show_says_the_lease_billing_now_and_the_paid_until(cli: Cli) -> None:
    start, end, paid = _renewed(cli)
    shown = cli("node", "show", "m1").out
    assert f"paid until {paid} 00:00" in shown
    assert f"bills now: monthly CNY 50,000.00, {start} 00:00 to {end} 00:00" in shown
    doc = json.loads(cli("node", "show", "m1", "--json").out)
    assert doc["lease_now"]["start"] == f"{start}T00:00:00+08:00"
    assert doc["paid_until"] == f"{paid}T00:00:00+08:00"


def test_lease_list_open_shows_the_chain(cli: Cli) -> None:
    start, end, paid = _renewed(cli)
    table = cli("lease", "list", "--open").out.splitlines()
    assert "RENEWS" in table[0] and "PAID UNTIL" in table[0]
    rows = [line for line in table[1:] if line.startswith("m1")]
    assert len(rows) == 3
    assert all(f"{paid} 00:00" in row for row in rows)
    # RENEWS: when each is next renewed (its end, where the next lease starts), never
    # before its START (it showed the start of the lease each renews: before its own).
    head = table[0]
    renews_at = [row[head.index("RENEWS") :].split("  ")[0].strip() for row in rows]
    assert renews_at == [f"{end} 00:00", f"{_day(50)} 00:00", "-"]
    leases = json.loads(cli("lease", "list", "--open", "--json").out)
    assert [le["renews"] for le in leases] == [
        None, f"{start}T00:00:00+08:00", f"{end}T00:00:00+08:00"
    ]  # fmt: skip
    assert {le["paid_until"] for le in leases} == {f"{paid}T00:00:00+08:00"}
    assert [le["bills_now"] for le in leases] == [True, False, False]


def test_a_lease_that_is_not_renewed_is_paid_until_its_end(cli: Cli) -> None:
    _open_lease(cli)
    listed = json.loads(cli("node", "list", "--json").out)[0]
    assert listed["paid_until"] == f"{_day(20)}T00:00:00+08:00"
    assert cli("node", "add", "h1", "--ssh", "ssh root@10.0.0.2").code == 0
    assert cli("lease", "add", "h1", "--billing", "hourly", "--price", "9").code == 0
    hourly = json.loads(cli("node", "show", "h1", "--json").out)
    assert hourly["paid_until"] is None and hourly["lease_now"]["billing_type"] == "hourly"


async def test_dashboard_shows_the_paid_until_of_a_renewed_lease(tmp_path: Path) -> None:
    now = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)
    path = tmp_path / "l.db"
    with Ledger.open(path, clock=lambda: now) as ledger:
        for name in ("m1", "m2"):
            ledger.add_node(records.node_from({"name": name, "ssh_host": "10.0.0.1"}))
            ledger.add_lease(records.lease_from(
                {"node": name, "billing_type": "monthly", "unit_price": "50000",
                 "start": "2026-11-15", "end": "2026-12-15"}
            ))  # fmt: skip
        ledger.renew_lease("m1", "2027-01-15")
    app = ZukaApp(path, clock=lambda: now, poll=False)
    async with app.run_test(size=(150, 40)) as pilot:
        fleet = app.query_one("#fleet", DataTable)
        # The first read runs off the UI loop.
        await wait_until(lambda: fleet.row_count == 2, what="both rows")
        # A renewed chain: marked, counting down to the end of what is paid for.
        assert fleet.get_cell("m1", "ends").plain == "↻45d 15 Jan"
        assert fleet.get_cell("m2", "ends").plain == "14d 15 Dec"
        await pilot.press("q")


# -- the pure rules -----------------------------------------------------------------------


def _lease(start: str, end: str | None, ended_at: str | None = None, node: str = "n") -> Lease:
    return records.lease_from(
        {"node": node, "billing_type": "monthly" if end else "hourly", "unit_price": "1",
         "start": start, "end": end, "ended_at": ended_at}
    )  # fmt: skip


def _at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=SHANGHAI)


def test_billing_now_follows_the_chain_to_its_paid_until() -> None:
    first = _lease("2026-10-01", "2026-11-01", "2026-11-01")
    second = _lease("2026-11-01", "2026-12-01", "2026-12-01")
    third = _lease("2026-12-01", "2027-01-01")
    leases = [first, second, third]
    assert [len(c) for c in chains(leases)] == [3]
    for day, bills in [("2026-10-15", first), ("2026-11-01", second), ("2026-12-31", third)]:
        now = billing_now(leases, _at(day))
        assert now is not None and now.lease is bills and now.paid_until == _at("2027-01-01")
    assert billing_now(leases, _at("2026-10-15")).renewed  # type: ignore[union-attr]
    assert not billing_now(leases, _at("2026-12-15")).renewed  # type: ignore[union-attr]
    assert billing_now([], _at("2026-10-15")) is None


def test_a_gap_or_an_early_end_breaks_the_chain() -> None:
    ended_early = _lease("2026-10-01", "2026-11-01", "2026-10-20")
    after_a_gap = _lease("2026-11-02", "2026-12-02")
    assert [len(c) for c in chains([ended_early, after_a_gap])] == [1, 1]
    now = billing_now([ended_early, after_a_gap], _at("2026-11-10"))
    assert now is not None and now.paid_until == _at("2026-12-02") and len(now.chain) == 1
    hourly = _lease("2026-10-01", None)
    now = billing_now([hourly], _at("2026-11-10"))
    assert now is not None and now.lease is hourly and now.paid_until is None
    # Leases of two nodes never chain, even when their times meet.
    other = _lease("2026-11-01", "2026-12-01", node="m")
    assert [len(c) for c in chains([other, ended_early])] == [1, 1]


def test_release_rule() -> None:
    now = _at("2026-11-10")
    node = records.node_from({"name": "n", "ssh_host": "10.0.0.1"})
    released = records.node_from({"name": "n", "ssh_host": "10.0.0.1", "state": "released"})
    running = _lease("2026-10-01", "2026-12-01")
    renewed = _lease("2026-10-01", "2026-12-01", "2026-12-01")  # ends in the future
    ended = _lease("2026-10-01", "2026-12-01", "2026-11-01")
    cancelled = _lease("2026-12-01", "2027-01-01", "2026-12-01")  # a renewal that never ran
    check_release("n", [ended, cancelled], now)
    for lease in (running, renewed):
        with pytest.raises(InputError, match="zuka lease end n"):
            check_release("n", [ended, lease], now)
        with pytest.raises(InputError, match="zuka node restore n"):
            check_lease_on(released, lease, now)
        check_lease_on(node, lease, now)
    check_lease_on(released, ended, now)  # history of an archived node may be imported


def test_lease_end_of_a_renewed_lease_lets_the_node_be_archived(cli: Cli) -> None:
    """The command the refusal names must fix it, renewals paid in advance included."""
    _renewed(cli)
    refused = cli("node", "archive", "m1")
    assert refused.code == 2 and "zuka lease end m1" in refused.err
    ended = cli("lease", "end", "m1")
    assert ended.code == 0, ended.err
    assert "2 renewal(s) not started yet" in ended.out
    assert json.loads(cli("lease", "list", "m1", "--open", "--json").out) == []
    leases = json.loads(cli("lease", "list", "m1", "--json").out)
    # Renewals that never started end at their start: they never billed.
    assert [le["ended_at"] == le["start"] for le in leases] == [False, True, True]
    assert cli("node", "archive", "m1").code == 0


# -- leases not started yet, and which lease a command changed --------------------------------


def test_a_lease_that_starts_later_does_not_bill_now(cli: Cli) -> None:
    assert cli("node", "add", "fut", "--ssh", "ssh root@h").code == 0
    r = cli("lease", "add", "fut", "--billing", "monthly", "--price", "100",
            "--start", _day(19), "--end", _day(50))  # fmt: skip
    assert r.code == 0, r.err
    (only,) = json.loads(cli("lease", "list", "fut", "--json").out)
    assert only["bills_now"] is False
    table = cli("lease", "list", "fut").out
    assert "starts in 1" in table and "yes" not in table
    show = cli("node", "show", "fut").out
    assert "bills now: no lease" in show and "starts in 1" in show


def _running_chain(cli: Cli, name: str = "a100") -> None:
    """A lease that bills now (started 20 days ago, ends in 10) renewed for 30 days more."""
    assert cli("node", "add", name, "--ssh", "ssh root@h", "--gpus", "8").code == 0
    r = cli("lease", "add", name, "--billing", "monthly", "--price", "50000",
            "--start", _day(-20), "--end", _day(10))  # fmt: skip
    assert r.code == 0, r.err
    assert cli("lease", "renew", name, "--until", _day(40)).code == 0


def test_after_deleting_the_lease_billing_now_the_renewal_does_not_bill(cli: Cli) -> None:
    _running_chain(cli)
    first, _ = json.loads(cli("lease", "list", "a100", "--json").out)
    assert cli("lease", "delete", "a100", "--start", str(first["start"])).code == 0
    (renewal,) = json.loads(cli("lease", "list", "a100", "--json").out)
    assert renewal["bills_now"] is False
    assert "starts in 10 days" in cli("lease", "list", "a100").out


def test_a_cancelled_renewal_is_not_paid_until_the_old_chain_end(cli: Cli) -> None:
    _running_chain(cli)
    assert cli("lease", "end", "a100").code == 0
    first, renewal = json.loads(cli("lease", "list", "a100", "--json").out)
    assert renewal["ended_at"] == renewal["start"]  # it never billed
    assert renewal["paid_until"] is None
    assert first["paid_until"] == first["end"]


def test_a_resource_after_the_lease_ended_goes_to_the_lease_that_ran(cli: Cli) -> None:
    """Ending the lease cancels its renewal (ended at its start): a snapshot recorded
    afterwards belongs to the lease that ran, never to the renewal that never began."""
    _running_chain(cli)
    assert cli("lease", "end", "a100").code == 0
    first, renewal = json.loads(cli("lease", "list", "a100", "--json").out)
    r = cli("resource", "add", "a100", "--kind", "snapshot", "--id", "s-after-end")
    assert r.code == 0, r.err
    assert "cancelled" not in r.out and f"from {_day(-20)}" in r.out
    (listed,) = json.loads(cli("resource", "list", "a100", "--json").out)
    assert listed["lease_start"] == first["start"] != renewal["start"]


def test_lease_words_say_which_lease(cli: Cli) -> None:
    _running_chain(cli)
    table = cli("lease", "list", "a100").out
    assert "not started" in table and "open" not in table
    r = cli("lease", "edit", "a100", "--price", "49000")
    assert r.code == 0, r.err
    assert f"billing now (from {_day(-20)}" in r.out
    r = cli("resource", "add", "a100", "--kind", "disk", "--id", "d-1")
    assert r.code == 0, r.err
    assert "lease billing now" in r.out and "open lease" not in r.out
    r = cli("resource", "add", "a100", "--kind", "disk", "--id", "d-2", "--lease-start", _day(10))
    assert r.code == 0, r.err
    assert f"renewal from {_day(10)}" in r.out and "(not started)" in r.out
    assert "billing now" in cli("lease", "edit", "--help").out


def test_lease_edit_cannot_make_a_chain_overlap(cli: Cli, ledger_path: Path) -> None:
    _running_chain(cli)
    count = _audit_count(ledger_path)
    r = cli("lease", "edit", "a100", "--end", _day(20))
    assert r.code == 2
    assert "overlaps the lease from" in r.err
    assert _audit_count(ledger_path) == count
    first, renewal = json.loads(cli("lease", "list", "a100", "--json").out)
    assert renewal["renews"] == first["start"]


def test_the_dashboard_row_of_a_lease_not_started_says_when_it_starts() -> None:
    from tui.screens.fleetview import fleet_row

    now = _at("2026-11-30")
    booked = _lease("2026-12-19", "2027-01-19")
    billing = billing_now([booked], now)
    assert billing is not None and not billing.started and billing.paid_until is None
    row = fleet_row(records.node_from({"name": "n", "ssh_host": "h"}), None, billing, [], now)
    assert row.cells["ends"].plain == "starts in 19 days"


# -- leases past their end ------------------------------------------------------------------


def _expiring(on_expiry: str, **kw: object) -> Lease:
    return records.lease_from(
        {"node": "n", "billing_type": "monthly", "unit_price": "30000", "start": "2026-08-03",
         "end": "2026-09-03", "on_expiry": on_expiry, **kw}
    )  # fmt: skip


def test_a_lease_released_at_its_past_end_does_not_bill_now() -> None:
    released = _expiring("released")
    now = billing_now([released], _at("2026-10-01"))
    assert now is not None and now.lease is released
    assert not now.bills and now.lapsed and not now.hourly_after_end
    assert now.paid_until == _at("2026-09-03")
    live = billing_now([released], _at("2026-08-20"))
    assert live is not None and live.bills and not live.lapsed


def test_an_hourly_fallback_after_its_end_bills_now() -> None:
    fallback = _expiring("hourly", hourly_price="50")
    now = billing_now([fallback], _at("2026-10-01"))
    assert now is not None and now.bills and now.hourly_after_end and not now.lapsed
    assert now.paid_until == _at("2026-09-03")


def test_an_auto_renew_lease_is_paid_until_the_end_of_its_current_period() -> None:
    auto = _expiring("released", auto_renew=True, renew_charge_days=9)
    assert billing_now([auto], _at("2026-08-20")).paid_until == _at("2026-09-03")  # type: ignore[union-attr]
    now = billing_now([auto], _at("2026-10-05"))
    assert now is not None and now.bills and now.paid_until == _at("2026-11-03")
    renews = _expiring("renews")
    assert billing_now([renews], _at("2026-12-03")).paid_until == _at("2027-01-03")  # type: ignore[union-attr]


def test_ledger_views_do_not_show_an_expired_lease_as_billing(cli: Cli) -> None:
    for name in ("h3", "m3"):
        assert cli("node", "add", name, "--ssh", "ssh root@10.0.0.2").code == 0
    assert cli("lease", "add", "h3", "--billing", "hourly", "--price", "9", "--start",
               "2024-01-01", "--end", "2024-03-01").code == 0  # fmt: skip
    assert cli("lease", "add", "m3", "--billing", "contract", "--price", "90000", "--start",
               "2026-03-01", "--end", "2026-06-01", "--on-expiry", "released").code == 0  # fmt: skip
    table = cli("lease", "list").out.splitlines()
    for name in ("h3", "m3"):
        row = next(line for line in table if line.startswith(name))
        assert " yes" not in row and " open" not in row, row
        assert "not recorded" in row or "ended at end" in row, row
    assert [le["bills_now"] for le in json.loads(cli("lease", "list", "--json").out)] == [
        False, False
    ]  # fmt: skip
    shown = cli("node", "show", "h3").out
    assert "bills now: hourly" not in shown
    assert "run zuka lease end h3 --at '2024-03-01 00:00'" in shown, shown
    edit = cli("lease", "edit", "m3", "--notes", "old")
    assert edit.code == 0, edit.err
    assert "billing now" not in edit.out + edit.err, edit.out


def test_node_show_says_an_hourly_fallback_bills_by_the_hour(cli: Cli) -> None:
    assert cli("node", "add", "f1", "--ssh", "ssh root@10.0.0.2").code == 0
    assert cli("lease", "add", "f1", "--billing", "monthly", "--price", "30000", "--start",
               _day(-40), "--end", _day(-10), "--on-expiry", "hourly",
               "--hourly-price", "50").code == 0  # fmt: skip
    shown = cli("node", "show", "f1").out
    assert "bills now: hourly CNY 50.00" in shown, shown
    assert "past its end" in shown
