"""The words money's text shows for values stored in English: a billing type's display
word (包月, 按量, 按卡时 in Chinese, docs/GLOSSARY.md), a deposit's state, an invoice's kind,
a channel. The stored value itself ("monthly") stays in the ledger, in `--json` and in CSV,
and English text shows it as it is stored. The words are leases.core.valuewords'."""

from __future__ import annotations

from leases.core import valuewords


def billing_word(value: str) -> str:
    """A billing type as text shows it: "monthly" in English (as stored), "包月" in
    Chinese; an unknown value as it is."""
    return valuewords.word(value, "leases.core.models.BillingType")


def deposit_word(value: str) -> str:
    """A deposit's state (leases.money.deposits.state_word) as text shows it: "pending" in
    English (as stored), "待退还" in Chinese; an unknown value as it is."""
    return valuewords.word(value, "deposit state")


def kind_word(value: str) -> str:
    """An invoice's kind as text shows it: "special" in English (as stored), "专票" in
    Chinese; an unknown value as it is."""
    return valuewords.word(value, "leases.ledger.books.InvoiceKind")


def channel_word(value: str) -> str:
    """A provider's channel as text shows it: "cloud" in English (as stored), "公有云" in
    Chinese; an unknown value as it is."""
    return valuewords.word(value, "leases.core.models.ProviderKind")
