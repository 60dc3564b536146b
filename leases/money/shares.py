"""Each provider's share of the lab's cards in a month (`zuka report`): the single-channel
risk, a lab whose work hangs on one provider.

A provider's share is the card-hours its leases billed in the month (cards x the hours
each lease paid for in it: a lease of 8 cards all of a 30-day month is 5,760, one of 8
cards for half of it 2,880) over the card-hours of every provider; leases whose cards are
not recorded are left out (the report's notes say so). A provider holding more than
SINGLE_CHANNEL_PERCENT of them is flagged. Pure; percentages rounded half up to 0.1."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from leases.core.i18n import _
from leases.money.report import LeaseRow

SINGLE_CHANNEL_PERCENT = Decimal(50)
ZERO = Decimal(0)


@dataclass(frozen=True)
class Share:
    provider: str
    card_hours: Decimal
    percent: Decimal  # exact; `shown` rounds it

    @property
    def shown(self) -> Decimal:
        return self.percent.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)

    @property
    def concentrated(self) -> bool:
        return self.percent > SINGLE_CHANNEL_PERCENT


def provider_shares(rows: Iterable[LeaseRow]) -> list[Share]:
    """Every provider's share of the month's card-hours, the largest first."""
    hours: dict[str, Decimal] = {}
    for r in rows:
        if r.usage is not None and r.usage.paid > 0:
            hours[r.provider] = hours.get(r.provider, ZERO) + r.usage.paid
    total = sum(hours.values(), ZERO)
    if not total:
        return []
    shares = [Share(p, h, h * 100 / total) for p, h in hours.items()]
    return sorted(shares, key=lambda s: (-s.card_hours, s.provider))


def risk_line(shares: Iterable[Share]) -> str | None:
    """The single-channel risk in words, or None when no provider holds over the limit."""
    over = [s for s in shares if s.concentrated]
    if not over:
        return None
    s = over[0]
    return _(
        "single-channel risk: {provider} holds {share} % of the cards billed this month"
        " (over {limit} %)"
    ).format(provider=s.provider, share=s.shown, limit=SINGLE_CHANNEL_PERCENT)
