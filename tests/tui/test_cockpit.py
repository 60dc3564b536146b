"""The dashboard's i and I keys with Pilot: what is refused before anything connects (a
browser tab, a terminal that cannot be handed over, a bad tmux name), what the toast says
after a session, and that the cursor stays on its node. The session itself runs against a
real sshd in tmux (test_cockpit_openssh.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from leases.app.shell import ShellEnd
from leases.core.models import Node, SshTarget
from leases.ssh.interactive_tty import TtyTerminal
from leases.ssh.options import SshOptions
from tests.support.fleetledger import NOW, frozen_ledger
from tests.support.waiting import wait_until
from tui.dashboard import cockpit
from tui.dashboard.app import ZukaApp
from tui.screens.ask import AskScreen
from tui.widgets.fleet_table import FleetTable


def notes(app: ZukaApp) -> str:
    return "\n".join(str(n.message) for n in app._notifications)


class Sessions:
    """Stands in for the session run while the app is suspended: records what was asked."""

    def __init__(self, end: ShellEnd | BaseException) -> None:
        self.end = end
        self.asked: list[tuple[str, str | None]] = []

    def __call__(self, path: Path, node: Node, tmux: str | None) -> ShellEnd | BaseException:
        self.asked.append((node.name, tmux))
        return self.end


@pytest.fixture
def suspendable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A headless app cannot suspend: here it pretends to, as a terminal app does."""

    @contextlib.contextmanager
    def suspend(self: ZukaApp) -> Iterator[None]:
        yield

    monkeypatch.setattr(ZukaApp, "suspend", suspend)
    yield


async def _fleet(app: ZukaApp) -> FleetTable:
    await app.workers.wait_for_complete()
    fleet = app.screen.query_one("#fleet", FleetTable)
    await wait_until(lambda: fleet.row_count > 0, what="the fleet's rows")
    return fleet


async def test_a_session_ends_with_a_toast_and_the_cursor_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suspendable: None
) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    sessions = Sessions(ShellEnd("x", True, "session exit status 3", 3))
    monkeypatch.setattr(cockpit, "_run", sessions)
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(120, 36)) as pilot:
        fleet = await _fleet(app)
        await pilot.press("down", "down")
        await pilot.pause()
        chosen = fleet.selected_key
        await pilot.press("i")
        await wait_until(lambda: "session exit status 3" in notes(app), what="the toast")
        assert sessions.asked == [(chosen, None)]
        assert fleet.selected_key == chosen and app.screen.id == "fleet-screen"
        await pilot.press("q")


async def test_no_session_says_why_in_an_error_toast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suspendable: None
) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    words = "node x: HOST KEY OF [10.0.0.1]:22 HAS CHANGED\x1b[2J: refused"
    monkeypatch.setattr(cockpit, "_run", Sessions(ShellEnd("x", False, words)))
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await _fleet(app)
        await pilot.press("i")
        await wait_until(lambda: "no session: x: node x: HOST KEY" in notes(app))
        assert "\x1b" not in notes(app)
        [note] = app._notifications
        assert note.severity == "error"
        await pilot.press("q")


async def test_I_asks_the_tmux_name_and_refuses_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suspendable: None
) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    sessions = Sessions(ShellEnd("x", True, "session exit status 0", 0))
    monkeypatch.setattr(cockpit, "_run", sessions)
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(120, 36)) as pilot:
        fleet = await _fleet(app)
        chosen = fleet.selected_key
        await pilot.press("I")
        await wait_until(lambda: isinstance(app.screen, AskScreen), what="the name asked")
        await pilot.press(*"a;b", "enter")
        await wait_until(lambda: "tmux session 'a;b'" in notes(app), what="the refusal")
        assert sessions.asked == []
        await pilot.press("I")
        await wait_until(lambda: isinstance(app.screen, AskScreen))
        await pilot.press("enter")  # the default name
        await wait_until(lambda: sessions.asked == [(chosen, "zuka")], what="tmux zuka")
        await pilot.press("I")
        await wait_until(lambda: isinstance(app.screen, AskScreen))
        await pilot.press(*"train.7b", "enter")
        await wait_until(lambda: len(sessions.asked) == 2)
        assert sessions.asked[1] == (chosen, "train.7b")
        await pilot.press("I")
        await wait_until(lambda: isinstance(app.screen, AskScreen))
        await pilot.press("escape")  # nothing opens
        await pilot.pause()
        assert len(sessions.asked) == 2
        await pilot.press("q")


