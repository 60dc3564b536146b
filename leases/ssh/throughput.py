"""How fast data leaves a node for the machine zuka runs on (the jump host): N bytes of
`head -c N /dev/zero` read over an exec channel of the node's own SSH connection, counted
and thrown away, within a time bound.

The connection is opened first (and its setup not timed), so the figure is the transfer's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from leases.core.models import NodeHealth
from leases.ssh.errors import CommandTimeout, SshError
from leases.ssh.session import NodeSession
from leases.ssh.speech import _

CHUNK = 1 << 20
MAX_BYTES = 1 << 30  # a transfer zuka asks for is never more than this


async def measure(
    session: NodeSession,
    nbytes: int,
    *,
    timeout: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Bytes per second of nbytes read from the node. Raises SshError (CommandTimeout when
    the transfer does not finish within timeout; SshError when it ends short)."""
    nbytes = max(1, min(int(nbytes), MAX_BYTES))
    await session.run("true")  # connected, and not timed
    got = 0
    began = clock()
    try:
        async with asyncio.timeout(timeout):
            async with session.binary(f"head -c {nbytes} /dev/zero") as process:
                while got < nbytes:
                    chunk = await process.stdout.read(CHUNK)
                    if not chunk:
                        break
                    got += len(chunk)
                elapsed = clock() - began
    except TimeoutError as exc:
        words = _("{got} of {total} bytes in {seconds:g} s: transfer stopped").format(
            got=got, total=nbytes, seconds=timeout
        )
        raise CommandTimeout(session.name, NodeHealth.TIMEOUT, words) from exc
    if got < nbytes:
        words = _("the transfer ended after {got} bytes").format(got=got)
        raise SshError(session.name, session.health, words)
    return got / max(elapsed, 1e-6)
