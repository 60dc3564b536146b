"""An alert's stored words (kind, severity, state: English in the ledger, in JSON and in
filters) as the dashboard shows them, in the language in use."""

from __future__ import annotations

from leases.core.i18n import N_, _

KINDS = {
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
    "ram_full": N_("RAM full"),
}
SEVERITIES = {"info": N_("info"), "warning": N_("warning"), "critical": N_("critical")}
STATES = {
    "open": N_("open"),
    "acked": N_("acked"),
    "snoozed": N_("snoozed"),
    "cleared": N_("cleared"),
}


def kind_words(kind: str) -> str:
    """'lease ending' / '租约将到期'; a kind not listed as its words."""
    known = KINDS.get(kind)
    return _(known) if known else kind.replace("_", " ")


def severity_words(severity: str) -> str:
    known = SEVERITIES.get(severity)
    return _(known) if known else severity


def state_words(state: str) -> str:
    known = STATES.get(state)
    return _(known) if known else state
