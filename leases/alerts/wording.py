"""How the alert rules say spans of time in their messages (amounts: leases.money.amounts),
in the language in use: "3 days" / "3天", "1.5 hours" / "1.5小时", "20 minutes" / "20分钟"."""

from __future__ import annotations

from datetime import timedelta

from leases.core.i18n import N_, _, ngettext, pgettext
from leases.notify.message import severity_word

__all__ = ["KIND_WORDS", "billing_word", "duration", "kind_word", "node_shown", "severity_word",
           "state_word"]  # fmt: skip

# The words a kind, a severity and a state are shown by in a text table or the dashboard
# (the values themselves stay English: they are stored, compared and written in --json).
KIND_WORDS = {
    "lease_ending": N_("lease ending"),
    "underused": N_("underused"),
    "forgotten": N_("forgotten"),
    "starved": N_("starved"),
    "release_soon": N_("release soon"),
    "deposit_not_refunded": N_("deposit not refunded"),
    "autorenew_soon": N_("auto-renew soon"),
    "hourly_after_end": N_("hourly after end"),
    "unreachable": N_("unreachable"),
    "stopped_question": N_("stopped?"),
    "login_failed": N_("login failed"),
    "hostkey_changed": N_("host key changed"),
    "temperature": N_("temperature"),
    "ecc_errors": N_("ECC errors"),
    "cannot_evaluate": N_("cannot evaluate"),
    "edited_outside_zuka": N_("edited outside zuka"),
    "bill_mismatch": N_("bill mismatch"),
    "bill_unmatched": N_("bill unmatched"),
    "balance_low": N_("balance low"),
    "acceptance_failed": N_("acceptance failed"),
    "disk_full": N_("disk full"),
    "ram_full": N_("memory full"),
}


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
    word = KIND_WORDS.get(kind)
    return _(word) if word else kind


def state_word(state: str) -> str:
    """An alert state's word in the language in use ("acked": "已确认")."""
    return {
        "open": pgettext("alert state", "open"),
        "acked": pgettext("alert state", "acked"),
        "snoozed": pgettext("alert state", "snoozed"),
        "cleared": pgettext("alert state", "cleared"),
    }.get(state, state)


def billing_word(value: str) -> str:
    """A billing type's word in the language in use ("monthly": "包月")."""
    return {
        "per_second": pgettext("billing type", "per_second"),
        "hourly": pgettext("billing type", "hourly"),
        "card_hour": pgettext("billing type", "card_hour"),
        "daily": pgettext("billing type", "daily"),
        "weekly": pgettext("billing type", "weekly"),
        "monthly": pgettext("billing type", "monthly"),
        "contract": pgettext("billing type", "contract"),
    }.get(value, value)


def node_shown(node: str) -> str:
    """An alert's node as shown: its name (data), or the ledger's words for an alert of the
    ledger itself (leases.alerts.alert.LEDGER, stored in English)."""
    return _(node) if node == "the ledger" else node
