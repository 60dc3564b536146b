"""The /metrics endpoint, served in the collector's own asyncio loop: a minimal HTTP/1.1
server (one request a connection, then closed) that answers GET /metrics with what its
render function returns (leases.metrics.gauges.Gauges.render).

Every client is hostile: the request head is read within HEAD_TIMEOUT_S and at most
MAX_HEAD bytes (431 beyond, 408 when it never ends), no body is read, at most MAX_CLIENTS
connections are held at once, a reply that the client does not take within
WRITE_TIMEOUT_S is dropped, and scrapes within FRESH_S of a rendering get that rendering
(a client scraping in a loop costs one rendering a second). With a token, a request
without `Authorization: Bearer TOKEN` (compared in constant time) gets 401 and
WWW-Authenticate, and no rendering.

When MAX_CLIENTS are held, a new connection drops the one that has waited longest without
a whole request head; only when every held connection is being answered is the newcomer
closed unanswered. A connection whose whole head has arrived (Prometheus sends it at
once) is never dropped for a later one, so connections held open idle, or opened again in
a loop as they are dropped, by someone without the token cannot keep Prometheus's scrapes
out; the connections held stay at MAX_CLIENTS, a dropped one's task ends at once. A flood
of thousands of connections a second still drops some scrapes before their head arrives,
and without a token slow readers can hold every answering slot for WRITE_TIMEOUT_S (README
says so).
A Unix socket is created mode 0600 (its owner only) before it listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
import stat
import time
from collections.abc import Callable

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.metrics.listen import FIELD, Listen

MAX_HEAD = 16 * 1024
HEAD_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 10.0
MAX_CLIENTS = 16
MAX_HEADERS = 64
# A rendering is served again to scrapes within this many seconds of it.
FRESH_S = 1.0
# The classic text format generate_latest writes (every name here is a legacy one); named
# here, as prometheus-client's own "latest" moved on to 1.0.0.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
REALM = 'Bearer realm="zuka metrics"'

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def unix_socket(path: os.PathLike[str] | str) -> socket.socket:
    """A Unix socket bound at `path`, mode 0600 before it listens (a connect before
    listen() is refused, so no other user gets in between). A stale socket nobody listens
    on is replaced; anything else at the path is refused."""
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise InputError(FIELD, f"unix:{path}", _("something other than a socket is there"))
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # stale: nobody listens
        else:
            raise InputError(FIELD, f"unix:{path}", _("another process listens there"))
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(64)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        words = _("cannot listen: {why}").format(why=exc.strerror)
        raise InputError(FIELD, f"unix:{path}", words) from None
    return sock


def _head_arrived(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Whether a whole request head already waits unread on the connection (looked at,
    not taken: the reader still reads it): in what asyncio has taken off the socket into
    the reader's buffer and its handler has not yet read (a loop busy with a flood of
    connects lets bytes wait there), then on the socket itself, as far as the longest head
    the reader takes (its limit bounds where the end may start: MAX_HEAD + 4 bytes)."""
    bound = MAX_HEAD + 4
    # StreamReader keeps what came in a bytearray it has no public way to show.
    buffered = bytes(getattr(reader, "_buffer", b"")[:bound])
    if b"\r\n\r\n" in buffered:
        return True
    if len(buffered) >= bound:
        return False  # no end within a head's bound: answered 431, never a scrape
    held = writer.get_extra_info("socket")
    if held is None:
        return False
    try:
        with held.dup() as sock:
            waiting = sock.recv(bound - len(buffered), socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    return b"\r\n\r\n" in buffered + waiting


class MetricsServer:
    """GET /metrics over TCP or a Unix socket, in the running loop."""

    def __init__(
        self,
        listen: Listen,
        render: Callable[[], bytes],
        token: bytes | None,
        log: logging.Logger | None = None,
        fresh_s: float = FRESH_S,
    ) -> None:
        self.listen = listen
        self._token = token
        self._fresh_s = fresh_s
        self._body: tuple[float, bytes] | None = None  # (monotonic time, rendered)
        self._log = log or logging.getLogger(__name__)
        self._render = render
        self._server: asyncio.Server | None = None
        # Connections still waiting for their request head, oldest first (dicts keep
        # insertion order), and those being answered: together at most MAX_CLIENTS.
        self._waiting: dict[asyncio.StreamWriter, asyncio.StreamReader] = {}
        self._answering: set[asyncio.StreamWriter] = set()
        # The handlers running, ended by close (the server's own wait_closed does not wait
        # for them on Python 3.11: they would answer 408 after it).
        self._handlers: set[asyncio.Task[None]] = set()
        self.dropped = 0  # waiting connections dropped for a newcomer (tests)
        self.served = 0  # replies with the metrics (tests)

    @property
    def port(self) -> int:
        """The TCP port listened on (the one asked for, or the system's pick for 0)."""
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        if self.listen.path is not None:
            sock = unix_socket(self.listen.path)
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_HEAD)
            return
        try:
            self._server = await asyncio.start_server(
                self._serve, self.listen.host, self.listen.port, limit=MAX_HEAD
            )
        except OSError as exc:
            words = _("cannot listen: {why}").format(why=exc.strerror)
            raise InputError(FIELD, str(self.listen), words) from None

    async def close(self) -> None:
        server, self._server = self._server, None  # a connection accepted now is closed
        if server is None:
            return
        server.close()
        for writer in [*self._waiting, *self._answering]:
            writer.transport.abort()  # its read or write ends at once, then its handler
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
        if self.listen.path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.listen.path)

    @property
    def clients(self) -> int:
        """Connections held now: waiting for their head or being answered."""
        return len(self._waiting) + len(self._answering)

    def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Room for a new connection (False: turned away, every held connection being
        answered). When full, the one that has waited longest without a whole head is
        dropped for it; one whose head has arrived meanwhile is kept, as being answered."""
        while self.clients >= MAX_CLIENTS and self._waiting:
            oldest, its_reader = next(iter(self._waiting.items()))
            del self._waiting[oldest]
            if _head_arrived(its_reader, oldest):
                self._answering.add(oldest)
                continue
            oldest.transport.abort()  # its read ends at once; its task then ends
            self.dropped += 1
        if self.clients >= MAX_CLIENTS:
            return False
        if _head_arrived(reader, writer):
            self._answering.add(writer)
        else:
            self._waiting[writer] = reader
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._server is None or not self._admit(reader, writer):
            writer.transport.abort()  # closing, or turned away
            return
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        try:
            status, headers, body = await self._answer(reader)
            if self._waiting.pop(writer, None) is not None:
                self._answering.add(writer)  # its head came: no longer to be dropped
            elif writer not in self._answering:
                return  # dropped for a newcomer while its head was read
            head = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(body)}",
                    "Connection: close", *(f"{k}: {v}" for k, v in headers)]  # fmt: skip
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body)
            await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the client went away or would not read: nothing to tell it
        finally:
            self._waiting.pop(writer, None)
            self._answering.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
            if handler is not None:
                self._handlers.discard(handler)

    async def _answer(
        self, reader: asyncio.StreamReader
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        text = [("Content-Type", "text/plain; charset=utf-8")]
        try:
            # In this task (asyncio.timeout, not wait_for's task of its own): the head is
            # taken off the reader and the connection marked as being answered in one step,
            # so a newcomer admitted between the two cannot drop it as headless.
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                raw = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            return 408, text, b"the request head did not arrive in time\n"
        except asyncio.LimitOverrunError:
            return 431, text, f"the request head is over {MAX_HEAD} bytes\n".encode()
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1.") or len(lines) > MAX_HEADERS:
            return 400, text, b"not an HTTP/1.x request\n"
        method, target = parts[0], parts[1]
        if target.split(b"?", 1)[0] != b"/metrics":
            return 404, text, b"only /metrics is here\n"
        if method not in (b"GET", b"HEAD"):
            return 405, [*text, ("Allow", "GET, HEAD")], b"GET /metrics\n"
        if self._token is not None and not self._authorised(lines[1:]):
            return 401, [*text, ("WWW-Authenticate", REALM)], b"a bearer token is needed\n"
        try:
            body = self._rendered()
        except Exception as exc:  # a fault in zuka: logged, the scrape fails, polling goes on
            self._log.error("metrics: a scrape failed", exc_info=exc)
            return 500, text, b"zuka could not render its metrics; see its log\n"
        self.served += 1
        return 200, [("Content-Type", CONTENT_TYPE)], b"" if method == b"HEAD" else body

    def _rendered(self) -> bytes:
        """The metrics, rendered again only when the last rendering is older than
        fresh_s: clients scraping in a loop cost one rendering a second at most."""
        now = time.monotonic()
        if self._body is None or now - self._body[0] >= self._fresh_s:
            self._body = (now, self._render())
        return self._body[1]

    def _authorised(self, headers: list[bytes]) -> bool:
        assert self._token is not None
        given = [v for k, _sep, v in (h.partition(b":") for h in headers)
                 if k.strip().lower() == b"authorization"]  # fmt: skip
        if len(given) != 1:
            return False
        scheme, _sep, credentials = given[0].strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(credentials.strip(), self._token)
