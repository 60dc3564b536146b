"""The provider's return window: the last day a node can be handed back."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo


def returnable_until(lease_start: datetime, billing_tz: str, return_days: int) -> date:
    """The lease's start day on its billing zone's calendar plus the provider's days:
    a lease started 2026-12-02 10:00 (Asia/Shanghai) with 7 days is returnable until
    2026-12-09 (that day included)."""
    return lease_start.astimezone(ZoneInfo(billing_tz)).date() + timedelta(days=return_days)
