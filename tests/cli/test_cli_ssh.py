"""`zuka ssh`: refusals before anything connects, and the local terminal always given back
(raw mode restored, the remote program's modes reset) however the session ends."""

from __future__ import annotations

import os
import pty
import termios
from pathlib import Path

import pytest

from leases.ssh.interactive import RESET
from leases.ssh.interactive_tty import TtyTerminal
from tests.support.cli import Cli


def test_a_bad_tmux_name_is_refused_before_the_ledger_is_read(cli: Cli, tmp_path: Path) -> None:
    r = cli("ssh", "n1", "--tmux", "a b;reboot", ledger=tmp_path / "none.db")
    assert r.code != 0 and "tmux session" in r.err and "no spaces" in r.err
    assert not (tmp_path / "none.db").exists()


def test_unknown_local_and_ambiguous_sessions_are_refused(cli: Cli) -> None:
    assert cli("node", "add", "here", "--local").code == 0
    assert cli("node", "add", "n1", "--ssh", "ssh -p 9 root@127.0.0.1").code == 0
    r = cli("ssh", "nope")
    assert r.code != 0 and "nope" in r.err
    r = cli("ssh", "here")
    assert r.code != 0 and "is this machine" in r.err
    r = cli("ssh", "--tmux", "w1", "n1", "--", "ls")
    assert r.code != 0 and "not both" in r.err


def test_an_unreachable_node_exits_255_and_says_why(
    cli: Cli, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After `--` every word is the command's (--ledger too): the ledger comes from the env.
    monkeypatch.setenv("ZUKA_LEDGER", str(ledger_path))
    assert cli("node", "add", "n1", "--ssh", "ssh -p 9 root@127.0.0.1").code == 0
    r = cli("ssh", "n1", "--", "true")
    assert r.code == 255 and r.err.startswith("zuka: n1: ") and "127.0.0.1" in r.err


@pytest.fixture
def tty_pair() -> tuple[int, int]:
    leader, follower = pty.openpty()
    yield leader, follower
    for fd in (leader, follower):
        os.close(fd)


def test_raw_mode_is_restored_and_the_terminal_reset_even_on_an_exception(
    tty_pair: tuple[int, int],
) -> None:
    leader, follower = tty_pair
    before = termios.tcgetattr(follower)
    term = TtyTerminal(follower, follower)
    assert term.term_type is not None and term.size() is not None
    with pytest.raises(RuntimeError), term.raw():
        during = termios.tcgetattr(follower)
        assert during != before
        assert not during[3] & termios.ECHO and not during[3] & termios.ICANON
        raise RuntimeError("the session failed")
    assert termios.tcgetattr(follower) == before
    assert os.read(leader, 4096).endswith(RESET)


def test_no_pty_is_asked_for_when_stdin_is_not_a_terminal(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        term = TtyTerminal(r, w)
        assert term.term_type is None
        with term.raw():  # nothing to change
            pass
    finally:
        os.close(r)
        os.close(w)


def test_keys_typed_as_the_session_ends_are_dropped_not_read_after(
    tty_pair: tuple[int, int],
) -> None:
    leader, follower = tty_pair
    term = TtyTerminal(follower, follower)
    with term.raw():
        os.write(leader, b"exit\r")  # the second `exit`, typed as the first one ended
        assert termios.tcgetattr(follower)[3] & termios.ICANON == 0
    os.set_blocking(follower, False)
    with pytest.raises(BlockingIOError):
        os.read(follower, 64)


def test_a_command_without_tty_gets_no_pty_and_leaves_the_terminal_cooked(
    tty_pair: tuple[int, int],
) -> None:
    _leader, follower = tty_pair
    before = termios.tcgetattr(follower)
    term = TtyTerminal(follower, follower, pty=False)
    assert term.term_type is None  # `zuka ssh n1 -- cmd`: output not staircased
    with term.raw():
        assert termios.tcgetattr(follower) == before
    assert TtyTerminal(follower, follower).term_type is not None  # a shell, or -t


def test_t_after_the_node_is_taken_as_ssh_takes_it(
    cli: Cli, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZUKA_LEDGER", str(ledger_path))
    assert cli("node", "add", "n1", "--ssh", "ssh -p 9 root@127.0.0.1").code == 0
    for args in (("n1", "-t", "--", "true"), ("-t", "n1", "--", "true"), ("n1", "--", "-t")):
        r = cli("ssh", *args)
        assert r.code == 255 and "unrecognized" not in r.err, (args, r.err)
