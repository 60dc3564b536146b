"""`zuka plan`: the hybrid optimum and buy against rent, by hand, by property, and on a
month of the simulated fleet (demand recomputed here from the raw gpu_hour rows)."""

from __future__ import annotations

import io
import json
import math
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases import plan
from leases.errors import InputError
from leases.ledger import Ledger
from leases.rollups import HistoryStore
from leases.simledger import backfill, register_sim_nodes, sim_nodes_of
from tui.cli import main

D = Decimal


def test_hybrid_by_hand() -> None:
    # Ten hours that are the whole month (hours_in_month=10): monthly 5, hourly 1 a card.
    cards = [0, 0, 1, 1, 2, 2, 2, 3, 3, 4]
    # cost(k) = 5k + sum(max(0, d - k)): 18, 15, 14, 16, 20
    totals = [c.total for c in plan.cost_curve(cards, D(5), D(1), D(10))]
    assert totals == [18, 15, 14, 16, 20]
    # threshold 5 / (1 x 10) = 0.5; share above 0: 0.8, above 1: 0.6, above 2: 0.3
    assert plan.optimal_base(cards, D(5), D(1), D(10)) == 2
    h = plan.hybrid(cards, D(5), D(1), D(10))
    assert (h.best.k, h.best.base, h.best.burst) == (2, 10, 4)
    assert (h.saves_against_hourly, h.saves_against_monthly) == (4, 6)
    assert h.threshold == D("0.5")
    # A window of half a month counts double: 20 hours of the same demand, month 10 h.
    assert plan.hybrid(cards * 2, D(5), D(1), D(10)).best.total == 14
    # Monthly dearer than every hour by the hour: all hourly; cheaper than any share: all.
    assert plan.optimal_base(cards, D(11), D(1), D(10)) == 0
    assert plan.optimal_base(cards, D("0.5"), D(1), D(10)) == 4


def test_cards_per_hour_rounds_up_to_whole_cards() -> None:
    assert plan.cards_per_hour([0, 1, 60, 61, 120.00000001, 138]) == [0, 1, 1, 2, 2, 3]


def test_bad_prices_and_no_demand_are_refused() -> None:
    with pytest.raises(InputError, match="hourly"):
        plan.optimal_base([1], D(1), D(0))
    with pytest.raises(InputError, match="monthly"):
        plan.optimal_base([1], D(-1), D(1))
    with pytest.raises(InputError, match="days"):
        plan.optimal_base([], D(1), D(1))


def _exact_cost(cards: list[int], k: int, monthly: Fraction, hourly: Fraction) -> Fraction:
    over = sum(max(0, c - k) for c in cards)
    return k * monthly + hourly * 730 * Fraction(over, len(cards))


@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=200),
    st.integers(1, 2_000_000),
    st.integers(1, 20_000),
)
def test_the_optimum_is_the_cheapest_base(cards: list[int], m_fen: int, h_fen: int) -> None:
    monthly, hourly = D(m_fen) / 100, D(h_fen) / 100
    h = plan.hybrid(cards, monthly, hourly)
    exact = [_exact_cost(cards, k, Fraction(m_fen, 100), Fraction(h_fen, 100))
             for k in range(max(cards) + 1)]  # fmt: skip
    best = min(exact)
    # Never worse than all hourly or all monthly; the cheapest of every k, the smallest
    # such k (computed here in exact fractions, not by the module's Decimals).
    assert exact[h.best.k] == best
    assert h.best.k == exact.index(best)
    assert exact[h.best.k] <= exact[0] and exact[h.best.k] <= exact[-1]
    assert h.best.total <= h.all_hourly.total and h.best.total <= h.all_monthly.total


def test_buy_against_rent_by_hand() -> None:
    r = plan.buy_vs_rent(
        card_price=D(73000),
        life_years=D(5),
        power_w=D(500),
        kwh=D(1),
        hosting_month=D(1000),
        cards=2,
        utilisation=D("0.5"),
        renting_per_busy_hour=D(20),
    )
    # 2 cards x 0.5 x 730 h = 730 busy card-hours a month; 0.5 kW each while busy.
    assert r.busy_card_hours_month == 730
    assert r.capex_month == D(146000) / 60
    assert r.power_month == 365
    owning = D(146000) / 60 + 365 + 1000
    assert r.owning_month == owning
    assert r.owning_per_busy_hour == owning / 730
    assert r.renting_month == 20 * 730
    assert r.ratio == D(20) / (owning / 730)
    with pytest.raises(InputError, match="utilisation"):
        plan.buy_vs_rent(
            card_price=D(1), life_years=D(1), power_w=D(1), kwh=D(1), hosting_month=D(0),
            cards=1, utilisation=D("1.5"), renting_per_busy_hour=D(1),
        )  # fmt: skip
    with pytest.raises(InputError, match="life-years"):
        plan.buy_vs_rent(
            card_price=D(1), life_years=D(0), power_w=D(1), kwh=D(1), hosting_month=D(0),
            cards=1, utilisation=D("0.5"), renting_per_busy_hour=D(1),
        )  # fmt: skip


