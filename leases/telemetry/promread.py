"""GPU readings from a Prometheus fed by NVIDIA's dcgm-exporter, as the same GpuSample
objects nvidia-smi gives (leases.telemetry.nvsmi).

One instant query per node (`/api/v1/query`) asks for every dcgm-exporter metric zuka reads
in one selector, `{__name__=~"DCGM_FI_DEV_...", <the node's matchers>}`, rebuilt from the
parsed matchers (leases.core.promsource), never from text as typed. The server is hostile
like a node: the answer is bounded in bytes and series, read with a timeout, its JSON taken
apart defensively, numbers read from ASCII only (NaN and Inf are unknown). Its host is
judged as a notification URL's (leases.notify.host: no link-local or cloud metadata
address, by every spelling and by what a name resolves to at connect time).

Every way the read fails ends as a PromProblem (health, words naming the URL): a dead
Prometheus, a slow one, an error answer, series matching nothing, series of two nodes (a
GPU index twice), a sample older than the stale limit. Readers of one poller share one
HTTP session (a connection pool) with bounded concurrency.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from leases.core.errors import InputError
from leases.core.models import GpuSample, Node, NodeHealth
from leases.core.promsource import PromTarget, masked, plain_token_refusal, quote
from leases.core.textsafe import visible
from leases.core.tokenfile import read_token
from leases.notify.host import refusal
from leases.telemetry.nvsmi import MAX_GPU_INDEX, MAX_GPUS
from leases.telemetry.promtarget import target_of

# dcgm-exporter's metric (default-counters.csv; FB in MiB, power in W, clocks in MHz) ->
# the GpuSample field it fills. FB_FREE and FB_RESERVED only add up to the total.
METRICS: Mapping[str, str] = {
    "DCGM_FI_DEV_GPU_UTIL": "util_gpu",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "util_mem",
    "DCGM_FI_DEV_FB_USED": "mem_used_mib",
    "DCGM_FI_DEV_FB_FREE": "",
    "DCGM_FI_DEV_FB_RESERVED": "",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "power_limit_w",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_FAN_SPEED": "fan_pct",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_uncorrected",
    "DCGM_FI_DEV_XID_ERRORS": "",
}
EXTRA_XID = "xid"  # the last XID error dcgm-exporter saw (0: none), in GpuSample.extra
MAX_BYTES = 4 * 1024 * 1024
# Prometheus drops a series at the first failed scrape (a staleness marker); an old sample
# still answered (federation, remote write, a frozen exporter) is stale past this.
STALE_INTERVALS = 4
STALE_MIN_S = 150.0
# A sample dated further ahead of zuka's clock than this is refused (a wrong clock on
# either side, or a forged answer): it would hide staleness and, once stored, make every
# later reading look late. Within it a sample's time is taken as at most zuka's now.
FUTURE_SKEW_S = 300.0
MAX_SERIES = MAX_GPUS * len(METRICS)
_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_UNKNOWN = frozenset({"nan", "+inf", "-inf", "inf"})
_MAX_LABEL = 256


# An instant query answers every sample at the query's evaluation time, not the time it
# was scraped: the query also asks the time of each GPU's utilisation sample (timestamp()
# of one metric: of several it would hold series told apart by their dropped names only,
# which Prometheus refuses), under this name, for the readings' `at` and staleness.
SAMPLE_TIME = "zuka_sample_time"
_DATED_BY = "DCGM_FI_DEV_GPU_UTIL"


def selector(target: PromTarget) -> str:
    """The PromQL the node is read with: every metric AND the node's matchers, or each
    GPU's sample time as SAMPLE_TIME."""
    names = "|".join(METRICS)
    matchers = target.selector_matchers()
    picked = f"{{__name__=~{quote(names)}, {matchers}}}"
    times = f"max by (gpu, UUID, Hostname) (timestamp({_DATED_BY}{{{matchers}}}))"
    return f'{picked} or label_replace({times}, "__name__", "{SAMPLE_TIME}", "", "")'


@dataclass(frozen=True)
class PromProblem:
    health: NodeHealth
    detail: str


@dataclass(frozen=True)
class PromReading:
    """What one read gave: samples (empty when Prometheus holds nothing newer than the last
    read), or the problem that makes the node's state."""

    samples: tuple[GpuSample, ...] = ()
    problem: PromProblem | None = None

    @classmethod
    def failed(cls, health: NodeHealth, words: str) -> PromReading:
        return cls(problem=PromProblem(health, words))


class _Refused(Exception):
    def __init__(self, health: NodeHealth, words: str) -> None:
        super().__init__(words)
        self.health = health
        self.words = words


