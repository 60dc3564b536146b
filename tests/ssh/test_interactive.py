"""The SSH cockpit's core: what the node is asked to run (validated, quoted), and a session
pumped between a local terminal (files here) and a PTY channel of an in-process asyncssh
node: keys in, output out, a resize, the exit status, a dropped link, a changed host key
refused in polling's own words with no channel opened, the simulated node's shell."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.app.shell import NO_SESSION, ShellEnd, check_node, open_session
from leases.core.errors import InputError
from leases.core.models import Node, NodeHealth, SshTarget
from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet
from leases.sim.pty import builtin, exit_status, tmux_stand_in
from leases.ssh.errors import HostKeyRejected
from leases.ssh.interactive import (
    RESET,
    Ended,
    ended_words,
    remote_command,
    term_type,
    tmux_command,
    tmux_name,
)
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until

# -- what the node runs ----------------------------------------------------------------


def test_tmux_names_are_checked_and_quoted() -> None:
    assert tmux_name(None) == "zuka"
    assert tmux_name("train-7b.run_2") == "train-7b.run_2"
    assert tmux_command("zuka") == "tmux new-session -A -s zuka"
    for bad in ("", "a b", "x;reboot", "$(id)", "`id`", "a\nb", "é", "x" * 65, "a:b", "-"[:0]):
        with pytest.raises(InputError) as caught:
            tmux_name(bad)
        assert caught.value.field == "tmux session"
        assert "\n" not in str(caught.value.value)


def test_remote_command_is_a_shell_tmux_or_the_users_words() -> None:
    assert remote_command(None, None) is None
    assert remote_command(None, []) is None
    assert remote_command("w1", None) == "tmux new-session -A -s w1"
    assert remote_command(None, ["nvidia-smi", "-L"]) == "nvidia-smi -L"
    with pytest.raises(InputError, match="not both"):
        remote_command("w1", ["ls"])
    with pytest.raises(InputError):
        remote_command("bad name", None)


def test_term_type_falls_back_for_odd_values() -> None:
    assert term_type("screen-256color") == "screen-256color"
    for odd in (None, "", "dumb", "xterm\x1b[2J", "a b", "x" * 65):
        assert term_type(odd) == "xterm-256color"


def test_how_a_session_ended_is_said() -> None:
    assert ended_words(Ended(0)) == "exit status 0"
    assert (
        ended_words(Ended(127), tmux=True) == "exit status 127: tmux is not installed on the node"
    )
    assert ended_words(Ended(127)) == "exit status 127"
    assert ended_words(Ended(None, "HUP\x1b[2J")) == "ended by signal HUP\u241b[2J"
    assert ended_words(Ended(None, lost=True)) == "the connection was lost"
    assert ended_words(Ended(None)) == "ended without an exit status"
    assert ShellEnd("n1", True, "x", 3).exit_code == 3
    assert ShellEnd("n1", False, "x").exit_code == NO_SESSION


def test_a_local_node_and_a_refused_row_open_nothing() -> None:
    with pytest.raises(InputError, match="this machine"):
        check_node(Node("here", SshTarget(host=""), local=True))
    with pytest.raises(InputError, match="not polled: port: not a number"):
        check_node(Node("n2", SshTarget(host="10.0.0.1"), problem="port: not a number"))
    check_node(Node("n1", SshTarget(host="10.0.0.1")))


# -- a session against an in-process node ------------------------------------------------


class FileTerminal:
    """Keys from a pipe, output to a file, a size the test changes."""

    def __init__(self, tmp_path: Path) -> None:
        self.keys_out, self._keys_in = -1, -1
        self._keys_in, self.keys_out = os.pipe()
        self.stdin = self._keys_in
        self.out_path = tmp_path / "terminal-out"
        self.stdout = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.term_type: str | None = "xterm-256color"
        self.cols_rows = (120, 36)
        self.raw_entered = 0
        self.raw_left = 0

    def size(self) -> tuple[int, int] | None:
        return self.cols_rows

    @contextlib.contextmanager
    def raw(self) -> Iterator[None]:
        self.raw_entered += 1
        try:
            yield
        finally:
            self.raw_left += 1

    def type(self, text: str) -> None:
        os.write(self.keys_out, text.encode())

    def shown(self) -> str:
        return self.out_path.read_bytes().decode(errors="replace")

    def close(self) -> None:
        for fd in (self._keys_in, self.keys_out, self.stdout):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def term(tmp_path: Path) -> Iterator[FileTerminal]:
    t = FileTerminal(tmp_path)
    yield t
    t.close()


async def _echo_pty(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    """A PTY session: says its terminal, answers each line, reports resizes, exits 3."""
    node.tunnels.append(("pty", 0))  # counts the channels that reached the node
    cols, rows, *_ = process.get_terminal_size()
    process.stdout.write(
        f"term={process.get_terminal_type()} {cols}x{rows} cmd={process.command}\n"
    )
    while True:
        try:
            line = await process.stdin.readline()
        except asyncssh.TerminalSizeChanged as exc:
            process.stdout.write(f"resized {exc.width}x{exc.height}\n")
            continue
        word = line.strip()
        if word == "exit" or not line:
            process.exit(3)
            return
        if word == "kill":  # the user's shell killed on the node
            process.exit_with_signal("KILL")
            return
        if word == "die":
            for conn in list(node.connections):
                conn.abort()
            return
        process.stdout.write(f"got {word}\n")


async def test_a_pty_session_passes_keys_output_resizes_and_the_exit_status(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])
        session = open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
        task = asyncio.create_task(session)
        await wait_until(lambda: "term=xterm-256color 120x36 cmd=None" in term.shown())
        term.type("hello\n")
        await wait_until(lambda: "got hello" in term.shown(), what="the echo")
        term.cols_rows = (100, 40)
        os.kill(os.getpid(), signal.SIGWINCH)
        await wait_until(lambda: "resized 100x40" in term.shown(), what="the resize")
        term.type("exit\n")
        end = await asyncio.wait_for(task, 20)
    assert end == ShellEnd("n1", True, "session exit status 3", 3)
    assert term.raw_entered == term.raw_left == 1


async def test_tmux_is_asked_for_with_its_quoted_name(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])
        task = asyncio.create_task(
            open_session(tmp_path / "l.db", fake.as_node("n1"), term, tmux="w.1", options=opts)
        )
        await wait_until(lambda: "cmd=tmux new-session -A -s w.1" in term.shown())
        term.type("exit\n")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status == 3


async def test_a_dropped_connection_ends_the_session_and_says_so(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])
        task = asyncio.create_task(
            open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
        )
        await wait_until(lambda: "term=" in term.shown())
        term.type("die\n")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status is None and end.words == "session the connection was lost"
    assert end.exit_code == NO_SESSION
    assert term.raw_entered == term.raw_left == 1  # the terminal given back


async def test_a_changed_host_key_is_refused_in_pollings_words_and_opens_nothing(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])  # pins keys.host_key
        await fake.stop()
        await fake.start(host_key=keys.other_host_key)  # the node now presents another
        polling = NodeSession(fake.as_node("n1"), opts)
        with pytest.raises(HostKeyRejected) as polled:
            await polling.run("true")
        await polling.close()
        end = await open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
    assert not end.opened and end.health is NodeHealth.HOSTKEY_CHANGED
    assert polled.value.health is NodeHealth.HOSTKEY_CHANGED
    assert end.words == polled.value.message and "HAS CHANGED" in end.words
    assert fake.tunnels == [] and term.raw_entered == 0 and term.shown() == ""


async def test_an_unknown_host_key_says_how_to_trust_it(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [])  # trusts nothing
        end = await open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
    assert not end.opened and end.health is NodeHealth.UNTRUSTED
    assert "press t on the fleet, or run `zuka node trust n1`" in end.words
    assert fake.tunnels == []


async def test_an_unreachable_node_opens_nothing(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys) as fake:
        opts = node_options(keys, tmp_path, [fake])
        node = fake.as_node("n1")
    end = await open_session(tmp_path / "l.db", node, term, options=opts)
    assert not end.opened and end.health is NodeHealth.UNREACHABLE and end.words
    assert term.raw_entered == 0


# -- the simulated node's shell -----------------------------------------------------------


def test_tmux_stand_in_reads_only_the_command_zuka_sends() -> None:
    assert tmux_stand_in("tmux new-session -A -s zuka") == "zuka"
    assert tmux_stand_in("tmux new -A -s w1") == "w1"
    assert tmux_stand_in("tmux ls") is None
    assert tmux_stand_in("tmux new -A -s 'a") is None


@pytest.mark.parametrize("tmux", [None, "w1"])
async def test_a_simulated_node_gives_a_prompt_runs_commands_and_exits(
    tmp_path: Path, term: FileTerminal, tmux: str | None
) -> None:
    async with SimFleet([SimNode("s1", "A10", 1, Scenario.BUSY)]) as fleet:
        known = fleet.write_known_hosts(tmp_path / "known_hosts")
        key = fleet.write_client_key(tmp_path)
        opts = SshOptions(known_hosts=(known,), agent_path=None, config=[])
        node = Node("s1", fleet["s1"].ssh_target(str(key)))
        task = asyncio.create_task(
            open_session(tmp_path / "l.db", node, term, tmux=tmux, options=opts)
        )
        await wait_until(lambda: "root@s1:~# " in term.shown(), what="the prompt")
        if tmux:
            assert "stands in for session 'w1'" in term.shown()
        term.type("nvidia-smi -Lx\x7f\r")  # a typo rubbed out
        await wait_until(lambda: "GPU 0: NVIDIA A10" in term.shown(), what="the answer")
        term.type("whoami\r")
        await wait_until(lambda: "\r\nroot\r\n" in term.shown(), what="whoami")
        term.type("no-such-tool\rexit\r")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status == 127  # $? of the last command


async def test_exit_with_a_status_on_a_simulated_node_is_the_sessions_status(
    tmp_path: Path, term: FileTerminal
) -> None:
    async with SimFleet([SimNode("s1", "A10", 1, Scenario.BUSY)]) as fleet:
        known = fleet.write_known_hosts(tmp_path / "known_hosts")
        key = fleet.write_client_key(tmp_path)
        opts = SshOptions(known_hosts=(known,), agent_path=None, config=[])
        node = Node("s1", fleet["s1"].ssh_target(str(key)))
        task = asyncio.create_task(open_session(tmp_path / "l.db", node, term, options=opts))
        await wait_until(lambda: "root@s1:~# " in term.shown(), what="the prompt")
        term.type("exit 3\r")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status == 3
    assert "\r\n" in term.shown()


def test_reset_leaves_the_alternate_screen_and_shows_the_cursor() -> None:
    assert b"\x1b[?1049l" in RESET and b"\x1b[?25h" in RESET and b"\x1b[?2004l" in RESET


async def test_a_session_killed_on_the_node_says_the_signal_and_gives_the_terminal_back(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])
        task = asyncio.create_task(
            open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
        )
        await wait_until(lambda: "term=" in term.shown())
        term.type("kill\n")
        end = await asyncio.wait_for(task, 20)
    assert end == ShellEnd("n1", True, "session ended by signal KILL", None)
    assert end.exit_code == NO_SESSION
    assert term.raw_entered == term.raw_left == 1


async def test_the_session_goes_through_the_jump_host_polling_uses(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    async with FakeNode(keys, handler=_echo_pty) as fake, FakeNode(keys, forwarding=True) as jump:
        config = tmp_path / "ssh_config"
        config.write_text(f"Host *\n  ProxyJump ops@127.0.0.1:{jump.port}\n")
        opts = node_options(keys, tmp_path, [fake, jump], config=[config])
        task = asyncio.create_task(
            open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
        )
        await wait_until(lambda: "term=xterm-256color" in term.shown())
        term.type("exit\n")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status == 3
    assert jump.tunnels == [("127.0.0.1", fake.port)]  # the node reached through the jump host


async def test_in_a_thread_of_its_own_as_the_dashboard_runs_it_sizes_are_followed(
    keys: TestKeys, tmp_path: Path, term: FileTerminal
) -> None:
    """No SIGWINCH handler can be set off the main thread: the size is looked at instead."""
    async with FakeNode(keys, handler=_echo_pty) as fake:
        opts = node_options(keys, tmp_path, [fake])
        session = open_session(tmp_path / "l.db", fake.as_node("n1"), term, options=opts)
        task = asyncio.create_task(asyncio.to_thread(asyncio.run, session))
        await wait_until(lambda: "term=xterm-256color 120x36" in term.shown())
        term.cols_rows = (80, 24)
        await wait_until(lambda: "resized 80x24" in term.shown(), what="the new size sent")
        term.type("exit\n")
        end = await asyncio.wait_for(task, 20)
    assert end.opened and end.status == 3


def test_reset_turns_off_every_mode_a_remote_program_may_leave_on() -> None:
    for seq in (
        b"\x1b[?1004l",
        *(b"\x1b[?%dl" % mode for mode in (1000, 1002, 1003, 1005, 1006, 1015)),
        b"\x1b[>4;0m",
        b"\x1b(B",
        b"\x0f",
        b"\x1b[?7h",
        b"\x1b[4l",
        b"\x1b[?5l",
        b"\x1b[0 q",
        *(b"\x1b[?%dl" % mode for mode in (1049, 1047, 47)),
        b"\x1b[?2026l",
        b"\x1b[?2004l",
        b"\x1b[?25h",
        b"\x1b[?1l\x1b>",
    ):
        assert seq in RESET, seq
    assert RESET.count(b"\x1b[<u") >= 4  # kitty keyboard modes popped, several deep
    # Origin mode and the scroll region reset keep the cursor where it was (both home it).
    assert b"\x1b7\x1b[?6l\x1b[r\x1b8" in RESET and RESET.endswith(b"\x1b[0m")
    assert RESET.count(b"\x1b[?6l") == 1 and RESET.count(b"\x1b[r") == 1


@pytest.mark.parametrize(
    ("typed", "status"),
    [("exit", 0), ("exit 3", 3), ("exit 259", 3), ("logout", 0), ("exit x", 2), ("exit ３", 2)],
)
def test_the_simulated_shell_exits_with_the_status_asked(typed: str, status: int) -> None:
    assert exit_status(typed, 0) == status
    assert exit_status("exit", 5) == 5
    assert exit_status("exitx", 0) is None and exit_status("echo exit", 0) is None


def test_the_simulated_shell_knows_clear_pwd_whoami_and_help() -> None:
    assert builtin("pwd") == "/root\n" and builtin("whoami") == "root\n"
    assert builtin("clear") == "\x1b[H\x1b[2J"
    said = builtin("help") or ""
    for word in ("exit [N]", "logout", "nvidia-smi", "ps", "Ctrl-D"):
        assert word in said
    assert builtin("ls") is None


class NoTtyTerminal:
    """Like `zuka ssh NODE -- CMD < /dev/null` from cron: stdin a file the event loop cannot
    watch, stdout and stderr files, no PTY."""

    def __init__(self, tmp_path: Path, stdin: str = "/dev/null") -> None:
        self.stdin = os.open(stdin, os.O_RDONLY)
        self.out_path, self.err_path = tmp_path / "out", tmp_path / "err"
        self.stdout = os.open(self.out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.stderr = os.open(self.err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.term_type: str | None = None

    def size(self) -> tuple[int, int] | None:
        return None

    @contextlib.contextmanager
    def raw(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            os.close(fd)


@pytest.mark.parametrize("stdin", ["/dev/null", "regular"])
async def test_a_command_with_stdin_from_dev_null_or_a_file_runs_and_streams_bytes(
    tmp_path: Path, stdin: str
) -> None:
    if stdin == "regular":
        stdin = str(tmp_path / "input")
        Path(stdin).write_bytes(b"typed ahead\n")
    term = NoTtyTerminal(tmp_path, stdin)
    try:
        async with SimFleet([SimNode("s1", "A10", 1, Scenario.BUSY)]) as fleet:
            known = fleet.write_known_hosts(tmp_path / "known_hosts")
            key = fleet.write_client_key(tmp_path)
            opts = SshOptions(known_hosts=(known,), agent_path=None, config=[])
            node = Node("s1", fleet["s1"].ssh_target(str(key)))
            end = await asyncio.wait_for(
                open_session(
                    tmp_path / "l.db", node, term, command=["echo", "hello"], options=opts
                ),
                20,
            )
            assert end.opened and end.status == 0
            assert term.out_path.read_bytes() == b"hello\n"  # bytes as sent: no CR added
            end = await asyncio.wait_for(
                open_session(tmp_path / "l.db", node, term, command=["no-such-tool"], options=opts),
                20,
            )
    finally:
        term.close()
    assert end.opened and end.status == 127
    assert b"not found" in term.err_path.read_bytes()  # stderr to stderr, not stdout
    assert b"not found" not in term.out_path.read_bytes()
