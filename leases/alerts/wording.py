"""How the alert rules say spans of time in their messages (amounts: leases.money.amounts),
in the language in use: "3 days" / "3天", "1.5 hours" / "1.5小时", "20 minutes" / "20分钟"."""

from __future__ import annotations

from datetime import timedelta

from leases.core import valuewords
from leases.core.i18n import _, ngettext
from leases.notify.message import severity_word

__all__ = ["KIND_WORDS", "billing_word", "duration", "kind_word", "node_shown", "severity_word",
           "state_word"]  # fmt: skip

# The words a kind, a severity and a state are shown by in a text table or the dashboard
# (the values themselves stay English: they are stored, compared and written in --json).
KIND_WORDS = valuewords.ALERT_KINDS


def duration(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400
    if days >= 2:
        # whole days: 62.6 days after an end is 62, not 63
        return ngettext("{n} day", "{n} days", int(days)).format(n=int(days))
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return _("{n} minutes").format(n=f"{delta.total_seconds() / 60:.0f}")
    shown = f"{hours:.1f}".removesuffix(".0")  # 1.5 hours, not 2
    if shown == "1":
        return _("1 hour")
    return _("{n} hours").format(n=shown)


def kind_word(kind: str) -> str:
    """An alert kind's words in the language in use ("lease_ending": "lease ending")."""
    return valuewords.word(kind, "leases.alerts.alert.AlertKind")


def state_word(state: str) -> str:
    """An alert state's word in the language in use ("acked": "已确认")."""
    return valuewords.word(state, "leases.alerts.state.State")


def billing_word(value: str) -> str:
    """A billing type's word in the language in use ("monthly": "包月")."""
    return valuewords.word(value, "leases.core.models.BillingType")


def node_shown(node: str) -> str:
    """An alert's node as shown: its name (data), or the ledger's words for an alert of the
    ledger itself (leases.alerts.alert.LEDGER, stored in English)."""
    return _(node) if node == "the ledger" else node
