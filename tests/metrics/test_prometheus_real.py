"""A real Prometheus (Debian's) scraping a real `zuka collect --metrics-listen` over a
bearer token, on simulated nodes over real SSH: zuka's GPU history read back through
PromQL. A second job without the token proves the endpoint refuses it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from tests.metrics.test_grafana import dashboard, exprs, runnable
from tests.support.prometheus import free_port, prometheus_binary, start_prometheus
from tests.support.tokens import token_file
from tests.support.waiting import wait_until_sync

ZUKA = [sys.executable, "-m", "tui.cli.main"]
NODES = 2

pytestmark = pytest.mark.slow


@pytest.fixture
def sim_ledger(ledger_path: Path) -> Iterator[Path]:
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, NODES, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    yield ledger_path
    runner.stop()


def test_prometheus_scrapes_zuka_collect(sim_ledger: Path, tmp_path: Path) -> None:
    prometheus_binary()  # skipped (failed under CI) before anything starts without it
    token = token_file(tmp_path, "zk-prom-test-token\n", name="token")
    port = free_port()
    collector = subprocess.Popen(
        [*ZUKA, "collect", "--ledger", str(sim_ledger), "--interval", "0.5", "--flush", "0.5",
         "--metrics-listen", f"127.0.0.1:{port}", "--metrics-token-file", str(token),
         "--metrics-money"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    prom = None
    try:
        assert collector.stdout is not None
        lines = [collector.stdout.readline(), collector.stdout.readline()]
        assert f"metrics at http://127.0.0.1:{port}/metrics" in lines[1], (
            lines, collector.stderr.read() if collector.poll() is not None else "")  # fmt: skip
        target = {"targets": [f"127.0.0.1:{port}"]}
        prom = start_prometheus(tmp_path, [
            {"job_name": "zuka", "scrape_interval": "1s", "static_configs": [target],
             "authorization": {"type": "Bearer", "credentials_file": str(token)}},
            {"job_name": "no-token", "scrape_interval": "1s", "static_configs": [target]},
        ])  # fmt: skip
        # Two scrapes or more of every GPU: its history, read back through PromQL.
        history = 'count_over_time(zuka_gpu_utilization_ratio{job="zuka"}[5m]) >= 2'
        rows = wait_until_sync(lambda: len(prom.query(history)) == NODES * 8 and prom.query(history),
                               timeout=90, interval=0.5, what="two scrapes of every GPU")  # fmt: skip
        assert {r["metric"]["node"] for r in rows} == {f"sim-{i:03d}" for i in range(1, NODES + 1)}
        util = prom.query('zuka_gpu_utilization_ratio{job="zuka"}')
        assert len(util) == NODES * 8
        assert all(0 <= float(r["value"][1]) <= 1 for r in util)
        assert {r["metric"]["channel"] for r in util} <= {"cloud", "platform", "colo"}
        assert all(r["metric"]["provider"] and r["metric"]["uuid"].startswith("GPU-") for r in util)
        ups = prom.query('zuka_node_up{job="zuka"} == 1')
        assert len(ups) == NODES
        assert {r["metric"]["lease"] for r in prom.query("zuka_lease_cost_to_date_yuan")}
        # The same endpoint without the token: scraped and refused (401), so down.
        down = wait_until_sync(lambda: prom.query('up{job="no-token"} == 0'), timeout=30,
                               what="the job without a token to be down")  # fmt: skip
        assert len(down) == 1
        assert prom.query('up{job="zuka"}')[0]["value"][1] == "1"
        targets = prom.api("/api/v1/targets")["activeTargets"]
        refused = next(t for t in targets if t["labels"]["job"] == "no-token")
        assert "401" in refused["lastError"], refused
        assert not prom.query('zuka_gpu_utilization_ratio{job="no-token"}')
        # The Grafana dashboard's every expression runs on this Prometheus (a label_values
        # variable as the selector it reads); those on GPUs and nodes find series.
        for expr in exprs(dashboard()):
            promql = runnable(re.sub(r"^label_values\((.*), \w+\)$", r"\1", expr))
            found = prom.query(promql)  # a parse error fails in Prom.api
            if "zuka_gpu_" in promql or "zuka_node_" in promql:
                assert found, promql
    finally:
        if prom is not None:
            prom.stop()
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=30)
    assert collector.returncode == 0, err
