"""A real Prometheus server for tests (Debian's package; TESTING.md "Prometheus"): its
own config, its TSDB in the test's tmp_path, 127.0.0.1 on a free port.

    prom = start_prometheus(tmp_path, [{"job_name": "zuka", "scrape_interval": "1s",
                                        "static_configs": [{"targets": ["127.0.0.1:9400"]}]}])
    try:
        wait_until_sync(lambda: prom.query("up == 1"), timeout=60)
    finally:
        prom.stop()

Without the binary a test is skipped, except under CI (CI=true), where .ci/run installs it:
there it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until_sync

BINARY = "prometheus"


def prometheus_binary() -> str:
    """The prometheus program; skipped without it, failed without it under CI."""
    found = shutil.which(BINARY) or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is not installed, and CI installs it (.ci/run)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    return found


def free_port() -> int:
    """A port nothing listens on now (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prom:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: [{"metric": {labels}, "value": [t, "v"]}, ...]."""
        data = self.api("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            if self.process.poll() is not None:
                raise AssertionError(
                    f"prometheus exited {self.process.returncode}: {self.log.read_text()[-2000:]}"
                ) from None
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_prometheus(tmp_path: Path, scrape_configs: list[dict[str, Any]]) -> Prom:
    """Prometheus scraping these jobs (JSON is YAML), ready to answer queries."""
    binary = prometheus_binary()
    home = tmp_path / "prometheus"
    home.mkdir(exist_ok=True)
    config = home / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": scrape_configs,
    }))  # fmt: skip
    last: AssertionError | None = None
    for _ in range(3):  # another process may take the free port first
        port = free_port()
        log = home / f"log-{port}.txt"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT, cwd=home,
            )  # fmt: skip
        prom = Prom(f"http://127.0.0.1:{port}", process, log)
        try:
            wait_until_sync(prom.ready, timeout=60, interval=0.1, what="prometheus to be ready")
            return prom
        except AssertionError as exc:
            prom.stop()
            last = exc
    assert last is not None
    raise last
