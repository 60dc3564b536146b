"""The SSH cockpit against a real OpenSSH sshd, driven as a person would in tmux: `zuka ssh`
and the dashboard's i key get a shell on the node, a command runs, `exit` brings the
dashboard back on the same node; once the node's host key changes, both refuse it in
polling's words and no shell opens."""

from __future__ import annotations

import asyncio
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import NodeHealth
from leases.ledger.paths import trust_store
from leases.ledger.store import Ledger
from leases.ssh.errors import HostKeyRejected
from leases.ssh.session import NodeSession
from leases.telemetry.wiring import ssh_options
from tests.support.cli import Cli
from tests.support.sshd import Sshd, sshd_unavailable
from tests.support.sshfixtures import known_hosts_line
from tests.support.waiting import wait_until_sync

_why_not = sshd_unavailable() or (None if shutil.which("tmux") else "tmux is not installed")
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]

REPO = Path(__file__).resolve().parents[2]
SESSION = "cockpit"


class Tmux:
    """A private tmux server (its own socket) holding one 120x36 window."""

    def __init__(self, tmp: Path) -> None:
        self.base = f"zuka-cockpit-{os.getpid()}-{tmp.name}"[:60]
        self.started = 0
        self.socket = self.base

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )
        return done.stdout

    def start(self, command: str, env: dict[str, str]) -> None:
        # A server of its own for each start: one just killed may still be going away.
        self.started += 1
        self.socket = f"{self.base}-{self.started}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.tmux(
            "new-session", "-d", "-x", "120", "-y", "36", "-s", SESSION,
            f"env {exports} {command}",
        )  # fmt: skip

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", SESSION, *keys)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", SESSION, "-l", text)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", SESSION)

    def wait(self, predicate: object, what: str, timeout: float = 30.0) -> str:
        assert callable(predicate)
        return str(
            wait_until_sync(
                lambda: (predicate(self.screen()) and self.screen()) or "",
                timeout=timeout,
                what=f"{what}; screen:\n{self.screen()}",
            )
        )

    def ask_name(self, name: str) -> None:
        """Answer the tmux name question. Keys that arrive before its input has the focus
        are lost (a type-ahead limit of the modal, noted in the report): typed again until
        the input shows them."""
        self.wait(lambda s: "Session name" in s, "the name asked")

        def typed() -> bool:
            if f"▊  {name} " in self.screen():
                return True
            self.keys(*["BSpace"] * 8)
            self.type(name)
            return False

        wait_until_sync(typed, interval=0.5, what=f"{name} in the question's input")
        self.keys("Enter")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    yield t
    t.close()


@pytest.fixture
def client_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture
def sshd(client_key: asyncssh.SSHKey) -> Iterator[Sshd]:
    with Sshd.start_new([client_key], own_home=True) as server:
        yield server


def _ledger(cli: Cli, ledger_path: Path, sshd: Sshd, client_key: asyncssh.SSHKey) -> None:
    key = ledger_path.parent / "lab_key"
    client_key.write_private_key(key)
    key.chmod(0o600)
    login = f"ssh -p {sshd.port} -i {key} {sshd.user}@127.0.0.1"
    assert cli("node", "add", "box", "--ssh", login).code == 0
    # A second node above it (unreachable): the cursor must come back to box, not to it.
    assert cli("node", "add", "a-first", "--ssh", "ssh -p 9 root@127.0.0.1").code == 0
    with trust_store(ledger_path).open("a") as f:  # as `zuka node trust` leaves it
        f.write(known_hosts_line("127.0.0.1", sshd.port, sshd.host_key))


def _env(tmp_path: Path, ledger_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PYTHONPATH": str(REPO),
        "ZUKA_LEDGER": str(ledger_path),
        "ZUKA_CONFIG": str(tmp_path / "no-config.toml"),
        "HOME": str(home),  # no ~/.ssh of the developer's
        "SSH_AUTH_SOCK": "",
        "TERM": "xterm-256color",
    }


def _zuka(*args: str) -> str:
    words = " ".join(shlex.quote(a) for a in args)
    # The exit status stays on screen: cat holds the pane open until the server is killed.
    return f"sh -c {shlex.quote(f'{sys.executable} -m tui.cli.main {words}; echo zuka-exit=$?; exec cat')}"


def _new_host_key(sshd: Sshd) -> None:
    """The node reinstalled: the same address presents another host key."""
    sshd.kill()
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(sshd.host_key_path)
    sshd.host_key_path.chmod(0o600)
    sshd.host_key = key
    sshd.restart()


async def _polled_refusal(ledger_path: Path) -> str:
    with Ledger.open(ledger_path, create=False) as ledger:
        node = ledger.node("box")
    session = NodeSession(node, ssh_options(ledger_path))
    try:
        await session.run("true")
    except HostKeyRejected as exc:
        assert exc.health is NodeHealth.HOSTKEY_CHANGED
        return exc.message
    finally:
        await session.close()
    raise AssertionError("polling logged in")