def _number(raw: object) -> float | None:
    """A sample value as Prometheus writes it (a JSON string): None for NaN/Inf."""
    if not isinstance(raw, str) or len(raw) > 64:
        raise _Refused(NodeHealth.GARBAGE, "a sample value that is not a number string")
    if raw.lower() in _UNKNOWN:
        return None
    if not _NUMBER.fullmatch(raw):
        raise _Refused(NodeHealth.GARBAGE, f"a sample value {visible(raw, 40)!r} is not a number")
    value = float(raw)
    return value if math.isfinite(value) else None


def _label(metric: Mapping[str, Any], name: str) -> str:
    value = metric.get(name, "")
    if not isinstance(value, str) or len(value) > _MAX_LABEL:
        raise _Refused(NodeHealth.GARBAGE, f"label {name} is not a short string")
    return value


@dataclass
class _Gpu:
    index: int
    uuid: str
    name: str
    at: float = 0.0
    values: dict[str, float | None] = field(default_factory=dict)


def _network_words(exc: Exception) -> str:
    """aiohttp's failure in plain words (its own text names internals: `ssl:default`,
    `_ssl.c:1006`); the URL is added by the caller."""
    import aiohttp

    inner = getattr(exc, "os_error", None)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "Prometheus's TLS certificate is not trusted here (a private CA, a wrong name?)"
    if isinstance(exc, aiohttp.ClientSSLError) or isinstance(inner, ssl.SSLError):
        return "the TLS handshake failed: is the URL https where Prometheus speaks http?"
    if isinstance(inner, socket.gaierror):
        return "Prometheus's host name is not found"
    if isinstance(inner, ConnectionRefusedError):
        return "connection refused: nothing listens at that port"
    if isinstance(inner, OSError) and inner.strerror:
        return f"Prometheus cannot be reached: {visible(inner.strerror, 100).lower()}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "Prometheus closed the connection without answering (http where it speaks https?)"
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        return "the answer broke off or was not HTTP"
    return "Prometheus cannot be reached"


def _http_refused(status: int, otherwise: str) -> _Refused:
    """An answer that is no Prometheus API answer: a server error is Prometheus's trouble
    (unreachable); a 404 or another 4xx means the URL is not a Prometheus's (garbage)."""
    if status >= 500 or status == 429:
        return _Refused(NodeHealth.UNREACHABLE, f"Prometheus answered HTTP {status}")
    if status != 200:
        return _Refused(
            NodeHealth.GARBAGE,
            f"HTTP {status}: no Prometheus API at this URL (is --url Prometheus's base URL,"
            " not dcgm-exporter's?)",
        )
    return _Refused(NodeHealth.GARBAGE, otherwise)


# Prometheus's errorType -> the node's state: a query it refused is the ledger's matchers'
# fault; a timeout is a timeout; the rest is Prometheus's trouble.
_ERROR_STATES = {
    "bad_data": NodeHealth.REFUSED,
    "timeout": NodeHealth.TIMEOUT,
    "canceled": NodeHealth.TIMEOUT,
}


