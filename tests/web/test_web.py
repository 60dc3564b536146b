"""`zuka web`: the dashboard served by textual-serve, driven from a real headless Chromium
(Debian's /usr/bin/chromium through Playwright), on 127.0.0.1 only."""

from __future__ import annotations

import gc
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import aiohttp
import pytest

from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.sim.demoledger import build_demo_ledger, demo_records
from tests.support.waiting import wait_until, wait_until_sync
from tui.web.guard import (
    Guard,
    ScrubbedFormatter,
    ZukaServer,
    check_max_sessions,
    host_name,
    new_token,
    shown_path,
)
from tui.web.serve import check_host, check_port, child_command, exposure_warning, is_loopback

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
# textual-serve's page keeps its xterm.js terminal in a closure. This init script catches
# the object that owns it when it sets its `fitAddon`, so the test reads the terminal's
# own buffer: the text the browser drew, not the bytes the server sent.
HOOK = """
Object.defineProperty(Object.prototype, 'fitAddon', {
  configurable: true,
  set(v) {
    window.__zukaTerm = this;
    Object.defineProperty(this, 'fitAddon',
      {value: v, writable: true, configurable: true, enumerable: true});
  },
});
"""
SCREEN_TEXT = """() => {
  const t = window.__zukaTerm && window.__zukaTerm.terminal;
  if (!t) return '';
  const b = t.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));
  return out.join('\\n');
}"""


def _shows(text: str) -> str:
    return f"() => ({SCREEN_TEXT})().includes({text!r})"


# -- what is listened on ---------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_is_served_without_a_warning(host: str) -> None:
    assert is_loopback(check_host(host)) and exposure_warning(host, 8000) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "jump.lab.example"])
def test_any_other_address_warns(host: str) -> None:
    said = exposure_warning(check_host(host), 8000)
    assert said is not None and "no password" in said and f"{host}:8000" in said


@pytest.mark.parametrize("host", ["-oProxyCommand=x", "a b", "$(id)", "", "host;rm"])
def test_a_bad_host_is_refused_by_name(host: str) -> None:
    with pytest.raises(InputError) as err:
        check_host(host)
    assert err.value.field == "--host"


def test_ports() -> None:
    assert check_port(1) == 1 and check_port(65535) == 65535
    for bad in (0, -1, 65536):
        with pytest.raises(InputError, match="--port"):
            check_port(bad)


def test_the_tab_command_is_quoted_word_by_word(tmp_path: Path) -> None:
    """textual-serve runs it through a shell: a ledger path is one word, never code."""
    odd = tmp_path / "it's a $(touch pwned) `x`; ledger.db"
    words = shlex.split(child_command(odd, "c d.toml"))
    assert words == ["exec", sys.executable, "-m", "tui.web.serve", "--ledger", str(odd),
                     "--config", "c d.toml"]  # fmt: skip