def test_zuka_ssh_opens_a_shell_runs_a_command_and_refuses_a_changed_key(
    cli: Cli, ledger_path: Path, tmp_path: Path, sshd: Sshd, tmux: Tmux,
    client_key: asyncssh.SSHKey,
) -> None:  # fmt: skip
    _ledger(cli, ledger_path, sshd, client_key)
    env = _env(tmp_path, ledger_path)
    tmux.start(_zuka("ssh", "box"), env)
    tmux.wait(lambda s: s.rstrip().endswith("$"), "the node's shell prompt")
    tmux.type("echo zuka-$((6*7)); tty\r")
    screen = tmux.wait(lambda s: "zuka-42" in s and "/dev/pts/" in s, "the command's output")
    tmux.type("exit 4\r")
    screen = tmux.wait(lambda s: "zuka-exit=4" in s, "zuka ssh to exit with the shell's status")
    # The terminal reset after the session leaves what it printed where it was.
    assert "zuka-42" in screen and screen.index("zuka-42") < screen.index("zuka-exit=4")
    tmux.close()
    # One command, as ssh runs it: no PTY (no staircase), its output, its status.
    tmux.start(_zuka("ssh", "box", "--", "echo one-$((2+3)); tty; exit 7"), env)
    screen = tmux.wait(lambda s: "zuka-exit=7" in s, "the one command to end")
    assert "one-5\nnot a tty\n" in screen and "/dev/pts/" not in screen and "$ " not in screen
    tmux.close()
    # -t asks for one.
    tmux.start(_zuka("ssh", "-t", "box", "--", "echo two-$((2+3)); tty; exit 6"), env)
    screen = tmux.wait(lambda s: "zuka-exit=6" in s, "the -t command to end")
    assert "two-5" in screen and "/dev/pts/" in screen and "$ " not in screen
    tmux.close()
    # From cron or a script: stdin /dev/null, or a pipe the command reads.
    zuka = f"{sys.executable} -m tui.cli.main ssh box --"
    script = (
        f"{zuka} echo three </dev/null; echo null-exit=$?; "
        f"echo hello | {zuka} cat; echo pipe-exit=$?; exec cat"
    )
    tmux.start(f"sh -c {shlex.quote(script)}", env)
    screen = tmux.wait(lambda s: "pipe-exit=" in s, "the scripted commands to end")
    assert "three\nnull-exit=0\n" in screen and "hello\npipe-exit=0" in screen, screen
    assert "permission denied" not in screen
    tmux.close()

    _new_host_key(sshd)
    tmux.start(_zuka("ssh", "box"), env)
    screen = tmux.wait(lambda s: "zuka-exit=255" in s, "zuka ssh to refuse")
    # Polling refuses it in the same words: its session, with the ledger's options.
    words = asyncio.run(_polled_refusal(ledger_path))
    assert "HAS CHANGED" in words and words in screen.replace("\n", ""), (words, screen)
    assert "$ " not in screen.replace("zuka-exit", "")


def test_the_i_key_opens_a_shell_and_comes_back_to_the_same_node(
    cli: Cli, ledger_path: Path, tmp_path: Path, sshd: Sshd, tmux: Tmux,
    client_key: asyncssh.SSHKey,
) -> None:  # fmt: skip
    _ledger(cli, ledger_path, sshd, client_key)
    tmux.start(_zuka("dashboard"), _env(tmp_path, ledger_path))
    tmux.wait(lambda s: "box" in s and "a-first" in s, "the fleet")
    tmux.keys("Down")  # a-first is first (sorted by name): box is the second row
    tmux.keys("i")
    tmux.wait(lambda s: s.rstrip().endswith("$"), "the node's shell prompt")
    tmux.type("echo zuka-$((6*7))\r")
    tmux.wait(lambda s: "zuka-42" in s, "the command's output")
    tmux.type("exit\r")
    screen = tmux.wait(lambda s: "session exit status 0" in s, "the dashboard, and the toast")
    assert "a-first" in screen and "zuka-42" not in screen
    tmux.keys("Enter")  # the cursor is where it was: box's node screen opens
    tmux.wait(lambda s: "box" in s and "a-first" not in s, "box's node screen")
    tmux.keys("Escape")
    tmux.wait(lambda s: "a-first" in s, "the fleet again")

    _new_host_key(sshd)
    tmux.keys("i")
    screen = tmux.wait(lambda s: "HAS CHANGED" in s, "the refusal")
    assert "no session: box:" in screen
    tmux.wait(lambda s: "a-first" in s, "the fleet, still shown")


def test_shift_i_creates_then_attaches_the_nodes_tmux_session(
    cli: Cli, ledger_path: Path, tmp_path: Path, sshd: Sshd, tmux: Tmux,
    client_key: asyncssh.SSHKey,
) -> None:  # fmt: skip
    _ledger(cli, ledger_path, sshd, client_key)
    node_tmux = f"/tmp/tmux-{pwd.getpwnam(sshd.user).pw_uid}/default"
    tmux.start(_zuka("dashboard"), _env(tmp_path, ledger_path))
    try:
        tmux.wait(lambda s: "box" in s and "a-first" in s, "the fleet")
        tmux.keys("Down", "I")
        tmux.ask_name("lab-1")
        tmux.wait(lambda s: "[lab-1]" in s, "the node's tmux, its status line")
        tmux.type("echo zuka-$((6*7))\r")
        tmux.wait(lambda s: "zuka-42" in s, "the command's output")
        tmux.keys("C-b", "d")  # detach: the job goes on, the dashboard comes back
        screen = tmux.wait(lambda s: "session exit status 0" in s, "the dashboard")
        assert "a-first" in screen
        tmux.keys("I")
        tmux.ask_name("lab-1")
        # Attached, not made anew: what ran before is still on its screen.
        tmux.wait(lambda s: "[lab-1]" in s and "zuka-42" in s, "the same tmux session")
        tmux.type("exit\r")
        tmux.wait(lambda s: "a-first" in s and "session exit status 0" in s, "the dashboard")
    finally:
        subprocess.run(["tmux", "-S", node_tmux, "kill-session", "-t", "lab-1"],
                       capture_output=True, timeout=20)  # fmt: skip
