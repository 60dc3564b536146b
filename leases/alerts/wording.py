"""How the alert rules say spans of time in their messages (amounts: leases.money.amounts)."""

from __future__ import annotations

from datetime import timedelta


def duration(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400
    if days >= 2:
        return f"{int(days)} days"  # whole days: 62.6 days after an end is 62, not 63
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{delta.total_seconds() / 60:.0f} minutes"
    shown = f"{hours:.1f}".removesuffix(".0")  # 1.5 hours, not 2
    return f"{shown} hour{'' if shown == '1' else 's'}"
