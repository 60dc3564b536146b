"""`zuka plan`: the hybrid optimum and buy against rent, by hand, by property, and on a
month of the simulated fleet (demand recomputed here from the raw gpu_hour rows)."""

from __future__ import annotations

import io
import json
import math
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.money import plan
from leases.sim.ledger import backfill, register_sim_nodes, sim_nodes_of
from leases.telemetry.history import GpuHour, NodeHour
from leases.telemetry.rollups import HistoryStore
from tui.cli.main import main

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
    # The threshold said as when a monthly card pays (it was "threshold 41.1 %"):
    share = round(Decimal(doc["threshold_share"]) * 100)
    assert f"A card rented monthly pays for itself when it is busy in more than {share} %" in text
    assert "threshold" not in text


def test_plan_hybrid_prices_from_the_ledger(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = run(fleet, "plan", "hybrid", "--gpu-model", "A100")
    # The A100 monthly lease: 52000 for 8 cards; the A100 card-hour lease: 4.80.
    assert "CNY 6,500.00 a month (from the monthly lease of sim-002)" in text
    assert "CNY 4.80 an hour (from the card_hour lease of sim-008)" in text
    # Several models, no price given: each model planned from its own leases (issue 17);
    # none of the simulated models has both a monthly and an hourly lease of its own.
    assert main(["--ledger", str(fleet), "plan", "hybrid"]) == 1
    out = capsys.readouterr().out
    assert "## A100 80GB SXM" in out and "## RTX 4090" in out
    assert "give --hourly PRICE (a card's price for an hour) with --gpu-model" in out
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
    # Money to the fen, shares to 6 decimals (issue 22: 28 digits of noise before).
    assert abs(Decimal(doc["owning_per_busy_card_hour"]) - owning) <= D("0.006")
    assert re.fullmatch(r"\d+\.\d\d", doc["owning_per_busy_card_hour"])
    assert re.fullmatch(r"0\.\d{1,6}|1", doc["utilisation"])
    ratio = Decimal(doc["renting_per_busy_card_hour"]) / owning
    assert Decimal(doc["renting_share_of_owning"]) == pytest.approx(ratio, rel=D("0.005"))
    assert all(len(v) < 20 for v in doc.values() if isinstance(v, str)), doc
    text = run(fleet, *args, "--utilisation", "50")
    assert "at 50.00 % utilisation (given" in text
    # Said so a reader can act on it (it was "Renting comes to 312.35 % of owning"):
    last = text.strip().splitlines()[-1]
    assert re.fullmatch(
        r"Renting costs \d+\.\dx what owning would over the cards' 48 months: buying pays"
        r" for itself after \d+ months\.|Renting costs 0\.\d\dx what owning would \([\d.]+ %"
        r" less\) over the cards' 48 months: .*\.",
        last,
    ), last
    assert "%" not in last or "less" in last


# -- unknown hours are never idle (issue 8: a short history must not read as no demand) --


def _node_hours(node: str, cards: int, busy: int, hours: list[int]) -> list[NodeHour]:
    return [
        NodeHour(node, h, tuple(GpuHour(i, 60, 60 if i < busy else 0, 50.0, 90.0, 1000.0, 300.0)
                                for i in range(cards)))
        for h in hours
    ]  # fmt: skip


def _patchy(path: Path, days: int) -> Path:
    """Two sim nodes leased from 20 days ago; history only for the last `days` days, with
    a dead collector for 2 of them (when days > 6): 8 + 2 cards busy in every known hour."""
    now = datetime.now(UTC)
    with Ledger.open(path) as ledger:
        register_sim_nodes(ledger, 2, now)
        store = HistoryStore(ledger)
        top = int(now.timestamp()) // 3600
        dead = range(top - 6 * 24, top - 4 * 24) if days > 6 else range(0)
        hours = [h for h in range(top - days * 24, top) if h not in dead]
        store.write_hours(_node_hours("sim-001", 8, 8, hours) + _node_hours("sim-002", 8, 2, hours))
    return path


def test_measured_demand_keeps_unknown_hours_out() -> None:
    h = 3600
    full = {100: (60, 60), 101: (0, 60), 103: (60, 60)}  # hour 102: no reading
    nodes = {
        "a": plan.NodeHistory(1, ((100 * h, 105 * h),), full),
        # b: 2 cards leased from hour 101; half its minutes known in 103 (a partial reading)
        "b": plan.NodeHistory(2, ((101 * h, 110 * h),), {101: (0, 120), 103: (30, 60)}),
        "c": plan.NodeHistory(1, (), {104: (60, 60)}),  # no lease recorded: seen from 104
    }
    d = plan.measured_demand(nodes, 98, 106)
    # 98, 99: before any reading (the window is cut); 100: a alone leased, read; 101: a
    # and b read; 102: nobody read (a dead collector); 103: 120 of 180 leased card-minutes
    # read (67 % < 90 %); 104: only c read, 60 of 240; 105: b and c, nothing read.
    assert d.before_history == 2
    assert d.hours == (100, 101)
    assert d.cards == (1, 0)
    assert d.unknown == 6 and d.window == 8


def test_plan_hybrid_plans_from_known_hours_only(tmp_path: Path) -> None:
    path = _patchy(tmp_path / "ledger.db", 12)
    docs = [
        json.loads(run(path, "plan", "hybrid", "--monthly", "3000", "--hourly", "10", "--json",
                       "--days", str(days)))
        for days in (30, 90, 366)
    ]  # fmt: skip
    for days, doc in zip((30, 90, 366), docs, strict=True):
        # 12 days of history less 2 dead days: 240 known hours, 10 busy cards in each.
        assert doc["hours"] == 240 and doc["window_hours"] == days * 24
        assert doc["unknown_hours"] == days * 24 - 240
        assert doc["hours_before_history"] == (days - 12) * 24
        assert doc["base_cards"] == 10 and doc["peak_cards"] == 10
        assert Decimal(doc["cost_per_month"]) == 30000
        assert Decimal(doc["all_hourly_per_month"]) == 10 * 10 * 730
        assert set(doc["demand_cards_per_hour"]) == {10}
    text = run(path, "plan", "hybrid", "--monthly", "3000", "--hourly", "10", "--days", "90")
    assert "1,920 of the 2,160 hours" in text and "unknown" in text
    assert "history starts" in text  # the window was cut


def test_plan_hybrid_refuses_too_little_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _patchy(tmp_path / "ledger.db", 5)
    args = ["--ledger", str(path), "plan", "hybrid", "--monthly", "3000", "--hourly", "10"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "120 known hours" in err and "at least 168" in err


def test_plan_buy_measures_utilisation_over_known_hours(tmp_path: Path) -> None:
    path = _patchy(tmp_path / "ledger.db", 12)
    args = ["plan", "buy", "--card-price", "80000", "--life-years", "4", "--power-w", "450",
            "--kwh", "0.8", "--hosting", "0", "--gpu-model", "4090", "--days", "30"]  # fmt: skip
    doc = json.loads(run(path, *args, "--json"))
    # sim-001's 8 cards were busy in every hour history knows (240 of the 480 leased).
    assert Decimal(doc["measured_utilisation"]) == 1
    # The unknown 240 hours of 8 cards, and the current hour's minutes so far.
    assert 8 * 240 <= Decimal(doc["unknown_card_hours"]) < 8 * 241
    text = run(path, *args)
    assert "measured 100.00 % busy of 1,920.00 known card-hours" in text
    assert "paid card-hours unknown (no history), left out" in text


def test_absurd_numbers_are_refused_naming_the_flag(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    buy = ["--ledger", str(fleet), "plan", "buy", "--card-price", "80000", "--life-years", "4",
           "--power-w", "700", "--kwh", "0.8", "--hosting", "6000", "--gpu-model", "H800"]  # fmt: skip
    cases = [
        ([*buy, "--utilisation", "0"], "utilisation"),
        ([*buy, "--utilisation", "1e-30"], "utilisation"),
        ([*buy, "--utilisation", "101"], "utilisation"),
        ([*buy[:7], "1e-30", *buy[8:]], "life-years"),
        ([*buy[:7], "31", *buy[8:]], "life-years"),
        ([*buy[:5], "1e30", *buy[6:]], "card-price"),
        ([*buy, "--cards", "0"], "cards"),
        (["--ledger", str(fleet), "plan", "hybrid", "--hourly", "1e-30", "--monthly", "1e30"],
         "hourly"),
        (["--ledger", str(fleet), "plan", "hybrid", "--hourly", "10", "--monthly", "1e30"],
         "monthly"),
    ]  # fmt: skip
    for argv, flag in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert flag in err and "Traceback" not in err, (argv, err)
    with pytest.raises(InputError, match="utilisation"):
        plan.buy_vs_rent(card_price=D(1), life_years=D(1), power_w=D(0), kwh=D(0),
                         hosting_month=D(0), cards=1, utilisation=D("1e-30"),
                         renting_per_busy_hour=D(1))  # fmt: skip
