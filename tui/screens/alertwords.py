"""An alert's stored words (kind, severity, state: English in the ledger, in JSON and in
filters) as the dashboard shows them, in the language in use (leases.core.valuewords, as
`zuka alerts` says them)."""

from __future__ import annotations

from leases.core import valuewords

KIND = "leases.alerts.alert.AlertKind"
SEVERITY = "leases.core.severity.Severity"
STATE = "leases.alerts.state.State"
KINDS = valuewords.ALERT_KINDS


def kind_words(kind: str) -> str:
    """'lease ending' / '租约将到期'; a kind not listed as its words."""
    return valuewords.words(KIND).get(kind, kind.replace("_", " "))


def severity_words(severity: str) -> str:
    return valuewords.word(severity, SEVERITY)


def state_words(state: str) -> str:
    return valuewords.word(state, STATE)
