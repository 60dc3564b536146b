"""Notifications received by a real HTTP server on 127.0.0.1: the robots' JSON shapes and
signs, apprise's json://, dedupe, rate limit, digest, retry, and a dead endpoint that
blocks nothing."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import io
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from leases.config.sections import NotifyConfig
from leases.core.errors import InputError
from leases.core.models import Node, NodeStatus
from leases.core.severity import Severity
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.notify.message import Message
from leases.notify.outbox import Notifier
from leases.notify.send import SendResult, send
from leases.notify.url import Target, TargetKind, mask_url, parse_target
from leases.sim import SimNode
from leases.ssh.pool import SshPool
from leases.telemetry.poller import Poller
from tests.support.sshfixtures import FakeNode, TestKeys, node_options
from tests.support.waiting import wait_until_sync
from tui.cli.main import main

T0 = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)  # 08:30 in Asia/Shanghai


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    body: Any
    method: str = "POST"


@dataclass
class Hook:
    """A webhook receiver on 127.0.0.1. mode: ok | error | hang | redirect (302 to
    `location`) | drip (headers, then one byte of the answer every 0.2 s) | drip-headers
    (the status line and headers one byte every 0.2 s)."""

    port: int = 0
    mode: str = "ok"
    location: str = ""
    got: list[Received] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)
    hanging: int = 0  # requests held by mode "hang" so far
    server: ThreadingHTTPServer | None = None

    def start(self) -> Hook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # where a followed redirect would land
                parts = urlsplit(self.path)
                with hook.cond:
                    hook.got.append(Received(parts.path, parse_qs(parts.query), None, "GET"))
                    hook.cond.notify_all()
                self._answer(b'{"errcode": 0, "errmsg": "ok"}')

            def _answer(self, data: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _drip(self, data: bytes) -> None:
                for i in range(len(data)):
                    if hook.release.wait(0.2):
                        return
                    try:
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

            def do_POST(self) -> None:
                if hook.mode == "hang":
                    with hook.cond:
                        hook.hanging += 1
                        hook.cond.notify_all()
                    hook.release.wait(30)
                    return
                if hook.mode == "redirect":
                    self.send_response(302)
                    self.send_header("Location", hook.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if hook.mode == "drip":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.flush()
                    self._drip(b" " * 1000)
                    return
                if hook.mode == "drip-headers":
                    self._drip(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"x" * 1000)
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = urlsplit(self.path)
                with hook.cond:
                    hook.got.append(Received(parts.path, parse_qs(parts.query), json.loads(raw)))
                    hook.cond.notify_all()
                answer = {"errcode": 0, "errmsg": "ok", "code": 0, "msg": "success"}
                if hook.mode == "error":
                    answer = {"errcode": 310000, "errmsg": "keywords not in content"}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.daemon_threads = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def wait_hanging(self, timeout: float = 10.0) -> None:
        """Until a sender is stuck on this endpoint (mode "hang")."""
        with self.cond:
            assert self.cond.wait_for(lambda: self.hanging >= 1, timeout), "nothing sent"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= count, timeout), self.got
            return list(self.got)

    def url(self, kind: str, path: str = "/robot/send?access_token=tok123") -> str:
        return f"{kind}+http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook().start()
    yield h
    h.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


MSG = Message(
    "lease ends in 3 days",
    "node gpu-01: monthly lease ends 2026-03-05",
    Severity.WARNING,
    "lease-end:gpu-01:3",
)


# -- the robots' JSON shapes ----------------------------------------------------------


def test_dingtalk_text_shape(hook: Hook) -> None:
    result = send(parse_target(hook.url("dingtalk")), MSG, timeout=5)
    assert result.ok, result.detail
    [got] = hook.wait_for(1)
    assert got.path == "/robot/send" and got.query == {"access_token": ["tok123"]}
    assert got.body["msgtype"] == "text"
    content = got.body["text"]["content"]
    assert "lease ends in 3 days" in content and "gpu-01" in content and "zuka" in content


def test_dingtalk_sign(hook: Hook) -> None:
    secret = "SEC0123456789abcdef"
    before = int(time.time() * 1000)
    assert send(parse_target(hook.url("dingtalk") + f"&secret={secret}"), MSG, timeout=5).ok
    [got] = hook.wait_for(1)
    assert "secret" not in got.query
    ts = got.query["timestamp"][0]
    assert before <= int(ts) <= int(time.time() * 1000)
    mac = hmac.new(secret.encode(), f"{ts}\n{secret}".encode(), hashlib.sha256).digest()
    assert got.query["sign"] == [base64.b64encode(mac).decode()]


def test_feishu_text_shape_and_sign(hook: Hook) -> None:
    path = "/open-apis/bot/v2/hook/0123abcd-4567"
    assert send(parse_target(hook.url("feishu", path)), MSG, timeout=5).ok
    assert send(parse_target(hook.url("lark", path) + "?secret=s3cr3t"), MSG, timeout=5).ok
    plain, signed = hook.wait_for(2)
    assert plain.path == path
    assert plain.body == {"msg_type": "text", "content": {"text": plain.body["content"]["text"]}}
    assert "lease ends in 3 days" in plain.body["content"]["text"]
    ts = signed.body["timestamp"]
    assert abs(int(ts) - time.time()) < 60
    mac = hmac.new(f"{ts}\ns3cr3t".encode(), b"", hashlib.sha256).digest()
    assert signed.body["sign"] == base64.b64encode(mac).decode()
    assert signed.body["msg_type"] == "text" and signed.query == {}


def test_wecom_text_shape(hook: Hook) -> None:
    target = parse_target(hook.url("wecom", "/cgi-bin/webhook/send?key=k-1"))
    assert send(target, MSG, timeout=5).ok
    [got] = hook.wait_for(1)
    assert got.query == {"key": ["k-1"]}
    assert got.body["msgtype"] == "text" and "gpu-01" in got.body["text"]["content"]


def test_apprise_json_url_reaches_the_same_server(hook: Hook) -> None:
    target = parse_target(f"json://127.0.0.1:{hook.port}/generic")
    assert target.kind is TargetKind.APPRISE
    result = send(target, MSG, timeout=5)
    assert result.ok, result.detail
    [got] = hook.wait_for(1)
    assert got.path == "/generic"
    assert got.body["title"].endswith("lease ends in 3 days")
    assert "gpu-01" in got.body["message"] and got.body["type"] == "warning"


def test_a_robot_error_code_is_a_failure_in_words(hook: Hook) -> None:
    hook.mode = "error"
    result = send(parse_target(hook.url("dingtalk")), MSG, timeout=5)
    assert not result.ok and "310000" in result.detail and "keywords" in result.detail


def test_text_is_made_visible_and_bounded(hook: Hook) -> None:
    hostile = Message(
        "gpu\x1b]0;pwned\x07", "a\x1b[31mred\u202e" + "x" * 100_000, Severity.CRITICAL, "k"
    )
    assert send(
        parse_target(hook.url("wecom", "/cgi-bin/webhook/send?key=k")), hostile, timeout=5
    ).ok
    assert send(parse_target(hook.url("dingtalk")), hostile, timeout=5).ok
    wecom, ding = hook.wait_for(2)
    for content in (wecom.body["text"]["content"], ding.body["text"]["content"]):
        assert "\x1b" not in content and "\u202e" not in content and "␛" in content
        assert content.endswith("…")
    assert len(wecom.body["text"]["content"].encode()) <= 2048
    assert len(ding.body["text"]["content"].encode()) <= 8000


# -- URLs -----------------------------------------------------------------------------


def test_well_known_robot_hosts_need_no_prefix() -> None:
    ding = parse_target("https://oapi.dingtalk.com/robot/send?access_token=x")
    assert ding.kind is TargetKind.DINGTALK
    assert parse_target("https://open.feishu.cn/open-apis/bot/v2/hook/x").kind is TargetKind.FEISHU
    assert (
        parse_target("https://open.larksuite.com/open-apis/bot/v2/hook/x").kind is TargetKind.FEISHU
    )
    wecom = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=x"
    assert parse_target(wecom).kind is TargetKind.WECOM
    assert parse_target("mailto://u:p@example.com").kind is TargetKind.APPRISE


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "nosuchscheme://x",
        "dingtalk+ftp://h/x",
        "",
        "wecom+http://h/x?key=k&secret=s",
    ],
)
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_target(url)
    assert caught.value.field == "notify.urls"


def test_masking_hides_every_token() -> None:
    cases = {
        "dingtalk+https://proxy.lab/robot/send?access_token=TOKEN1234567&secret=SECRET999": (
            "proxy.lab",
            "access_token",
        ),
        "https://open.feishu.cn/open-apis/bot/v2/hook/TOKEN1234567-abcdef": (
            "open.feishu.cn",
            "hook",
        ),
        "json://user:SECRET999@127.0.0.1:9/x": ("127.0.0.1", "json"),
        "slack://TOKEN1234567/TOKEN2234567/TOKEN3234567/#chan": ("slack", ""),
    }
    for url, keep in cases.items():
        masked = mask_url(url)
        assert "TOKEN1234567" not in masked and "SECRET999" not in masked, masked
        assert all(k in masked for k in keep), masked


# -- failures that must not block -------------------------------------------------------


def test_connection_refused_is_a_failure_in_words() -> None:
    result = send(
        parse_target(f"dingtalk+http://127.0.0.1:{free_port()}/r?access_token=x"), MSG, timeout=2
    )
    assert not result.ok and "refused" in result.detail


def test_a_hanging_endpoint_times_out(hook: Hook) -> None:
    hook.mode = "hang"
    for url in (hook.url("feishu", "/h"), f"json://127.0.0.1:{hook.port}/h"):
        started = time.monotonic()
        result = send(parse_target(url), MSG, timeout=0.5)
        assert not result.ok and "timed out" in result.detail, result.detail
        assert time.monotonic() - started < 3


# -- the notifier: dedupe, rate limit, digest, retry --------------------------------------


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> None:
        self.now += timedelta(**kw)


def notifier(tmp_path: Path, clock: Clock, urls: list[str], **kw: Any) -> Notifier:
    config = replace(NotifyConfig(), urls=tuple(urls), timeout_s=2.0, **kw)
    return Notifier(config, tmp_path / "ledger.db", clock=clock)


def msg(key: str, severity: Severity = Severity.WARNING) -> Message:
    return Message(f"alert {key}", f"body of {key}", severity, key)


def test_dedupe_within_the_window(tmp_path: Path, hook: Hook) -> None:
    clock = Clock()
    n = notifier(tmp_path, clock, [hook.url("dingtalk")], dedupe_hours=6)
    n.submit(msg("a"))
    n.submit(msg("a"))
    n.pump()
    n.submit(msg("a"))
    n.pump()
    assert len(hook.wait_for(1)) == 1
    clock.advance(hours=5)
    n.submit(msg("a"))
    n.pump()
    assert len(hook.got) == 1
    # A restarted notifier (a new collector) remembers what was sent.
    n.close()
    again = notifier(tmp_path, clock, [hook.url("dingtalk")], dedupe_hours=6)
    again.submit(msg("a"))
    again.pump()
    assert len(hook.got) == 1
    clock.advance(hours=2)
    again.submit(msg("a"))
    again.pump()
    assert len(hook.wait_for(2)) == 2
    again.close()


def test_min_severity_drops_what_is_below(tmp_path: Path, hook: Hook) -> None:
    n = notifier(tmp_path, Clock(), [hook.url("wecom", "/w?key=k")], min_severity=Severity.WARNING)
    n.submit(msg("quiet", Severity.INFO))
    n.submit(msg("loud", Severity.CRITICAL))
    n.pump()
    [got] = hook.wait_for(1)
    assert "alert loud" in got.body["text"]["content"]
    n.close()


def test_rate_limit_delays_the_rest(tmp_path: Path, hook: Hook) -> None:
    clock = Clock()
    n = notifier(tmp_path, clock, [hook.url("dingtalk")], rate_limit_per_hour=2)
    for i in range(5):
        n.submit(msg(f"k{i}"))
    n.pump()
    assert len(hook.wait_for(2)) == 2
    clock.advance(minutes=30)
    n.pump()
    assert len(hook.got) == 2
    clock.advance(minutes=31)
    n.pump()
    got = hook.wait_for(4)
    assert len(got) == 4
    assert [g.body["text"]["content"].count("alert k") for g in got] == [1, 1, 1, 1]
    n.close()


def test_daily_digest_collects_then_sends_once(tmp_path: Path, hook: Hook) -> None:
    from datetime import time as dtime

    clock = Clock()  # 08:30 in Shanghai
    n = notifier(tmp_path, clock, [hook.url("feishu", "/h")], digest_at=dtime(9, 0))
    for key in ("d1", "d2", "d3"):
        n.submit(msg(key))
    n.submit(msg("urgent", Severity.CRITICAL))
    n.pump()
    [urgent] = hook.wait_for(1)
    assert "alert urgent" in urgent.body["content"]["text"]
    clock.advance(minutes=29)
    n.pump()
    assert len(hook.got) == 1
    clock.advance(minutes=2)  # 09:01
    n.pump()
    _, digest = hook.wait_for(2)
    text = digest.body["content"]["text"]
    assert "digest" in text and all(f"alert {k}" in text for k in ("d1", "d2", "d3"))
    clock.advance(hours=1)
    n.pump()
    assert len(hook.got) == 2
    n.close()


def test_a_failed_send_is_retried_with_backoff(tmp_path: Path) -> None:
    port = free_port()
    clock = Clock()
    url = f"dingtalk+http://127.0.0.1:{port}/robot/send?access_token=SECRETTOKEN42"
    n = notifier(tmp_path, clock, [url])
    n.submit(msg("r"))
    n.pump()
    [row] = n.outbox_rows()
    assert row["state"] == "pending" and row["attempts"] == 1 and "refused" in row["last_error"]
    up = Hook(port=port).start()
    try:
        clock.advance(seconds=5)
        n.pump()  # backoff not over yet
        assert up.got == []
        clock.advance(minutes=5)
        n.pump()
        [got] = up.wait_for(1)
        assert "alert r" in got.body["text"]["content"]
        assert n.outbox_rows()[0]["state"] == "sent"
    finally:
        up.stop()
    n.close()
    # The token never reaches the ledger: rows name the target by a hash.
    assert b"SECRETTOKEN42" not in (tmp_path / "ledger.db").read_bytes()


def test_retry_gives_up_after_retry_hours(tmp_path: Path) -> None:
    clock = Clock()
    n = notifier(tmp_path, clock, [f"wecom+http://127.0.0.1:{free_port()}/w?key=k"], retry_hours=1)
    n.submit(msg("x"))
    for _ in range(20):
        n.pump()
        clock.advance(minutes=10)
    [row] = n.outbox_rows()
    assert row["state"] == "failed" and row["attempts"] >= 3
    n.close()


def test_the_outbox_is_a_ledger_table(tmp_path: Path) -> None:
    Ledger.open(tmp_path / "l.db").close()
    conn = sqlite3.connect(tmp_path / "l.db")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(notify_outbox)")}
    conn.close()
    assert {"target", "key", "state", "attempts", "next_at"} <= cols


def test_the_worker_thread_delivers(tmp_path: Path, hook: Hook) -> None:
    config = replace(NotifyConfig(), urls=(hook.url("dingtalk"),), timeout_s=5.0)
    n = Notifier(config, tmp_path / "ledger.db").start()
    assert n.submit(msg("threaded"))
    [got] = hook.wait_for(1)
    assert "alert threaded" in got.body["text"]["content"]
    assert n.close(timeout=5)


def test_no_urls_no_ledger(tmp_path: Path) -> None:
    n = Notifier(NotifyConfig(), tmp_path / "ledger.db")
    n.submit(msg("x"))
    assert n.pump() == 60.0
    assert not (tmp_path / "ledger.db").exists()


# -- a dead endpoint blocks nothing -----------------------------------------------------

KEYS = TestKeys.generate()


async def sim_fleet(ledger: Ledger, count: int = 3) -> tuple[list[FakeNode], list[Node]]:
    """`count` in-process SSH nodes answering as simulated 2-card A100 nodes, in the ledger."""
    sims = [SimNode(f"n{i}", "A100", 2, seed=i) for i in range(count)]
    servers = [await FakeNode(KEYS, sim=sim).start() for sim in sims]
    nodes = [
        ledger.add_node(records.node_from(
            {**records.node_record(server.as_node(sim.name)), "gpu_model": "A100",
             "gpu_count": 2}))
        for server, sim in zip(servers, sims, strict=True)
    ]  # fmt: skip
    return servers, nodes


async def test_a_poll_round_finishes_on_time_with_a_hanging_endpoint(
    tmp_path: Path, hook: Hook
) -> None:
    hook.mode = "hang"
    ledger = Ledger.open(tmp_path / "ledger.db")
    servers, nodes = await sim_fleet(ledger)
    config = replace(
        NotifyConfig(),
        urls=(hook.url("dingtalk"), f"json://127.0.0.1:{hook.port}/x"),
        timeout_s=30.0,
    )
    notifier = Notifier(config, tmp_path / "ledger.db").start()
    submitted: list[float] = []

    def on_update(status: NodeStatus) -> None:
        started = time.monotonic()
        notifier.submit(
            Message(
                f"{status.node} read", "x", Severity.CRITICAL, f"{status.node}:{time.monotonic()}"
            )
        )
        submitted.append(time.monotonic() - started)

    poller = Poller(
        nodes,
        pool=SshPool(node_options(KEYS, tmp_path, servers)),
        on_update=on_update,
        interval_s=0.2,
    )
    try:
        await poller.sweep()  # warm: connections open, notifier now stuck on the hanging endpoint
        await asyncio.to_thread(hook.wait_hanging)
        started = time.monotonic()
        for _ in range(3):
            await poller.sweep()
        elapsed = time.monotonic() - started
        # Three rounds while every send hangs for up to 30 s each.
        assert elapsed < 3.0, elapsed
        assert submitted and max(submitted) < 0.5
    finally:
        await poller.close()
        for s in servers:
            await s.stop()
        hook.stop()
        assert notifier.close(timeout=10)
        ledger.close()


# -- zuka notify test -------------------------------------------------------------------


def test_notify_test_reports_each_url(
    tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"wecom+http://127.0.0.1:{free_port()}/cgi-bin/webhook/send?key=DEADKEY"
    config = tmp_path / "config.toml"
    config.write_text(f'[notify]\nurls = ["{hook.url("dingtalk")}", "{dead}"]\n')
    config.chmod(0o600)
    out = io.StringIO()
    code = main(["--config", str(config), "notify", "test"], out=out)
    text = out.getvalue()
    assert code == 1
    assert "sent" in text and "failed" in text and "refused" in text
    assert "tok123" not in text and "DEADKEY" not in text
    [got] = hook.wait_for(1)
    assert "test" in got.body["text"]["content"]
    out = io.StringIO()
    assert (
        main(
            ["--config", str(config), "notify", "test", "--url", hook.url("feishu", "/only")],
            out=out,
        )
        == 0
    )
    assert hook.wait_for(2)[1].path == "/only"
    assert out.getvalue().count("\n") == 1


def test_notify_test_without_urls_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("")
    config.chmod(0o600)
    code = main(["--config", str(config), "notify", "test"], out=io.StringIO())
    assert code == 2 and "notify.urls" in capsys.readouterr().err


# -- attacker review (issue 8): bad URLs, masking, redirects, mentions, slow endpoints ----

SECRET = "SECRETTOKEN123456"


def spaced_url(port: int) -> str:
    return f"dingtalk+http://127.0.0.1:{port}/robot send?access_token={SECRET}"


@pytest.mark.parametrize(
    "url",
    [
        f"dingtalk+http://127.0.0.1:9/robot send?access_token={SECRET}",
        f"dingtalk+http://127.0.0.1:9/robot/send?access_token={SECRET}\x7f",
        f"feishu+http://127.0.0.1:9/open-apis/bot/v2/hook/{SECRET}\t",
        f"wecom+http://127.0.0.1:9/cgi-bin/webhook/send?key={SECRET}\u00e9",
        f"json://127.0.0.1:9/a b?+Authorization={SECRET}",
        f"json://127.0.0.1:9/a\nb?-apikey={SECRET}",
    ],
)
def test_urls_with_spaces_controls_or_non_ascii_are_refused_masked(url: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_target(url)
    assert caught.value.field == "notify.urls"
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.value)


def test_config_check_names_a_url_with_a_space_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[notify]\nurls = ["{spaced_url(9)}"]\n')
    config.chmod(0o600)
    assert main(["--config", str(config), "config", "check"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "notify.urls[0]" in err and "space" in err and SECRET not in err


def test_a_send_that_raises_is_a_masked_failure(hook: Hook) -> None:
    # A Target made without parse_target (an older config, a caller's bug): urllib raises
    # http.client.InvalidURL, quoting the URL.
    url = spaced_url(hook.port)
    target = Target(url, TargetKind.DINGTALK, url.removeprefix("dingtalk+"))
    result = send(target, MSG, timeout=2)
    assert not result.ok and SECRET not in result.detail and result.detail


def test_one_failing_target_never_blocks_another(
    tmp_path: Path, hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    import http.client

    bad = hook.url("dingtalk", f"/robot/send?access_token={SECRET}")
    good = hook.url("feishu", "/good")

    def sender(target: Target, message: Message, timeout: float) -> SendResult:
        if target.kind is TargetKind.DINGTALK:
            raise http.client.InvalidURL(f"URL can't contain control characters. {target.url!r}")
        return send(target, message, timeout)

    config = replace(NotifyConfig(), urls=(bad, good), timeout_s=2.0)
    n = Notifier(config, tmp_path / "ledger.db", clock=Clock(), sender=sender)
    n.submit(msg("a"))
    n.submit(msg("b"))
    n.pump()
    got = hook.wait_for(2)
    assert [g.path for g in got] == ["/good", "/good"]
    rows = n.outbox_rows()
    failed = [r for r in rows if r["last_error"]]
    assert len(failed) == 1 and failed[0]["state"] == "pending"  # retried later
    assert "InvalidURL" in failed[0]["last_error"]
    assert all(SECRET not in str(r["last_error"]) for r in rows)
    assert SECRET not in caplog.text
    n.close()


def test_the_worker_never_logs_a_url(
    tmp_path: Path, hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    config = replace(NotifyConfig(), urls=(hook.url("dingtalk", f"/r?access_token={SECRET}"),))
    n = Notifier(config, tmp_path / "ledger.db")

    def broken() -> float:
        raise RuntimeError(f"cannot reach {n.targets[0].url}")

    n.pump = broken  # type: ignore[method-assign]
    n.start()
    deadline = time.monotonic() + 10
    while not caplog.records and time.monotonic() < deadline:
        time.sleep(0.01)
    assert n.close(timeout=5)
    assert caplog.records and "RuntimeError" in caplog.text
    assert SECRET not in caplog.text and not any(r.exc_info for r in caplog.records)


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("json://host/hook?+Authorization=Bearer%20SUPERSECRETTOKEN", ["SUPERSECRET"]),
        ("json://host/hook?-apikey=APIKEYSECRET", ["APIKEYSECRET"]),
        ("json://USERNAMEX:PASSWORDX@host/hook", ["USERNAMEX", "PASSWORDX"]),
        ("form://host/hook?+X-Token=HEADERVAL&-key=PARAMVAL&x=QUERYVAL", ["HEADERVAL",
                                                                          "PARAMVAL", "QUERYVAL"]),
        ("dingtalk+https://USERNAMEX:PW@proxy.lab/r?access_token=T", ["USERNAMEX"]),
    ],
)  # fmt: skip
def test_masking_hides_headers_params_and_userinfo(url: str, secrets: list[str]) -> None:
    masked = mask_url(url)
    assert "host" in masked or "proxy.lab" in masked, masked
    assert not any(s in masked for s in secrets), masked


def test_config_show_and_notify_test_mask_apprise_headers(
    tmp_path: Path, hook: Hook, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"json://127.0.0.1:{hook.port}/x?+Authorization=Bearer%20SUPERSECRETTOKEN&-apikey=K99X"
    config = tmp_path / "config.toml"
    config.write_text(f'[notify]\nurls = ["{url}"]\n')
    config.chmod(0o600)
    for argv in (["config", "show"], ["config", "show", "--json"], ["notify", "test"]):
        out = io.StringIO()
        assert main(["--config", str(config), *argv], out=out) == 0
        shown = out.getvalue() + capsys.readouterr().err
        assert "SUPERSECRET" not in shown and "K99X" not in shown, shown
        assert "127.0.0.1" in shown


def test_a_redirect_is_a_failure_and_is_not_followed(hook: Hook) -> None:
    inside = Hook().start()
    try:
        hook.mode = "redirect"
        hook.location = f"http://127.0.0.1:{inside.port}/latest/meta-data"
        for url in (
            hook.url("dingtalk"),
            hook.url("feishu", "/open-apis/bot/v2/hook/x"),
            hook.url("wecom", "/cgi-bin/webhook/send?key=k"),
            f"json://127.0.0.1:{hook.port}/x",
            f"json://127.0.0.1:{hook.port}/x?redirect=yes",
        ):
            result = send(parse_target(url), MSG, timeout=5)
            assert not result.ok, (url, result.detail)
            if not url.startswith("json"):
                assert "redirect" in result.detail and "302" in result.detail, result.detail
        assert inside.got == []
    finally:
        inside.stop()


@pytest.mark.parametrize(
    "url",
    [
        "dingtalk+file:///etc/passwd",
        "feishu+ftp://h/x",
        "dingtalk+http://169.254.169.254/latest/meta-data?access_token=x",
        "json://169.254.169.254/latest",
        "json://[fd00:ec2::254]/latest",
        "json://metadata.google.internal/computeMetadata/v1",
    ],
)
def test_file_other_schemes_and_metadata_addresses_are_refused(url: str) -> None:
    with pytest.raises(InputError):
        parse_target(url)


HOSTILE = (
    '<at user_id="all">所有人</at> @all <@all> @所有人 &lt;at user_id="all"&gt; <at id=all></at>'
)


def test_node_text_cannot_mention_everyone(hook: Hook) -> None:
    m = Message(f"gpu-01 unreachable {HOSTILE}", f"ssh: {HOSTILE}", Severity.CRITICAL, "k")
    for url in (
        hook.url("feishu", "/open-apis/bot/v2/hook/x"),
        hook.url("dingtalk"),
        hook.url("wecom", "/cgi-bin/webhook/send?key=k"),
    ):
        assert send(parse_target(url), m, timeout=5).ok
    feishu, ding, wecom = hook.wait_for(3)
    text = feishu.body["content"]["text"]
    assert "<" not in text and ">" not in text and "&" not in text
    assert "所有人" in text and "user_id" in text  # shown, as harmless text
    for got in (ding, wecom):
        assert set(got.body) == {"msgtype", "text"}  # no "at", no isAtAll
        assert set(got.body["text"]) == {"content"}  # no mentioned_list
        content = got.body["text"]["content"]
        assert "@" not in content and "<" not in content
        assert "all" in content and "所有人" in content


@pytest.mark.parametrize("mode", ["drip", "drip-headers"])
def test_a_slow_drip_endpoint_meets_the_deadline(hook: Hook, mode: str) -> None:
    hook.mode = mode
    for url in (hook.url("feishu", "/h"), f"json://127.0.0.1:{hook.port}/h"):
        started = time.monotonic()
        result = send(parse_target(url), MSG, timeout=1.0)
        assert not result.ok and "timed out" in result.detail, result.detail
        assert time.monotonic() - started < 3


def test_a_slow_target_does_not_delay_the_others(tmp_path: Path, hook: Hook) -> None:
    fast = Hook().start()
    try:
        hook.mode = "drip"
        config = replace(
            NotifyConfig(),
            urls=(hook.url("dingtalk"), fast.url("feishu", "/fast")),
            timeout_s=8.0,
        )
        n = Notifier(config, tmp_path / "ledger.db")
        n.submit(msg("a"))
        started = time.monotonic()
        n.start()
        fast.wait_for(1, timeout=10)
        assert time.monotonic() - started < 4  # not after the slow one's 8 s
        assert n.close(timeout=15)
    finally:
        fast.stop()


# -- attacker review (issue 16): mentions through apprise, and every robot ------------------

MENTIONS = (
    "@everyone @here @channel @all @room <!channel> <!here> <@U123> <@&987> <!subteam^S1>"
    ' <at user_id="all">所有人</at> &lt;!channel&gt; isAtAll'
)


def test_node_text_cannot_mention_anyone_through_apprise_or_a_robot(
    tmp_path: Path, hook: Hook
) -> None:
    """A node's name, note or GPU process name reaches the alert text; no target may
    turn it into a mention. Sent by the notifier (render, outbox, send) to a local catcher:
    the mention characters arrive visibly changed (full-width), never invisible."""
    urls = (
        f"json://127.0.0.1:{hook.port}/generic",
        hook.url("dingtalk"),
        hook.url("feishu", "/open-apis/bot/v2/hook/x"),
        hook.url("wecom", "/cgi-bin/webhook/send?key=k"),
    )
    n = Notifier(replace(NotifyConfig(), urls=urls), tmp_path / "ledger.db", clock=lambda: T0)
    n.submit(Message(f"node {MENTIONS} unreachable", f"gpu proc: {MENTIONS}", Severity.CRITICAL))
    n.pump()
    got = hook.wait_for(4)
    texts = []
    for r in got:
        if "message" in r.body:  # apprise's json://
            texts += [r.body["title"], r.body["message"]]
        else:
            texts.append(json.dumps(r.body, ensure_ascii=False))
    assert len(texts) == 5
    for text in texts:
        shown = text.split('"content"', 1)[-1]  # a robot's JSON: its text only
        for mark in ("@", "<", ">", "&"):
            assert mark not in shown, (mark, text)
        assert "＠everyone" in text and "＜!channel＞" in text and "＜＠U123＞" in text
        assert "\u200b" not in text and "\u2060" not in text
    for r in got:
        assert "at" not in r.body and "mentioned_list" not in json.dumps(r.body)


def test_each_message_is_recorded_sent_as_it_goes_not_after_the_round(
    tmp_path: Path, hook: Hook
) -> None:
    """A collector stopped in the middle of a round (the endpoint slow) sent its first
    messages again when it started next: the round recorded nothing until every send had
    finished. Read from another connection while the second send hangs: the first is sent."""
    import sqlite3
    import threading

    release = threading.Event()
    calls: list[str] = []

    def sender(target: Target, message: Message, timeout: float) -> SendResult:
        calls.append(message.title)
        if len(calls) == 2:
            release.wait(30)  # the second send hangs, as a slow endpoint does
        return send(target, message, timeout)

    config = replace(NotifyConfig(), urls=(hook.url("dingtalk"),), timeout_s=2.0)
    path = tmp_path / "ledger.db"
    n = Notifier(config, path, clock=Clock(), sender=sender)
    n.submit(msg("a"))
    n.submit(msg("b"))
    pumping = threading.Thread(target=n.pump)
    pumping.start()

    def states() -> list[str]:
        with sqlite3.connect(path) as conn:
            return [s for (s,) in conn.execute("SELECT state FROM notify_outbox ORDER BY id")]

    try:
        hook.wait_for(1)

        wait_until_sync(lambda: states() == ["sent", "pending"], what="the first recorded sent")
    finally:
        release.set()
        pumping.join(30)
    assert states() == ["sent", "sent"]


def test_a_malformed_url_is_refused_in_words_not_a_traceback(tmp_path: Path) -> None:
    """`urls = ["http://[::1"]`: ValueError from urlsplit came out of every command."""
    from tui.cli.main import main

    config = tmp_path / "bad.toml"
    config.write_text('[notify]\nurls = ["http://[::1"]\n')
    for args in (("config", "check"), ("alerts",)):
        out = io.StringIO()
        code = main([*args, "--config", str(config), "--ledger", str(tmp_path / "l.db")], out=out)
        assert code == 2, args
    with pytest.raises(InputError, match="not a well-formed URL"):
        parse_target("dingtalk+http://[::1")
