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
