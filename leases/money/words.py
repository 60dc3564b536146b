"""The words money's text shows for values stored in English: a billing type's display
word (包月, 按量, 按卡时 in Chinese, docs/GLOSSARY.md). The stored value itself ("monthly")
stays in the ledger, in `--json` and in CSV, and English text shows it as it is stored."""

from __future__ import annotations

from collections.abc import Callable

from leases.core.i18n import pgettext

# The stored value, said in the language in use (English: the value itself).
_BILLING: dict[str, Callable[[], str]] = {
    "per_second": lambda: pgettext("billing type", "per_second"),
    "hourly": lambda: pgettext("billing type", "hourly"),
    "card_hour": lambda: pgettext("billing type", "card_hour"),
    "daily": lambda: pgettext("billing type", "daily"),
    "weekly": lambda: pgettext("billing type", "weekly"),
    "monthly": lambda: pgettext("billing type", "monthly"),
    "contract": lambda: pgettext("billing type", "contract"),
}


def billing_word(value: str) -> str:
    """A billing type as text shows it: "monthly" in English (as stored), "包月" in
    Chinese; an unknown value as it is."""
    said = _BILLING.get(value)
    return value if said is None else said()


_DEPOSIT: dict[str, Callable[[], str]] = {
    "none": lambda: pgettext("deposit state", "none"),
    "pending": lambda: pgettext("deposit state", "pending"),
    "refunded": lambda: pgettext("deposit state", "refunded"),
    "forfeited": lambda: pgettext("deposit state", "forfeited"),
    "partly back": lambda: pgettext("deposit state", "partly back"),
}


def deposit_word(value: str) -> str:
    """A deposit's state (leases.money.deposits.state_word) as text shows it: "pending" in
    English (as stored), "待退还" in Chinese; an unknown value as it is."""
    said = _DEPOSIT.get(value)
    return value if said is None else said()


_KIND: dict[str, Callable[[], str]] = {
    "special": lambda: pgettext("invoice kind", "special"),
    "ordinary": lambda: pgettext("invoice kind", "ordinary"),
    "other": lambda: pgettext("invoice kind", "other"),
}


def kind_word(value: str) -> str:
    """An invoice's kind as text shows it: "special" in English (as stored), "专票" in
    Chinese; an unknown value as it is."""
    said = _KIND.get(value)
    return value if said is None else said()


_CHANNEL: dict[str, Callable[[], str]] = {
    "cloud": lambda: pgettext("channel", "cloud"),
    "platform": lambda: pgettext("channel", "platform"),
    "colo": lambda: pgettext("channel", "colo"),
}


def channel_word(value: str) -> str:
    """A provider's channel as text shows it: "cloud" in English (as stored), "公有云" in
    Chinese; an unknown value as it is."""
    said = _CHANNEL.get(value)
    return value if said is None else said()