async def test_a_terminal_that_cannot_be_handed_over_and_a_browser_tab_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    sessions = Sessions(ShellEnd("x", True, "session exit status 0", 0))
    monkeypatch.setattr(cockpit, "_run", sessions)
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await _fleet(app)
        await pilot.press("i")  # Pilot's headless driver cannot suspend
        await wait_until(lambda: "cannot be handed over to a shell" in notes(app))
        monkeypatch.setattr(ZukaApp, "is_web", property(lambda self: True))
        await pilot.press("i")
        await wait_until(lambda: "browser dashboard (zuka web)" in notes(app))
        assert sessions.asked == []
        await pilot.press("q")


async def test_the_node_screen_has_the_keys_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suspendable: None
) -> None:
    path = tmp_path / "l.db"
    frozen_ledger(path)
    sessions = Sessions(ShellEnd("x", True, "session exit status 0", 0))
    monkeypatch.setattr(cockpit, "_run", sessions)
    app = ZukaApp(path, clock=lambda: NOW, poll=False)
    async with app.run_test(size=(120, 36)) as pilot:
        fleet = await _fleet(app)
        chosen = fleet.selected_key
        await pilot.press("enter")
        await wait_until(lambda: app.screen.id != "fleet-screen", what="the node screen")
        node_screen = app.screen
        await pilot.press("i")
        await wait_until(lambda: sessions.asked == [(chosen, None)])
        assert app.screen is node_screen
        await pilot.press("q")


@pytest.fixture
def tty_pair() -> Iterator[tuple[int, int]]:
    leader, follower = pty.openpty()
    yield leader, follower
    for fd in (leader, follower):
        os.close(fd)


async def test_keys_and_ctrl_c_while_connecting_go_nowhere_and_escape_gives_up(
    tmp_path: Path, tty_pair: tuple[int, int]
) -> None:
    leader, follower = tty_pair
    cooked = termios.tcgetattr(follower)
    hung: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung.append(writer)  # accepts, never says a word: the connection hangs

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    node = Node("n1", SshTarget(host="127.0.0.1", port=port, user="root"))
    opts = SshOptions(known_hosts=(tmp_path / "kh",), agent_path=None, config=[])
    terminal = TtyTerminal(follower, follower)
    task = asyncio.create_task(
        cockpit.connect_then_pump(tmp_path / "l.db", node, None, terminal, opts)
    )
    shown = bytearray()

    def said(text: bytes) -> bool:
        with contextlib.suppress(BlockingIOError):
            shown.extend(os.read(leader, 4096))
        return text in shown

    os.set_blocking(leader, False)
    await wait_until(lambda: said(b"connecting to n1"), what="the connecting line")
    await wait_until(lambda: bool(hung), what="the hung connection")
    os.write(leader, b"exit\r\x03")  # Ctrl-C is a byte here: no SIGINT, zuka goes on
    await asyncio.sleep(0)
    assert not task.done() or (await task).words.startswith("connecting given up")
    os.write(leader, b"\x1b")
    end = await asyncio.wait_for(task, 10)
    server.close()
    for writer in hung:
        writer.close()
    assert not end.opened and "given up" in end.words
    assert termios.tcgetattr(follower) == cooked
    os.set_blocking(follower, False)
    with pytest.raises(BlockingIOError):
        os.read(follower, 64)  # nothing typed is left for the dashboard


def test_an_exception_while_suspended_still_resumes_the_app() -> None:
    calls: list[str] = []

    class Fake:
        @contextlib.contextmanager
        def suspend(self) -> Iterator[None]:
            calls.append("suspend")
            yield  # no try/finally: as Textual's
            calls.append("resume")

    with pytest.raises(RuntimeError), cockpit.suspended(Fake()):  # type: ignore[arg-type]
        raise RuntimeError("the session thread failed")
    assert calls == ["suspend", "resume"]
