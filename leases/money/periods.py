"""The grid of billing periods: a lease's billing zone, the length of one billing unit,
and where the k-th period from an anchor starts, on the zone's wall clock (a calendar
month from the 31st ends on the last day of a shorter month). Pure; leases.money.billing prices
leases on it and leases.money.renewals tells how long an auto-renewing lease is paid for.
"""

from __future__ import annotations

import math
from calendar import monthrange
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from leases.core import fields
from leases.core.models import BillingType, Lease, MonthCount

FIXED = {"second": 1, "minute": 60, "hour": 3600}  # steps of a fixed length in seconds
WALL_DAYS = {"day": 1, "week": 7, "month30": 30}  # steps of wall-clock days in the zone


def zone(lease: Lease) -> ZoneInfo:
    return fields.timezone(lease.billing_tz, "billing_tz")


def utc(at: datetime) -> datetime:
    """`at` in UTC: every comparison and every elapsed time goes through UTC, because Python
    compares two times of the same zone by their wall clock, ignoring fold (01:30 EDT and
    01:30 EST, an hour apart, compare equal)."""
    return at.astimezone(UTC)


def seconds_between(a: datetime, b: datetime) -> Decimal:
    """b - a in seconds, exactly (in UTC: same-zone subtraction ignores DST)."""
    d = b.astimezone(UTC) - a.astimezone(UTC)
    return Decimal(d.days * 86400 + d.seconds) + Decimal(d.microseconds) / 1_000_000


def step_of(lease: Lease) -> str:
    """The length of one billing unit: second, hour, day, week, month or month30."""
    bt = lease.billing_type
    if bt is BillingType.PER_SECOND:
        return "second"
    if bt in (BillingType.HOURLY, BillingType.CARD_HOUR):
        return "hour"
    if bt is BillingType.DAILY:
        return "day"
    if bt is BillingType.WEEKLY:
        return "week"
    return "month30" if lease.month_count is MonthCount.DAYS_30 else "month"


def boundary(anchor: datetime, step: str, k: int, tz: ZoneInfo) -> datetime:
    """The start of the k-th period of `step` from `anchor`, counted on the wall clock of
    `tz` (a calendar month from the 31st ends on the last day of a shorter month)."""
    if step in FIXED:  # real seconds: in UTC (a zone's + timedelta is wall-clock)
        return utc(anchor) + timedelta(seconds=k * FIXED[step])
    local = anchor.astimezone(tz).replace(tzinfo=None)
    if step in WALL_DAYS:
        naive = local + timedelta(days=k * WALL_DAYS[step])
    else:
        y, m = divmod(local.month - 1 + k, 12)
        year, month = local.year + y, m + 1
        naive = local.replace(
            year=year, month=month, day=min(local.day, monthrange(year, month)[1])
        )
    return naive.replace(tzinfo=tz)


def period_index(anchor: datetime, step: str, t: datetime, tz: ZoneInfo) -> int:
    """The k whose period [boundary(k), boundary(k+1)) holds t (negative before anchor)."""
    if step in FIXED:
        return math.floor(seconds_between(anchor, t) / FIXED[step])
    t = utc(t)
    a, b = anchor.astimezone(tz), t.astimezone(tz)
    if step in WALL_DAYS:
        k = (b.replace(tzinfo=None) - a.replace(tzinfo=None)).days // WALL_DAYS[step]
    else:
        k = (b.year - a.year) * 12 + b.month - a.month
    while boundary(anchor, step, k + 1, tz) <= t:
        k += 1
    while boundary(anchor, step, k, tz) > t:
        k -= 1
    return k
