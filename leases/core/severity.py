"""How serious an alert or a notification is, in the order that thresholds compare."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def at_least(self, other: Severity) -> bool:
        return self.rank >= other.rank


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}
