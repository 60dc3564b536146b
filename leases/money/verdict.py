"""Hourly against monthly: the hours a month at which a monthly lease pays off against renting
by the hour, and the verdict for the hours a window actually used (leases.money.billing
gives a prepaid lease's own: lease_verdict), in words in the lease's currency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import BillingType, Lease
from leases.money.amounts import money
from leases.money.units import ZERO


def break_even_hours(monthly_price: Decimal, hourly_price: Decimal, cards: int = 1) -> Decimal:
    """Hours a month at which renting `cards` by the hour (hourly_price a card-hour) costs
    as much as the month (monthly_price for all of them): more hours, monthly is cheaper."""
    if hourly_price <= 0 or cards <= 0:
        raise InputError("hourly_price", str(hourly_price), _("must be greater than zero"))
    return monthly_price / (hourly_price * cards)


def lease_break_even(lease: Lease) -> Decimal | None:
    """A monthly (or contract) lease's break-even hours a month against its recorded hourly
    price (both for the whole lease); None without one."""
    if lease.billing_type not in (BillingType.MONTHLY, BillingType.CONTRACT):
        return None
    if not lease.hourly_price:
        return None
    return break_even_hours(lease.unit_price, lease.hourly_price)


@dataclass(frozen=True)
class Verdict:
    """Monthly against hourly for the hours actually used."""

    monthly_cost: Decimal  # what the prepaid lease cost over the window
    hourly_cost: Decimal  # the busy (and unknown) card-hours at the hourly price
    refund_known: bool = True  # whether leaving early is priced by a known rule

    @property
    def monthly_saves(self) -> Decimal:
        """Positive: monthly was cheaper by this much; negative: hourly would have been."""
        return self.hourly_cost - self.monthly_cost

    def said(self, amount: Callable[[Decimal], str]) -> str:
        """The verdict in words, its amount written by `amount` (in the lease's currency:
        verdict_text)."""
        if self.monthly_saves >= 0:
            said = _("monthly saves {amount}").format(amount=amount(self.monthly_saves))
        else:
            said = _("hourly would have cost {amount} less").format(
                amount=amount(-self.monthly_saves)
            )
        if not self.refund_known:
            said = _("{verdict} (the provider's early-release refund rule is unknown)").format(
                verdict=said
            )
        return said


def hourly_vs_monthly(
    monthly_cost: Decimal,
    busy_card_hours: Decimal,
    hourly_card_price: Decimal,
    unknown_card_hours: Decimal = ZERO,
    *,
    refund_known: bool = True,
) -> Verdict:
    """The verdict for a window: hourly rents only the card-hours used; unknown hours are
    counted as used (never idle), so the verdict never flatters hourly."""
    used = busy_card_hours + unknown_card_hours
    return Verdict(monthly_cost, used * hourly_card_price, refund_known)


def verdict_text(v: Verdict, currency: str) -> str:
    """A monthly-against-hourly verdict in words, its amount in the lease's currency."""
    return v.said(lambda x: money(x, currency))