def test_chart_marks_the_base() -> None:
    lines = plan.load_duration_chart([0, 1, 2, 3, 4, 4, 4, 4], 2, width=8, height=4)
    assert lines[0].split("│")[1] == "████    "  # the busiest hours first
    assert any("k=2 ▶" in ln for ln in lines)
    assert "k=0 ▶" in plan.load_duration_chart([1, 2], 0)[-2]


# -- on the simulated fleet ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("plan") / "ledger.db"
    now = datetime.now(UTC)
    with Ledger.open(path) as ledger:
        nodes = register_sim_nodes(ledger, 8, now)
        store = HistoryStore(ledger)
        for s in sim_nodes_of(nodes):
            backfill(store, s, now - timedelta(days=31), now, minute_span=timedelta(0),
                     coarse_step=timedelta(minutes=10))  # fmt: skip
    yield path


def run(path: Path, *args: str) -> str:
    out = io.StringIO()
    assert main(["--ledger", str(path), *args], out=out) == 0
    return out.getvalue()


def test_plan_hybrid_on_the_simulated_fleet(fleet: Path) -> None:
    doc = json.loads(run(fleet, "plan", "hybrid", "--monthly", "3000", "--hourly", "10", "--json"))
    since, until = datetime.fromisoformat(doc["since"]), datetime.fromisoformat(doc["until"])
    lo, hi = int(since.timestamp()) // 3600, int(until.timestamp()) // 3600
    minutes = dict.fromkeys(range(lo, hi), 0)
    with sqlite3.connect(fleet) as conn:
        for hour, busy in conn.execute(
            "SELECT hour, busy_card_minutes FROM gpu_hour WHERE hour >= ? AND hour < ?", (lo, hi)
        ):
            minutes[hour] += busy
    cards = [math.ceil(minutes[h] / 60) for h in range(lo, hi)]
    assert doc["demand_cards_per_hour"] == cards and doc["hours"] == 720
    exact = [_exact_cost(cards, k, Fraction(3000), Fraction(10)) for k in range(max(cards) + 1)]
    assert doc["base_cards"] == exact.index(min(exact))
    assert 0 < doc["base_cards"] < doc["peak_cards"] == max(cards)
    assert Fraction(doc["cost_per_month"]) == pytest.approx(min(exact))
    assert Fraction(doc["all_hourly_per_month"]) == pytest.approx(exact[0])
    saves = Decimal(doc["all_monthly_per_month"]) - Decimal(doc["cost_per_month"])
    assert Decimal(doc["saves_against_monthly"]) == saves > 0
    text = run(fleet, "plan", "hybrid", "--monthly", "3000", "--hourly", "10")
    assert f"k={doc['base_cards']} ▶" in text and "100 % of hours" in text
    assert f"Rent {doc['base_cards']} card(s) monthly" in text


def test_plan_hybrid_prices_from_the_ledger(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = run(fleet, "plan", "hybrid", "--gpu-model", "A100")
    # The A100 monthly lease: 52000 for 8 cards; the A100 card-hour lease: 4.80.
    assert "¥6,500.00 a month (from the monthly lease of sim-002)" in text
    assert "¥4.80 an hour (from the card_hour lease of sim-008)" in text
    assert main(["--ledger", str(fleet), "plan", "hybrid"]) == 2
    assert "--gpu-model" in capsys.readouterr().err
    assert main(["--ledger", str(fleet), "plan", "hybrid", "--gpu-model", "4090"]) == 2
    assert "give --monthly PRICE" in capsys.readouterr().err


def test_plan_buy_on_the_simulated_fleet(fleet: Path) -> None:
    args = ["plan", "buy", "--card-price", "80000", "--life-years", "4", "--power-w", "700",
            "--kwh", "0.8", "--hosting", "6000", "--gpu-model", "H800"]  # fmt: skip
    doc = json.loads(run(fleet, *args, "--json"))
    assert doc["cards"] == 8  # the H800 node's cards
    u = Decimal(doc["utilisation"])
    assert u == Decimal(doc["measured_utilisation"]) and Decimal("0.9") < u <= 1
    owning = (D(80000) * 8 / 48 + 8 * u * 730 * D("0.7") * D("0.8") + 6000) / (8 * u * 730)
    assert Decimal(doc["owning_per_busy_card_hour"]) == pytest.approx(owning)
    ratio = Decimal(doc["renting_per_busy_card_hour"]) / owning
    assert Decimal(doc["renting_share_of_owning"]) == pytest.approx(ratio)
    text = run(fleet, *args, "--utilisation", "50")
    assert "at 50.00 % utilisation (given" in text and "% of owning for this lab" in text
