"""How the alert rules say amounts and spans of time in their messages."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from leases.money.amounts import fen, money, symbol


def yuan(amount: Decimal, currency: str) -> str:
    """¥1,234.56, USD 1,234.56: an amount in its lease's currency, as reports print it."""
    return money(fen(amount), currency)


def unit_price(amount: Decimal, currency: str) -> str:
    """A price per hour as recorded (¥3.3333, not ¥3.33: hourly prices go to 4 places)."""
    if amount == fen(amount):
        return yuan(amount, currency)
    return f"{symbol(currency)}{amount.normalize():,f}"


def duration(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400
    if days >= 2:
        return f"{int(days)} days"  # whole days: 62.6 days after an end is 62, not 63
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{delta.total_seconds() / 60:.0f} minutes"
    shown = f"{hours:.1f}".removesuffix(".0")  # 1.5 hours, not 2
    return f"{shown} hour{'' if shown == '1' else 's'}"
