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

import asyncssh
import pytest
from sshfixtures import FakeNode, TestKeys, node_options

from leases import records
from leases.config import NotifyConfig
from leases.errors import InputError
from leases.ledger import Ledger
from leases.models import Node
from leases.notify import (
    Message,
    Notifier,
    TargetKind,
    mask_url,
    parse_target,
    send,
)
from leases.poller import NodeStatus, Poller
from leases.severity import Severity
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.ssh import SshPool
from tui.cli import main

T0 = datetime(2026, 3, 2, 0, 30, tzinfo=UTC)  # 08:30 in Asia/Shanghai


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class Hook:
    """A webhook receiver on 127.0.0.1. mode: ok | error | hang."""

    port: int = 0
    mode: str = "ok"
    got: list[Received] = field(default_factory=list)
    cond: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Hook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if hook.mode == "hang":
                    hook.release.wait(30)
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


async def test_a_poll_round_finishes_on_time_with_a_hanging_endpoint(
    tmp_path: Path, hook: Hook
) -> None:
    hook.mode = "hang"
    sims = [SimNode(f"n{i}", "A100", 2, seed=i) for i in range(3)]

    def handler_for(sim: SimNode):  # type: ignore[no-untyped-def]
        async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
            out, err, status = sim_answer(sim, process.command or "", datetime.now(UTC))
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(status)

        return handle

    servers = [await FakeNode(KEYS, handler=handler_for(s)).start() for s in sims]
    ledger = Ledger.open(tmp_path / "ledger.db")
    nodes: list[Node] = []
    for server, sim in zip(servers, sims, strict=True):
        node = server.as_node(sim.name)
        nodes.append(
            ledger.add_node(
                records.node_from(
                    {**records.node_record(node), "gpu_model": "A100", "gpu_count": 2}
                )
            )
        )
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
        await asyncio.sleep(0.2)
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
