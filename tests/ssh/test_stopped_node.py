"""A node that stopped answering while its connection stays open (a process stopped with
SIGSTOP, a kernel stuck, a VM paused): every command, and every kept shell opened again,
ends within the command's limit; it never waits for the keepalives to give the connection
up, and in exec mode the other nodes are read within that limit too.

The stop is a TCP proxy in this process that stops passing bytes both ways while keeping
both connections open: what the client sees of a stopped node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import Node, NodeHealth, SshTarget
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.keptshell import shell_commands
from leases.ssh.errors import CommandTimeout, ConnectionDropped
from leases.ssh.pool import SshPool
from leases.ssh.session import NodeSession
from leases.telemetry.poller import Poller
from tests.support.sshfixtures import FakeNode, TestKeys, known_hosts_line, node_options
from tests.support.waiting import wait_until


class StoppingProxy:
    """127.0.0.1:port passed on to a node's port, until stop(): then no byte passes either
    way (those read are held), and every connection stays open."""

    def __init__(self, to_port: int) -> None:
        self.to_port = to_port
        self.port = 0
        self._running = asyncio.Event()
        self._running.set()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> StoppingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop_passing(self) -> None:
        self._running.clear()

    def pass_again(self) -> None:
        self._running.set()

    def cut(self) -> None:
        """Every connection through it reset (the node's host went away)."""
        for writer in self._writers:
            writer.transport.abort()

    async def close(self) -> None:
        self._running.set()
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.to_port)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await self._running.wait()
                writer.write(data)
                await writer.drain()
        writer.close()


def _trust_proxy(tmp_path: Path, proxy: StoppingProxy, node: FakeNode) -> None:
    """The node's host key trusted at the proxy's port too (node_options' known_hosts)."""
    assert node.host_key is not None
    with (tmp_path / "known_hosts").open("a") as f:
        f.write(known_hosts_line("127.0.0.1", proxy.port, node.host_key))


SHELLS: list[int] = []  # the kept shells the node opened, by its port


async def _kept_shell(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    SHELLS.append(node.port)
    async for command in shell_commands(process):
        word, _, rest = command.text.partition(" ")
        assert word == "echo", command.text
        command.reply(f"{rest}\n", "", 0)


@contextlib.asynccontextmanager
async def _behind_proxy(
    keys: TestKeys, tmp_path: Path, limit: float
) -> AsyncIterator[tuple[FakeNode, StoppingProxy, NodeSession]]:
    """A node with kept shells, reached through a StoppingProxy by a session whose
    commands have `limit` seconds, its kept shell open and answered once."""
    async with FakeNode(keys, handler=_kept_shell) as fake:
        proxy = await StoppingProxy(fake.port).start()
        options = node_options(keys, tmp_path, [fake], command_timeout=limit)
        _trust_proxy(tmp_path, proxy, fake)
        session = NodeSession(Node("n1", SshTarget("127.0.0.1", proxy.port)), options)
        try:
            assert (await session.query("echo up")).stdout == "up\n"
            yield fake, proxy, session
        finally:
            session.abandon()
            await proxy.close()


async def test_a_stopped_node_times_out_within_the_limit_even_opening_a_shell(
    keys: TestKeys, tmp_path: Path
) -> None:
    async with _behind_proxy(keys, tmp_path, 0.5) as (_, proxy, session):
        proxy.stop_passing()
        loop = asyncio.get_running_loop()
        for _ in range(2):  # the command in its shell; then a new shell never opened
            began = loop.time()
            with pytest.raises(CommandTimeout):
                await asyncio.wait_for(session.query("echo anyone"), 5)
            assert loop.time() - began < 2
            assert session.health is NodeHealth.TIMEOUT
            assert session.last_error == "'echo anyone' did not finish within 0.5 s"


async def test_in_exec_mode_a_stopped_node_holds_the_others_up_no_longer_than_its_limit(
    keys: TestKeys, tmp_path: Path
) -> None:
    sims = [SimNode(f"n{i}", "A100", 1, seed=i) for i in range(3)]

    def handler(sim: SimNode):  # type: ignore[no-untyped-def]
        async def handle(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
            async for command in shell_commands(process):
                command.reply(*sim_answer(sim, command.text, datetime.now(UTC)))

        return handle

    fakes = [await FakeNode(keys, handler=handler(s)).start() for s in sims]
    proxy = await StoppingProxy(fakes[0].port).start()
    try:
        options = node_options(keys, tmp_path, fakes, command_timeout=0.5)
        _trust_proxy(tmp_path, proxy, fakes[0])
        nodes = [fakes[1].as_node("n1"), fakes[2].as_node("n2")]
        nodes.insert(0, Node("n0", SshTarget("127.0.0.1", proxy.port)))
        poller = Poller(nodes, pool=SshPool(options), host_stats=False, processes=False)
        try:
            first = await poller.sweep()
            assert {s.health for s in first.values()} == {NodeHealth.OK}
            proxy.stop_passing()
            loop = asyncio.get_running_loop()
            for _ in range(4):  # its command, then shells never opened, then backoff
                began = loop.time()
                result = await asyncio.wait_for(poller.sweep(), 5)
                assert loop.time() - began < 2  # the limit (0.5 s), and slack
                assert result["n1"].health is result["n2"].health is NodeHealth.OK
                assert result["n0"].health is not NodeHealth.OK
        finally:
            poller.pool.abandon()
            await poller.close()
    finally:
        await proxy.close()
        for fake in fakes:
            await fake.stop()


async def test_a_shell_asked_for_while_the_node_is_stopped_is_opened_once(
    keys: TestKeys, tmp_path: Path
) -> None:
    """Commands that time out while a stopped node's new shell is being opened all wait
    for that one open: none is cancelled (asyncssh has sent its request: a cancelled open
    left the node, once it ran again, a channel nobody owned, holding a session slot for
    the connection's life). When the node runs again the open becomes the kept shell."""
    async with _behind_proxy(keys, tmp_path, 0.3) as (fake, proxy, session):
        proxy.stop_passing()
        for _ in range(5):  # the command; then four waits for one shell's open
            with pytest.raises(CommandTimeout):
                await asyncio.wait_for(session.query("echo anyone"), 5)
        proxy.pass_again()
        again = await asyncio.wait_for(session.query("echo back"), 5)
        assert again.stdout == "back\n" and session.shell_works
        assert SHELLS.count(fake.port) == 2  # the first shell and one opened again
        assert session.connects == 1
        # The connection's channels (asyncssh's own table: no public count): the kept
        # shell alone, once the first one's close went through; a cancelled open
        # would stay there, confirmed by the node and owned by no one.
        link = session._link
        assert link is not None
        channels = link.conn._channels  # type: ignore[attr-defined]
        await wait_until(lambda: len(channels) == 1, timeout=5, what="one channel")


async def test_a_connection_lost_while_a_shell_opens_is_a_lost_connection(
    keys: TestKeys, tmp_path: Path
) -> None:
    """Not a node that refuses shells: the next command may use one again (shell_works)."""
    async with _behind_proxy(keys, tmp_path, 0.3) as (_, proxy, session):
        proxy.stop_passing()
        with pytest.raises(CommandTimeout):  # the command in its shell
            await asyncio.wait_for(session.query("echo anyone"), 5)
        opening = asyncio.ensure_future(session.query("echo anyone"))
        await wait_until(lambda: session._opening is not None, what="a shell opening")
        proxy.cut()
        with pytest.raises(ConnectionDropped):
            await asyncio.wait_for(opening, 5)
        assert session.shell_works and session.health is NodeHealth.UNREACHABLE
