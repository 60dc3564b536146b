"""`t` on the fleet: the key a node offers now fetched, its fingerprint shown, accepted on y
(leases.app.trust), said in the language in use. Run by the app's trust worker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.notifications import SeverityLevel
from textual.screen import Screen

from leases.app.trust import HostKeyTrust, refused
from leases.core.i18n import _
from leases.ledger.store import Ledger
from leases.ssh.errors import SshError

Tell = Callable[[str, SeverityLevel], None]
Ask = Callable[[Screen[bool]], Awaitable[bool]]


async def trust(ledger: Ledger, path: Path, name: str, tell: Tell, ask: Ask) -> bool:
    """True when the key is trusted now (already, or accepted here): the node may be
    polled again at once."""
    from tui.screens.yesno import TrustScreen

    async with HostKeyTrust(path, ledger.node(name)) as trusting:
        try:
            offered = await trusting.offered()
        except SshError as exc:
            tell(f"{name}: {exc.message}", "error")
            return False
        if offered is None:
            tell(_("{name}: host key already trusted").format(name=name), "information")
        elif refused(offered):
            tell(_("{name}: the host key CHANGED ({fingerprint}): refused").format(
                name=name, fingerprint=offered.fingerprint), "error")  # fmt: skip
            return False
        elif await ask(TrustScreen(name, offered)):
            trusting.accept(offered, offered.fingerprint)
            tell(_("trusted {fingerprint} for {name}").format(
                fingerprint=offered.fingerprint, name=name), "information")  # fmt: skip
        else:
            return False
    return True
