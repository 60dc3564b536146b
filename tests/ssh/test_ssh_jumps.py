"""How zuka connects: ~/.ssh/config read by zuka, shared jump hosts, key files, connect
lanes, and `poll --once --timeout`. In-process asyncssh servers (tests/support/sshfixtures.py)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh import hostkeys
from leases.ssh.errors import HostKeyRejected, SshError, TargetRefused
from leases.ssh.keys import read_key_file
from leases.ssh.pool import SshPool
from leases.ssh.session import NodeSession
from leases.telemetry.poller import Poller
from tests.support.cli import Cli
from tests.support.sshfixtures import FakeNode, TestKeys, free_port, known_hosts_line, node_options
from tests.support.waiting import wait_until


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port whose connects complete (the kernel's backlog) but never get a banner."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield sock.getsockname()[1]
    sock.close()


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


# -- ~/.ssh/config, read by zuka -------------------------------------------------------


async def test_a_config_proxycommand_refuses_the_node_and_runs_nothing(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    config = write_config(tmp_path, f"Host *\n  ProxyCommand touch {marker}-%h\n")
    options = node_options(keys, tmp_path, [node], config=[config])
    # The host value of a hostile ledger: quotes and spaces that %h would splice in.
    session = NodeSession(node.as_node("gpu1"), options)

    with pytest.raises(TargetRefused) as caught:
        await session.run("echo hi")

    assert "proxycommand" in caught.value.message.lower()
    assert "refused by zuka" in session.last_error
    assert session.health is NodeHealth.REFUSED
    assert node.connects.total == 0
    assert not list(tmp_path.glob("pwned*"))


async def test_a_hostile_host_value_is_refused_before_any_config_or_connect(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    config = write_config(tmp_path, "Host *\n  ProxyCommand none\n")
    options = node_options(keys, tmp_path, [node], config=[config])
    for host in ["127.0.0.1 -oProxyCommand=touch", "-oProxyCommand=x", "a'b", "h%h", "h\nx"]:
        session = NodeSession(Node("bad", SshTarget(host, port=node.port)), options)
        with pytest.raises(TargetRefused):
            await session.run("echo hi")
    assert node.connects.total == 0


async def test_match_exec_is_never_run_and_refuses_what_it_might_set(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    config = write_config(tmp_path, f'Match exec "touch {marker}"\n  HostName 10.9.9.9\n')
    options = node_options(keys, tmp_path, [node], config=[config])
    session = NodeSession(node.as_node("gpu1"), options)

    with pytest.raises(TargetRefused, match="Match"):
        await session.run("echo hi")
    assert not marker.exists()


async def test_config_hostname_port_user_and_identityfile_are_honoured(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    key_file = tmp_path / "id_lab"
    keys.stranger_key.write_private_key(key_file)
    node.authorized = {keys.stranger_key.convert_to_public()}
    config = write_config(
        tmp_path,
        "Host other\n  HostName 10.1.1.1\n"
        f"Host gpu-*\n  HostName 127.0.0.1\n  Port {node.port}\n  User ops\n"
        f"  IdentityFile {key_file}\n  ServerAliveInterval 30\n"
        "Host *\n  User ignored-as-the-first-value-wins\n",
    )
    options = node_options(keys, tmp_path, [node], config=[config], client_keys=None)
    session = NodeSession(Node("a", SshTarget("gpu-a", alias=True)), options)

    assert (await session.run("echo via config")).stdout == "via config\n"
    await session.close()


async def test_config_hostname_with_metacharacters_is_refused(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    config = write_config(tmp_path, 'Host gpu\n  HostName "127.0.0.1 -oProxyCommand=sh"\n')
    options = node_options(keys, tmp_path, [node], config=[config])
    session = NodeSession(Node("a", SshTarget("gpu", port=node.port)), options)

    with pytest.raises(TargetRefused, match="HostName"):
        await session.run("echo hi")


async def test_config_proxyjump_becomes_a_zuka_hop_and_proxyjump_none_means_none(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    async with FakeNode(keys, forwarding=True) as bastion:
        config = write_config(
            tmp_path,
            "Host direct\n  HostName 127.0.0.1\n  ProxyJump none\n"
            f"Host *\n  ProxyJump ops@127.0.0.1:{bastion.port}\n",
        )
        options = node_options(keys, tmp_path, [node, bastion], config=[config])
        pool = SshPool(options)
        pool.add(Node("behind", SshTarget("127.0.0.1", port=node.port)))
        pool.add(Node("direct", SshTarget("direct", port=node.port)))
        try:
            results = await pool.run_many(pool.sessions, "echo up")
            assert all(not isinstance(r, Exception) for r in results.values()), results
            assert bastion.tunnels == [("127.0.0.1", node.port)]  # only "behind" went through
            assert pool.jumps.connects == 1
        finally:
            await pool.close()


# -- shared jump hosts -----------------------------------------------------------------


async def test_nodes_behind_one_jump_host_share_one_connection(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    async with FakeNode(keys, forwarding=True) as bastion:
        pool = SshPool(node_options(keys, tmp_path, [node, bastion]))
        for i in range(12):
            pool.add(node.as_node(f"n{i}", jump=f"ops@127.0.0.1:{bastion.port}"))
        try:
            results = await pool.run_many(pool.sessions, "echo up")
            assert all(not isinstance(r, Exception) for r in results.values()), results
            assert bastion.connects.total == 1
            assert len(bastion.tunnels) == 12
            assert pool.jumps.connects == 1
        finally:
            await pool.close()
        # Its last user gone, the jump connection is closed too.
        await wait_until(lambda: not bastion.connections, what="the jump connection to close")


async def test_a_dead_jump_host_fails_every_node_behind_it_after_one_attempt(
    keys: TestKeys, tmp_path: Path
) -> None:
    attempts = 0

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.close()

    dead = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = dead.sockets[0].getsockname()[1]
    # The backoff's jitter is random (full jitter from 0 s): a draw near 0 let a node that
    # waited its turn on a loaded machine find the backoff over and try again (CI saw 2
    # attempts). The jitter is fixed here, and the pool's clock stands still: one attempt.
    pool = SshPool(node_options(keys, tmp_path, []), clock=lambda: 1000.0, random=lambda: 0.5)
    for i in range(40):
        pool.add(Node(f"n{i}", SshTarget("10.0.0.7", port=2200 + i, jump=f"127.0.0.1:{port}")))
    try:
        results = await pool.run_many(pool.sessions, "echo up")

        assert attempts == 1
        assert all(isinstance(r, SshError) for r in results.values())
        assert all(
            s.last_error.startswith(f"jump host 127.0.0.1:{port}: ") for s in pool.sessions.values()
        )
        assert {s.health for s in pool.sessions.values()} == {NodeHealth.UNREACHABLE}
    finally:
        await pool.close()
        dead.close()
        await dead.wait_closed()


async def test_a_jump_host_that_dropped_is_reconnected_once_for_all_nodes(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    bastion = await FakeNode(keys, forwarding=True).start()
    pool = SshPool(node_options(keys, tmp_path, [node, bastion]), random=lambda: 0.0)
    for i in range(5):
        pool.add(node.as_node(f"n{i}", jump=f"127.0.0.1:{bastion.port}"))
    try:
        await pool.run_many(pool.sessions, "echo up")
        await bastion.stop()
        await bastion.start()  # same port, same key: back up
        await wait_until(  # every node saw its link go
            lambda: not any(s.connected for s in pool.sessions.values()),
            what="every node behind the jump host to see the drop",
        )
        results = await pool.run_many(pool.sessions, "echo again")

        assert all(not isinstance(r, Exception) for r in results.values()), results
        assert pool.jumps.connects == 2
        assert bastion.connects.total == 2
    finally:
        await pool.close()
        await bastion.stop()


async def test_an_untrusted_jump_host_is_named_and_trusting_it_lets_the_node_connect(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    async with FakeNode(keys, forwarding=True, host_key=keys.other_host_key) as bastion:
        options = node_options(keys, tmp_path, [node])  # only the node is trusted
        pool = SshPool(options)
        session = pool.add(node.as_node("gpu1", jump=f"127.0.0.1:{bastion.port}"))
        try:
            with pytest.raises(HostKeyRejected) as caught:
                await session.run("echo hi")
            assert "jump host" in caught.value.message
            assert session.health is NodeHealth.UNTRUSTED
            assert session.offered_key is not None
            assert session.offered_key.port == bastion.port

            assert session.accept_host_key(hostkeys.fingerprint(keys.other_host_key))
            assert (await session.run("echo hi")).stdout == "hi\n"
        finally:
            await pool.close()


# -- key files ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "huge", "fifo", "directory"])
async def test_a_key_path_that_is_not_a_small_regular_file_is_refused_unread(
    keys: TestKeys, node: FakeNode, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / kind
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as f:
            f.truncate(200 * 1024 * 1024)  # sparse: costs no disk
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    session = NodeSession(node.as_node("gpu1", key_path=str(path)), node_options(keys, tmp_path))

    with pytest.raises(SshError) as caught:
        await session.run("echo hi")

    assert caught.value.health is NodeHealth.AUTH_FAILED
    assert str(path) in session.last_error
    assert "regular file" in session.last_error or "larger than" in session.last_error
    assert node.connects.total == 0


def test_read_key_file_never_reads_more_than_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_bytes(b"x" * 100)
    assert read_key_file(path, limit=100) == b"x" * 100
    with pytest.raises(Exception, match="larger than 99"):
        read_key_file(path, limit=99)


# -- live nodes first ------------------------------------------------------------------


async def test_a_live_node_is_read_while_blackholed_nodes_still_hang(
    keys: TestKeys, node: FakeNode, tmp_path: Path, blackhole: int
) -> None:
    options = node_options(
        keys, tmp_path, [node], max_concurrent_connects=2, stall_after=0.1, connect_timeout=20
    )
    pool = SshPool(options)
    # Two ports' worth of dead nodes, all ahead of the live one in the queue.
    dead = [pool.add(Node(f"d{i}", SshTarget("127.0.0.1", port=blackhole))) for i in range(6)]
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(64)
    dead += [
        pool.add(Node(f"e{i}", SshTarget("127.0.0.1", port=other.getsockname()[1])))
        for i in range(6)
    ]
    live = pool.add(node.as_node("live"))
    try:
        dead_runs = [asyncio.ensure_future(s.run("echo x")) for s in dead]
        assert (await live.run("echo alive")).stdout == "alive\n"
        # Not one dead connect has ended (they wait 20 s): the live one did not queue.
        assert not any(t.done() for t in dead_runs)
        for t in dead_runs:
            t.cancel()
        await asyncio.gather(*dead_runs, return_exceptions=True)
    finally:
        other.close()
        await pool.close()


async def test_nodes_that_failed_use_the_retry_lane_not_the_fresh_one(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    options = node_options(keys, tmp_path, [node], max_concurrent_retries=1)
    pool = SshPool(options, random=lambda: 0.0)
    down = [pool.add(Node(f"d{i}", SshTarget("127.0.0.1", port=await free_port()))) for i in (1, 2)]
    await pool.run_many([s.name for s in down], "echo x")
    assert all(s.failures == 1 for s in down)
    # Hold the only retry slot: a failed node now waits, a fresh one does not.
    await pool.budget.retry.acquire()
    try:
        retry = asyncio.ensure_future(down[0].run("echo x"))
        assert (await pool.add(node.as_node("fresh")).run("echo ok")).stdout == "ok\n"
        assert not retry.done()
    finally:
        pool.budget.retry.release()
    with pytest.raises(SshError):
        await retry
    await pool.close()


async def test_bounded_sweep_reports_unfinished_nodes_as_timeout(
    keys: TestKeys, node: FakeNode, tmp_path: Path, blackhole: int
) -> None:
    from tui.cli.fleet import _bounded_sweep

    options = node_options(keys, tmp_path, [node], connect_timeout=30)
    nodes = [Node("dead", SshTarget("127.0.0.1", port=blackhole))]
    poller = Poller(nodes, pool=SshPool(options))
    try:
        async with asyncio.timeout(10):
            statuses = await _bounded_sweep(poller, 0.3)
        assert statuses["dead"].health is NodeHealth.TIMEOUT
        assert "--timeout" in statuses["dead"].detail
    finally:
        await poller.close()


def test_poll_once_timeout_exits_non_zero_when_no_node_answered(cli: Cli, blackhole: int) -> None:
    assert cli("node", "add", "dead", "--ssh", f"ssh -p {blackhole} root@127.0.0.1").code == 0
    r = cli("poll", "--once", "--timeout", "0.5", "--json")
    assert r.code == 1, r.err
    assert '"health": "timeout"' in r.out
    assert cli("poll", "--once", "--timeout", "0").code != 0  # must be positive


def test_asyncssh_is_never_given_a_config(tmp_path: Path) -> None:
    """Guard: every connect in leases.ssh.connect (and the password proof's, built on it)
    passes config=[] (asyncssh would run a ProxyCommand from the one it reads)."""
    import inspect

    from leases.ssh import connect, passwordprobe

    source = inspect.getsource(connect.Connector.connect_kwargs)
    assert '"config": []' in source
    for user in (connect.Connector._connect_one, passwordprobe._ProofConnector._connect_one):
        assert "self.connect_kwargs(end, tunnel)" in inspect.getsource(user)
    assert asyncssh.connect  # the call it guards


# -- which hop failed, in words ------------------------------------------------------------


def _plain_words(text: str) -> None:
    """A fault detail a user reads: no exception class names, errno or Python reprs."""
    for raw in ("Error:", "Errno", "Exception", "Denied:", "('", "gaierror"):
        assert raw not in text, text


async def _fault(session: NodeSession) -> str:
    with pytest.raises(SshError):
        await session.run("echo hi")
    await session.close()
    _plain_words(session.last_error)
    return session.last_error


async def test_a_refused_node_is_named_in_words(keys: TestKeys, tmp_path: Path) -> None:
    port = await free_port()
    fake = FakeNode(keys, port=port)
    session = NodeSession(fake.as_node("gpu1"), node_options(keys, tmp_path, [fake]))
    assert await _fault(session) == f"node 127.0.0.1:{port}: connection refused"


async def test_a_node_that_never_answers_is_named_in_words(
    keys: TestKeys, tmp_path: Path, blackhole: int
) -> None:
    options = node_options(keys, tmp_path, connect_timeout=0.3)
    session = NodeSession(Node("gpu1", SshTarget("127.0.0.1", port=blackhole)), options)
    detail = await _fault(session)
    assert detail.startswith(f"node 127.0.0.1:{blackhole}: ")
    assert "timed out after 0.3 s" in detail


async def test_an_unknown_host_name_is_named_in_words(keys: TestKeys, tmp_path: Path) -> None:
    options = node_options(keys, tmp_path)
    session = NodeSession(Node("gpu1", SshTarget("zuka-no-such-node.lan", port=22)), options)
    detail = await _fault(session)
    assert detail.startswith("node zuka-no-such-node.lan:22: host name "), detail


async def test_a_refused_key_is_named_in_words(
    keys: TestKeys, node: FakeNode, tmp_path: Path
) -> None:
    options = node_options(keys, tmp_path, [node], client_key=keys.stranger_key)
    session = NodeSession(node.as_node("gpu1", user="lab"), options)
    detail = await _fault(session)
    assert detail.startswith(f"node lab@127.0.0.1:{node.port}: authentication failed"), detail


async def test_a_refused_jump_host_is_named_in_words(keys: TestKeys, tmp_path: Path) -> None:
    port = await free_port()
    options = node_options(keys, tmp_path)
    target = SshTarget("10.0.0.5", port=2222, jump=f"127.0.0.1:{port}")
    detail = await _fault(NodeSession(Node("gpu1", target), options))
    assert detail == f"jump host 127.0.0.1:{port}: connection refused"


async def test_a_node_refused_behind_a_jump_host_is_named_with_it(
    keys: TestKeys, tmp_path: Path
) -> None:
    closed = await free_port()
    async with FakeNode(keys, forwarding=True) as bastion:
        options = node_options(keys, tmp_path, [bastion])
        target = SshTarget("127.0.0.1", port=closed, jump=f"127.0.0.1:{bastion.port}")
        detail = await _fault(NodeSession(Node("gpu1", target), options))
    assert detail.startswith(
        f"node 127.0.0.1:{closed} (via jump host 127.0.0.1:{bastion.port}): "
    ), detail
    assert "refused" in detail


async def test_a_changed_node_key_behind_a_jump_host_is_named_with_it(
    keys: TestKeys, tmp_path: Path
) -> None:
    async with (
        FakeNode(keys, forwarding=True) as bastion,
        FakeNode(keys, host_key=keys.other_host_key) as node,
    ):
        options = node_options(keys, tmp_path, [bastion])
        # On file: the bastion's key for the node's address, so the node's key has changed.
        with (tmp_path / "known_hosts").open("a") as f:
            f.write(known_hosts_line("127.0.0.1", node.port, bastion.host_key))
        session = NodeSession(node.as_node("gpu1", jump=f"127.0.0.1:{bastion.port}"), options)
        with pytest.raises(HostKeyRejected):
            await session.run("echo hi")
        await session.close()
    assert session.last_error.startswith(
        f"node 127.0.0.1:{node.port} (via jump host 127.0.0.1:{bastion.port}): "
        f"HOST KEY OF [127.0.0.1]:{node.port} HAS CHANGED"
    ), session.last_error
