"""acceptance_failed: the last acceptance run of the current lease failed, raised while
the lease can be returned: until the provider's return_days after the lease's start day
(billing zone), else [accept] young_days after its start. Dates worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.alerts.alert import Alert, AlertKind
from leases.alerts.facts import gather
from leases.alerts.rules import evaluate
from leases.config.sections import AlertsConfig
from leases.core.acceptance import CheckResult, Level, Status, Verdict
from leases.core.severity import Severity
from leases.ledger import acceptance_rows
from leases.ledger.store import Ledger
from tests.support.cli import Cli

CONFIG = AlertsConfig()  # accept_young_days 7
# The lease starts 2026-12-02 10:00 in Shanghai, 02:00 UTC.
START = "2026-12-02 10:00"


def _setup(z: Cli, ledger_path: Path, status: Status) -> None:
    r = z("lease", "add", "n", "--billing", "monthly", "--price", "30000", "--start", START,
          "--end", "2027-01-02 10:00")  # fmt: skip
    assert r.code == 0, r.err
    at = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
    with Ledger.open(ledger_path, clock=lambda: at) as ledger:
        node = ledger.node("n")
        lease = ledger.leases("n")[-1]
        assert node.id is not None
        verdict = Verdict("n", Level.QUICK, at, at,
                          (CheckResult("inventory.vram", "VRAM", status, "24 GiB of 80"),), ())  # fmt: skip
        acceptance_rows.store(ledger, node.id, "n", lease.id, verdict)


def _alerts(ledger_path: Path, now: datetime) -> list[Alert]:
    with Ledger.open(ledger_path, clock=lambda: now) as ledger:
        found = evaluate(gather(ledger, CONFIG, now), CONFIG, now)
    return [a for a in found if a.kind is AlertKind.ACCEPTANCE_FAILED]


def test_a_known_window_alerts_until_its_last_day(z: Cli, ledger_path: Path) -> None:
    assert z("provider", "edit", "P", "--return-days", "7").code == 0
    _setup(z, ledger_path, Status.FAILED)
    # 12-02 + 7 days = 12-09; its last minute in Shanghai is 15:59 UTC.
    last = _alerts(ledger_path, datetime(2026, 12, 9, 15, 59, tzinfo=UTC))
    assert len(last) == 1 and last[0].severity is Severity.CRITICAL
    assert "returnable until 2026-12-09" in last[0].message
    assert "zuka accept n --last --report md" in last[0].action
    # 16:00 UTC is 00:00 on 12-10 in Shanghai: no longer returnable.
    assert _alerts(ledger_path, datetime(2026, 12, 9, 16, 0, tzinfo=UTC)) == []


def test_an_unknown_window_alerts_for_young_days_and_says_how_to_record_it(
    z: Cli, ledger_path: Path
) -> None:
    _setup(z, ledger_path, Status.FAILED)
    # Start 02:00 UTC on 12-02 + 7 days = 02:00 UTC on 12-09.
    young = _alerts(ledger_path, datetime(2026, 12, 9, 1, 59, tzinfo=UTC))
    assert len(young) == 1 and young[0].severity is Severity.WARNING
    assert "return window unknown (record it: zuka provider edit P --return-days N)" in (
        young[0].message
    )
    assert _alerts(ledger_path, datetime(2026, 12, 9, 2, 0, tzinfo=UTC)) == []


def test_a_passed_or_warned_run_raises_nothing(z: Cli, ledger_path: Path) -> None:
    _setup(z, ledger_path, Status.WARNED)
    assert _alerts(ledger_path, datetime(2026, 12, 3, tzinfo=UTC)) == []


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE acceptance_runs SET status = 'passed'",
        # The failing run deleted: the chain still records it, not a run before it.
        "DELETE FROM acceptance_runs",
    ],
)
def test_a_run_changed_outside_zuka_cannot_be_evaluated(
    z: Cli, ledger_path: Path, sql: str
) -> None:
    import sqlite3

    from leases.ledger.auditchain import ACCEPTANCE_TRIGGERS

    _setup(z, ledger_path, Status.FAILED)
    conn = sqlite3.connect(ledger_path, isolation_level=None)
    try:  # as someone who has the file: the guards dropped, then put back
        for name in ACCEPTANCE_TRIGGERS:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute(sql)
        for trigger in ACCEPTANCE_TRIGGERS.values():
            conn.execute(trigger)
    finally:
        conn.close()
    now = datetime(2026, 12, 3, tzinfo=UTC)
    with Ledger.open(ledger_path, clock=lambda: now) as ledger:
        found = evaluate(gather(ledger, CONFIG, now), CONFIG, now)
    said = [a for a in found if a.kind is AlertKind.UNEVALUATED]
    assert said and "changed outside zuka" in said[0].message
