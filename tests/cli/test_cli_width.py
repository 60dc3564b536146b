"""`zuka cost` and `zuka alerts` fit the terminal (80 columns when not one): long columns
move under their row, a row too wide becomes a block; nothing is cut; --wide keeps a line a
row; --json money to the fen, figures without 28 digits of noise (issue 22)."""

from __future__ import annotations

import io
import json
import re
from typing import Any

from tests.alerts.test_alerts import _three_alerts
from tests.money.test_cost import _now_lease
from tests.support.cli import Cli
from tui.cli import output


def _cells(text: str) -> int:
    return max(output.width(line) for line in text.splitlines())


def _words(text: str) -> list[str]:
    return text.split()


def test_cost_fits_80_columns_and_keeps_every_word(cli: Cli) -> None:
    _now_lease(cli)
    wide = cli("cost", "--wide").out
    fitted = cli("cost").out
    assert _cells(wide) > 150 and _cells(fitted) <= 80, fitted
    assert fitted.startswith("n1  monthly\n")
    flat = " ".join(fitted.split())
    assert (
        "verdict: record its hourly price to compare: zuka lease edit n1 --hourly-price P" in flat
    )
    assert "to date: CNY 30,000.00" in flat
    for word in ("30,000.00", "monthly", "n1"):
        assert word in _words(fitted)


def test_alerts_fit_80_columns_with_message_and_action_under_the_row(cli: Cli) -> None:
    _three_alerts(cli)
    fitted = cli("alerts").out
    assert _cells(fitted) <= 80, fitted
    zone, head = fitted.splitlines()[:2]
    assert zone == "times in CST (UTC+8)"
    assert head.startswith("ID  SEVERITY") and "MESSAGE" not in head
    flat = " ".join(fitted.split())
    assert "action: copy data off and start offboarding" in flat
    assert "zuka node edit m1 --state offboarding" in flat
    assert _cells(cli("alerts", "--wide").out) > 80


def test_a_fitted_table_by_hand() -> None:
    rows = [("a", "x" * 10, "短" * 30), ("bb", "-", "y")]
    out = io.StringIO()
    output.fit_table(("K", "V", "NOTE"), rows, out, columns=40, below=("NOTE",))
    assert out.getvalue().splitlines() == [
        "K   V",
        "a   xxxxxxxxxx",
        # Chinese fills the line, broken between two of its characters (34 cells a line
        # after the hanging indent): not a short line then a run moved whole.
        "    note: " + "短" * 14,
        "      " + "短" * 16,
        "bb  -",
        "    note: y",
    ]
    out = io.StringIO()
    output.fit_table(("K", "V", "W"), [("a", "1" * 30, "2" * 30)], out, columns=40, below=())
    assert out.getvalue().splitlines() == ["a", "    v: " + "1" * 30, "    w: " + "2" * 30]
    out = io.StringIO()
    output.fit_table(("K", "V"), [("a", "b")], out, columns=40)
    assert out.getvalue() == "K  V\na  b\n"


def _strings(doc: Any) -> list[tuple[str, str]]:
    if isinstance(doc, dict):
        return [
            p for k, v in doc.items() for p in ([(k, v)] if isinstance(v, str) else _strings(v))
        ]
    if isinstance(doc, list):
        return [p for v in doc for p in _strings(v)]
    return []


MONEY = {"to_date", "storage_to_date", "by_period_end", "by_lease_end", "window_cost",
         "idle_cost", "per_busy_card_hour", "monthly_saves", "term_owed", "term_charged"}  # fmt: skip


def test_cost_json_money_to_the_fen_and_no_noise(cli: Cli) -> None:
    _now_lease(cli)
    doc = json.loads(cli("cost", "--json").out)
    pairs = _strings(doc)
    numbers = [(k, v) for k, v in pairs if re.fullmatch(r"-?[0-9.]+", v)]
    assert {k for k, _ in numbers} >= {"to_date", "paid_card_hours"}
    for key, value in numbers:
        if key in MONEY:
            assert re.fullmatch(r"-?\d+\.\d\d", value), (key, value)
        else:
            assert not re.search(r"\.\d{7,}", value), (key, value)  # was 5760.000...0 (24)