def test_zuka_web_refuses_bad_options_before_serving(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    r = cli("web", "--host", "a b", "--config", str(empty))
    assert r.code == 2 and "--host" in r.err
    r = cli("web", "--port", "70000", "--config", str(empty))
    assert r.code == 2 and "--port" in r.err
    bad = tmp_path / "bad.toml"
    bad.write_text('[keys]\napp-hlep = "f1"\n')
    r = cli("web", "--config", str(bad))
    assert r.code == 2 and "keys.app-hlep: no binding has this id" in r.err


# -- in a real browser -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _said_url(log: Path) -> str | None:
    """The URL `zuka web` printed for the user (it holds the run's token)."""
    found = re.search(r"zuka web: open (http://\S+)", log.read_text(errors="replace"))
    return found.group(1) if found else None


@dataclass
class Served:
    url: str  # as printed, with the token
    port: int
    token: str
    pid: int  # zuka web's own process
    log: Path  # its stdout and stderr together


@contextmanager
def zuka_web(tmp_path: Path, ledger: Path, *extra: str) -> Iterator[Served]:
    """`zuka web` on ledger, in its own process group (it starts one dashboard process per
    tab): the whole group is stopped afterwards."""
    config = tmp_path / "config.toml"
    config.write_text("")
    port = _free_port()
    said = tmp_path / "server.log"
    log = said.open("wb")
    argv = [sys.executable, "-m", "tui.cli.main", "web", "--ledger", str(ledger),
            "--config", str(config), "--port", str(port), *extra]  # fmt: skip
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_sync(lambda: server.poll() is not None or _listening(port),
                        timeout=60, what="zuka web to listen")  # fmt: skip
        url = wait_until_sync(lambda: server.poll() is not None or _said_url(said),
                              timeout=60, what="zuka web to print its URL")  # fmt: skip
        assert server.poll() is None, said.read_text()
        assert isinstance(url, str) and url.startswith(f"http://127.0.0.1:{port}/?token=")
        yield Served(url, port, url.split("token=", 1)[1], server.pid, said)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`zuka web` on the demo ledger. Yields the URL it printed."""
    ledger = tmp_path / "web.db"
    build_demo_ledger(ledger, date(2026, 11, 30)).close()
    with zuka_web(tmp_path, ledger) as web:
        yield web.url


async def test_zuka_web_in_headless_chromium(served: str, tmp_path: Path) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            await page.add_init_script(HOOK)
            await page.goto(served)
            # First paint: the fleet, with a demo node's name, in the browser's terminal.
            await page.wait_for_function(_shows("a100-monthly-1"), timeout=60_000)
            await page.screenshot(path=str(tmp_path / "first-paint.png"))
            # One key path: ? opens help, escape goes back to the fleet.
            await page.click("#terminal")
            await page.keyboard.press("?")
            await page.wait_for_function(_shows("Keys on the fleet screen"), timeout=30_000)
            assert "app-help" in await page.evaluate(SCREEN_TEXT)
            await page.keyboard.press("Escape")
            await page.wait_for_function(
                f"() => !({SCREEN_TEXT})().includes('Keys on the fleet screen')", timeout=30_000
            )
            assert "h800-monthly-2" in await page.evaluate(SCREEN_TEXT)
        finally:
            await browser.close()
    # The token is in the one line that gives the URL, in no request's log line.
    token = served.split("token=", 1)[1]
    assert (tmp_path / "server.log").read_text(errors="replace").count(token) == 1


async def test_a_websocket_from_another_site_is_refused(served: str) -> None:
    """Any page the user visits can open `ws://127.0.0.1:8000/...` (browsers send its
    Origin but do not stop it); so can every other user of a shared jump host."""
    base = served.split("?", 1)[0].rstrip("/")
    token = served.split("token=", 1)[1]
    async with aiohttp.ClientSession() as session:
        for path, origin in [("/ws?width=80&height=24", "http://evil.example"),
                             (f"/ws/{token}", "http://evil.example"),
                             ("/ws", None)]:  # fmt: skip
            headers = {"Origin": origin} if origin else {}
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await session.ws_connect(base + path, headers=headers)
            assert err.value.status == 403, path


# -- the guard, in process: token, Host, Origin, the session cap -----------------------------

TOKEN = "t0ken-for-this-test-only"
# A stand-in dashboard speaking textual-serve's protocol: says it is a Textual app, draws
# one packet, and exits when told to quit.
FAKE_DASHBOARD = """
import sys
out = sys.stdout.buffer
drawn = b"fake dashboard"
out.write(b"__GANGLION__\\n" + b"D" + len(drawn).to_bytes(4, "big") + drawn)
out.flush()
got = b""
while chunk := sys.stdin.buffer.read1(4096):
    got += chunk
    if b'"quit"' in got:
        break
"""


@dataclass
class Guarded:
    base: str
    host: str  # as a browser sends it in Host (and Origin, without the scheme)
    server: ZukaServer


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[Guarded]:
    from aiohttp.test_utils import TestServer

    child = tmp_path / "fake_dashboard.py"
    child.write_text(FAKE_DASHBOARD)
    command = shlex.join([sys.executable, str(child)])
    port = _free_port()
    server = ZukaServer(command, host="127.0.0.1", port=port, token=TOKEN, max_sessions=2,
                        out=io.StringIO())  # fmt: skip
    test_server = TestServer(await server._make_app(), host="127.0.0.1", port=port)
    await test_server.start_server()
    try:
        yield Guarded(f"http://127.0.0.1:{port}", f"127.0.0.1:{port}", server)
    finally:
        await test_server.close()
        # textual-serve never waits on a tab's process: its transport is closed when
        # collected, which must happen while this test's loop is still open.
        gc.collect()


async def _drawn(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    """The first bytes a session draws in the tab's terminal."""
    while True:
        msg = await ws.receive(timeout=30)
        if msg.type == aiohttp.WSMsgType.BINARY:
            return bytes(msg.data)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg


async def test_the_page_needs_the_token(guarded: Guarded) -> None:
    async with aiohttp.ClientSession() as session:
        for query in ["", "?token=", "?token=wrong", f"?token={TOKEN}x", "?token=%C3%A9"]:
            async with session.get(f"{guarded.base}/{query}") as r:
                assert r.status == 403, query
                assert TOKEN not in await r.text()
        async with session.get(f"{guarded.base}/?token={TOKEN}") as r:
            assert r.status == 200
            page = await r.text()
            assert f'data-session-websocket-url="ws://{guarded.host}/ws/{TOKEN}"' in page
            assert r.headers["Referrer-Policy"] == "no-referrer"
            assert r.headers["Cache-Control"] == "no-store"
        # textual-serve's downloads are not used by zuka, and not served.
        async with session.get(f"{guarded.base}/download/x") as r:
            assert r.status == 403


async def test_the_websocket_needs_the_token(guarded: Guarded) -> None:
    same = {"Origin": f"http://{guarded.host}"}
    async with aiohttp.ClientSession() as session:
        for path in ["/ws", "/ws?token=" + TOKEN, "/ws/", "/ws/wrong", f"/ws/{TOKEN}x"]:
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await session.ws_connect(guarded.base + path, headers=same)
            assert err.value.status == 403, path
        assert guarded.server.sessions == 0
        ws = await session.ws_connect(f"{guarded.base}/ws/{TOKEN}?width=80&height=24",
                                      headers=same)  # fmt: skip
        assert await _drawn(ws) == b"fake dashboard"
        await ws.close()


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.1",
                                    "http://127.0.0.1:1", "http://localhost"])  # fmt: skip
