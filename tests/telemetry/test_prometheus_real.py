"""The real one: Debian's Prometheus scrapes a dcgm-exporter-format endpoint, and zuka
reads a node's GPU readings through PromQL and keeps them as history, as it keeps an SSH
node's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from leases.core.clock import utc_now
from leases.core.models import NodeHealth
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.housekeeping import fleet_nodes
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from tests.support.dcgmexporter import UTILS, DcgmExporter
from tests.support.prometheus import Prom, start_prometheus
from tests.support.waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[DcgmExporter, DcgmExporter, Prom]]:
    mine = DcgmExporter("gpu-07").start()
    other = DcgmExporter("gpu-08").start()  # another node on the same Prometheus
    prom = start_prometheus(
        tmp_path,
        [{"job_name": "dcgm", "static_configs": [{"targets": [mine.target, other.target]}]}],
    )
    try:
        yield mine, other, prom
    finally:
        prom.stop()
        mine.stop()
        other.stop()


async def test_zuka_reads_gpu_readings_and_history_back_through_promql(
    served: tuple[DcgmExporter, DcgmExporter, Prom], tmp_path: Path
) -> None:
    mine, _, prom = served
    # Prometheus has scraped both exporters.
    wait_until_sync(
        lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 4, what="both exporters scraped"
    )
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({
        "name": "gpu-07", "ssh_host": "10.0.0.7", "reading_source": "prometheus",
        "prom_url": prom.url,  # the default matcher: Hostname="gpu-07"
    }))  # fmt: skip
    later = [timedelta(0)]  # the real clock (Prometheus's samples are real time), moved on

    def clock() -> datetime:
        return utc_now() + later[0]

    poller = Poller(
        fleet_nodes(ledger)[0], pool=SshPool(SshOptions()), clock=clock,
        store=HistoryStore(ledger), interval_s=0.3,
    )  # fmt: skip
    readings: list[tuple[float | None, float | None]] = []
    poller.on_update = lambda s: readings.append(
        (s.samples[0].util_gpu, s.samples[1].util_gpu) if s.samples else (None, None)
    )
    start = utc_now()
    stop = asyncio.Event()
    task = asyncio.create_task(poller.run(stop, "exec"))
    try:
        # A few sweeps, each a new scrape: readings of several different values.
        await wait_until(
            lambda: len({r for r in readings if r[0] is not None}) >= 3,
            timeout=60,
            what="three different readings through Prometheus",
        )
    finally:
        stop.set()
        await task
    status = poller.statuses["gpu-07"]
    assert status.health is NodeHealth.OK, status.detail
    gpu0 = status.samples[0]
    assert (gpu0.uuid, gpu0.name) == ("GPU-5fd4c8a2-0000", "NVIDIA H100 80GB HBM3")
    assert gpu0.mem_total_mib == 81559 and gpu0.sm_clock_mhz == 1980
    # Only this node's GPUs (gpu-08's are on the same Prometheus), and only values served.
    for util0, util1 in readings:
        if util0 is not None:
            assert util0 in mine.served and util1 == util0 + 1
    # The history holds them: two minutes on, the poller's flush closes the minute still
    # open and writes it with the others.
    later[0] = timedelta(minutes=2)
    poller.flush()
    end = clock()
    minutes = HistoryStore(ledger).minutes("gpu-07", start - timedelta(minutes=1), end)
    assert minutes, "no minute of history written"
    gpu0_minutes = [g for m in minutes for g in m.gpus if g.index == 0]
    assert sum(g.readings for g in gpu0_minutes) >= 3
    assert {g.util_max for g in gpu0_minutes} <= set(UTILS)
    for g in gpu0_minutes:
        assert g.util_mean is not None and min(UTILS) <= g.util_mean <= max(UTILS)
    await poller.close()
    ledger.close()


async def test_a_matcher_picking_two_nodes_is_the_nodes_state(
    served: tuple[DcgmExporter, DcgmExporter, Prom], tmp_path: Path
) -> None:
    _, _, prom = served
    wait_until_sync(
        lambda: len(prom.query("DCGM_FI_DEV_GPU_UTIL")) == 4, what="both exporters scraped"
    )
    ledger = Ledger.open(tmp_path / "l.db")
    ledger.add_node(records.node_from({
        "name": "gpu-07", "ssh_host": "10.0.0.7", "reading_source": "prometheus",
        "prom_url": prom.url, "prom_match": 'Hostname=~"gpu-0[78]"',
    }))  # fmt: skip
    poller = Poller(fleet_nodes(ledger)[0], pool=SshPool(SshOptions()))
    try:
        status = (await poller.sweep())["gpu-07"]
    finally:
        await poller.close()
        ledger.close()
    assert status.health is NodeHealth.GARBAGE
    assert "more than one node" in status.detail and prom.url in status.detail
