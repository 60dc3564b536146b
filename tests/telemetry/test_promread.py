"""The Prometheus reader against an in-process server answering crafted /api/v1/query
JSON: a normal answer becomes GpuSamples; every way a hostile or broken server answers
becomes the node's health and detail, naming the URL."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from leases.core.models import Node, NodeHealth, SshTarget
from leases.core.promsource import ReadingSource
from leases.telemetry.promread import EXTRA_XID, PromReader, PromReading
from tests.support.promapi import PromApi, dcgm_series, prom_api, vector
from tests.support.tokens import token_file

TS = 1_795_000_000.0  # 2026-11-18, a Prometheus sample time
AT = datetime.fromtimestamp(TS, UTC)
NOW = AT + timedelta(seconds=5)
FULL = {
    "DCGM_FI_DEV_GPU_UTIL": "87",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "41",
    "DCGM_FI_DEV_FB_USED": "60000",
    "DCGM_FI_DEV_FB_FREE": "20959",
    "DCGM_FI_DEV_FB_RESERVED": "600",
    "DCGM_FI_DEV_GPU_TEMP": "66",
    "DCGM_FI_DEV_POWER_USAGE": "512.25",
    "DCGM_FI_DEV_SM_CLOCK": "1980",
    "DCGM_FI_DEV_XID_ERRORS": "0",
}


def _node(url: str, match: str = 'Hostname="gpu-07"', **kw: Any) -> Node:
    return Node(
        "gpu-07",
        ssh=SshTarget("10.0.0.7"),
        reading_source=ReadingSource.PROMETHEUS,
        prom_url=url,
        prom_match=match,
        **kw,
    )


@pytest.fixture
async def api() -> AsyncIterator[PromApi]:
    async with prom_api() as served:
        yield served


@pytest.fixture
async def reader() -> AsyncIterator[PromReader]:
    r = PromReader(timeout_s=2.0, max_bytes=200_000)
    yield r
    await r.close()


async def _read(reader: PromReader, api: PromApi, **kw: Any) -> PromReading:
    return await reader.read(_node(api.url, **kw), NOW, 5.0)


async def test_a_normal_answer_is_one_sample_per_gpu(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 1, TS, FULL) + dcgm_series("gpu-07", 0, TS, FULL)))
    got = await _read(reader, api)
    assert got.problem is None
    assert [s.index for s in got.samples] == [0, 1]
    s = got.samples[0]
    assert (s.node, s.at, s.uuid, s.name) == ("gpu-07", AT, "GPU-gpu-07-0", "NVIDIA H100 80GB HBM3")
    assert (s.util_gpu, s.util_mem, s.temp_c, s.power_w, s.sm_clock_mhz) == (
        87,
        41,
        66,
        512.25,
        1980,
    )
    assert (s.mem_used_mib, s.mem_total_mib) == (60000, 60000 + 20959 + 600)
    assert s.extra == {EXTRA_XID: "0"}
    # One request, every metric by name AND the node's matchers, rebuilt quoted.
    [query] = api.queries
    assert query.startswith('{__name__=~"DCGM_FI_DEV_GPU_UTIL|')
    picked = query.split(" or ", 1)[0]
    assert picked.endswith(', Hostname="gpu-07"}')
    assert query.endswith(
        '(timestamp(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-07"})), "__name__", "zuka_sample_time",'
        ' "", "")'
    )


def _scraped(gpu: int, ts: float) -> dict[str, Any]:
    """The series the query adds per GPU: its newest sample's own time."""
    labels = {"__name__": "zuka_sample_time", "gpu": str(gpu), "UUID": f"GPU-gpu-07-{gpu}",
              "Hostname": "gpu-07"}  # fmt: skip
    return {"metric": labels, "value": [TS + 5, repr(ts)]}


async def test_a_reading_is_dated_by_its_scrape_not_by_the_query(
    api: PromApi, reader: PromReader
) -> None:
    # Prometheus answers every value at the query's time (TS + 5); the scrape was at TS - 40.
    series = [*dcgm_series("gpu-07", 0, TS + 5, FULL), _scraped(0, TS - 40)]
    api.json(vector(series))
    got = await _read(reader, api)
    assert got.problem is None and [s.at for s in got.samples] == [AT - timedelta(seconds=40)]
    # A scrape long stopped is stale although the query's time is now.
    api.json(vector([*dcgm_series("gpu-07", 0, TS + 5, FULL), _scraped(0, TS - 600)]))
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.TIMEOUT
    assert "stale" in got.problem.detail
    api.json(vector([*dcgm_series("gpu-07", 0, TS + 5, FULL), _scraped(0, float("nan"))]))
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.GARBAGE


