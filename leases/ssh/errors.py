"""What a node's SSH session raises: SshError (its health says why) and its kinds, and
StreamExited for a streamed command that ended badly."""

from __future__ import annotations

from dataclasses import dataclass

import asyncssh

from leases.core.models import NodeHealth
from leases.ssh import hostkeys
from leases.ssh.stream import CommandResult


@dataclass(frozen=True)
class OfferedHostKey:
    """A host key the node (or one of its jump hosts) presented that we did not accept."""

    host: str
    port: int | None  # None for 22
    key: asyncssh.SSHKey
    status: hostkeys.HostKeyStatus
    addr: str = ""

    @property
    def fingerprint(self) -> str:
        return hostkeys.fingerprint(self.key)


class SshError(Exception):
    """A node could not run a command; health says why."""

    def __init__(self, node: str, health: NodeHealth, message: str) -> None:
        super().__init__(f"{node}: {message}")
        self.node = node
        self.health = health
        self.message = message


class BackingOff(SshError):
    """Not attempted: the last connect failed and its backoff has not run out."""

    def __init__(self, node: str, health: NodeHealth, message: str, retry_at: float) -> None:
        super().__init__(node, health, message)
        self.retry_at = retry_at


class CommandTimeout(SshError):
    """The command did not finish in time; the connection is kept."""


class ConnectionDropped(SshError):
    """The connection went away under a running command; the next command reconnects."""


class HostKeyRejected(SshError):
    """The host key is unknown (UNTRUSTED) or differs from the one on file (HOSTKEY_CHANGED)."""

    def __init__(self, node: str, health: NodeHealth, message: str, offered: OfferedHostKey):
        super().__init__(node, health, message)
        self.offered = offered


class ShellUnavailable(SshError):
    """The node would not open a shell channel; query() falls back to exec."""


class OutputTooLarge(SshError):
    """The command printed more than the caps allow; it was stopped (health GARBAGE)."""


class TargetRefused(SshError):
    """zuka will not connect the way the ledger or ~/.ssh/config asks (a ProxyCommand, a
    value that is not a plain host or user name, a key file it will not read)."""


class StreamExited(Exception):
    """A streamed command ended with a non-zero or missing exit status."""

    def __init__(self, node: str, result: CommandResult) -> None:
        super().__init__(f"{node}: stream exited with status {result.exit_status}")
        self.node = node
        self.result = result
