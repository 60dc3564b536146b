"""Values stored in English (in the ledger, JSON and filters: a billing type, a refund's
state, a resource's kind, a provider's kind) as the dashboard shows them: in the language
in use, the stored value itself when it has no words here."""

from __future__ import annotations

from leases.core.i18n import _, pgettext


def value_words(value: str) -> str:
    """'monthly' -> '包月' under zh_CN; under English the value as stored."""
    words = {
        # billing types
        "per_second": pgettext("billing", "per_second"),
        "hourly": pgettext("billing", "hourly"),
        "card_hour": pgettext("billing", "card_hour"),
        "daily": pgettext("billing", "daily"),
        "weekly": pgettext("billing", "weekly"),
        "monthly": pgettext("billing", "monthly"),
        "contract": pgettext("billing", "contract"),
        # a deposit's refund
        "none": pgettext("refund", "none"),
        "pending": pgettext("refund", "pending"),
        "refunded": pgettext("refund", "refunded"),
        "forfeited": pgettext("refund", "forfeited"),
        # resource kinds
        "disk": pgettext("resource", "disk"),
        "snapshot": pgettext("resource", "snapshot"),
        "image": pgettext("resource", "image"),
        "bucket": pgettext("resource", "bucket"),
        "bucket_prefix": pgettext("resource", "bucket_prefix"),
        "ssh_key": pgettext("resource", "ssh_key"),
        "scratch_path": pgettext("resource", "scratch_path"),
        "eip": pgettext("resource", "eip"),
        # provider kinds (the fleet's channel)
        "cloud": pgettext("channel", "cloud"),
        "platform": pgettext("channel", "platform"),
        "colo": pgettext("channel", "colo"),
    }
    return words.get(value, value)


def period_words(value: str) -> str:
    """A price's period ('hour', 'day', 'month')."""
    words = {
        "hour": pgettext("period", "hour"),
        "day": pgettext("period", "day"),
        "month": pgettext("period", "month"),
    }
    return words.get(value, value)


def unknown() -> str:
    return _("unknown")


def elapsed_cell(seconds: int | None) -> str:
    """A process's run time, short enough for a narrow column, in the language in use:
    "3d04h", "2h05m", "55m32s" (as leases.app.processes.elapsed_words) / "3天04时",
    "2时05分", "55分32秒"; "?" when unknown."""
    if seconds is None:
        return "?"
    days, rest = divmod(max(seconds, 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return _("{days}d{hours:02d}h").format(days=days, hours=hours)
    if hours:
        return _("{hours}h{minutes:02d}m").format(hours=hours, minutes=minutes)
    return _("{minutes}m{seconds:02d}s").format(minutes=minutes, seconds=secs)