def _series(body: object) -> list[Any]:
    if not isinstance(body, dict):
        raise _Refused(NodeHealth.GARBAGE, "the answer is not a JSON object")
    if body.get("status") != "success":
        said = body.get("error")
        said = visible(said, 200) if isinstance(said, str) else "no reason given"
        kind = body.get("errorType")
        health = (
            _ERROR_STATES.get(kind, NodeHealth.UNREACHABLE)
            if isinstance(kind, str)
            else (NodeHealth.UNREACHABLE)
        )
        raise _Refused(health, f"Prometheus answered an error: {said}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise _Refused(NodeHealth.GARBAGE, "the answer is not an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise _Refused(NodeHealth.GARBAGE, "the answer's result is not a list")
    if len(result) > MAX_SERIES:
        raise _Refused(NodeHealth.GARBAGE, f"more than {MAX_SERIES} series in the answer")
    return result


def parse_answer(body: object, node: str) -> list[GpuSample]:
    """The /api/v1/query answer (JSON already loaded) as one sample per GPU, ordered by
    index. Raises _Refused for anything that is not a reading of one node's GPUs."""
    gpus: dict[int, _Gpu] = {}
    scraped: dict[int, float] = {}
    hosts: set[str] = set()
    for item in _series(body):
        if not isinstance(item, dict):
            raise _Refused(NodeHealth.GARBAGE, "a series that is not an object")
        metric, value = item.get("metric"), item.get("value")
        if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
            raise _Refused(NodeHealth.GARBAGE, "a series without its labels and value")
        name = _label(metric, "__name__")
        if name not in METRICS and name != SAMPLE_TIME:
            continue
        index_text = _label(metric, "gpu")
        if not index_text.isascii() or not index_text.isdigit() or len(index_text) > 3:
            raise _Refused(NodeHealth.GARBAGE, f"a series without a GPU index ({name})")
        index = int(index_text)
        if index > MAX_GPU_INDEX:
            raise _Refused(NodeHealth.GARBAGE, f"GPU index {index} out of range")
        ts = value[0]
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not 0 < ts < 1e11:
            raise _Refused(NodeHealth.GARBAGE, "a sample timestamp that is not a time")
        if name == SAMPLE_TIME:
            scraped[index] = _time(value[1])
            continue
        uuid = _label(metric, "UUID")
        hosts.add(_label(metric, "Hostname"))
        if len(hosts) > 1:
            shown = ", ".join(repr(visible(h, 40)) for h in sorted(hosts))
            raise _Refused(
                NodeHealth.GARBAGE,
                f"series of hosts {shown}: the matchers pick more than one node's GPUs",
            )
        gpu = gpus.setdefault(index, _Gpu(index, uuid, _label(metric, "modelName")))
        if name in gpu.values or gpu.uuid != uuid:
            host = visible(_label(metric, "Hostname"), 60)
            raise _Refused(
                NodeHealth.GARBAGE,
                f"GPU {index} appears twice ({name}; Hostname {host!r}): the matchers pick"
                " more than one node's GPUs",
            )
        gpu.values[name] = _number(value[1])
        gpu.at = max(gpu.at, float(ts))
    if len(gpus) > MAX_GPUS:
        raise _Refused(NodeHealth.GARBAGE, f"more than {MAX_GPUS} GPUs")
    for index, gpu in gpus.items():
        gpu.at = scraped.get(index) or gpu.at  # the scrape's time, else the query's
    return [_sample(g, node) for _, g in sorted(gpus.items())]


def _time(raw: object) -> float:
    """A SAMPLE_TIME value: seconds since 1970 as a number string."""
    value = _number(raw)
    if value is None or not 0 < value < 1e11:
        raise _Refused(NodeHealth.GARBAGE, "a sample time that is not a time")
    return value


def _sample(gpu: _Gpu, node: str) -> GpuSample:
    v = gpu.values
    kw: dict[str, Any] = {f: v.get(m) for m, f in METRICS.items() if f}
    ecc = kw.pop("ecc_uncorrected")
    parts = [v.get(m) for m in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")]
    total = None
    if all(p is not None for p in parts):
        total = sum(p for p in parts if p is not None) + (v.get("DCGM_FI_DEV_FB_RESERVED") or 0)
    xid = v.get("DCGM_FI_DEV_XID_ERRORS")
    if xid is not None and not 0 <= xid < 2**32:
        raise _Refused(NodeHealth.GARBAGE, f"GPU {gpu.index}: XID {xid:g} is not an XID")
    return GpuSample(
        node=node,
        at=datetime.fromtimestamp(gpu.at, UTC),
        index=gpu.index,
        uuid=visible(gpu.uuid, 100),
        name=visible(gpu.name, 100),
        mem_total_mib=total,
        ecc_uncorrected=None if ecc is None else int(ecc),
        extra={} if xid is None else {EXTRA_XID: str(int(xid))},
        **kw,
    )


def _token(path: str) -> str:
    """The bearer token, checked as every token file is (leases.core.tokenfile): never a
    FIFO, a symbolic link, a file others may read or another user's."""
    try:
        return read_token(path, "prom_token_file", "the Prometheus queries").decode("ascii")
    except InputError as exc:
        raise _Refused(NodeHealth.REFUSED, f"no token sent: the token file {exc.reason}") from None


class PromReader:
    """Reads nodes from Prometheus; one HTTP session for all of a poller's nodes."""

    def __init__(
        self,
        *,
        timeout_s: float = 5.0,
        max_bytes: int = MAX_BYTES,
        concurrency: int = 16,
        resolver: Any = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._limit = asyncio.Semaphore(concurrency)
        self._concurrency = concurrency
        self._resolver = resolver
        self._session: Any = None
        self._last: dict[str, datetime] = {}

    def _open(self) -> Any:
        import aiohttp  # only where a node is read from Prometheus (a cold CLI skips it)

        from leases.telemetry.promresolve import GuardedResolver

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._concurrency, resolver=GuardedResolver(self._resolver)
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout_s)
            )
        return self._session

    async def read(self, node: Node, now: datetime, interval_s: float) -> PromReading:
        """One node's readings; never raises for what the server does. A newest sample
        older than STALE_INTERVALS poll intervals (STALE_MIN_S at least) before now is a
        stale node, not a reading."""
        stale_s = max(STALE_MIN_S, STALE_INTERVALS * interval_s)
        try:
            target = target_of(node)
        except InputError as exc:
            return PromReading.failed(NodeHealth.REFUSED, exc.reason)
        where = masked(target.url)
        try:
            # One deadline for the whole read: the wait for a free connection, the first
            # read's import of aiohttp (seconds on a loaded machine) and the request.
            async with asyncio.timeout(self.timeout_s):
                samples = await self._query(node.name, target, where)
        except _Refused as exc:
            return PromReading.failed(exc.health, f"{exc.words} ({where})")
        except TimeoutError:
            said = f"Prometheus did not answer within {self.timeout_s:g} s ({where})"
            return PromReading.failed(NodeHealth.TIMEOUT, said)
        if not samples:
            # Prometheus drops a series a scrape no longer finds (a staleness marker): a
            # dcgm-exporter that died looks like this, and so do matchers that pick nothing.
            # Neither is a lost GPU (that alarm is for nvidia-smi's own word).
            return PromReading.failed(
                NodeHealth.TIMEOUT,
                f"no series match {{{target.selector_matchers()}}} at Prometheus {where}:"
                " dcgm-exporter or its scrape stopped, or the matchers pick nothing",
            )
        newest = max(s.at for s in samples)
        ahead = (newest - now).total_seconds()
        if ahead > FUTURE_SKEW_S:
            return PromReading.failed(
                NodeHealth.GARBAGE,
                f"a sample dated {newest:%Y-%m-%d %H:%M:%S} UTC, {ahead:.0f} s ahead of"
                f" this machine's clock (more than {FUTURE_SKEW_S:.0f} s): is a clock"
                f" wrong? (Prometheus {where})",
            )
        oldest = min(s.at for s in samples)
        # A sample is dated by its scrape, at most now, and not before the minute now is in:
        # the poller closes a minute once the clock has left it (MinuteAccumulator), and a
        # sample of that minute read after (a scrape's lag) would write that minute again
        # with itself alone. It is counted in the minute it was read in instead.
        floor = now.replace(second=0, microsecond=0)
        samples = [
            s if floor <= s.at <= now else replace(s, at=min(max(s.at, floor), now))
            for s in samples
        ]
        age = (now - oldest).total_seconds()
        if age > stale_s:
            return PromReading.failed(
                NodeHealth.TIMEOUT,
                f"stale: Prometheus {where} holds no sample newer than {age:.0f} s"
                f" (more than {stale_s:.0f} s): dcgm-exporter or its scrape has stopped",
            )
        if self._last.get(node.name) == newest:
            return PromReading()  # nothing newer since the last read
        self._last[node.name] = newest
        return PromReading(samples=tuple(samples))

    async def _query(self, node: str, target: PromTarget, where: str) -> list[GpuSample]:
        import aiohttp

        from leases.telemetry.promresolve import RefusedHost

        said = refusal(urllib.parse.urlsplit(target.url).hostname or "")
        if said is not None:
            raise _Refused(NodeHealth.REFUSED, f"not read: {said}")
        headers = {"Accept": "application/json"}
        if target.token_file:
            plain = plain_token_refusal(target.url)
            if plain is not None:
                raise _Refused(NodeHealth.REFUSED, f"no token sent: {plain}")
            headers["Authorization"] = f"Bearer {_token(target.token_file)}"
        params = {"query": selector(target)}
        try:
            async with self._limit:
                session = self._open()
                async with session.get(
                    f"{target.url}/api/v1/query", params=params, headers=headers,
                    allow_redirects=False,
                ) as resp:  # fmt: skip
                    body = await self._body(resp)
                    status = resp.status
        except TimeoutError:
            raise _Refused(
                NodeHealth.TIMEOUT, f"Prometheus did not answer within {self.timeout_s:g} s"
            ) from None
        except aiohttp.ClientError as exc:
            refused = getattr(exc, "os_error", None)
            if isinstance(refused, RefusedHost):
                raise _Refused(NodeHealth.REFUSED, str(refused)) from None
            raise _Refused(NodeHealth.UNREACHABLE, _network_words(exc)) from None
        if status in (401, 403):
            raise _Refused(
                NodeHealth.AUTH_FAILED,
                f"Prometheus refused the credentials (HTTP {status}): check --token-file",
            )
        try:
            loaded = json.loads(body)
        except (ValueError, RecursionError):
            raise _http_refused(status, "the answer is not JSON") from None
        if status != 200 and not (isinstance(loaded, dict) and "error" in loaded):
            raise _http_refused(status, "")
        return parse_answer(loaded, node)

    async def _body(self, resp: Any) -> bytes:
        length = resp.content_length
        if length is not None and length > self.max_bytes:
            raise _Refused(NodeHealth.GARBAGE, f"an answer larger than {self.max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(65536):
            size += len(chunk)
            if size > self.max_bytes:
                raise _Refused(NodeHealth.GARBAGE, f"an answer larger than {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