async def test_another_origin_is_refused(guarded: Guarded, origin: str) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await session.ws_connect(f"{guarded.base}/ws/{TOKEN}", headers={"Origin": origin})
        assert err.value.status == 403
        headers = {"Origin": origin}
        async with session.get(f"{guarded.base}/?token={TOKEN}", headers=headers) as r:
            assert r.status == 403
    assert guarded.server.sessions == 0


@pytest.mark.parametrize("host", ["evil.example", "rebind.attacker.example:8000", "",
                                  "127.0.0.1:x", "[::1"])  # fmt: skip
async def test_another_host_is_refused(guarded: Guarded, host: str) -> None:
    """A DNS-rebinding page reaches 127.0.0.1 under its own name, as its own origin."""
    async with aiohttp.ClientSession() as session:
        headers = {"Host": host}
        async with session.get(f"{guarded.base}/?token={TOKEN}", headers=headers) as r:
            assert r.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await session.ws_connect(f"{guarded.base}/ws/{TOKEN}",
                                     headers={"Host": host, "Origin": f"http://{host}"})  # fmt: skip
        assert err.value.status == 403


async def test_localhost_and_another_local_port_are_served(guarded: Guarded) -> None:
    """A tunnel (ssh -L 9000:127.0.0.1:8000) arrives with the browser's own port: the page
    points its WebSocket at the address the browser used."""
    async with aiohttp.ClientSession() as session:
        for host in ["localhost:9000", "127.0.0.1:9000", "[::1]:9000", "LOCALHOST"]:
            async with session.get(f"{guarded.base}/?token={TOKEN}",
                                   headers={"Host": host}) as r:  # fmt: skip
                assert r.status == 200, host
                assert f"ws://{host}/ws/{TOKEN}" in await r.text()


async def test_sessions_are_capped_and_the_refused_tab_is_told(guarded: Guarded) -> None:
    url = f"{guarded.base}/ws/{TOKEN}?width=80&height=24"
    same = {"Origin": f"http://{guarded.host}"}
    async with aiohttp.ClientSession() as session:
        first = await session.ws_connect(url, headers=same)
        second = await session.ws_connect(url, headers=same)
        assert await _drawn(first) == await _drawn(second) == b"fake dashboard"
        assert guarded.server.sessions == 2
        third = await session.ws_connect(url, headers=same)
        said = (await _drawn(third)).decode()
        assert "2 dashboards are open already" in said and "--max-sessions 2" in said
        assert guarded.server.sessions == 2
        await third.close()
        await first.close()
        await wait_until(lambda: guarded.server.sessions == 1, what="a tab's session to end")
        fourth = await session.ws_connect(url, headers=same)
        assert await _drawn(fourth) == b"fake dashboard"
        await fourth.close()
        await second.close()
        await wait_until(lambda: guarded.server.sessions == 0, what="the sessions to end")


