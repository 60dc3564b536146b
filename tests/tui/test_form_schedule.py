"""The dashboard's lease form takes a payment schedule (in its fold), as `zuka lease renew
--payment-schedule` does, and refuses one on an hourly lease, or a change of a started
lease's, under its field."""

from __future__ import annotations

from pathlib import Path

from leases.core.models import PaymentSchedule
from leases.ledger.store import Ledger
from tests.tui.test_forms import (  # noqa: F401  (demo, no_ssh_config: fixtures)
    FormHost,
    demo,
    fill,
    lease_form,
    no_ssh_config,
    opened,
    save_ok,
    save_refused,
    state,
)


async def test_a_monthly_lease_is_renewed_on_a_quarterly_schedule(demo: Path) -> None:  # noqa: F811
    app = FormHost(demo, lease_form("h800-monthly-1", "renew"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        assert screen.field("payment_schedule").value == "upfront"
        fill(screen, until="2027-01-10", payment_schedule="quarterly")
        assert await save_ok(pilot) is True
    with Ledger.open(demo, create=False) as ledger:
        old, new = ledger.leases("h800-monthly-1")
        assert old.payment_schedule is PaymentSchedule.UPFRONT
        assert new.payment_schedule is PaymentSchedule.QUARTERLY


async def test_a_started_lease_keeps_its_schedule_under_its_field(demo: Path) -> None:  # noqa: F811
    before = state(demo)
    app = FormHost(demo, lease_form("h800-monthly-1", "edit"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, payment_schedule="quarterly")
        said = await save_refused(pilot, "payment_schedule")
        assert "--payment-schedule: the lease started on" in said
        assert "zuka lease renew h800-monthly-1 --until" in said
    assert state(demo) == before


async def test_a_schedule_on_an_hourly_lease_is_refused_under_its_field(demo: Path) -> None:  # noqa: F811
    before = state(demo)
    app = FormHost(demo, lease_form("aliyun-a10-burst", "edit"))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(pilot)
        fill(screen, payment_schedule="monthly")
        said = await save_refused(pilot, "payment_schedule")
        assert said.startswith("--payment-schedule: is for monthly and contract terms; an hourly")
    assert state(demo) == before
