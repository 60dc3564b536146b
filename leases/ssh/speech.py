"""The words leases.ssh and leases.accept speak through: leases.core.i18n's, whose `_`
honours a task's own language (`speaking`), so an acceptance run or a connect writes what
it stores in English while the dashboard, in another task, keeps its language; and how a
person reads an interconnect.
"""

from __future__ import annotations

from leases.core.i18n import N_, _, ngettext, pgettext, speaking, speaking_now
from leases.core.models import Interconnect

__all__ = [
    "N_",
    "_",
    "interconnect_words",
    "ngettext",
    "pgettext",
    "speaking",
    "speaking_now",
]


def interconnect_words(link: Interconnect) -> str:
    """ "nvlink", "PCIe": how a person reads an interconnect (the ledger keeps the value)."""
    words = {
        Interconnect.NVLINK: pgettext("interconnect", "nvlink"),
        Interconnect.PCIE: pgettext("interconnect", "pcie"),
        Interconnect.UNKNOWN: pgettext("interconnect", "unknown"),
    }
    return words[link]
