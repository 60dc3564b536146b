"""`zuka demo` and `zuka web --demo` killed as a closed terminal or a `kill` kills them:
their folder (the ledger and the simulated nodes' private key) is removed as on `q`.
Real processes, on a real pseudo-terminal for the dashboard."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waiting import wait_until_sync

STARTED_S = 120.0  # 12 simulated nodes with 30 days of history, on a loaded 2-core machine


def _env(tmp: Path) -> dict[str, str]:
    # TMPDIR: the demo's folder is made where the test can see it.
    return {**os.environ, "TMPDIR": str(tmp), "HOME": str(tmp), "TERM": "xterm-256color"}


def _folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("zuka-*demo-*"))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    out = tmp_path / "tmp"
    out.mkdir()
    return out


class Terminal:
    """A pseudo-terminal whose output is read (and dropped) as it comes."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.seen = b""

    def read(self) -> bytes:
        try:
            while select.select([self.master], [], [], 0)[0]:
                chunk = os.read(self.master, 65536)
                if not chunk:
                    break
                self.seen = (self.seen + chunk)[-200_000:]
        except OSError:  # the dashboard's side closed
            pass
        return self.seen

    def close(self) -> None:
        os.close(self.master)  # as tmux kill-session: the terminal is gone


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    yield term
    for fd in (term.master, term.slave):
        with contextlib.suppress(OSError):  # closed already
            os.close(fd)


def _stopped(proc: subprocess.Popen[bytes], term: Terminal | None = None) -> int:
    def done() -> bool:
        if term is not None:
            term.read()
        return proc.poll() is not None

    try:
        # Generous: the exit closes the poller, stops the simulated fleet and removes the
        # folder, and a loaded CI machine once took longer than 30 s.
        wait_until_sync(done, timeout=90, what="the process to end")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode


@pytest.mark.parametrize(("sig", "hang_up"), [(signal.SIGHUP, True), (signal.SIGTERM, False)])
def test_zuka_demo_killed_leaves_no_folder(
    tmp: Path, terminal: Terminal, sig: signal.Signals, hang_up: bool
) -> None:
    argv = [sys.executable, "-m", "tui.cli.main", "demo"]
    s = terminal.slave
    proc = subprocess.Popen(
        argv, stdin=s, stdout=s, stderr=s, env=_env(tmp), start_new_session=True
    )
    try:
        wait_until_sync(
            lambda: proc.poll() is not None or b"a100-monthly-1" in terminal.read(),
            timeout=STARTED_S,
            what="the dashboard to draw the demo fleet",
        )
        assert proc.poll() is None, terminal.seen[-2000:]
        (folder,) = _folders(tmp)
        assert (folder / "demo.db").exists()
        assert list(folder.glob("demo.db.sim/id_ed25519"))  # the key that must not stay
        proc.send_signal(sig)
        if hang_up:
            terminal.close()
        assert _stopped(proc, None if hang_up else terminal) == 128 + sig
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _folders(tmp) == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_zuka_web_demo_killed_leaves_no_folder(tmp: Path, sig: signal.Signals) -> None:
    port = _free_port()
    config = tmp / "config.toml"
    config.write_text("")
    argv = [sys.executable, "-m", "tui.cli.main", "web", "--demo", "--port", str(port),
            "--config", str(config)]  # fmt: skip
    log = (tmp / "server.log").open("wb")
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=_env(tmp), start_new_session=True
    )
    try:
        wait_until_sync(
            lambda: proc.poll() is not None or _listening(port),
            timeout=STARTED_S,
            what="zuka web --demo to listen",
        )
        assert proc.poll() is None, (tmp / "server.log").read_text()
        (folder,) = _folders(tmp)
        assert (folder / "demo.db").exists()
        proc.send_signal(sig)
        _stopped(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    assert _folders(tmp) == []