def test_host_names() -> None:
    assert host_name("127.0.0.1:8000") == "127.0.0.1"
    assert host_name("[::1]:8000") == "::1" and host_name("[::1]") == "::1"
    assert host_name("LocalHost") == "localhost"
    for bad in ["", ":80", "a:b", "[::1", "[::1]x", "a:80:90"]:
        assert host_name(bad) is None, bad


def test_listening_everywhere_accepts_any_address_but_no_other_name() -> None:
    guard = Guard.for_host(TOKEN, "0.0.0.0")
    for host in ["192.168.1.10:8000", "[fe80::1]:8000", "localhost:8000"]:
        assert guard.refusal("/", TOKEN, host, None) is None, host
    assert guard.refusal("/", TOKEN, "evil.example:8000", None) is not None
    named = Guard.for_host(TOKEN, "jump.lab.example")
    assert named.refusal("/", TOKEN, "jump.lab.example:8000", None) is None
    assert named.refusal("/", TOKEN, "192.168.1.10:8000", None) is not None


def test_a_refusal_never_names_the_token() -> None:
    guard = Guard.for_host(TOKEN, "127.0.0.1")
    for path, given in [("/", TOKEN + "x"), (f"/ws/{TOKEN}x", None), ("/ws", TOKEN)]:
        why = guard.refusal(path, given, "127.0.0.1", None)
        assert why is not None and TOKEN not in why
    assert shown_path(f"/ws/{TOKEN}") == "/ws/..."


def test_max_sessions_is_checked(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    for bad in ("0", "65"):
        r = cli("web", "--max-sessions", bad, "--config", str(empty))
        assert r.code == 2 and "--max-sessions" in r.err
    with pytest.raises(InputError):
        check_max_sessions(-1)
    assert new_token() != new_token() and len(new_token()) >= 40


# -- attacker review (issue 16): the token in logs, a dropped big tab ----------------------


def _children(pid: int) -> list[int]:
    """The live processes whose parent is pid (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # bytes: a process's name is any bytes it chose (not UTF-8 nor one line)
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != b"Z":
            found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    """The process has exited and been reaped (not even a zombie is left)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _ws_open(port: int, path: str, rcvbuf: int = 0) -> socket.socket:
    """A raw WebSocket handshake (so that the test can drop the TCP connection as a
    crashed browser or a dead network does); rcvbuf: a small receive buffer makes the
    server's writes back up as soon as the test stops reading."""
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{port}\r\n\r\n".encode()
    )
    return sock


