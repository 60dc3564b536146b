"""An imported hostile ledger runs nothing, with a real sshd and a user ~/.ssh/config whose
ProxyCommand (with %h) would run for any connect zuka made (the integration tier)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.ledger import transfer
from tests.support.sshd import Sshd, sshd_unavailable

_why_not = sshd_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    with Sshd.start_new([asyncssh.generate_private_key("ssh-ed25519")]) as server:
        yield server


def zuka(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SSH_AUTH_SOCK"} | {"HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "tui.cli.main", *args], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_an_imported_hostile_ledger_runs_nothing(sshd: Sshd, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    marker = home / "MARKER"
    (home / ".ssh" / "config").write_text(
        f"Host *\n  ProxyCommand sh -c 'touch {marker}; exit 1' %h\n"
    )
    ledger = tmp_path / "ledger.db"
    good = {"name": "real", "ssh_host": "127.0.0.1", "ssh_port": sshd.port, "ssh_user": sshd.user}
    hostile = [
        {**good, "name": "h1", "ssh_host": f"127.0.0.1 -oProxyCommand=touch {marker}"},
        {**good, "name": "h2", "ssh_user": f"{sshd.user}' -oProxyCommand='touch {marker}"},
        {**good, "name": "h3", "ssh_jump": f"127.0.0.1;touch {marker}"},
        {**good, "name": "h4", "ssh_host": f"$(touch {marker})"},
        {**good, "name": "h5", "ssh_host": "127.0.0.1\n[127.0.0.1]:22 ssh-ed25519 AAAA"},
    ]
    # A ledger with no node in it yet (a provider only).
    assert zuka(home, "provider", "add", "Lab", "--kind", "colo",
                "--ledger", str(ledger)).returncode == 0  # fmt: skip
    before = ledger.read_bytes()
    connects = sshd.log().count("Connection from")  # sshd's start probes it once
    for rec in hostile:
        src = tmp_path / f"{rec['name']}.json"
        src.write_text(json.dumps({"format": transfer.FORMAT, "version": transfer.VERSION,
                                   "nodes": [good | {"name": "ok"}, rec]}))  # fmt: skip
        done = zuka(home, "import", str(src), "--ledger", str(ledger))
        assert done.returncode == 2, done.stderr
        assert ledger.read_bytes() == before
    done = zuka(home, "poll", "--once", "--force", "--ledger", str(ledger))
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert sshd.log().count("Connection from") == connects
    # A valid node under that config: zuka reads ~/.ssh/config itself and refuses a node
    # that a ProxyCommand would reach, instead of running it.
    src = tmp_path / "good.json"
    src.write_text(json.dumps({"format": transfer.FORMAT, "version": transfer.VERSION,
                               "nodes": [good]}))  # fmt: skip
    assert zuka(home, "import", str(src), "--ledger", str(ledger)).returncode == 0
    done = zuka(home, "poll", "--once", "--force", "--json", "--ledger", str(ledger))
    assert done.returncode == 1
    assert "proxycommand" in done.stdout.lower()
    assert not marker.exists()
    assert sshd.log().count("Connection from") == connects
    # The control: without the ProxyCommand the same node is reached, so the counts above
    # would have seen a connect that escaped the checks.
    (home / ".ssh" / "config").write_text("Host *\n  ServerAliveInterval 30\n")
    zuka(home, "poll", "--once", "--force", "--ledger", str(ledger))
    assert sshd.log().count("Connection from") > connects
