"""Sending one notification message (leases.notify.message) to one URL, now.

URLs (config `[notify] urls`), two families:
- Chat robots, sent by zuka itself so that any host works (a lab's proxy, a test server):
  the robot's full webhook URL as the platform gives it (oapi.dingtalk.com,
  open.feishu.cn / open.larksuite.com, qyapi.weixin.qq.com are recognised), or any host
  with a kind prefix: `dingtalk+https://HOST/robot/send?access_token=T`,
  `feishu+https://HOST/open-apis/bot/v2/hook/T` (`lark+` is the same), `wecom+https://HOST
  /cgi-bin/webhook/send?key=K`. A robot with signing on takes `secret=SEC...` in the URL's
  query (DingTalk, Feishu); zuka removes it and signs (HMAC-SHA256) instead.
  apprise's own dingtalk:// and feishu:// plugins post to fixed public hosts, hence these.
- Everything else is an apprise URL (mailto://, slack://, json://, ...), sent by apprise.
A URL with spaces or control characters, a robot URL that is not plain ASCII or not
http(s), and any URL whose host is link-local or a cloud metadata service (169.254.0.0/16,
100.100.100.200, ... in any spelling, or a name resolving there: see leases.notify.host) is refused;
every send checks again each address its connections resolve to, and connects to those.
Robot posts never follow redirects (a 3xx is a failure), nor do apprise's (zuka turns its
`redirects` off). Text is made visible and bounded, and the characters that
make a chat mention are swapped for their full-width forms (leases.notify.message), since node text
(a node's name or note, an SSH error) reaches the messages.

One send (send()) runs in its own thread under an overall deadline of timeout_s: a robot
whose endpoint drips its answer is cut off (its socket shut); an apprise send past it is
left to end in the background. A send never raises, and what it reports, logs or stores
never holds the URL's secrets (leases.notify.url: scrub(); mask_url() masks every query
value, user and password, apprise's +header and -param values included).
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from leases.core.i18n import _
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.notify.host import Resolver, guarded, system_resolver
from leases.notify.message import Message, apprise_text, robot_request
from leases.notify.url import Target, TargetKind, apprise_plugin, kind_word, scrub

# apprise logs through the "apprise" logger; without a handler Python's last resort would
# print its warnings on the terminal (the dashboard's, too).
logging.getLogger("apprise").addHandler(logging.NullHandler())

ANSWER_BYTES = 65536


@dataclass(frozen=True)
class SendResult:
    target: Target
    ok: bool
    detail: str


Sender = Callable[[Target, Message, float], SendResult]


def _failure(exc: BaseException, timeout: float) -> str:
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        return _("connection refused")
    if isinstance(reason, TimeoutError):
        return _("timed out after {timeout:g} s").format(timeout=timeout)
    return visible(reason, 200)


class _Watch:
    """The connections of one send, so that its deadline can cut them: a slow-drip
    endpoint (a byte a second) never trips a socket timeout. Shutting the socket down
    makes the sending thread's read fail at once, so an abandoned send ends too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conns: list[http.client.HTTPConnection] = []
        self.aborted = False

    def track(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conns.append(conn)

    def connected(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if self.aborted:
                conn.close()
                raise TimeoutError("the send's deadline passed")

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            socks = [c.sock for c in self._conns if c.sock is not None]
        for sock in socks:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> Callable[..., Any]:
    class Conn(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            watch.connected(self)

    def make(host: str, **kw: Any) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection = Conn(host, **kw)
        watch.track(conn)
        return conn

    return make


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(http.client.HTTPConnection, self.watch), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        context = getattr(self, "_context", None)
        make = _watched(http.client.HTTPSConnection, self.watch)
        return self.do_open(make, req, context=context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A robot's answer is never followed elsewhere: a 3xx (to an internal address, say)
    becomes an HTTPError that the send reports as a failure."""

    def redirect_request(self, *args: Any) -> None:
        return None


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """http(s) only (no file:, ftp: or data:), the environment's proxy honoured, no
    redirects, every connection watched."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.UnknownHandler(),
        _HttpHandler(watch),
        _HttpsHandler(watch),
        urllib.request.HTTPDefaultErrorHandler(),
        _NoRedirect(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


def _post_robot(target: Target, message: Message, timeout: float, watch: _Watch) -> SendResult:
    url, payload = robot_request(target, message, time.time())
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        return SendResult(target, False, _("a robot's address must be http(s)://"))
    request = urllib.request.Request(
        url,
        data=json.dumps(payload, ensure_ascii=False).encode(),
        headers={"Content-Type": "application/json; charset=utf-8", "User-Agent": "zuka"},
        method="POST",
    )
    try:
        with _opener(watch).open(request, timeout=timeout) as answer:
            status = int(answer.status)
            raw = answer.read(ANSWER_BYTES)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return SendResult(target, False, _redirected(exc.code))
        return SendResult(target, False, f"HTTP {exc.code} {visible(exc.reason, 100)}")
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return SendResult(target, False, _failure(exc, timeout))
    if 300 <= status < 400:
        return SendResult(target, False, _redirected(status))
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for code_key, text_key in (("errcode", "errmsg"), ("code", "msg"), ("StatusCode", "")):
            code = data.get(code_key)
            if code not in (None, 0):
                said = visible(data.get(text_key, ""), 200) if text_key else ""
                return SendResult(
                    target,
                    False,
                    _("the robot answered {key} {code} {said}").format(
                        key=code_key, code=code, said=said
                    ),
                )
    return SendResult(
        target, True, _("the {kind} robot accepted it").format(kind=kind_word(target.kind))
    )


def _redirected(code: int) -> str:
    return _(
        "the robot answered HTTP {code}, a redirect: not followed (give its final address)"
    ).format(code=code)


class _ThreadLog(logging.Handler):
    """apprise's log lines of this thread only (sends run in several threads)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.lines.append(record.getMessage())


_NOTIFY_TYPE = {Severity.INFO: "info", Severity.WARNING: "warning", Severity.CRITICAL: "failure"}


def _send_apprise(target: Target, message: Message, timeout: float) -> SendResult:
    import apprise

    plugin = apprise_plugin(target.url)
    if plugin is None:
        return SendResult(target, False, _("apprise does not understand this URL"))
    plugin.socket_connect_timeout = timeout
    plugin.socket_read_timeout = timeout
    # apprise follows HTTP redirects by default (a POST to json:// turned into a GET
    # elsewhere); never, whatever the URL's ?redirect= says.
    plugin.redirects = False
    title, body = apprise_text(message)
    log = _ThreadLog()
    logger = logging.getLogger("apprise")
    logger.addHandler(log)
    started = time.monotonic()
    try:
        ok = bool(
            plugin.notify(
                body=body,
                title=title,
                notify_type=apprise.NotifyType(_NOTIFY_TYPE[message.severity]),
            )
        )
    except Exception as exc:  # a plugin's own bug must not end the worker
        ok, log.lines = (
            False,
            [_("apprise failed: {why}").format(why=f"{type(exc).__name__}: {exc}")],
        )
    finally:
        logger.removeHandler(log)
    if ok:
        return SendResult(target, True, _("apprise sent it"))
    said = " ".join(log.lines[-2:]) or _("apprise could not send it")
    # apprise words a refused connection and a timeout alike (at warning level); a failure
    # that took the whole timeout was the endpoint not answering.
    if time.monotonic() - started >= 0.9 * timeout:
        said = _("timed out after {timeout:g} s ({said})").format(timeout=timeout, said=said)
    return SendResult(target, False, visible(said, 300))


def send(
    target: Target, message: Message, timeout: float, *, resolve: Resolver = system_resolver
) -> SendResult:
    """Send one message to one target now, within timeout seconds in all: the send runs
    in its own thread, and one that is not done by then is cut off (a robot's socket is
    shut) or, for apprise, left to end in the background. Every address its connections
    resolve to (through resolve) is checked, and a refused one fails the send. Never
    raises; the detail never holds the URL's secrets."""
    watch = _Watch()
    box: list[SendResult] = []

    def work() -> None:
        with guarded(resolve) as refused:
            try:
                if target.kind is TargetKind.APPRISE:
                    result = _send_apprise(target, message, timeout)
                else:
                    result = _post_robot(target, message, timeout, watch)
            except Exception as exc:  # whatever urllib, http.client or a plugin raises
                detail = f"{type(exc).__name__}: {visible(exc, 200)}"
                result = SendResult(target, False, detail)
            if refused and not result.ok:  # apprise words it as a mere connection error
                result = SendResult(target, False, _("not sent: {why}").format(why=refused[-1]))
            box.append(result)

    thread = threading.Thread(target=work, name="zuka-send", daemon=True)
    thread.start()
    thread.join(timeout)
    if not box:
        watch.abort()
        result = SendResult(
            target, False, _("timed out after {timeout:g} s").format(timeout=timeout)
        )
    else:
        result = box[0]
    return SendResult(target, result.ok, visible(scrub(target, result.detail), 300))


def send_all(targets: list[Target], message: Message, timeout: float) -> list[SendResult]:
    """One message to every target at once: a hanging one delays none of the others."""
    from concurrent.futures import ThreadPoolExecutor

    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(targets))) as pool:
        return list(pool.map(lambda t: send(t, message, timeout), targets))
