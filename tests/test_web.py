"""`zuka web`: the dashboard served by textual-serve, driven from a real headless Chromium
(Debian's /usr/bin/chromium through Playwright), on 127.0.0.1 only."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from waiting import wait_until_sync

from leases.demo import build_demo_ledger
from leases.errors import InputError
from tui.web import check_host, check_port, child_command, exposure_warning, is_loopback

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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`zuka web` on the demo ledger, in its own process group (it starts one dashboard
    process per tab): the whole group is stopped afterwards."""
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
        wait_until_sync(lambda: server.poll() is not None or _listening(port),
                        timeout=60, what="zuka web to listen")  # fmt: skip
        assert server.poll() is None, (tmp_path / "server.log").read_text()
        yield f"http://127.0.0.1:{port}/"
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
