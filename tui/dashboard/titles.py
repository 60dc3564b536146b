"""The dashboard app's own words: its title (which ledger, whose) and the status line
under the fleet (how many nodes, their health, alerts, who polls), in the language in
use: built again at every refresh, and by a language switch."""

from __future__ import annotations

from pathlib import Path

from leases.core.i18n import _, ngettext
from leases.core.textsafe import visible


def ledger_label(path: Path | None) -> str:
    """The ledger as the header names it."""
    return _("in memory") if path is None else str(path)


def app_title(title: str, path: Path | None, *, lab: bool, readonly: bool) -> str:
    """'zuka 租卡 · /path/ledger.db · the lab's ledger (read-only for you)'."""
    shown = f"{title} · {visible(ledger_label(path), 120)}"
    if lab and readonly:
        return shown + " · " + _("the lab's ledger (read-only for you)")
    if lab:
        return shown + " · " + _("the lab's ledger")
    if readonly:
        return shown + " " + _("(read-only)")
    return shown


def status_line(count: int, health: str, alerts: int, source: str) -> str:
    """'12 nodes · 10 ok, 2 unreachable · 3 alerts (a) · polling every 5 s'."""
    nodes = _("{count} nodes").format(count=count)  # "1 nodes": as the dashboard always said
    parts = [nodes, health]
    if alerts:
        parts.append(ngettext("{count} alert (a)", "{count} alerts (a)", alerts).format(
            count=alerts))  # fmt: skip
    parts.append(source)
    return " · ".join(parts)


def poller_fault(exc: BaseException, retry_in: float) -> str:
    """The poller died and restarts: what the notification says."""
    return _(
        "The poller stopped ({error}); restarting in {seconds:g} s. "
        "Details in the fault log beside the ledger."
    ).format(error=visible(exc, 200), seconds=retry_in)
