"""The resolver a Prometheus read connects through: every address a name resolves to is
judged as a notification URL's (leases.notify.host), at connect time, so a name rebound
to a link-local or cloud metadata address after the check cannot be read."""

from __future__ import annotations

import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from leases.notify.host import refusal


class RefusedHost(OSError):
    """A Prometheus URL's name resolved to an address zuka does not read."""


class GuardedResolver(AbstractResolver):
    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner: Any = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            self._inner = ThreadedResolver()
        said = refusal(host)
        if said is not None:
            raise RefusedHost(f"not read: {said}")
        results: list[ResolveResult] = await self._inner.resolve(host, port, family)
        for result in results:
            said = refusal(str(result["host"]))
            if said is not None:
                raise RefusedHost(f"not read: {host} resolves to {said}")
        return results

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()
