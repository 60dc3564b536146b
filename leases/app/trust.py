"""Trusting a node's SSH host key (`zuka node trust`, and t on the dashboard's fleet): the
one way it is done, whichever front end asks. Open a session to the node, fetch the key it
offers now, say which of three it is (already trusted; CHANGED, which is refused here and
never accepted; new, to be compared by a person with what the provider shows), and accept
exactly the fingerprint that person saw. The front ends word each case and ask the question;
they hold no part of the rule."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from leases.core.errors import LedgerError
from leases.core.i18n import _
from leases.core.models import Node
from leases.ledger.store import Ledger
from leases.ssh.errors import OfferedHostKey
from leases.ssh.hostkeys import HostKeyStatus
from leases.ssh.pool import SshPool
from leases.ssh.session import offered_host_key
from leases.telemetry.wiring import ssh_options


def refused(offered: OfferedHostKey) -> bool:
    """A key that is not simply new (it CHANGED, or is revoked): never accepted from zuka;
    the person removes the old line from known_hosts themselves, if satisfied."""
    return offered.status is not HostKeyStatus.UNKNOWN


class HostKeyTrust:
    """One node's session while its key is looked at and, on a yes, accepted. Use it as an
    async context manager: the session is closed on the way out."""

    def __init__(self, ledger_path: Path, node: Node) -> None:
        self.node = node
        self._ledger_path = ledger_path
        self._pool = SshPool(ssh_options(ledger_path))
        self._session = self._pool.add(node)

    async def offered(self) -> OfferedHostKey | None:
        """The key the node offers that is not trusted yet; None when its key is trusted
        (and a login works). Raises SshError for any other failure."""
        return await offered_host_key(self._session)

    def accept(self, offered: OfferedHostKey, seen_fingerprint: str) -> bool:
        """Trust the offered new key if `seen_fingerprint` is its fingerprint, the one the
        person compared; a refused key is never accepted."""
        if refused(offered):
            return False
        if not self._session.accept_host_key(seen_fingerprint):
            return False
        self._audit(offered)
        return True

    def _audit(self, offered: OfferedHostKey) -> None:
        """The trust on the audit log: who trusted which key of which node, and from where
        (the trust store is a file: its line says neither). The key is trusted already: a
        ledger that cannot take the entry is said as such."""
        after = {
            "node": self.node.name,
            # The node's row id: `zuka log NODE` and the node's Audit tab find it by it.
            "node_id": self.node.id,
            "host": offered.host,
            "port": offered.port,
            "fingerprint": offered.fingerprint,
        }
        try:
            led = Ledger.open(self._ledger_path, create=False, action="zuka node trust")
            with led, led.transaction() as conn:
                led.audit(conn, "node.trust", "hostkey", None, self.node.name, None, after)
        except LedgerError as exc:
            raise LedgerError(
                _(
                    "the host key {fingerprint} of {node} is trusted, but its audit entry could"
                    " not be written: {problem}"
                ).format(fingerprint=offered.fingerprint, node=self.node.name, problem=exc)
            ) from exc

    async def log_in(self) -> None:
        """Log in once with the key just trusted (raises SshError when that fails)."""
        await self._session.run("true")

    async def __aenter__(self) -> HostKeyTrust:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._pool.close()
