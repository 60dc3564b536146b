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
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import aiohttp
import pytest
from waiting import wait_until, wait_until_sync

from leases.demo import build_demo_ledger
from leases.errors import InputError
from tui.web import check_host, check_port, child_command, exposure_warning, is_loopback
from tui.webguard import Guard, ZukaServer, check_max_sessions, host_name, new_token, shown_path

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
    assert words == [sys.executable, "-m", "tui.web", "--ledger", str(odd), "--config", "c d.toml"]


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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`zuka web` on the demo ledger, in its own process group (it starts one dashboard
    process per tab): the whole group is stopped afterwards. Yields the URL it printed."""
    ledger = tmp_path / "web.db"
    build_demo_ledger(ledger, date(2026, 11, 30)).close()
    config = tmp_path / "config.toml"
    config.write_text("")
    port = _free_port()
    log = (tmp_path / "server.log").open("wb")
    argv = [sys.executable, "-m", "tui.cli", "web", "--ledger", str(ledger),
            "--config", str(config), "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        said = tmp_path / "server.log"
        wait_until_sync(lambda: server.poll() is not None or _listening(port),
                        timeout=60, what="zuka web to listen")  # fmt: skip
        url = wait_until_sync(lambda: server.poll() is not None or _said_url(said),
                              timeout=60, what="zuka web to print its URL")  # fmt: skip
        assert server.poll() is None, said.read_text()
        assert isinstance(url, str) and url.startswith(f"http://127.0.0.1:{port}/?token=")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


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
