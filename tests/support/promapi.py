"""A small in-process HTTP server answering Prometheus's /api/v1/query with crafted JSON
(or crafted failures), for the reader's tests; and the dcgm-exporter series such an answer
holds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Series = dict[str, Any]


def dcgm_series(
    host: str, gpu: int, ts: float, values: dict[str, str], *, uuid: str = ""
) -> list[Series]:
    """One GPU's series as Prometheus answers them (values as strings)."""
    labels = {
        "gpu": str(gpu),
        "UUID": uuid or f"GPU-{host}-{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": host,
        "instance": "10.0.0.7:9400",
        "job": "dcgm",
    }
    return [
        {"metric": {"__name__": name, **labels}, "value": [ts, value]}
        for name, value in values.items()
    ]


def vector(series: list[Series]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": series}}


@dataclass
class PromApi:
    """What the server answers next (answer(request) -> web.StreamResponse), and what it
    was asked."""

    url: str = ""
    answer: Callable[[web.Request], Any] = lambda _r: web.json_response(vector([]))
    queries: list[str] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def json(self, body: Any, status: int = 200) -> None:
        text = json.dumps(body)
        self.answer = lambda _r: web.Response(
            text=text, status=status, content_type="application/json"
        )


@asynccontextmanager
async def prom_api() -> AsyncIterator[PromApi]:
    api = PromApi()

    async def handle(request: web.Request) -> web.StreamResponse:
        api.queries.append(request.query.get("query", ""))
        api.auth.append(request.headers.get("Authorization"))
        got = api.answer(request)
        if asyncio.iscoroutine(got):
            got = await got
        assert isinstance(got, web.StreamResponse)
        return got

    app = web.Application()
    app.router.add_get("/api/v1/query", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    api.url = f"http://127.0.0.1:{port}"
    try:
        yield api
    finally:
        api.release.set()
        await runner.cleanup()