def _read_until(sock: socket.socket, *marks: bytes, limit: int = 1 << 22) -> bytes:
    got = b""
    while not any(m in got for m in marks) and len(got) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _drop(sock: socket.socket) -> None:
    """Close with a reset, no goodbye: what a killed browser or a dropped link does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


def _ws_text_frame(text: str) -> bytes:
    """One masked client text frame (RFC 6455), payload under 126 bytes."""
    data = text.encode()
    mask = b"\x01\x02\x03\x04"
    return (
        bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    )


def _big_ledger(path: Path, copies: int) -> None:
    """The demo fleet `copies` times over (12 nodes each), every node unreachable."""
    demo = demo_records(date(2026, 11, 30))
    big: dict[str, list[dict[str, object]]] = {"providers": demo["providers"], "nodes": [],
                                               "leases": [], "resources": []}  # fmt: skip
    for i in range(copies):
        big["nodes"] += [{**n, "name": f"{n['name']}-{i}", "ssh_host": "127.0.0.1",
                          "ssh_port": 9} for n in demo["nodes"]]  # fmt: skip
        big["leases"] += [{**lease, "node": f"{lease['node']}-{i}"} for lease in demo["leases"]]
    with Ledger.open(path) as ledger:
        ledger.import_records(big)


ALT_SCREEN = b"\x1b[?1049h"  # the dashboard's first words to the tab's terminal


def test_the_token_never_reaches_the_log(tmp_path: Path) -> None:
    """Garbage from a tab makes textual-serve's handler raise; textual-serve logged that
    with a traceback showing locals (the request: /ws/TOKEN). Everything the server
    prints is captured: the token is in the one line that gives the URL, nowhere else."""
    ledger = tmp_path / "web.db"
    build_demo_ledger(ledger, date(2026, 11, 30)).close()
    with zuka_web(tmp_path, ledger) as web:
        for garbage in ("not json", '["resize", {}]', "{}"):
            sock = _ws_open(web.port, f"/ws/{web.token}?width=100&height=30")
            _read_until(sock, ALT_SCREEN)
            sock.sendall(_ws_text_frame(garbage))
            # Until the server ends the session over it: closed at once, the tab could be
            # gone before the server read the garbage (then nothing is raised at all).
            sock.settimeout(60)
            _read_until(sock, b"\x00never\x00", limit=1 << 30)
            sock.close()
        raised = ("JSONDecodeError", "KeyError", "AssertionError")
        wait_until_sync(lambda: all(e in web.log.read_text(errors="replace") for e in raised),
                        timeout=60, what="the three errors to be logged")  # fmt: skip
        wait_until_sync(lambda: not _children(web.pid), timeout=60, what="the dashboards to go")
    said = web.log.read_text(errors="replace")
    assert said.count(web.token) == 1, said


def test_a_log_line_never_holds_the_token() -> None:
    """Whatever a library writes (a message, an exception, its traceback), masked."""
    import logging

    try:
        raise RuntimeError(f"bad GET /ws/{TOKEN}?width=80 from page /?token={TOKEN}")
    except RuntimeError:
        record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1,
                                   "Error handling request /ws/%s", (TOKEN,), sys.exc_info())  # fmt: skip
    text = ScrubbedFormatter(TOKEN).format(record)
    assert TOKEN not in text and "/ws/..." in text and "token=***" in text
    assert "RuntimeError" in text  # the traceback is still there, for whoever debugs


# A dashboard drawing without pause, single-threaded as an app in a big draw is: it reads
# its input (where the quit comes) only between two writes, so while its output pipe is
# full it reads nothing.
BIG_DASHBOARD = """
import os, select, sys
from pathlib import Path
Path(sys.argv[1]).write_text(str(os.getpid()))
out = sys.stdout.buffer
frame = b"\\x1b[?1049h" + b"x" * 60000
out.write(b"__GANGLION__\\n")
got = b""
while b'"quit"' not in got:
    out.write(b"D" + len(frame).to_bytes(4, "big") + frame)
    out.flush()
    while select.select([0], [], [], 0)[0]:
        chunk = os.read(0, 4096)
        if not chunk:
            sys.exit(0)
        got += chunk
"""


@pytest.mark.parametrize("tab", ["dropped", "silent"])
async def test_a_gone_tab_mid_draw_frees_its_process_and_slot(tmp_path: Path, tab: str) -> None:
    """A big dashboard mid-draw, its tab's connection backed up. "dropped": the tab resets
    its connection (textual-serve stopped reading the dashboard's output at the failed
    write, so the dashboard, blocked on its full pipe, never read its quit). "silent": the
    tab neither reads nor closes nor answers pings (a laptop asleep): textual-serve's
    session waited on that write for ever, holding the slot and the process. Either way
    the process is now reaped and the slot reused. The ping interval and the stall limit
    are injected short (15 s and 30 s in use) so the test takes seconds."""
    import asyncio

    from aiohttp.test_utils import TestServer

    child = tmp_path / "big_dashboard.py"
    child.write_text(BIG_DASHBOARD)
    pid_file = tmp_path / "pid"
    command = "exec " + shlex.join([sys.executable, str(child), str(pid_file)])
    port = _free_port()
    server = ZukaServer(command, host="127.0.0.1", port=port, token=TOKEN, max_sessions=1,
                        out=io.StringIO(), heartbeat_s=1.0, stalled_send_s=2.0)  # fmt: skip
    test_server = TestServer(await server._make_app(), host="127.0.0.1", port=port)
    await test_server.start_server()
    try:
        path = f"/ws/{TOKEN}?width=200&height=60"
        sock = await asyncio.to_thread(_ws_open, port, path, 4096)
        await asyncio.to_thread(_read_until, sock, ALT_SCREEN)
        pid = int(await wait_until(lambda: pid_file.exists() and pid_file.read_text()))
        # Let the server's writes back up (the test reads no more), then the tab goes.
        await wait_until(lambda: server.sessions == 1 and _blocked_writing(pid),
                         what="the dashboard to block on its output")  # fmt: skip
        if tab == "dropped":
            _drop(sock)
        await wait_until(lambda: _gone(pid), what="the dashboard process to be reaped")
        await wait_until(lambda: server.sessions == 0, what="the slot to be free")
        again = await asyncio.to_thread(_ws_open, port, path)
        assert ALT_SCREEN in await asyncio.to_thread(
            _read_until, again, ALT_SCREEN, b"open already"
        )
        again.close()
        sock.close()
        await wait_until(lambda: server.sessions == 0, what="the second session to end")
    finally:
        await test_server.close()
        gc.collect()


def _blocked_writing(pid: int) -> bool:
    """The process sleeps in a write to a full pipe (its kernel wait channel says so)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def test_a_big_fleet_tab_dropped_abruptly_frees_its_dashboard(tmp_path: Path) -> None:
    """A real `zuka web` with one slot, a fleet of 120 nodes on a big terminal: a tab
    that reads a little and drops its connection leaves no dashboard process behind, and
    the next tab gets a dashboard, not the refusal."""
    ledger = tmp_path / "big.db"
    _big_ledger(ledger, copies=10)
    with zuka_web(tmp_path, ledger, "--max-sessions", "1") as web:
        path = f"/ws/{web.token}?width=250&height=80"
        sock = _ws_open(web.port, path, rcvbuf=4096)
        _read_until(sock, ALT_SCREEN)
        [dashboard] = wait_until_sync(lambda: _children(web.pid), what="the tab's dashboard")
        _drop(sock)
        wait_until_sync(lambda: _gone(dashboard), timeout=60, what="the dashboard to exit")
        again = _ws_open(web.port, path)
        first = _read_until(again, ALT_SCREEN, b"open already")
        assert ALT_SCREEN in first and b"open already" not in first
        again.close()


