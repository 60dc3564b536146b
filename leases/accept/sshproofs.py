"""The two measurements acceptance makes over SSH itself rather than by a command: the
password proof (leases.ssh.passwordprobe) and the throughput (leases.ssh.throughput), as
the callables a Context takes."""

from __future__ import annotations

from leases.accept.engine import LoginOffer, PasswordProof, Throughput
from leases.core.models import Node
from leases.ssh import throughput as sshthroughput
from leases.ssh.options import SshOptions
from leases.ssh.passwordprobe import Attempt, password_probe
from leases.ssh.session import NodeSession


def password_proof(node: Node, options: SshOptions) -> PasswordProof:
    attempt = password_probe(node, options)

    async def proof() -> LoginOffer:
        got: Attempt = await attempt()
        return LoginOffer(got.refused, got.methods, got.words)

    return proof


def throughput(session: NodeSession, *, timeout: float = 60.0) -> Throughput:
    """Bytes per second node -> here over session's connection."""

    async def measure(nbytes: int) -> float:
        return await sshthroughput.measure(session, nbytes, timeout=timeout)

    return measure
