"""Values stored in English (in the ledger, JSON and filters: a billing type, a refund's
state, a resource's kind, a provider's kind) as the dashboard shows them: in the language
in use, the stored value itself when it has no words here."""

from __future__ import annotations

from leases.core import valuewords
from leases.core.i18n import _
from leases.core.spoken import elapsed


def value_words(value: str) -> str:
    """'monthly' -> '包月' under zh_CN; under English the value as stored
    (leases.core.valuewords)."""
    return valuewords.shown(value)


def period_words(value: str) -> str:
    """A price's period ('hour', 'day', 'month')."""
    return valuewords.word(value, "leases.core.models.StoragePeriod")


def unknown() -> str:
    return _("unknown")


# A process's run time (leases.core.spoken.elapsed), shared with `zuka ps`.
elapsed_cell = elapsed