async def test_the_same_sample_again_is_no_new_reading(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL)))
    assert len((await _read(reader, api)).samples) == 1
    again = await _read(reader, api)
    assert again.samples == () and again.problem is None
    api.json(vector(dcgm_series("gpu-07", 0, TS + 15, FULL)))
    assert len((await _read(reader, api)).samples) == 1


async def test_a_matcher_matching_nothing_says_so(api: PromApi, reader: PromReader) -> None:
    api.json(vector([]))
    got = await _read(reader, api, match='Hostname="gpu-7"')
    assert got.problem is not None and got.problem.health is NodeHealth.TIMEOUT
    assert 'no series match {Hostname="gpu-7"}' in got.problem.detail
    assert api.url in got.problem.detail


async def test_two_nodes_gpus_are_refused(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL) + dcgm_series("gpu-08", 0, TS, FULL)))
    got = await _read(reader, api, match='Hostname=~"gpu-0.*"')
    assert got.problem is not None and got.problem.health is NodeHealth.GARBAGE
    assert "series of hosts 'gpu-07', 'gpu-08'" in got.problem.detail
    assert "more than one node" in got.problem.detail
    # Even where their GPU indexes do not meet.
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL) + dcgm_series("gpu-08", 1, TS, FULL)))
    got = await _read(reader, api, match='Hostname=~"gpu-0.*"')
    assert got.problem is not None and "more than one node" in got.problem.detail
    # One host naming GPU 0 twice (two exporters on it, another card behind the same index).
    api.json(
        vector(
            dcgm_series("gpu-07", 0, TS, FULL) + dcgm_series("gpu-07", 0, TS, FULL, uuid="GPU-x")
        )
    )
    got = await _read(reader, api)
    assert got.problem is not None and "GPU 0 appears twice" in got.problem.detail


async def test_a_stale_sample_is_not_a_reading(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 0, TS - 600, FULL)))
    got = await _read(reader, api)
    assert got.samples == () and got.problem is not None
    assert got.problem.health is NodeHealth.TIMEOUT
    assert "stale" in got.problem.detail and "605 s" in got.problem.detail


async def test_nan_and_inf_are_unknown_never_zero(api: PromApi, reader: PromReader) -> None:
    values = {**FULL, "DCGM_FI_DEV_GPU_UTIL": "NaN", "DCGM_FI_DEV_POWER_USAGE": "+Inf"}
    api.json(vector(dcgm_series("gpu-07", 0, TS, values)))
    [s] = (await _read(reader, api)).samples
    assert s.util_gpu is None and s.power_w is None and s.temp_c == 66


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ([], "not a JSON object"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "instant vector"),
        ({"status": "success", "data": {"resultType": "vector", "result": {}}}, "not a list"),
        (vector([{"metric": [], "value": [TS, "1"]}]), "labels and value"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"}, "value": [TS, 1]}]),
         "number string"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"},
                  "value": [TS, "1e5x"]}]), "not a number"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "٣"}, "value": [TS, "1"]}]),
         "GPU index"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"},
                  "value": ["x", "1"]}]), "timestamp"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": 7},
                  "value": [TS, "1"]}]), "label UUID"),
        (vector([{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "999"},
                  "value": [TS, "1"]}]), "out of range"),
    ],
)  # fmt: skip
async def test_wrong_types_are_garbage(
    api: PromApi, reader: PromReader, body: Any, said: str
) -> None:
    api.json(body)
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.GARBAGE, got
    assert said in got.problem.detail


async def test_figures_out_of_bounds_are_garbage(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 0, TS, {**FULL, "DCGM_FI_DEV_XID_ERRORS": "1e300"})))
    got = await _read(reader, api)
    assert got.problem is not None and "is not an XID" in got.problem.detail
    api.json(vector(dcgm_series("gpu-07", 0, TS, {**FULL, "DCGM_FI_DEV_GPU_UTIL": "1e9"})))
    [s] = (await _read(reader, api)).samples  # read as given: the poller's bounds refuse it
    assert s.util_gpu == 1e9


async def test_not_json_and_deep_json_are_garbage(api: PromApi, reader: PromReader) -> None:
    api.answer = lambda _r: web.Response(text="<html>hello</html>")
    got = await _read(reader, api)
    assert got.problem is not None and "not JSON" in got.problem.detail
    api.answer = lambda _r: web.Response(text="[" * 100_000 + "]" * 100_000)
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.GARBAGE


