"""`zuka collect`'s metrics options refused before the collector starts (exit 2, the
option named, no lock taken, nothing polled), and a collector serving its Unix socket."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from leases.ledger.store import Ledger
from leases.sim.ledger import register_sim_nodes, serve_ledger_nodes
from leases.telemetry.lock import PollerLock
from tests.support.cli import Cli
from tests.support.tokens import token_file
from tests.support.waiting import wait_until_sync

ZUKA = [sys.executable, "-m", "tui.cli.main"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--metrics-listen", "localhost:9400"], "--metrics-listen: 'localhost' is not an IP"),
        (["--metrics-listen", "127.0.0.1:0"], "--metrics-listen: the port must be a number"),
        (["--metrics-listen", "9400"], "--metrics-listen: no port"),
        (["--metrics-listen", "0.0.0.0:9400"], "--metrics-listen: an address other machines"),
        (["--metrics-listen", "127.0.0.1:9400", "--metrics-money"],
         "--metrics-money: money figures over TCP"),
        (["--metrics-money"], "--metrics-money: needs --metrics-listen ADDRESS"),
        (["--metrics-token-file", "/nonexistent"],
         "--metrics-token-file: needs --metrics-listen ADDRESS"),
        (["--metrics-listen", "127.0.0.1:9400", "--metrics-token-file", "/nonexistent"],
         "--metrics-token-file: cannot be read"),
        (["--metrics-listen", "unix:/tmp/m.sock", "--metrics-token-file", "/nonexistent"],
         "--metrics-token-file: a Unix socket"),
    ],
)  # fmt: skip
def test_refused_before_it_starts(z: Cli, ledger_path: Path, args: list[str], said: str) -> None:
    r = z("collect", *args)
    assert r.code == 2 and r.err.startswith(f"zuka: error: {said}"), r.err
    assert "metrics_" not in r.err  # the option as typed, never its internal name
    assert PollerLock(ledger_path).holder() is None


def test_a_token_file_others_can_read_is_refused(z: Cli, tmp_path: Path) -> None:
    token = token_file(tmp_path, "secret\n", 0o644, name="token")
    r = z("collect", "--metrics-listen", "127.0.0.1:9400", "--metrics-token-file", str(token))
    assert (
        r.code == 2 and "open to its group and others (mode 0644)" in r.err and "chmod 600" in r.err
    ), r.err
    assert "secret" not in r.err + r.out


@pytest.fixture
def sim_ledger(ledger_path: Path) -> Iterator[Path]:
    with Ledger.open(ledger_path) as ledger:
        nodes = register_sim_nodes(ledger, 2, datetime.now(UTC))
        runner = serve_ledger_nodes(ledger, ledger_path, nodes)
    yield ledger_path
    runner.stop()


def _get(path: Path) -> tuple[int, str]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: zuka\r\n\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode()


def test_collect_serves_money_on_its_unix_socket(sim_ledger: Path, tmp_path: Path) -> None:
    sock = tmp_path / "m.sock"
    collector = subprocess.Popen(
        [*ZUKA, "collect", "--ledger", str(sim_ledger), "--interval", "0.5",
         "--metrics-listen", f"unix:{sock}", "--metrics-money"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert collector.stdout is not None
        lines = [collector.stdout.readline(), collector.stdout.readline()]
        assert f"metrics at unix:{sock} (mode 0600)" in lines[1], lines
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600

        def read() -> dict[str, list[dict[str, str]]] | None:
            code, body = _get(sock)
            assert code == 200
            got: dict[str, list[dict[str, str]]] = {}
            for family in text_string_to_metric_families(body):
                for s in family.samples:
                    got.setdefault(s.name, []).append(s.labels)
            return got if len(got.get("zuka_gpu_power_watts", [])) == 16 else None

        got = wait_until_sync(read, interval=0.2, what="both nodes' GPUs on the socket")
        assert {x["node"] for x in got["zuka_lease_cost_to_date_yuan"]} == {"sim-001", "sim-002"}
        assert len(got["zuka_node_up"]) == 2
    finally:
        collector.send_signal(signal.SIGTERM)
        _, err = collector.communicate(timeout=30)
    assert collector.returncode == 0, err
    assert not sock.exists()  # taken away with the collector
