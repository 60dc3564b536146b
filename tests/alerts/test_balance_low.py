"""The balance_low alert (issue 20): a provider account's prepaid balance that runs out
within [alerts] balance_days at the burn rate now, naming the provider, the yuan left, the
day and time it runs out in the billing zone and the nodes that stop. Evaluated by the
same check the collector and `zuka alerts` run, on a real ledger file, at pinned times."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from leases.alerts import state as alertstate
from leases.alerts.alert import AlertKind
from leases.alerts.watch import check
from leases.config.sections import AlertsConfig
from leases.core.severity import Severity
from leases.ledger.store import Ledger
from tests.support.cli import Cli

SH = ZoneInfo("Asia/Shanghai")


def _open_alerts(path: Path, at: datetime, config: AlertsConfig | None = None
                 ) -> list[alertstate.StoredAlert]:  # fmt: skip
    with Ledger.open(path, clock=lambda: at) as ledger:
        check(ledger, config or AlertsConfig(), ledger.clock)
        found = alertstate.alerts(ledger, at)
    return [a for a in found if a.kind == AlertKind.BALANCE_LOW.value and a.cleared_at is None]


def _platform(z: Cli, topup: str) -> None:
    for typed in (
        ("provider", "topup", "P", "--amount", topup, "--at", "2026-08-01T09:00"),
        ("lease", "add", "n", "--billing", "card_hour", "--price", "1.98", "--cards", "8",
         "--start", "2026-08-01T10:00"),
    ):  # fmt: skip
        r = z(*typed)
        assert r.code == 0, r.err


def test_a_balance_that_runs_out_within_3_days_warns(z: Cli, ledger_path: Path) -> None:
    _platform(z, "1000")
    # 08-02 10:00: 1,000 - 24 h x 8 x 1.98 (380.16) = 619.84; 619.84 / 380.16 = 1.6305 days
    [alert] = _open_alerts(ledger_path, datetime(2026, 8, 2, 10, tzinfo=SH))
    assert alert.severity is Severity.WARNING and alert.node_id is None
    assert alert.key == "provider:P" and alert.yuan is not None and str(alert.yuan) == "619.84"
    # 1.6304714 days = 1 d + 0.6304714 x 86,400 s = 54,472.7 s (15 h 7 min 52.7 s, spent by
    # the whole second 53) after
    # 08-02 10:00: 08-04 01:07:53 Beijing time
    assert "prepaid balance of P has CNY 619.84 left, burning CNY 380.16/day" in alert.message
    assert "runs out in 1.63 days, at 2026-08-04 01:07:53" in alert.message
    assert "(Asia/Shanghai)" in alert.message and "then stops: n" in alert.message
    assert "zuka provider topup P" in alert.action


def test_under_a_day_or_run_out_is_critical(z: Cli, ledger_path: Path) -> None:
    _platform(z, "1000")
    # 08-03 10:00: 1,000 - 2 x 380.16 = 239.68; 239.68 / 380.16 = 0.63 days: critical
    [alert] = _open_alerts(ledger_path, datetime(2026, 8, 3, 10, tzinfo=SH))
    assert alert.severity is Severity.CRITICAL and "0.63 days" in alert.message
    # 08-04 10:00: 1,000 - 3 x 380.16 = -140.48: run out
    [alert] = _open_alerts(ledger_path, datetime(2026, 8, 4, 10, tzinfo=SH))
    assert alert.severity is Severity.CRITICAL
    assert "has run out (CNY -140.48)" in alert.message


def test_a_full_balance_says_nothing_and_a_top_up_clears_it(z: Cli, ledger_path: Path) -> None:
    _platform(z, "5000")
    # 08-02 10:00: 4,619.84 left, 12.15 days: above 3
    assert _open_alerts(ledger_path, datetime(2026, 8, 2, 10, tzinfo=SH)) == []
    # 08-12 10:00: 5,000 - 11 x 380.16 = 818.24; 2.15 days: raised
    assert len(_open_alerts(ledger_path, datetime(2026, 8, 12, 10, tzinfo=SH))) == 1
    r = z("provider", "topup", "P", "--amount", "2000", "--at", "2026-08-12T10:00")
    assert r.code == 0, r.err
    # 818.24 + 2,000 = 2,818.24; 7.41 days: cleared
    assert _open_alerts(ledger_path, datetime(2026, 8, 12, 10, tzinfo=SH)) == []


def test_the_threshold_is_the_configs_and_it_holds_a_day_above(z: Cli, ledger_path: Path) -> None:
    _platform(z, "5000")
    at = datetime(2026, 8, 10, 10, tzinfo=SH)
    # 5,000 - 9 x 380.16 = 1,578.56; 4.15 days: silent at 3, raised at 5
    assert _open_alerts(ledger_path, at) == []
    assert len(_open_alerts(ledger_path, at, AlertsConfig(balance_days=5))) == 1
    # raised at 4.15 < 5; at 08-09 10:00 (5.15 days, under 5 + 1) it holds, still open
    assert len(_open_alerts(ledger_path, datetime(2026, 8, 9, 10, tzinfo=SH),
                            AlertsConfig(balance_days=5))) == 1  # fmt: skip
    # at 08-08 10:00 (6.15 days) it clears
    assert _open_alerts(ledger_path, datetime(2026, 8, 8, 10, tzinfo=SH),
                        AlertsConfig(balance_days=5)) == []  # fmt: skip


def _without_cards(cli: Cli, topup: str) -> None:
    """Provider P; node m (8 GPUs) on a card-hour lease from 08-01 10:00 recorded without
    --cards (it bills its node's GPUs); a top-up at 09:00."""
    for typed in (
        ("provider", "add", "P", "--kind", "platform"),
        ("node", "add", "m", "--ssh", "root@10.0.0.9", "--gpus", "8", "--provider", "P"),
        ("lease", "add", "m", "--billing", "card_hour", "--price", "1.98",
         "--start", "2026-08-01T10:00"),
        ("provider", "topup", "P", "--amount", topup, "--at", "2026-08-01T09:00"),
    ):  # fmt: skip
        r = cli(*typed)
        assert r.code == 0, r.err


def test_a_provider_whose_leases_cannot_be_costed_is_said_not_fatal(
    cli: Cli, ledger_path: Path
) -> None:
    _without_cards(cli, "100")
    with sqlite3.connect(ledger_path) as conn:  # its GPU count lost behind zuka's back
        conn.execute("UPDATE nodes SET gpu_count = 0")
    at = datetime(2026, 8, 2, 10, tzinfo=SH)
    with Ledger.open(ledger_path, clock=lambda: at) as ledger:
        check(ledger, AlertsConfig(), ledger.clock)
        found = alertstate.alerts(ledger, at)
    said = [a for a in found if a.kind == AlertKind.UNEVALUATED.value and a.node_id is None]
    assert [a.key for a in said] == ["the balance rule: P"]
    assert "cards_billed" in said[0].message


def test_an_open_alert_stays_open_while_its_balance_cannot_be_worked_out(
    cli: Cli, ledger_path: Path
) -> None:
    """Nobody judged the balance this time: its alert must not clear as if topped up."""
    _without_cards(cli, "1000")
    # 08-02 10:00: 1,000 - 380.16 = 619.84, 1.63 days: a warning
    [alert] = _open_alerts(ledger_path, datetime(2026, 8, 2, 10, tzinfo=SH))
    with sqlite3.connect(ledger_path) as conn:  # its GPU count lost behind zuka's back
        conn.execute("UPDATE nodes SET gpu_count = 0")
    [still] = _open_alerts(ledger_path, datetime(2026, 8, 2, 11, tzinfo=SH))
    assert still.id == alert.id
