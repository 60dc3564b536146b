"""Who may open `zuka web`: a secret token per run, this server's own Host, same-origin
pages only, and a cap on dashboards at once.

textual-serve itself answers any request: any web page the user visits could open its
WebSocket (browsers send the Origin but do not stop it), a DNS-rebinding name could reach
it, every other user of a shared jump host could connect, and each connection starts a
dashboard process. Here every request is checked before textual-serve sees it.

A tab's session is zuka's own (not textual-serve's handle_websocket): however the tab goes
(closed, dropped mid-draw, never reading again, sending garbage), its dashboard process is
told to quit, then terminated, and reaped before its slot is free; and no log line ever
holds the token (textual-serve's rich handler printed tracebacks with their locals,
`/ws/TOKEN` among them).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import re
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, TextIO

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible

log = logging.getLogger("zuka.web")

DEFAULT_MAX_SESSIONS = 4
MAX_SESSIONS_LIMIT = 64
# How long a tab refused for the cap keeps its message on screen before it is closed.
REFUSED_TAB_S = 120.0
WS_PREFIX = "/ws/"
# A dashboard told to quit has this long to go before it is terminated (then killed).
QUIT_GRACE_S = 5.0
# A tab that takes none of its dashboard's output for this long is gone (a laptop asleep,
# a dropped network): its connection is cut rather than waited on for ever.
STALLED_SEND_S = 30.0
# WebSocket pings (textual-serve's value): a tab that answers none is closed.
HEARTBEAT_S = 15.0


def new_token() -> str:
    """A fresh secret for one run of `zuka web` (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def check_max_sessions(n: int) -> int:
    if not 1 <= n <= MAX_SESSIONS_LIMIT:
        raise InputError(
            "--max-sessions", str(n),
            _("dashboards at once: 1 to {most}").format(most=MAX_SESSIONS_LIMIT),
        )  # fmt: skip
    return n


def host_name(header: str) -> str | None:
    """The name in a Host (or Origin authority) header, lower case, without its port;
    None when it is not a name with an optional numeric port."""
    h = header.strip().lower()
    if h.startswith("["):
        end = h.find("]")
        if end < 0:
            return None
        name, rest = h[1:end], h[end + 1 :]
    else:
        name, colon, port = h.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    return name or None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Guard:
    """The checks every request passes (a pure rule: the server only asks it)."""

    token: str = field(repr=False)
    names: frozenset[str]  # host names a request's Host may carry
    any_ip: bool  # listening on every address: any IP literal is one of ours

    @classmethod
    def for_host(cls, token: str, bound: str) -> Guard:
        names = {"localhost", "127.0.0.1", "::1"}
        wildcard = bound in ("0.0.0.0", "::")
        if wildcard:
            # Whatever name the user reaches this machine by; an IP literal cannot be
            # rebound, so any is accepted.
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        else:
            names.add(bound.lower())
        return cls(token, frozenset(names), wildcard)

    def _token_is(self, given: str | None) -> bool:
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def refusal(
        self, path: str, query_token: str | None, host: str | None, origin: str | None
    ) -> str | None:
        """Why this request is refused, or None. Never names the token."""
        name = host_name(host) if host is not None else None
        if name is None:
            return f"Host {visible(host or '(none)', 80)!r} is not an address"
        if name not in self.names and not (self.any_ip and _is_ip(name)):
            # A DNS-rebinding page reaches us under its own name.
            return f"Host {visible(name, 80)!r} is not this server's address"
        if origin is not None and origin.lower() != f"http://{(host or '').strip().lower()}":
            return f"Origin {visible(origin, 80)!r} is another site"
        if path.startswith("/static/"):
            return None  # textual-serve's own scripts and fonts: nothing secret
        if path == "/":
            return None if self._token_is(query_token) else "no valid token in the URL"
        if path.startswith(WS_PREFIX):
            return None if self._token_is(path[len(WS_PREFIX) :]) else "no valid token"
        if path == "/ws":
            return "no valid token"
        return "not served"


# The font textual-serve ships (static/fonts) and the terminal asks for by name, served from
# here; then monospace fonts a jump host's browser may have, each with the block elements
# the sparklines are drawn with.
LOCAL_FONTS = """<style>
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf")
          format("truetype");
        font-weight: 100 700;
        font-display: block;
      }
      body { font-family: "Roboto Mono", "DejaVu Sans Mono", "Noto Sans Mono",
        "Liberation Mono", Menlo, Consolas, monospace; }
    </style>"""
# A stylesheet, script or font on another host: fonts.googleapis.com is blocked in mainland
# China and out of an offline jump host's reach (sparklines then drew as solid bars).
_REMOTE = re.compile(r"<(link|script)\b[^>]*\b(href|src)\s*=\s*[\"']?(https?:)?//[^>]*>"
                     r"(\s*</script>)?", re.IGNORECASE)  # fmt: skip


def local_page() -> str:
    """textual-serve's page template with every reference to another host taken out and
    its font served from this server instead."""
    from importlib.resources import files

    page = (files("textual_serve") / "templates" / "app_index.html").read_text("utf-8")
    page = _REMOTE.sub("", page)
    return page.replace("</head>", LOCAL_FONTS + "\n  </head>", 1)


def shown_path(path: str) -> str:
    """A request's path as logged: the WebSocket's token left out."""
    return "/ws/..." if path.startswith(WS_PREFIX) else visible(path, 80)


class ScrubbedFormatter(logging.Formatter):
    """Log lines (and their tracebacks) with the token, a WebSocket path and a token=
    query value masked: whatever a library puts in a message, the token stays out."""

    def __init__(self, token: str) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.token = token

    def format(self, record: logging.LogRecord) -> str:
        text = re.sub(r"/ws/[A-Za-z0-9_\-]+", "/ws/...", super().format(record))
        text = re.sub(r"token=[A-Za-z0-9_\-%]+", "token=***", text)
        return text.replace(self.token, "***")


class Dashboard(AppService):
    """One tab's dashboard process, ended for sure (end()).

    textual-serve stops reading a dashboard's output at the first failed write to a
    closed tab, so a dashboard in the middle of a big draw blocks on a full pipe, never
    reads the quit it is sent, and lives on (an error other than ConnectionResetError, or
    a tab that stops reading, left the session itself waiting for ever). Here output for a
    tab that is gone is read and dropped, a stalled write cuts the connection, and end()
    escalates from quit to terminate to kill, always reaping the process."""

    def __init__(
        self,
        command: str,
        websocket: web.WebSocketResponse,
        transport: Any,
        server: Server,
        stalled_send_s: float = STALLED_SEND_S,
    ) -> None:
        super().__init__(
            command,
            write_bytes=self._write_bytes,
            write_str=self._write_str,
            close=self._close_tab,
            download_manager=server.download_manager,
            debug=server.debug,
        )
        self._ws = websocket
        self._transport = transport
        self._stalled_send_s = stalled_send_s
        self.gone = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def _close_tab(self) -> None:
        await self._ws.close()  # the dashboard exited by itself

    async def _write_bytes(self, data: bytes) -> None:
        await self._to_tab(lambda: self._ws.send_bytes(data))

    async def _write_str(self, data: str) -> None:
        await self._to_tab(lambda: self._ws.send_str(data))

    async def _to_tab(self, send: Callable[[], Awaitable[None]]) -> None:
        if self.gone or self._ws.closed:
            self.gone = True  # still read (so the process never blocks), no longer sent
            return
        try:
            async with asyncio.timeout(self._stalled_send_s):
                await send()
        except Exception:  # closed, reset, lost, stalled: the tab is gone either way
            self.gone = True
            self._cut()

    def _cut(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    async def end(self) -> None:
        """Close the tab, tell the process to quit, and wait for it; terminate it after
        QUIT_GRACE_S, kill it after as long again. Returns when it has been reaped."""
        self.gone = True
        process = self._process
        try:
            try:
                async with asyncio.timeout(1.0):
                    await self._ws.close()
            except Exception:  # a tab that takes nothing cannot take the close either
                self._cut()
            if process is None:
                return
            with suppress(Exception):
                async with asyncio.timeout(1.0):
                    await self.send_meta({"type": "quit"})
            for escalate in (process.terminate, process.kill):
                if await _exits_within(process, QUIT_GRACE_S):
                    break
                with suppress(ProcessLookupError):
                    escalate()
            else:
                if not await _exits_within(process, QUIT_GRACE_S):
                    log.warning("a dashboard process (pid %s) outlived SIGKILL", process.pid)
        finally:
            if process is not None and process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()  # cancelled while waiting: never leave it running
            await self._end_reader()

    async def _end_reader(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        with suppress(Exception):
            await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        if not task.done():
            with suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(QUIT_GRACE_S):
                    await asyncio.shield(task)
            task.cancel()


async def _exits_within(process: asyncio.subprocess.Process, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await process.wait()
    except TimeoutError:
        return False
    return True


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ZukaServer(Server):
    """textual-serve behind the guard, with at most `max_sessions` dashboards at once."""

    def __init__(
        self,
        command: str,
        *,
        host: str,
        port: int,
        token: str,
        max_sessions: int,
        out: TextIO,
        heartbeat_s: float = HEARTBEAT_S,
        stalled_send_s: float = STALLED_SEND_S,
    ) -> None:
        super().__init__(command, host=host, port=port, title="zuka")
        self.guard = Guard.for_host(token, host)
        self.max_sessions = max_sessions
        self.sessions = 0
        self.out = out
        self.heartbeat_s = heartbeat_s
        self.stalled_send_s = stalled_send_s

    def url(self) -> str:
        """The URL the user opens (it holds the token)."""
        shown = self.host
        if shown in ("0.0.0.0", "::"):
            shown = socket.gethostname()
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}/?token={self.guard.token}"

    def initialize_logging(self) -> None:
        """Plain lines on stderr, the token masked in each (see ScrubbedFormatter), in
        place of textual-serve's rich handler, whose tracebacks show every frame's locals
        (the request, and its path /ws/TOKEN)."""
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(ScrubbedFormatter(self.guard.token))
        logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
        # aiohttp's access log writes each request's query, and the page's holds the token.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        # textual-serve's page with nothing fetched from another host (see local_page).
        aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": local_page()}))
        app.middlewares.append(self._guard)
        # The page's WebSocket carries the token in its path: textual-serve's script adds
        # its own `?width=...` to the URL it is given.
        app.router.add_get(WS_PREFIX + "{token}", self.handle_websocket, name="zuka-ws")
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        why = self.guard.refusal(
            request.path,
            request.query.get("token"),
            request.headers.get("Host"),
            request.headers.get("Origin"),
        )
        if why is not None:
            log.warning("refused %s %s: %s", request.method, shown_path(request.path), why)
            return web.Response(status=403, text=f"zuka web: refused: {why}\n")
        response = await handler(request)
        if not response.prepared:
            # The page's URL holds the token: never sent on as a Referer, never cached,
            # never framed by another page.
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
            response.headers["X-Frame-Options"] = "DENY"
        return response

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """textual-serve's page, its URLs built from the Host the guard accepted (so a
        tunnel to another local port works) and the WebSocket's carrying the token."""
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"ws://{request.host}{WS_PREFIX}{self.guard.token}",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self.sessions >= self.max_sessions:
            return await self._refuse_session(request)
        # The slot is held until the tab's dashboard process has been reaped.
        self.sessions += 1
        try:
            return await self._session(request)
        finally:
            self.sessions -= 1

    async def _session(self, request: web.Request) -> web.WebSocketResponse:
        """One tab: its dashboard process fed with the tab's keys and sizes, drawing into
        the tab, and ended for sure however the tab goes."""
        websocket = web.WebSocketResponse(heartbeat=self.heartbeat_s)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        dashboard = Dashboard(self.command, websocket, request.transport, self, self.stalled_send_s)
        try:
            await dashboard.start(width, height)
            await self._process_messages(websocket, dashboard)
        except Exception as exc:  # a malformed message from the tab, a failed start
            # Its type only: a traceback's frames hold the request, and its path the token.
            log.warning("a dashboard's session ended on %s", type(exc).__name__)
        finally:
            await dashboard.end()
        return websocket

    async def _refuse_session(self, request: web.Request) -> web.WebSocketResponse:
        said = _(
            "zuka web: {open} dashboards are open already, the most at once "
            "(--max-sessions {most}); close a tab, then reload this one."
        ).format(open=self.sessions, most=self.max_sessions)
        log.warning("refused a dashboard: %s", said)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        # Written into the tab's terminal, and left there (closing would cover it).
        await ws.send_bytes(f"\r\n  {said}\r\n".encode())
        try:
            async with asyncio.timeout(REFUSED_TAB_S):
                async for _message in ws:
                    pass
        except TimeoutError:
            pass
        await ws.close()
        return ws

    async def on_startup(self, app: web.Application) -> None:
        # The one line that holds the token.
        print(_("zuka web: open {url}").format(url=self.url()), file=self.out, flush=True)
        print(
            _("zuka web: at most {most} dashboards at once; ctrl+c stops").format(
                most=self.max_sessions
            ),
            file=self.out,
            flush=True,
        )