async def test_an_error_answer_and_a_500_name_the_reason(api: PromApi, reader: PromReader) -> None:
    api.json({"status": "error", "errorType": "bad_data", "error": "parse error\x1b[2J"}, 400)
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "Prometheus answered an error: parse error␛[2J" in got.problem.detail
    api.json({"status": "error", "errorType": "timeout", "error": "query timed out"}, 503)
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is NodeHealth.TIMEOUT
    api.answer = lambda _r: web.Response(text="oops", status=500)
    got = await _read(reader, api)
    assert got.problem is not None and "HTTP 500" in got.problem.detail
    assert got.problem.health is NodeHealth.UNREACHABLE


@pytest.mark.parametrize(
    ("status", "health", "said"),
    [
        (401, NodeHealth.AUTH_FAILED, "refused the credentials (HTTP 401): check --token-file"),
        (403, NodeHealth.AUTH_FAILED, "refused the credentials (HTTP 403)"),
        # --url pointing at dcgm-exporter itself (:9400), which has no /api/v1/query.
        (404, NodeHealth.GARBAGE, "HTTP 404: no Prometheus API at this URL"),
        (400, NodeHealth.GARBAGE, "HTTP 400: no Prometheus API"),
        (502, NodeHealth.UNREACHABLE, "Prometheus answered HTTP 502"),
    ],
)
async def test_each_http_failure_is_its_own_state(
    api: PromApi, reader: PromReader, status: int, health: NodeHealth, said: str
) -> None:
    api.answer = lambda _r: web.Response(text="404 page not found\n", status=status)
    got = await _read(reader, api)
    assert got.problem is not None and got.problem.health is health, got.problem
    assert said in got.problem.detail and api.url in got.problem.detail


