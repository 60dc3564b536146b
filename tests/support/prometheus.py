"""A real Prometheus (Debian's /usr/bin/prometheus, TESTING.md "Prometheus") for tests:
run in the foreground with its own config, storage in tmp_path and a port of its own;
`.query(expr)` runs an instant PromQL query and gives the result's series.

    prom = start_prometheus(tmp_path, [{"job_name": "dcgm", "static_configs":
                                        [{"targets": ["127.0.0.1:9400"]}]}])
    wait_until_sync(lambda: prom.query("DCGM_FI_DEV_GPU_UTIL"))
    prom.stop()

Where the binary is missing the test is skipped, except under CI=true (.ci/run installs
it): there it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until_sync

BINARY = "/usr/bin/prometheus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Prom:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series ([] when none; raises on an error answer)."""
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_prometheus(
    tmp_path: Path, scrape_configs: list[dict[str, Any]], *, interval: str = "1s"
) -> Prom:
    """A running Prometheus scraping `scrape_configs` (Prometheus's own YAML keys, as
    dicts) every `interval`, ready to answer."""
    binary = shutil.which("prometheus") or (BINARY if Path(BINARY).exists() else None)
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{BINARY} is missing: .ci/run installs Debian's prometheus")
        pytest.skip("Debian's prometheus is not installed (apt-get install prometheus)")
    home = tmp_path / "prometheus"
    home.mkdir(exist_ok=True)
    config = home / "prometheus.yml"
    settings = {"scrape_interval": interval, "evaluation_interval": interval}
    # JSON is YAML: no YAML writer needed.
    config.write_text(json.dumps({"global": settings, "scrape_configs": scrape_configs}))
    port = _free_port()
    log = home / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    prom = Prom(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_until_sync(prom.ready, what="prometheus to be ready")
    except BaseException:
        prom.stop()
        raise
    return prom
