"""leases.ssh.session and leases.ssh.hostkeys against in-process asyncssh servers."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import re
import stat
import time
from base64 import b64encode
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
import pytest

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh import hostkeys
from leases.ssh.errors import (
    BackingOff,
    CommandTimeout,
    ConnectionDropped,
    HostKeyRejected,
    OutputTooLarge,
    SshError,
    StreamExited,
)
from leases.ssh.hostkeys import HostKeyChangedError, HostKeyStatus
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.ssh.posixsh import under_sh
from leases.ssh.session import NodeSession
from leases.ssh.shell import answer_text, unframed
from leases.ssh.stream import CommandResult
from tests.support.sshfixtures import (
    Counter,
    FakeNode,
    Handler,
    TestKeys,
    default_handler,
    free_port,
    known_hosts_line,
    node_options,
)
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from leases.sim.fleet import SimFleet


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def public(key: asyncssh.SSHKey) -> asyncssh.SSHKey:
    return key.convert_to_public()


# -- commands on one connection -----------------------------------------------------


async def test_run_returns_output_and_reuses_the_connection(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))
    assert session.health is NodeHealth.CONNECTING

    first = await session.run("echo hello")
    second = await session.run("exit 3")

    assert first == CommandResult(0, "hello\n", "")
    assert first.ok
    assert second == CommandResult(3, "", "failing\n")
    assert session.health is NodeHealth.OK
    assert session.last_error == ""
    assert session.connects == 1
    assert node.connects.total == 1
    await session.close()


async def test_parallel_commands_share_one_connection_within_the_channel_bound(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    options = node_options(keys, tmp_path, [node], max_channels_per_connection=4)
    session = NodeSession(node.as_node("gpu1"), options)

    results = await asyncio.gather(*(session.run("sleep 0.05") for _ in range(20)))

    assert all(r == CommandResult(0, "slept\n", "") for r in results)
    assert node.connects.total == 1
    assert node.channels.peak == 4
    assert node.channels.total == 20
    await session.close()


async def test_command_timeout_is_reported_and_the_next_command_works(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

    started = time.monotonic()
    with pytest.raises(CommandTimeout) as caught:
        await session.run("hang", timeout=0.2)
    assert time.monotonic() - started < 2
    assert caught.value.health is NodeHealth.TIMEOUT
    assert session.health is NodeHealth.TIMEOUT
    assert "hang" in session.last_error

    assert await session.run("echo still here") == CommandResult(0, "still here\n", "")
    assert session.health is NodeHealth.OK
    assert session.connects == 1
    # The timed-out command's channel is closed (the server sees it a moment later).
    await wait_until(lambda: node.channels.now == 0, what="the timed-out channel to close")
    await session.close()


async def test_channel_closed_mid_output_gives_partial_output_and_no_status(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

    result = await session.run("half")

    assert result == CommandResult(None, "partial out", "")
    assert not result.ok
    assert session.health is NodeHealth.OK  # the connection itself is fine
    assert session.connected
    await session.close()


async def test_connection_dropped_mid_command_then_next_command_reconnects(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))
    await session.run("echo warm")

    with pytest.raises(ConnectionDropped) as caught:
        await session.run("drop")

    assert caught.value.health is NodeHealth.UNREACHABLE
    assert session.health is NodeHealth.UNREACHABLE
    assert not session.connected
    assert await session.run("echo back") == CommandResult(0, "back\n", "")
    assert session.health is NodeHealth.OK
    assert session.connects == 2
    await session.close()


# -- failures, backoff and recovery ---------------------------------------------------


async def test_auth_failure_then_recovers_once_the_key_is_authorised(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    clock = FakeClock()
    options = node_options(keys, tmp_path, [node], client_key=keys.stranger_key)
    session = NodeSession(node.as_node("gpu1"), options, clock=clock, random=lambda: 1.0)

    with pytest.raises(SshError) as caught:
        await session.run("echo hi")
    assert caught.value.health is NodeHealth.AUTH_FAILED
    assert session.health is NodeHealth.AUTH_FAILED
    assert f"node 127.0.0.1:{node.port}: authentication failed" in session.last_error

    node.authorized.add(public(keys.stranger_key))
    with pytest.raises(BackingOff):  # not before the backoff has run out
        await session.run("echo hi")
    clock.now += 1.0

    assert await session.run("echo hi") == CommandResult(0, "hi\n", "")
    assert session.health is NodeHealth.OK
    assert session.failures == 0


async def test_missing_key_file_is_an_auth_failure(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    target = node.as_node("gpu1", key_path=str(tmp_path / "no-such-key"))
    session = NodeSession(target, node_options(keys, tmp_path, [node]))

    with pytest.raises(SshError) as caught:
        await session.run("echo hi")

    assert caught.value.health is NodeHealth.AUTH_FAILED
    assert "no-such-key" in session.last_error
    assert node.connects.total == 0


async def test_node_key_path_is_used_to_log_in(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    key_file = tmp_path / "id_node"
    keys.stranger_key.write_private_key(key_file)
    key_file.chmod(0o600)
    node.authorized = {public(keys.stranger_key)}
    options = node_options(keys, tmp_path, [node], client_keys=None)
    session = NodeSession(node.as_node("gpu1", key_path=str(key_file)), options)

    assert (await session.run("echo via key")).stdout == "via key\n"
    await session.close()


async def test_server_down_is_unreachable_and_recovers_on_the_same_port_after_backoff(
    keys: TestKeys, tmp_path: Path
) -> None:
    clock = FakeClock()
    port = await free_port()
    fake = FakeNode(keys, port=port)
    options = node_options(keys, tmp_path, [fake])
    session = NodeSession(fake.as_node("gpu1"), options, clock=clock, random=lambda: 0.5)

    with pytest.raises(SshError) as caught:
        await session.run("echo hi")
    assert caught.value.health is NodeHealth.UNREACHABLE
    assert session.health is NodeHealth.UNREACHABLE
    assert "refused" in session.last_error.lower()
    assert session.next_attempt_at == clock.now + 0.5  # 0.5 * base 1 s

    await fake.start()
    try:
        with pytest.raises(BackingOff) as backing:
            await session.run("echo hi")
        assert backing.value.health is NodeHealth.UNREACHABLE
        assert fake.connects.total == 0  # not even attempted

        clock.now += 0.5
        assert await session.run("echo hi") == CommandResult(0, "hi\n", "")
        assert session.health is NodeHealth.OK
        assert session.next_attempt_at == 0.0
    finally:
        await session.close()
        await fake.stop()


async def test_backoff_doubles_with_full_jitter_up_to_the_cap(tmp_path: Path) -> None:
    clock = FakeClock()
    draws = iter([1.0, 1.0, 1.0, 0.25, 1.0, 1.0, 1.0, 1.0, 1.0])
    port = await free_port()
    node = Node("down", SshTarget("127.0.0.1", port=port))
    options = SshOptions(
        known_hosts=(tmp_path / "kh",), agent_path=None, config=[], client_keys=[], backoff_cap=8
    )
    session = NodeSession(node, options, clock=clock, random=lambda: next(draws))

    delays = []
    for _ in range(7):
        with pytest.raises(SshError):
            await session.run("true")
        delays.append(session.next_attempt_at - clock.now)
        clock.now = session.next_attempt_at

    assert delays == [1.0, 2.0, 4.0, 2.0, 8.0, 8.0, 8.0]


async def test_one_faulty_node_among_five_does_not_hold_up_the_others(
    keys: TestKeys, tmp_path: Path
) -> None:
    timeout_s = 2.5  # the stuck node's connect timeout
    healthy = [await FakeNode(keys).start() for _ in range(4)]
    stuck = await FakeNode(keys, auth_delay=30).start()  # accepts TCP, never finishes auth
    options = node_options(keys, tmp_path, [*healthy, stuck], connect_timeout=timeout_s)
    pool = SshPool(options)
    for i, fake in enumerate(healthy):
        pool.add(fake.as_node(f"ok{i}"))
    pool.add(stuck.as_node("stuck"))
    try:
        everything = asyncio.create_task(pool.run_many(pool.sessions, "echo up"))
        started = time.monotonic()
        others = await pool.run_many([f"ok{i}" for i in range(4)], "echo up")
        # Answered before the stuck node's connect timed out (a margin for a loaded box).
        assert time.monotonic() - started < timeout_s
        assert not everything.done()
        results = await everything

        assert set(results) == {"ok0", "ok1", "ok2", "ok3", "stuck"}
        for name in ("ok0", "ok1", "ok2", "ok3"):
            assert results[name] == CommandResult(0, "up\n", "")
            assert others[name] == CommandResult(0, "up\n", "")
            assert pool[name].health is NodeHealth.OK
        assert isinstance(results["stuck"], SshError)
        assert results["stuck"].health is NodeHealth.TIMEOUT
        assert pool["stuck"].health is NodeHealth.TIMEOUT
    finally:
        await pool.close()
        for fake in [*healthy, stuck]:
            await fake.stop()


async def test_connects_are_bounded_by_the_pool_semaphore(keys: TestKeys, tmp_path: Path) -> None:
    in_flight = Counter()  # shared by every server: connects in flight across the fleet
    fakes = [await FakeNode(keys, auth_delay=0.05, connects=in_flight).start() for _ in range(12)]
    pool = SshPool(node_options(keys, tmp_path, fakes, max_concurrent_connects=3))
    for i, fake in enumerate(fakes):
        pool.add(fake.as_node(f"n{i}"))
    try:
        results = await pool.run_many(pool.sessions, "echo up")

        assert all(r == CommandResult(0, "up\n", "") for r in results.values())
        assert in_flight.total == 12
        assert in_flight.peak == 3
    finally:
        await pool.close()
        for fake in fakes:
            await fake.stop()


async def test_connects_to_one_server_are_bounded_per_host(keys: TestKeys, tmp_path: Path) -> None:
    """Many nodes behind one sshd (a gateway, or one jump host) respect its MaxStartups."""
    fake = await FakeNode(keys, auth_delay=0.05).start()
    others = [await FakeNode(keys, auth_delay=0.05).start() for _ in range(6)]
    pool = SshPool(node_options(keys, tmp_path, [fake, *others], max_connects_per_host=2))
    for i in range(6):
        pool.add(fake.as_node(f"n{i}"))
    for i, other in enumerate(others):
        pool.add(other.as_node(f"m{i}"))
    try:
        results = await pool.run_many(pool.sessions, "echo up")
        assert all(r == CommandResult(0, "up\n", "") for r in results.values())
        assert fake.connects.total == 6 and fake.connects.peak == 2
    finally:
        await pool.close()
        for f in [fake, *others]:
            await f.stop()


async def test_waiting_for_a_connect_slot_does_not_count_towards_the_timeout(
    keys: TestKeys, tmp_path: Path
) -> None:
    # Four connects one at a time take longer than one connect's timeout; each alone has
    # 1.4 s to spare (a loaded machine's handshake is slow).
    fakes = [await FakeNode(keys, auth_delay=0.6).start() for _ in range(4)]
    options = node_options(keys, tmp_path, fakes, max_concurrent_connects=1, connect_timeout=2.0)
    pool = SshPool(options)
    for i, fake in enumerate(fakes):
        pool.add(fake.as_node(f"n{i}"))
    try:
        started = time.monotonic()
        results = await pool.run_many(pool.sessions, "echo up")

        assert time.monotonic() - started > 2.4  # one at a time, 0.6 s each
        assert all(r == CommandResult(0, "up\n", "") for r in results.values()), results
    finally:
        await pool.close()
        for fake in fakes:
            await fake.stop()


async def test_run_many_returns_failures_as_values(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    pool = SshPool(node_options(keys, tmp_path, [node]))
    pool.add(node.as_node("good"))
    pool.add(Node("gone", SshTarget("127.0.0.1", port=await free_port())))

    results = await pool.run_many(["good", "gone", "never-added"], "echo x")

    assert results["good"] == CommandResult(0, "x\n", "")
    assert isinstance(results["gone"], SshError)
    assert results["gone"].health is NodeHealth.UNREACHABLE
    assert isinstance(results["never-added"], KeyError)
    await pool.close()


async def test_pool_add_keeps_a_session_until_its_login_changes(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    pool = SshPool(node_options(keys, tmp_path, [node]))
    first = pool.add(node.as_node("gpu1"))
    await first.run("echo x")

    assert pool.add(node.as_node("gpu1")) is first
    second = pool.add(node.as_node("gpu1", user="someone"))

    assert second is not first
    assert not first.connected
    await pool.close()


# -- host keys ----------------------------------------------------------------------


async def test_unknown_host_key_is_untrusted_until_the_user_accepts_its_fingerprint(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    zuka_known = tmp_path / "zuka" / "known_hosts"
    options = node_options(keys, tmp_path, [], known_hosts=(zuka_known,))
    clock = FakeClock()
    session = NodeSession(node.as_node("gpu1"), options, clock=clock)
    expected = hostkeys.fingerprint(keys.host_key)

    with pytest.raises(HostKeyRejected) as caught:
        await session.run("echo hi")

    assert caught.value.health is NodeHealth.UNTRUSTED
    assert session.health is NodeHealth.UNTRUSTED
    assert session.fingerprint == expected
    assert expected.startswith("SHA256:")
    assert expected in session.last_error
    assert caught.value.offered.status is HostKeyStatus.UNKNOWN
    assert not zuka_known.exists()  # nothing trusted behind the user's back
    assert node.channels.total == 0

    assert not session.accept_host_key("SHA256:not-what-was-shown")
    assert session.accept_host_key(expected)
    assert stat.S_IMODE(zuka_known.stat().st_mode) == 0o600
    assert zuka_known.read_text().startswith(f"[127.0.0.1]:{node.port} ssh-ed25519 ")

    # accept_host_key clears the backoff: no clock advance needed.
    assert await session.run("echo hi") == CommandResult(0, "hi\n", "")
    assert session.health is NodeHealth.OK
    assert session.fingerprint is None
    await session.close()


async def test_trust_then_connect(keys: TestKeys, node: FakeNode, tmp_path: Path) -> None:
    zuka_known = tmp_path / "known_hosts"
    options = node_options(keys, tmp_path, [], known_hosts=(zuka_known,))

    key = await hostkeys.fetch_host_key("127.0.0.1", node.port)
    assert hostkeys.fingerprint(key) == hostkeys.fingerprint(keys.host_key)
    assert node.channels.total == 0
    assert hostkeys.trust("127.0.0.1", node.port, key, zuka_known)

    session = NodeSession(node.as_node("gpu1"), options)
    assert (await session.run("echo hi")).ok
    await session.close()


async def test_changed_host_key_is_refused_and_stays_refused(
    keys: TestKeys, tmp_path: Path
) -> None:
    fake = await FakeNode(keys).start()
    options = node_options(keys, tmp_path, [fake])
    clock = FakeClock()
    session = NodeSession(fake.as_node("gpu1"), options, clock=clock)
    await session.run("echo first")

    # The node comes back on the same port with another host key.
    await fake.stop()
    await fake.start(host_key=keys.other_host_key)
    try:
        for _ in range(3):
            clock.now = session.next_attempt_at + 1
            with pytest.raises(HostKeyRejected) as caught:
                await session.run("echo hi")
            assert caught.value.health is NodeHealth.HOSTKEY_CHANGED
            assert session.health is NodeHealth.HOSTKEY_CHANGED
            assert session.fingerprint == hostkeys.fingerprint(keys.other_host_key)
            assert "CHANGED" in session.last_error

        assert not session.accept_host_key(hostkeys.fingerprint(keys.other_host_key))
        with pytest.raises(HostKeyChangedError):
            hostkeys.trust("127.0.0.1", fake.port, keys.other_host_key, options.trust_path)
        assert fake.channels.total == 1  # only the command before the change ran
    finally:
        await session.close()
        await fake.stop()


def test_trust_writes_openssh_lines_to_a_private_file(keys: TestKeys, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "known_hosts"

    assert hostkeys.trust("gpu.example.com", 22, keys.host_key, path)
    assert hostkeys.trust("10.0.0.7", 2222, keys.other_host_key, path)
    assert not hostkeys.trust("gpu.example.com", None, keys.host_key, path)  # already there

    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("gpu.example.com ssh-ed25519 AAAA")
    assert lines[1].startswith("[10.0.0.7]:2222 ssh-ed25519 AAAA")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert hostkeys.classify("10.0.0.7", 2222, keys.other_host_key, [path]) is (
        HostKeyStatus.TRUSTED
    )


def test_classify_follows_openssh_port_rules(keys: TestKeys, tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(known_hosts_line("gw.example.com", 22, keys.host_key))

    assert hostkeys.classify("gw.example.com", 22, keys.host_key, [path]) is HostKeyStatus.TRUSTED
    assert hostkeys.classify("gw.example.com", None, keys.other_host_key, [path]) is (
        HostKeyStatus.CHANGED
    )
    # Another port of the same gateway is another machine (NAT-mapped rental nodes).
    assert hostkeys.classify("gw.example.com", 30022, keys.other_host_key, [path]) is (
        HostKeyStatus.UNKNOWN
    )
    assert hostkeys.classify("other.example.com", 22, keys.host_key, [path]) is (
        HostKeyStatus.UNKNOWN
    )


def test_classify_reads_hashed_entries_and_every_file(keys: TestKeys, tmp_path: Path) -> None:
    salt = b"0123456789abcdefghij"
    digest = hmac.new(salt, b"[10.1.2.3]:2200", hashlib.sha1).digest()
    pub = keys.host_key.export_public_key("openssh").decode().strip()
    hashed = tmp_path / "user_known_hosts"
    hashed.write_text(f"|1|{b64encode(salt).decode()}|{b64encode(digest).decode()} {pub}\n")
    empty = tmp_path / "zuka_known_hosts"  # missing file: skipped

    paths = [empty, hashed]
    assert hostkeys.classify("10.1.2.3", 2200, keys.host_key, paths) is HostKeyStatus.TRUSTED
    assert hostkeys.classify("10.1.2.3", 2200, keys.other_host_key, paths) is (
        HostKeyStatus.CHANGED
    )
    assert hostkeys.classify("10.1.2.3", 2201, keys.host_key, paths) is HostKeyStatus.UNKNOWN
    # The address form counts as well as the name.
    assert hostkeys.classify("node7", 2200, keys.host_key, paths, addr="10.1.2.3") is (
        HostKeyStatus.TRUSTED
    )


def test_revoked_key_counts_as_changed_and_bad_lines_are_skipped(
    keys: TestKeys, tmp_path: Path
) -> None:
    pub = keys.host_key.export_public_key("openssh").decode().strip()
    path = tmp_path / "known_hosts"
    path.write_text(f"garbage-line-without-a-key\n@revoked * {pub}\n")

    assert hostkeys.classify("any", 22, keys.host_key, [path]) is HostKeyStatus.CHANGED
    assert hostkeys.classify("any", 22, keys.other_host_key, [path]) is HostKeyStatus.UNKNOWN


def test_known_hosts_file_changes_are_seen(keys: TestKeys, tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("")
    assert hostkeys.classify("h", 22, keys.host_key, [path]) is HostKeyStatus.UNKNOWN
    hostkeys.trust("h", 22, keys.host_key, path)
    assert hostkeys.classify("h", 22, keys.host_key, [path]) is HostKeyStatus.TRUSTED


# -- streaming ----------------------------------------------------------------------


async def test_stream_yields_lines_as_they_are_printed(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))
    arrivals: list[float] = []
    lines: list[str] = []

    async with aclosing(session.stream("ticks 0 50", idle_timeout=2)) as stream:
        async for line in stream:
            arrivals.append(time.monotonic())
            lines.append(line)
            if len(lines) == 5:
                break

    assert lines == [f"tick {i}" for i in range(5)]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    # Pushed one by one, not batched: the lines arrive spread over the 4 x 50 ms the node
    # took. One gap may be short: a stall of this loop on a loaded box reads two at once.
    assert sum(gap > 0.03 for gap in gaps) >= len(gaps) - 1, gaps
    assert arrivals[-1] - arrivals[0] > 0.15, gaps
    # Stopping the stream closed the remote command.
    await wait_until(lambda: node.channels.now == 0, what="the stream's channel to close")
    assert session.health is NodeHealth.OK
    assert (await session.run("echo after")).ok
    await session.close()


async def test_stream_ends_cleanly_on_exit_zero_and_raises_on_failure(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

    assert [line async for line in session.stream("ticks 3 10")] == [
        "tick 0",
        "tick 1",
        "tick 2",
    ]
    with pytest.raises(StreamExited) as caught:
        async for _ in session.stream("exit 9"):
            pass
    assert caught.value.result == CommandResult(9, "", "failing\n")
    with pytest.raises(StreamExited) as failed:
        async for _ in session.stream("ticks 3 1 7"):
            pass
    assert failed.value.result.exit_status == 7
    assert failed.value.result.stdout == "tick 0\ntick 1\ntick 2\n"
    await session.close()


async def test_stream_raises_when_the_connection_drops(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))
    seen = []

    with pytest.raises(ConnectionDropped):
        async for line in session.stream("drop"):
            seen.append(line)

    assert seen == ["before drop"]
    assert session.health is NodeHealth.UNREACHABLE
    assert (await session.run("echo back")).ok
    await session.close()


async def test_stream_idle_timeout(keys: TestKeys, node: FakeNode, tmp_path: Path) -> None:
    session = NodeSession(node.as_node("gpu1"), node_options(keys, tmp_path, [node]))

    with pytest.raises(CommandTimeout):
        async for _ in session.stream("hang", idle_timeout=0.2):
            pass

    assert session.health is NodeHealth.TIMEOUT
    await session.close()


# -- ProxyJump ----------------------------------------------------------------------


async def test_proxy_jump_tunnels_through_the_jump_host(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    async with FakeNode(keys, forwarding=True) as bastion:
        options = node_options(keys, tmp_path, [node, bastion])
        target = node.as_node("gpu1", jump=f"ops@127.0.0.1:{bastion.port}")
        session = NodeSession(target, options)

        assert (await session.run("echo through")).stdout == "through\n"
        assert bastion.connects.total == 1
        assert bastion.tunnels == [("127.0.0.1", node.port)]
        await session.close()


async def test_unknown_jump_host_key_is_reported_for_the_jump_host(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    async with FakeNode(keys, forwarding=True, host_key=keys.other_host_key) as bastion:
        options = node_options(keys, tmp_path, [node])  # only the target is trusted
        session = NodeSession(node.as_node("gpu1", jump=f"127.0.0.1:{bastion.port}"), options)

        with pytest.raises(HostKeyRejected):
            await session.run("echo hi")

        assert session.health is NodeHealth.UNTRUSTED
        assert session.offered_key is not None
        assert session.offered_key.port == bastion.port
        assert session.fingerprint == hostkeys.fingerprint(keys.other_host_key)
        assert node.connects.total == 0


async def test_query_falls_back_to_exec_where_the_node_has_no_shell(
    keys: TestKeys, tmp_path: Path
) -> None:
    """FakeNode closes a shell channel at once (like a ForceCommand account)."""
    seen: list[str | None] = []

    async def recording(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        seen.append(process.command)
        await default_handler(process, node)

    async with FakeNode(keys, handler=recording) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            assert await session.query("echo hi") == CommandResult(0, "hi\n", "")
            assert session.shell_works is False
            assert await session.query("echo again") == CommandResult(0, "again\n", "")
            # Each exec handed to sh, as the kept shell would have run it: not the login's
            # shell (leases.ssh.posixsh).
            assert seen[-2:] == [under_sh("echo hi"), under_sh("echo again")]
        finally:
            await session.close()


def _framing_shell(
    answer: Callable[[asyncssh.SSHServerProcess[str], str, str], None],
    shells: list[int],
    *,
    echo: bool = False,
) -> Handler:
    """A node whose `sh` channel hands each framed command (leases.ssh.shell), with its
    marker, to answer; shells counts the channels opened; echo: it echoes what it reads.
    Any other command runs as default_handler runs it."""

    async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
        if process.command not in (None, "sh"):
            await default_handler(process, node)
            return
        shells.append(1)
        pending = ""
        async for line in process.stdin:
            if echo:
                process.stdout.write(line)
            pending += line
            if (frame := unframed(pending)) is not None:
                pending = ""
                answer(process, frame[0], frame[1])

    return handle


async def test_a_shell_that_echoes_what_it_is_sent_never_ends_an_answer_early(
    keys: TestKeys, tmp_path: Path
) -> None:
    """A node whose shell echoes its input (a PTY, a logging wrapper): the marker is never
    in what zuka writes (leases.ssh.shell), so the echo cannot end an answer. Each answer
    ends at its own marker with its own status, never holds the one before, and the shell
    is kept."""
    shells: list[int] = []

    def answer(process: asyncssh.SSHServerProcess[str], cmd: str, marker: str) -> None:
        word, _, rest = cmd.partition(" ")
        out, status = (rest + "\n", 0) if word == "echo" else ("", 127)
        process.stdout.write(answer_text(out, status, marker))

    async with FakeNode(keys, handler=_framing_shell(answer, shells, echo=True)) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            first = await session.query("echo apple")
            second = await session.query("echo pear")
            missing = await session.query("nothing-here")
            assert (first.exit_status, second.exit_status, missing.exit_status) == (0, 0, 127)
            # What each holds: the echo of what was written, then the command's own output.
            assert first.stdout.startswith("__z=") and first.stdout.endswith("__z=\napple\n")
            assert second.stdout.endswith("__z=\npear\n") and "apple" not in second.stdout
            assert re.search("__zuka_done_[0-9a-f]", first.stdout + second.stdout) is None
            assert len(shells) == 1 and session.shell_works
        finally:
            await session.close()


async def test_a_shell_that_cannot_frame_is_left_for_execs(keys: TestKeys, tmp_path: Path) -> None:
    """A node whose `head` has no -c (the frame's cut): its shell prints the marker with no
    status line before it. The first such answer is not taken: the command runs as an
    exec, and so do the ones after it, on that node."""
    shells: list[int] = []

    def answer(process: asyncssh.SSHServerProcess[str], cmd: str, marker: str) -> None:
        process.stderr.write("head: invalid option -- 'c'\n")
        process.stdout.write(f"\n{marker}\n")  # $__z empty: no status line

    async with FakeNode(keys, handler=_framing_shell(answer, shells)) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            assert await session.query("echo hi") == CommandResult(0, "hi\n", "")
            assert await session.query("echo again") == CommandResult(0, "again\n", "")
            assert session.shell_works is False and len(shells) == 1
        finally:
            await session.close()


async def test_output_after_an_answer_is_never_read_as_the_next_one(
    keys: TestKeys, tmp_path: Path
) -> None:
    """A node's shell that prints more after an answer's marker, later (a background job of
    a command, a node out of step): no command is waiting for it, so that shell is not used
    again. The next command gets a new shell, and its answer holds only its own output."""
    shells: list[int] = []
    late = asyncio.Event()

    def answer(process: asyncssh.SSHServerProcess[str], cmd: str, marker: str) -> None:
        word, _, rest = cmd.partition(" ")
        process.stdout.write(answer_text(rest + "\n", 0, marker))
        if word == "late":

            async def afterwards() -> None:
                await asyncio.sleep(0.05)
                process.stdout.write("printed later\n")
                late.set()

            asyncio.get_running_loop().create_task(afterwards())

    async with FakeNode(keys, handler=_framing_shell(answer, shells)) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            assert await session.query("late first") == CommandResult(0, "first\n", "")
            await late.wait()
            await wait_until(lambda: session._shell is not None and session._shell.session.stray,
                             what="the late output to reach the client")  # fmt: skip
            assert await session.query("echo second") == CommandResult(0, "second\n", "")
            assert len(shells) == 2 and session.shell_works and session.connects == 1
        finally:
            await session.close()


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_a_shell_flooding_between_commands_is_closed_at_once(
    keys: TestKeys, tmp_path: Path, stream: str
) -> None:
    """A node's shell that prints without end after an answer, with no command waiting:
    the kept shell takes every packet as it comes, so it must not keep taking them. The
    shell is closed at once (stdout) or past 64 KiB (stderr), having cost the client a few
    packets, not what the node can send until the next command."""
    shells: list[int] = []
    sent: list[int] = []

    def answer(process: asyncssh.SSHServerProcess[str], cmd: str, marker: str) -> None:
        word, _, rest = cmd.partition(" ")
        process.stdout.write(answer_text(rest + "\n", 0, marker))
        if word == "flood":

            async def flood() -> None:
                out = process.stdout if stream == "stdout" else process.stderr
                total = 0
                with contextlib.suppress(Exception):
                    while not process.channel.is_closing() and total < 256 << 20:
                        out.write("x" * 16384 + "\n")
                        total += 16385
                        await out.drain()
                sent.append(total)

            asyncio.get_running_loop().create_task(flood())

    async with FakeNode(keys, handler=_framing_shell(answer, shells)) as fake:
        session = NodeSession(fake.as_node("n1"), node_options(keys, tmp_path, [fake]))
        try:
            first = await session.query("flood first")  # (stderr: the flood may begin in it)
            assert (first.exit_status, first.stdout) == (0, "first\n")
            await wait_until(lambda: bool(sent), what="the node to stop flooding")
            assert sent[0] < 4 << 20  # closed by the client, not by the 256 MiB cut here
            assert await session.query("echo second") == CommandResult(0, "second\n", "")
            assert len(shells) == 2 and session.shell_works
        finally:
            await session.close()


async def test_a_shell_whose_output_ends_ends_its_answer_at_once(
    keys: TestKeys, tmp_path: Path
) -> None:
    """A node's shell that ends its output (EOF) without closing the channel, before its
    first answer: the answer ends there (not at the command's time limit), and the node's
    commands run as execs."""
    shells: list[int] = []

    def answer(process: asyncssh.SSHServerProcess[str], cmd: str, marker: str) -> None:
        process.stdout.write_eof()

    async with FakeNode(keys, handler=_framing_shell(answer, shells)) as fake:
        options = node_options(keys, tmp_path, [fake], command_timeout=60)
        session = NodeSession(fake.as_node("n1"), options)
        try:
            assert await asyncio.wait_for(session.query("echo hi"), 30) == CommandResult(
                0, "hi\n", ""
            )
            assert session.shell_works is False and len(shells) == 1
        finally:
            await session.close()


def _sim_session(fleet: SimFleet, name: str, tmp_path: Path, **options: Any) -> NodeSession:
    """A session to one simulated node, trusting only the fleet's keys."""
    known = fleet.write_known_hosts(tmp_path / "known_hosts")
    key = fleet.write_client_key(tmp_path)
    opts = SshOptions(known_hosts=(known,), agent_path=None, config=[], **options)
    return NodeSession(Node(name, fleet[name].ssh_target(str(key))), opts)


async def test_kept_open_shell_times_out_and_recovers(tmp_path: Path) -> None:
    from leases.sim import Scenario, SimNode
    from leases.sim.fleet import SimFleet

    async with SimFleet([SimNode("s1", "A10", 1, Scenario.BUSY)]) as fleet:
        session = _sim_session(fleet, "s1", tmp_path, command_timeout=0.5)
        try:
            first = await session.run_in_shell("nvidia-smi -L")
            assert first.exit_status == 0 and first.stdout.startswith("GPU 0: NVIDIA A10")
            missing = await session.run_in_shell("no-such-tool")
            assert missing.exit_status == 127
            # A stream-style command never ends: the shell is dropped, the node survives.
            with pytest.raises(CommandTimeout):
                await session.run_in_shell("nvidia-smi --query-gpu=index --format=csv -lms 100")
            assert session.health is NodeHealth.TIMEOUT
            again = await session.run_in_shell("nvidia-smi -L")
            assert again.exit_status == 0 and session.health is NodeHealth.OK
            assert session.connects == 1
        finally:
            await session.close()


# -- bounded reads: a node printing without end costs a bounded amount -------------------


async def _flooding(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    """`lines N` prints N short lines; `stderr` floods stderr then exits 3; else default."""
    word, _, rest = (process.command or "").partition(" ")
    if word == "lines":
        for _ in range(int(rest)):
            process.stdout.write("x" * 99 + "\n")
            await process.stdout.drain()
        process.exit(0)
    elif word == "stderr":
        # 3 MiB: more than asyncssh's 2 MiB channel window, so a client that stopped
        # reading stderr would leave the command stalled and never see it exit.
        for _ in range(48):
            process.stderr.write("e" * 65535 + "\n")
            await process.stderr.drain()
        process.stdout.write("done\n")
        process.exit(3)
    else:
        from tests.support.sshfixtures import default_handler

        await default_handler(process, node)


async def test_output_over_the_total_cap_stops_the_command_and_marks_garbage(
    keys: TestKeys, tmp_path: Path
) -> None:
    async with FakeNode(keys, handler=_flooding) as fake:
        options = node_options(keys, tmp_path, [fake], max_output=50_000)
        session = NodeSession(fake.as_node("n1"), options)
        try:
            ok = await session.run("lines 400")  # 40,000 characters: under the cap
            assert ok.exit_status == 0 and len(ok.stdout) == 40_000
            with pytest.raises(OutputTooLarge) as caught:
                await session.run("lines 100000")  # 10 MB if it were let through
            assert caught.value.health is NodeHealth.GARBAGE
            assert session.health is NodeHealth.GARBAGE
            assert "output over 50000 characters" in session.last_error
            again = await session.run("echo still here")  # the connection is kept
            assert again.stdout == "still here\n" and session.connects == 1
            # stderr is read to its end but only its tail is kept.
            err = await session.run("stderr")
            assert err.exit_status == 3 and err.stdout == "done\n"
            assert 0 < len(err.stderr) <= 8192 and set(err.stderr) <= {"e", "\n"}
        finally:
            await session.close()


@pytest.mark.parametrize("scenario", ["endless_output", "huge_line"])
async def test_a_line_without_end_is_stopped_in_run_shell_and_stream(
    tmp_path: Path, scenario: str
) -> None:
    from leases.sim import Scenario, SimNode
    from leases.sim.fleet import SimFleet

    async with SimFleet([SimNode("s1", "A10", 1, Scenario(scenario))]) as fleet:
        session = _sim_session(fleet, "s1", tmp_path, command_timeout=20)
        try:
            for attempt in (session.run, session.run_in_shell):
                with pytest.raises(OutputTooLarge):
                    await attempt("nvidia-smi -L")
                assert session.health is NodeHealth.GARBAGE
                assert "printed a line over 64 KiB: stopped" in session.last_error
                assert (await session.run("echo ok")).stdout == "ok\n"
            for chunks in (False, True):
                lines = session.stream("nvidia-smi -L", idle_timeout=20, chunks=chunks)
                with pytest.raises(OutputTooLarge):
                    async with aclosing(lines):
                        async for _ in lines:
                            pass
                assert session.health is NodeHealth.GARBAGE
            assert session.connects == 1  # never a reason to drop the connection
        finally:
            await session.close()