async def test_a_huge_answer_is_refused(api: PromApi, reader: PromReader) -> None:
    api.answer = lambda _r: web.Response(text='{"x": "' + "a" * 300_000 + '"}')
    got = await _read(reader, api)
    assert got.problem is not None and "larger than 200000 bytes" in got.problem.detail

    async def streamed(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()  # no Content-Length: bounded while reading
        await resp.prepare(request)
        for _ in range(100):
            await resp.write(b"a" * 10_000)
        return resp

    api.answer = streamed
    got = await _read(reader, api)
    assert got.problem is not None and "larger than" in got.problem.detail


async def test_a_slow_prometheus_is_a_timeout(api: PromApi) -> None:
    async def slow(_r: web.Request) -> web.Response:
        await api.release.wait()  # set when the server stops
        return web.json_response(vector([]))

    api.answer = slow
    reader = PromReader(timeout_s=0.3)
    try:
        got = await _read(reader, api)
    finally:
        await reader.close()
    assert got.problem is not None and got.problem.health is NodeHealth.TIMEOUT
    assert "within 0.3 s" in got.problem.detail and api.url in got.problem.detail


async def test_the_whole_read_is_bounded_by_the_limit(api: PromApi) -> None:
    """A Prometheus that takes connections and never answers: reads waiting for a free
    connection count against the same limit (they waited one limit each, in turn)."""

    async def never(_r: web.Request) -> web.Response:
        await api.release.wait()
        return web.json_response(vector([]))

    api.answer = never
    reader = PromReader(timeout_s=0.5, concurrency=1)
    try:
        started = time.monotonic()
        got = await asyncio.gather(*(_read(reader, api) for _ in range(4)))
        took = time.monotonic() - started
    finally:
        await reader.close()
    assert all(g.problem is not None and g.problem.health is NodeHealth.TIMEOUT for g in got)
    assert took < 1.5, took  # one limit (0.5 s), not four in turn (2 s)


async def test_a_dead_prometheus_is_unreachable(reader: PromReader) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    got = await reader.read(_node(f"http://127.0.0.1:{port}"), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.UNREACHABLE
    assert got.problem.detail == (
        f"connection refused: nothing listens at that port (http://127.0.0.1:{port})"
    )


async def test_https_to_a_plain_http_prometheus_says_so(api: PromApi, reader: PromReader) -> None:
    url = api.url.replace("http://", "https://")
    got = await reader.read(_node(url), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.UNREACHABLE
    assert got.problem.detail == (
        f"the TLS handshake failed: is the URL https where Prometheus speaks http? ({url})"
    )


async def test_a_name_not_found_says_so() -> None:
    class Unknown:
        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[Any]:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        async def close(self) -> None:
            return None

    reader = PromReader(resolver=Unknown())
    try:
        got = await reader.read(_node("http://prom.lab.example:9090"), NOW, 5.0)
    finally:
        await reader.close()
    assert got.problem is not None and got.problem.health is NodeHealth.UNREACHABLE
    assert got.problem.detail == (
        "Prometheus's host name is not found (http://prom.lab.example:9090)"
    )


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254", "http://2852039166:9090", "http://[::ffff:169.254.169.254]"]
)
async def test_a_metadata_address_is_never_asked(reader: PromReader, url: str) -> None:
    got = await reader.read(_node(url), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "link-local or cloud metadata" in got.problem.detail


async def test_a_name_resolving_to_metadata_is_refused_at_connect(api: PromApi) -> None:
    class Rebinding:
        async def resolve(self, host: str, port: int = 0, family: int = 0) -> list[Any]:
            return [{"hostname": host, "host": "169.254.169.254", "port": port,
                     "family": socket.AF_INET, "proto": 0, "flags": 0}]  # fmt: skip

        async def close(self) -> None:
            return None

    reader = PromReader(resolver=Rebinding())
    try:
        got = await reader.read(_node("http://prom.lab.example:9090"), NOW, 5.0)
    finally:
        await reader.close()
    assert got.problem is not None and "169.254.169.254" in got.problem.detail
    assert api.queries == []


async def test_the_token_is_sent_from_its_file(
    api: PromApi, reader: PromReader, tmp_path: Path
) -> None:
    token = token_file(tmp_path, "s3cr3t-token\n")
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL)))
    got = await reader.read(_node(api.url, prom_token_file=str(token)), NOW, 5.0)
    assert got.problem is None and api.auth == ["Bearer s3cr3t-token"]
    token.write_text("two\nlines\n")
    got = await reader.read(_node(api.url, prom_token_file=str(token)), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "s3cr3t" not in got.problem.detail
    missing = await reader.read(_node(api.url, prom_token_file=str(tmp_path / "no")), NOW, 5.0)
    assert missing.problem is not None and "cannot be read" in missing.problem.detail


async def test_a_file_others_may_read_is_never_sent(
    api: PromApi, reader: PromReader, tmp_path: Path
) -> None:
    # The ledger row edited to name ~/.git-credentials (git writes it 0644).
    creds = token_file(
        tmp_path, "https://alice:ghp_AbCdEf@github.com\n", 0o644, name=".git-credentials"
    )
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL)))
    got = await reader.read(_node(api.url, prom_token_file=str(creds)), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert (
        "no token sent" in got.problem.detail
        and "open to its group and others" in got.problem.detail
    )
    assert api.auth == [] and "ghp_" not in got.problem.detail


async def test_a_fifo_token_file_ends_the_read_at_once(
    api: PromApi, reader: PromReader, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # nobody writes to it: a blocking open() froze the event loop
    got = await asyncio.wait_for(
        reader.read(_node(api.url, prom_token_file=str(fifo)), NOW, 5.0), reader.timeout_s
    )
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "not a regular file" in got.problem.detail and api.auth == []


async def test_a_node_without_url_is_refused(reader: PromReader) -> None:
    got = await reader.read(_node(""), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "need a URL" in got.problem.detail


async def test_nodes_share_one_session(api: PromApi, reader: PromReader) -> None:
    api.json(vector(dcgm_series("gpu-07", 0, TS, FULL)))
    await asyncio.gather(*(_read(reader, api) for _ in range(5)))
    first = reader._session
    await _read(reader, api)
    assert reader._session is first and len(api.queries) == 6


async def test_reads_at_once_are_bounded(api: PromApi) -> None:
    inflight = [0, 0]  # now, most

    async def counted(_r: web.Request) -> web.Response:
        inflight[0] += 1
        inflight[1] = max(inflight[1], inflight[0])
        try:
            await asyncio.sleep(0)  # let the others in, if they may come
            await asyncio.sleep(0)
            return web.json_response(vector(dcgm_series("gpu-07", 0, TS, FULL)))
        finally:
            inflight[0] -= 1

    api.answer = counted
    reader = PromReader(concurrency=2)
    try:
        nodes = [_node(api.url) for _ in range(10)]
        got = await asyncio.gather(*(reader.read(n, NOW, 5.0) for n in nodes))
    finally:
        await reader.close()
    assert len(api.queries) == 10 and all(g.problem is None for g in got)
    assert 1 <= inflight[1] <= 2


async def test_a_token_is_never_sent_over_plain_http_to_another_host(
    reader: PromReader, tmp_path: Path
) -> None:
    token = token_file(tmp_path, "s3cr3t-token\n")
    # The ledger row edited to an http URL on another host: refused before any connect.
    got = await reader.read(_node("http://prom.invalid:9090", prom_token_file=str(token)), NOW, 5.0)
    assert got.problem is not None and got.problem.health is NodeHealth.REFUSED
    assert "no token sent: a bearer token is sent over https only" in got.problem.detail