async def test_the_page_fetches_nothing_from_another_host(guarded: Guarded) -> None:
    """textual-serve's page asked fonts.googleapis.com for its font (blocked in mainland
    China, out of an offline jump host's reach): every stylesheet, script, image and font
    the page names is this server's, and the font is served."""
    import re

    async with aiohttp.ClientSession() as session:
        async with session.get(f"{guarded.base}/?token={TOKEN}") as r:
            assert r.status == 200
            page = await r.text()
        assert "googleapis" not in page and "gstatic" not in page
        named = re.findall(r"""(?:href|src)\s*=\s*["']([^"']+)|url\(\s*["']?([^"')]+)""", page)
        urls = [a or b for a, b in named]
        assert urls and all(u.startswith("/static/") for u in urls), urls
        font = next(u for u in urls if u.endswith(".ttf"))
        async with session.get(f"{guarded.base}{font}") as r:
            assert r.status == 200 and len(await r.read()) > 10_000
        assert "Roboto Mono" in page and "DejaVu Sans Mono" in page


def test_a_lab_ledger_is_served_read_only_and_so_is_read_only_asked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """Whoever holds a web token is not known by name: on a lab's ledger the tabs read only."""
    import tui.web.guard
    from leases.lab.layout import Lab

    commands: list[str] = []

    class Server:
        def __init__(self, command: str, **kwargs: object) -> None:
            commands.append(command)

        def serve(self) -> None:
            return None

    monkeypatch.setattr(tui.web.guard, "ZukaServer", Server)
    assert cli("node", "add", "n1", "--ssh", "root@10.0.0.1").code == 0
    r = cli("web")
    assert r.code == 0, r.err
    assert "--read-only" not in shlex.split(commands[-1])
    r = cli("web", "--read-only")
    assert r.code == 0 and shlex.split(commands[-1])[-1] == "--read-only", r.err
    if os.geteuid() != 0:
        pytest.skip("a lab's marker counts only when root owns it")
    lab = Lab(tmp_path)
    lab.marker.write_text(lab.marker_text())
    r = cli("web")
    assert r.code == 0, r.err
    assert "--read-only" in shlex.split(commands[-1])
    assert "the web dashboards are read-only (a lab's ledger" in r.err


def test_a_read_only_tab_opens_its_dashboard_read_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    from tui.dashboard.app import ZukaApp
    from tui.web.serve import main_child

    seen: list[bool] = []
    monkeypatch.setattr(ZukaApp, "run", lambda self, *a, **k: seen.append(self.readonly))
    assert cli("node", "add", "n1", "--ssh", "root@10.0.0.1").code == 0
    ledger = str(tmp_path / "ledger.db")
    assert main_child(["--ledger", ledger]) == 0
    assert main_child(["--ledger", ledger, "--read-only"]) == 0
    assert seen == [False, True]
