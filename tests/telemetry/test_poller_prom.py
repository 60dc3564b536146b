"""A node read from Prometheus through the poller: its readings stored as an SSH node's
(latest, minutes), a broken Prometheus or a matcher matching nothing its health and
detail (naming the URL), a gap opened and closed; in stream mode it is read every
interval; its provider's setting applies where the node has none."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from leases.core.errors import InputError
from leases.core.models import Node, NodeHealth
from leases.core.promsource import MAX_MATCH, parse_matchers
from leases.ledger import records, rowaudit
from leases.ledger.store import Ledger
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.housekeeping import fleet_nodes
from leases.telemetry.poller import Poller
from leases.telemetry.promtarget import inherit, target_of
from leases.telemetry.rollups import HistoryStore
from leases.telemetry.wiring import polled_nodes
from tests.support.clock import SetClock
from tests.support.promapi import PromApi, dcgm_series, prom_api, vector
from tests.support.tokens import token_file
from tests.support.waiting import wait_until

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def _serve(api: PromApi, clock: SetClock, util: list[int]) -> None:
    """Each query answers the clock's time and the next utilisation of `util` (the last
    one again when they run out), for GPUs 0 and 1 of gpu-07."""
    served = iter(util)
    last = [util[0]]

    def answer(_r: web.Request) -> web.Response:
        last[0] = next(served, last[0])
        ts = clock.now.timestamp()
        values = {
            "DCGM_FI_DEV_GPU_UTIL": str(last[0]),
            "DCGM_FI_DEV_FB_USED": "1000",
            "DCGM_FI_DEV_FB_FREE": "80000",
            "DCGM_FI_DEV_POWER_USAGE": "300",
        }
        series = dcgm_series("gpu-07", 0, ts, values) + dcgm_series("gpu-07", 1, ts, values)
        return web.json_response(vector(series))

    api.answer = answer


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[PromApi, Ledger, SetClock]]:
    async with prom_api() as api:
        ledger = Ledger.open(tmp_path / "l.db")
        ledger.add_provider(records.provider_from(
            {"name": "k8s", "kind": "colo", "reading_source": "prometheus", "prom_url": api.url}
        ))  # fmt: skip
        ledger.add_node(records.node_from(
            {"name": "gpu-07", "provider": "k8s", "ssh_host": "10.0.0.7", "gpu_count": 2}
        ))  # fmt: skip
        yield api, ledger, SetClock(T0)
        ledger.close()


def _poller(ledger: Ledger, clock: SetClock, interval_s: float = 5.0) -> Poller:
    nodes, refused = fleet_nodes(ledger)
    assert refused == []
    return Poller(
        nodes, pool=SshPool(SshOptions()), clock=clock, store=HistoryStore(ledger),
        interval_s=interval_s,
    )  # fmt: skip


async def test_readings_health_and_history_like_an_ssh_node(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    api, ledger, clock = setup
    _serve(api, clock, [10, 90, 50])
    poller = _poller(ledger, clock)
    try:
        # The provider's source and URL apply, and Hostname="NODE" is its matcher.
        [node] = poller.nodes
        assert node.prom_url == api.url
        for _ in range(3):
            status = (await poller.sweep())["gpu-07"]
            assert status.health is NodeHealth.OK, status.detail
            clock.now += timedelta(seconds=15)
        assert api.queries[0].split(" or ")[0].endswith(', Hostname="gpu-07"}')
        assert [s.util_gpu for s in status.samples] == [50, 50]
        assert status.processes == () and status.host is None  # SSH-only figures
        clock.now = T0 + timedelta(minutes=2)
        poller.flush()
        store = HistoryStore(ledger)
        [minute] = store.minutes("gpu-07", T0, T0 + timedelta(minutes=5))
        assert [g.readings for g in minute.gpus] == [3, 3]
        assert minute.gpus[0].util_mean == pytest.approx(50)
        assert minute.gpus[0].util_max == 90
        latest = {r.node: r for r in store.latest_by_id().values()}["gpu-07"]
        assert latest.health is NodeHealth.OK and len(latest.samples) == 2

        # A broken Prometheus is the node's state, naming the URL; a gap opens and closes.
        api.answer = lambda _r: web.Response(text="down", status=503)
        status = (await poller.sweep())["gpu-07"]
        assert status.health is NodeHealth.UNREACHABLE
        assert "HTTP 503" in status.detail and api.url in status.detail
        assert store.gaps("gpu-07")[-1][1] is None
        api.json(vector([]))
        status = (await poller.sweep())["gpu-07"]
        assert 'no series match {Hostname="gpu-07"}' in status.detail
        assert status.health is NodeHealth.TIMEOUT  # an exporter stopped, or no match
        _serve(api, clock, [20])
        clock.now += timedelta(seconds=30)
        assert (await poller.sweep())["gpu-07"].health is NodeHealth.OK
        assert store.gaps("gpu-07")[-1][1] is not None
    finally:
        await poller.close()


async def test_a_node_of_its_own_wins_over_its_provider(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    _, ledger, _clock = setup
    ledger.update_node("gpu-07", {"reading_source": "ssh"})
    [node] = fleet_nodes(ledger)[0]
    assert node.reading_source is not None and node.reading_source.value == "ssh"
    ledger.update_node("gpu-07", {"reading_source": None, "prom_match": 'Hostname="h7"'})
    [node] = fleet_nodes(ledger)[0]
    assert node.prom_match == 'Hostname="h7"' and node.reading_source is not None


async def test_stream_mode_reads_it_every_interval(setup: tuple[PromApi, Ledger, SetClock]) -> None:
    api, ledger, clock = setup
    _serve(api, clock, [30])
    poller = _poller(ledger, clock, interval_s=0.05)
    seen: list[datetime] = []
    poller.on_update = lambda s: seen.append(s.at) if s.at is not None else None

    def advance() -> None:  # a new Prometheus sample between reads
        clock.now += timedelta(seconds=1)

    stop = asyncio.Event()
    task = asyncio.create_task(poller.run(stop, "stream", flush_s=0.05))
    try:
        for _ in range(3):
            count = len(seen)
            await wait_until(lambda c=count: len(seen) > c, what="another reading")  # type: ignore[misc]
            advance()
        assert poller.statuses["gpu-07"].health is NodeHealth.OK
        assert len(set(seen)) >= 3
    finally:
        stop.set()
        await task
        await poller.close()


async def test_a_prometheus_node_without_url_is_refused_not_crashed(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "l.db")
    try:
        node = ledger.add_node(records.node_from(
            {"name": "n1", "ssh_host": "h", "reading_source": "prometheus"}
        ))  # fmt: skip
        poller = Poller([node], pool=SshPool(SshOptions()), store=HistoryStore(ledger))
        status = (await poller.sweep())["n1"]
        await poller.close()
        assert status.health is NodeHealth.REFUSED and "need a URL" in status.detail
    finally:
        ledger.close()


def test_a_node_read_over_ssh_is_untouched() -> None:
    from leases.telemetry.promtarget import is_prometheus

    assert not is_prometheus(Node("a", ssh=records.node_from({"name": "a", "ssh_host": "h"}).ssh))


async def test_a_figure_out_of_bounds_is_the_nodes_garbage(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    api, ledger, clock = setup

    def answer(_r: web.Request) -> web.Response:
        values = {"DCGM_FI_DEV_GPU_UTIL": "1e9", "DCGM_FI_DEV_FB_USED": "1"}
        return web.json_response(vector(dcgm_series("gpu-07", 0, clock.now.timestamp(), values)))

    api.answer = answer
    poller = _poller(ledger, clock)
    try:
        status = (await poller.sweep())["gpu-07"]
    finally:
        await poller.close()
    assert status.health is NodeHealth.GARBAGE and "util_gpu" in status.detail
    assert HistoryStore(ledger).minutes("gpu-07", T0, T0 + timedelta(hours=1)) == []


def _outside(tmp_path: Path, sql: str, value: str) -> None:
    """An edit by another program (sqlite3 on the ledger file)."""
    conn = sqlite3.connect(tmp_path / "l.db")
    with conn:
        conn.execute(sql, [value])
    conn.close()


async def test_settings_changed_outside_zuka_are_never_read_with_a_token(
    setup: tuple[PromApi, Ledger, SetClock], tmp_path: Path
) -> None:
    api, ledger, clock = setup
    token = token_file(tmp_path, "s3cr3t\n")
    ledger.update_provider("k8s", {"prom_token_file": str(token)})
    _serve(api, clock, [10])
    assert [n.name for n in fleet_nodes(ledger)[0]] == ["gpu-07"]
    # Somebody with the ledger file points the provider's token file elsewhere (a private
    # file of the user's, so that only the drift stops it).
    other = token_file(tmp_path, "ghp_AbCdEf\n", name="other")
    _outside(tmp_path, "UPDATE providers SET prom_token_file = ?", str(other))
    polled, refused = fleet_nodes(ledger)
    assert polled == [] and [n.name for n in refused] == ["gpu-07"]
    pid = ledger.provider("k8s").id
    assert f"the Prometheus settings of provider {pid} were changed outside zuka" in (
        refused[0].problem
    )
    assert f"zuka audit accept provider {pid}" in refused[0].problem
    with pytest.raises(InputError, match="not read from Prometheus with its token"):
        polled_nodes(ledger, ["gpu-07"])
    assert api.auth == []
    # The same edit of the node's own row, the node holding a token of its own (a URL of
    # its own never takes the provider's token).
    rowaudit.accept(ledger, "provider", pid or 0)
    ledger.update_node("gpu-07", {"prom_token_file": str(token)})
    assert [n.name for n in fleet_nodes(ledger)[0]] == ["gpu-07"]
    _outside(tmp_path, "UPDATE nodes SET prom_url = ?", "http://127.0.0.1:1")
    [node] = fleet_nodes(ledger)[1]
    assert "settings of node" in node.problem


async def test_a_nodes_own_url_never_takes_its_providers_token(
    setup: tuple[PromApi, Ledger, SetClock], tmp_path: Path
) -> None:
    api, ledger, _clock = setup
    token = token_file(tmp_path, "s3cr3t\n")
    ledger.update_provider("k8s", {"prom_token_file": str(token)})
    [node] = fleet_nodes(ledger)[0]
    assert node.prom_url == api.url and node.prom_token_file == str(token)
    # The node's own Prometheus (another server): read without the provider's token.
    ledger.update_node("gpu-07", {"prom_url": "https://prom.other.example:9090"})
    [node] = fleet_nodes(ledger)[0]
    assert node.prom_url == "https://prom.other.example:9090" and node.prom_token_file == ""


async def test_a_node_moved_to_a_token_bearing_provider_outside_zuka_is_refused(
    setup: tuple[PromApi, Ledger, SetClock], tmp_path: Path
) -> None:
    _api, ledger, _clock = setup
    token = token_file(tmp_path, "s3cr3t\n")
    ledger.add_provider(records.provider_from(
        {"name": "vault", "kind": "colo", "reading_source": "prometheus",
         "prom_url": "https://prom.vault.example", "prom_token_file": str(token)}
    ))  # fmt: skip
    vault = ledger.provider("vault").id
    _outside(tmp_path, "UPDATE nodes SET provider_id = ?", str(vault))
    polled, refused = fleet_nodes(ledger)
    assert polled == [] and [n.name for n in refused] == ["gpu-07"]
    assert "settings of node" in refused[0].problem


async def test_a_future_sample_is_refused_and_history_resumes(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    api, ledger, clock = setup
    future = datetime(2099, 1, 1, tzinfo=UTC).timestamp()

    def answer(_r: web.Request) -> web.Response:
        ts = future if api.queries and len(api.queries) == 1 else clock.now.timestamp()
        values = {"DCGM_FI_DEV_GPU_UTIL": "40", "DCGM_FI_DEV_FB_USED": "1"}
        return web.json_response(vector(dcgm_series("gpu-07", 0, ts, values)))

    api.answer = answer
    poller = _poller(ledger, clock)
    try:
        status = (await poller.sweep())["gpu-07"]  # the first answer: dated 2099
        assert status.health is NodeHealth.GARBAGE
        assert "a sample dated 2099-01-01 00:00:00 UTC" in status.detail
        assert "ahead of this machine's clock (more than 300 s)" in status.detail
        for _ in range(4):  # good answers after it: read, and kept in history
            clock.now += timedelta(seconds=15)
            status = (await poller.sweep())["gpu-07"]
            assert status.health is NodeHealth.OK, status.detail
            assert status.at == clock.now
        clock.now = T0 + timedelta(minutes=3)
        poller.flush()
    finally:
        await poller.close()
    minutes = HistoryStore(ledger).minutes("gpu-07", T0, T0 + timedelta(minutes=5))
    # 08:00:15, :30, :45, then 08:01:00: every good reading after the future one is kept.
    assert [sum(g.readings for g in m.gpus) for m in minutes] == [3, 1]


async def test_a_sample_a_little_ahead_is_taken_as_now(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    api, ledger, clock = setup
    ahead = clock.now.timestamp() + 60  # within the skew: Prometheus's clock is a bit fast
    api.json(vector(dcgm_series("gpu-07", 0, ahead, {"DCGM_FI_DEV_GPU_UTIL": "40"})))
    poller = _poller(ledger, clock)
    try:
        status = (await poller.sweep())["gpu-07"]
    finally:
        await poller.close()
    assert status.health is NodeHealth.OK and status.at == clock.now
    assert [s.at for s in status.samples] == [clock.now]


async def test_a_scrape_read_after_its_minute_closed_keeps_that_minute_whole(
    setup: tuple[PromApi, Ledger, SetClock],
) -> None:
    api, ledger, clock = setup
    lag = [timedelta(seconds=2)]  # how long before the query Prometheus scraped

    def answer(_r: web.Request) -> web.Response:
        ts = (clock.now - lag[0]).timestamp()
        values = {"DCGM_FI_DEV_GPU_UTIL": "40", "DCGM_FI_DEV_FB_USED": "1"}
        series = dcgm_series("gpu-07", 0, clock.now.timestamp(), values)
        scraped = {"__name__": "zuka_sample_time", "gpu": "0", "UUID": "GPU-gpu-07-0",
                   "Hostname": "gpu-07"}  # fmt: skip
        at = clock.now.timestamp()
        return web.json_response(vector([*series, {"metric": scraped, "value": [at, repr(ts)]}]))

    api.answer = answer
    poller = _poller(ledger, clock)
    try:
        for second in (10, 25, 40, 55):
            clock.now = T0 + timedelta(seconds=second)
            status = (await poller.sweep())["gpu-07"]
            assert status.health is NodeHealth.OK, status.detail
            assert status.at == clock.now - lag[0]  # the scrape's own time
        clock.now = T0 + timedelta(seconds=61)
        poller.flush()  # the flusher (stream mode) closes 08:00 ...
        clock.now = T0 + timedelta(seconds=62)
        lag[0] = timedelta(seconds=4)  # ... and this scrape (08:00:58) is read after it
        assert (await poller.sweep())["gpu-07"].health is NodeHealth.OK
        clock.now = T0 + timedelta(minutes=3)
        poller.flush()
    finally:
        await poller.close()
    minutes = HistoryStore(ledger).minutes("gpu-07", T0, T0 + timedelta(minutes=5))
    # 08:00 keeps its four readings (not overwritten by one late one); 08:01 has the fifth.
    assert [sum(g.readings for g in m.gpus) for m in minutes] == [4, 1]


def test_a_providers_full_matcher_list_still_reads_each_node() -> None:
    # 16 matchers and about 1,000 characters are what a provider may hold; zuka then adds
    # Hostname="NODE" (a 63-character name at most): the node is still read.
    many = ", ".join(f'l{i}="{"v" * 50}"' for i in range(16))
    assert len(parse_matchers(many)) == 16 and len(many) <= MAX_MATCH
    provider = records.provider_from(
        {"name": "k8s", "kind": "colo", "reading_source": "prometheus",
         "prom_url": "https://prom.lab", "prom_match": many}
    )  # fmt: skip
    name = "g" * 63
    node = records.node_from({"name": name, "provider": "k8s", "ssh_host": "10.0.0.7"})
    [inherited] = inherit([node], [provider])
    target = target_of(inherited)
    assert len(target.matchers) == 17 and target.matchers[-1].value == name
