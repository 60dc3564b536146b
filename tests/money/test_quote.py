"""Quotes for planned work (leases.money.quote), GPU model names made comparable
(leases.core.gpumodels) and each provider's share of the cards (leases.money.shares):
every figure worked out by hand beside it."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal as D

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.core.errors import InputError
from leases.core.gpumodels import gpu_key, same_model
from leases.core.models import BillingType
from leases.money import quote, shares
from leases.money.billing import CardHours
from leases.money.report import LeaseRow


def offer(label: str, billing: str, price: str, *, gpus: int | None = 8, min_term: int | None = None,
          deposit: str | None = None, region: str = "cn-beijing", currency: str = "CNY") -> quote.Option:  # fmt: skip
    return quote.Option(
        label, "P", "cloud", "H800", BillingType(billing), D(price), currency, gpus, min_term,
        None if deposit is None else D(deposit), region,
    )  # fmt: skip


JOB = quote.job(8, D(720))  # 8 x H800 for 720 h


@pytest.mark.parametrize(
    ("option", "work", "cost", "units", "binds", "first"),
    [
        # card_hour: 8 cards x 720 h x 15.8 = 5,760 x 15.8 = 91,008
        (offer("a", "card_hour", "15.8"), JOB, "91008.0", "5760", False, "0"),
        # hourly, 8 cards a machine: 1 machine x 720 h x 130 = 93,600
        (offer("b", "hourly", "130"), JOB, "93600", "720", False, "0"),
        # monthly 80,000 a machine, 720 h = 1 month of 720 h; minimum 3 months binds:
        # 1 x 3 x 80,000 = 240,000; first payment one month, 80,000
        (offer("c", "monthly", "80000", min_term=3, deposit="100000"), JOB, "240000", "3",
         True, "80000"),
        # hourly, 12 cards on 8-card machines: 2 machines x ceil(10.5) = 11 h x 130 = 2,860
        (offer("d", "hourly", "130"), quote.job(12, D("10.5")), "2860", "11", False, "0"),
        # per second, a 4-card machine at 0.01 a second, 6 cards -> 2 machines,
        # 0.5 h = 1,800 s: 2 x 1,800 x 0.01 = 36
        (offer("e", "per_second", "0.01", gpus=4), quote.job(6, D("0.5")), "36.00", "1800",
         False, "0"),
        # daily 2,000 a machine, 50 h spread over 5 days: the machine is held 5 days:
        # 1 x 5 x 2,000 = 10,000; first payment a day, 2,000
        (offer("f", "daily", "2000"), quote.job(8, D(50), 5), "10000", "5", False, "2000"),
        # weekly 9,000, 50 h back-to-back: ceil(50 / 168) = 1 week = 9,000
        (offer("g", "weekly", "9000"), quote.job(8, D(50)), "9000", "1", False, "9000"),
        # contract 70,000 a month, 400 h within 45 days: 1,080 h / 720 = 1.5 -> 2 months,
        # min term 1 does not bind: 2 x 70,000 = 140,000
        (offer("h", "contract", "70000", min_term=1), quote.job(8, D(400), 45), "140000", "2",
         False, "70000"),
        # card_hour with a minimum of 100 card-hours: 2 cards x 10 h = 20 -> 100 x 2 = 200
        (offer("i", "card_hour", "2", min_term=100), quote.job(2, D(10)), "200", "100", True,
         "0"),
        # no --gpus: priced a card: 3 cards x 5 h x 2.5 = 37.5
        (offer("j", "hourly", "2.5", gpus=None), quote.job(3, D(5)), "37.5", "5", False, "0"),
    ],
)  # fmt: skip
def test_how_each_billing_type_prices_a_job(
    option: quote.Option, work: quote.Job, cost: str, units: str, binds: bool, first: str
) -> None:
    _, billed, got, bound, first_payment = quote.price(option, work)
    assert (got, billed, bound, first_payment) == (D(cost), D(units), binds, D(first))


def test_the_scenario_ranked_with_a_forbidden_region_and_another_currency() -> None:
    options = [
        offer("card", "card_hour", "15.8"),
        offer("month", "monthly", "80000", min_term=3, deposit="160000"),
        offer("cloud", "hourly", "130", region="cn-shanghai"),
        # cheapest of all, 90 x 720 = 64,800, but its data would sit abroad
        offer("abroad", "hourly", "90", region="us-west"),
        # USD 10 x 720 = 7,200: another currency, never compared
        offer("usd", "hourly", "10", currency="USD"),
    ]
    q = quote.quote(JOB, "H800", options, currency="CNY",
                    regions=("cn-beijing", "cn-shanghai"), rule="project llm")  # fmt: skip
    order = [p.option.label for p in q.options]
    assert order == ["card", "cloud", "month", "usd", "abroad"]
    assert q.cheapest is not None and q.cheapest.option.label == "card"
    # 93,600 - 91,008 = 2,592
    assert q.saves == D("2592.0")
    abroad = q.options[-1]
    assert not abroad.allowed and abroad.why == "not allowed for project llm (region us-west)"
    assert q.options[3].why == "in USD: not compared with CNY"
    month = q.options[2]
    # up front: a month, 80,000, and the deposit, 160,000 = 240,000
    assert month.up_front == D(240000)
    # break-even of 80,000 a month against 130 an hour for the 8 cards: 615.38 h; against
    # 15.8 a card-hour x 8 = 126.4 an hour: 80,000 / 126.4 = 632.91 h
    # against 90 an hour: 80,000 / 90 = 888.89 h, more than a 720 h month: none
    got = {(b.monthly.label, b.hourly.label): b.hours and round(b.hours, 2)
           for b in q.break_evens}  # fmt: skip
    assert got == {("month", "card"): D("632.91"), ("month", "cloud"): D("615.38"),
                   ("month", "abroad"): None}  # fmt: skip


def test_an_option_without_a_region_is_not_allowed_where_regions_are_set() -> None:
    q = quote.quote(JOB, "H800", [offer("x", "hourly", "1", region="")], currency="CNY",
                    regions=("cn-beijing",), rule="project llm")  # fmt: skip
    assert q.cheapest is None
    assert q.options[0].why == "not allowed for project llm (no region recorded)"


@pytest.mark.parametrize(
    ("cards", "hours", "within", "field"),
    [(0, "5", None, "cards"), (8, "0", None, "hours"), (8, "-1", None, "hours"),
     (8, "100", 4, "within"), (8, "5", 0, "within")],
)  # fmt: skip
def test_a_job_that_cannot_be_is_refused(
    cards: int, hours: str, within: int | None, field: str
) -> None:
    with pytest.raises(InputError) as exc:
        quote.job(cards, D(hours), within)
    assert exc.value.field == field


def test_gpu_names_as_people_type_them() -> None:
    for typed in ("h800", "H800 80GB", "NVIDIA H800-SXM5", "H800 80 GB HBM3", "Ｈ８００"):
        assert gpu_key(typed) == "H800", typed
    assert gpu_key("A800-SXM4") == "A800"
    assert not same_model("A800-SXM4", "H800")
    assert gpu_key("RTX 4090 D") == "4090D" and not same_model("4090", "RTX 4090 D")
    assert same_model("GeForce RTX 4090", "4090")
    assert not same_model("", "")
    # two memory sizes are two cards; a name without one is either
    assert not same_model("A100 40GB", "A100-SXM4-80GB")
    assert same_model("A100", "A100 80G") and same_model("A800-SXM4-80G", "A800 80 GB")


def _row(provider: str, paid: str) -> LeaseRow:
    at = datetime(2026, 9, 1, tzinfo=UTC)
    return LeaseRow("n", "cloud", provider, "hourly", at, None, 1, D(0), D(0),
                    CardHours(D(paid), D(0), D(0), D(0)), None, "")  # fmt: skip


def test_provider_share_of_the_cards() -> None:
    # 8 cards all of a 30-day month = 5,760 card-hours; 8 cards half of it = 2,880:
    # 5,760 / 8,640 = 66.7 %, 2,880 / 8,640 = 33.3 %
    found = shares.provider_shares([_row("P", "5760"), _row("Q", "2880")])
    assert [(s.provider, s.shown, s.concentrated) for s in found] == [
        ("P", D("66.7"), True), ("Q", D("33.3"), False)]  # fmt: skip
    assert shares.risk_line(found) == (
        "single-channel risk: P holds 66.7 % of the cards billed this month (over 50 %)"
    )
    # Two halves: 50 % is not over 50 %
    even = shares.provider_shares([_row("P", "100"), _row("Q", "100")])
    assert shares.risk_line(even) is None


_BILLINGS = [b.value for b in BillingType]
_option = st.builds(
    lambda i, b, p, g, m, r, c: offer(f"o{i}", b, str(p), gpus=g, min_term=m, region=r, currency=c),
    st.integers(0, 99),
    st.sampled_from(_BILLINGS),
    st.decimals("0.01", "100000", places=2),
    st.one_of(st.none(), st.integers(1, 16)),
    st.one_of(st.none(), st.integers(1, 12)),
    st.sampled_from(["cn-beijing", "us-west", ""]),
    st.sampled_from(["CNY", "CNY", "USD"]),
)


@given(st.lists(_option, max_size=8), st.integers(1, 64), st.integers(1, 2000))
def test_the_cheapest_is_allowed_compared_and_cheapest(
    options: list[quote.Option], cards: int, hours: int
) -> None:
    q = quote.quote(quote.job(cards, D(hours)), "H800", options, currency="CNY",
                    regions=("cn-beijing",), rule="project llm")  # fmt: skip
    ranked = [p for p in q.options if p.allowed and p.option.currency == "CNY"]
    if not ranked:
        assert q.cheapest is None
        return
    assert q.cheapest is not None
    assert q.cheapest.allowed and q.cheapest.option.region == "cn-beijing"
    assert all(q.cheapest.cost <= p.cost for p in ranked)
    # One more hour never costs less, under any option
    longer = quote.job(cards, D(hours + 1))
    for p in q.options:
        assert quote.price(p.option, longer)[2] >= p.cost
