"""In-process SSH servers for tests: fast, on 127.0.0.1, with keys made per test module.

    keys = TestKeys.generate()
    async with FakeNode(keys) as node:
        options = node_options(keys, tmp_path, [node])
        session = NodeSession(node.as_node("gpu1"), options)

A FakeNode answers commands through a handler (see `default_handler` for the commands it
knows), lets a test change which client keys it accepts while it runs, can be stopped and
started again on the same port (with the same or another host key), and counts how many
connects and channels it had in flight at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import asyncssh

from leases.core.models import Node, SshTarget
from leases.sim import SimNode
from leases.sim import answer as sim_answer
from leases.sim.commands import answer_with_apps
from leases.sim.output import Answer
from leases.sim.procs import owners_answer
from leases.ssh.hostkeys import host_pattern
from leases.ssh.options import SshOptions
from leases.ssh.posixsh import unwrap_sh
from leases.telemetry.owners import APPS_OWNERS_COMMAND

Handler = Callable[[asyncssh.SSHServerProcess[str], "FakeNode"], Awaitable[None]]


@dataclass(frozen=True)
class TestKeys:
    __test__ = False  # not a pytest class

    host_key: asyncssh.SSHKey
    other_host_key: asyncssh.SSHKey
    client_key: asyncssh.SSHKey
    stranger_key: asyncssh.SSHKey  # a client key no server accepts unless told to

    @classmethod
    def generate(cls) -> TestKeys:
        def make() -> asyncssh.SSHKey:
            return asyncssh.generate_private_key("ssh-ed25519")

        return cls(make(), make(), make(), make())


def known_hosts_line(host: str, port: int, key: asyncssh.SSHKey) -> str:
    return f"{host_pattern(host, port)} {key.export_public_key('openssh').decode().strip()}\n"


def node_options(
    keys: TestKeys,
    tmp_path: Path,
    nodes: Sequence[FakeNode] = (),
    *,
    client_key: asyncssh.SSHKey | None = None,
    **overrides: object,
) -> SshOptions:
    """SshOptions that trust the given nodes' keys and keep the developer's ~/.ssh out."""
    known = tmp_path / "known_hosts"
    with known.open("a") as f:
        for node in nodes:
            f.write(known_hosts_line("127.0.0.1", node.port, node.host_key))
    base: dict[str, object] = {
        "known_hosts": (known,),
        "client_keys": [client_key or keys.client_key],
        "agent_path": None,
        "config": [],
        "connect_timeout": 5.0,
        "keepalive_interval": 0,
    }
    base.update(overrides)
    return SshOptions(**base)  # type: ignore[arg-type]


@dataclass
class Counter:
    now: int = 0
    peak: int = 0
    total: int = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def enter(self) -> None:
        self.now += 1
        self.total += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        self.now -= 1


class _Server(asyncssh.SSHServer):
    def __init__(self, node: FakeNode) -> None:
        self._node = node
        self._conn: asyncssh.SSHServerConnection | None = None
        self._authing = False

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._node.connections.add(conn)
        self._node.connects.enter()
        self._authing = True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._node.connections.discard(self._conn)
        self._done_authing()

    def _done_authing(self) -> None:
        if self._authing:
            self._authing = False
            self._node.connects.leave()

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        if self._node.auth_delay:
            await asyncio.sleep(self._node.auth_delay)
        return self._node.accepts(key)

    def auth_completed(self) -> None:
        self._done_authing()

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        # A jump host: allow direct-tcpip (ProxyJump) only when the test asked for it.
        if not self._node.forwarding:
            return False
        self._node.tunnels.append((dest_host, dest_port))
        return True


async def default_handler(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    """Commands:
    `echo TEXT`, `exit N` (prints "failing" on stderr), `sleep SECONDS`, `hang` (never answers),
    `half` (prints part of a line, then closes the channel with no exit status),
    `drop` (prints a line, then cuts the whole connection), `ticks N MS [STATUS]` (prints
    "tick i" every MS ms, N times or forever when N is 0, then exits STATUS, default 0),
    with `node.sim` set, anything else is answered as that simulated node would (nvidia-smi,
    ps and the owner query among them; `node.ps_output` replaces what the owner query's ps
    prints); without it: exit 127.
    """
    cmd = process.command or ""
    cmd = unwrap_sh(cmd) or cmd  # handed to sh (leases.ssh.posixsh): what sh would run
    word, _, rest = cmd.partition(" ")
    if word == "echo":
        process.stdout.write(rest + "\n")
        process.exit(0)
    elif word == "exit":
        process.stderr.write("failing\n")
        process.exit(int(rest))
    elif word == "sleep":
        await asyncio.sleep(float(rest))
        process.stdout.write("slept\n")
        process.exit(0)
    elif word == "hang":
        await process.channel.wait_closed()  # until the client gives up on it
    elif word == "half":
        process.stdout.write("partial out")
        await asyncio.sleep(0.01)
        process.close()
    elif word == "drop":
        process.stdout.write("before drop\n")
        await asyncio.sleep(0.05)
        process.get_extra_info("connection").abort()
    elif word == "ticks":
        count, interval_ms, status = (int(x) for x in [*rest.split(), "0"][:3])
        i = 0
        while count == 0 or i < count:
            process.stdout.write(f"tick {i}\n")
            i += 1
            await asyncio.sleep(interval_ms / 1000)
        process.exit(status)
    elif node.sim is not None and cmd:
        out, err, status = node.answer(cmd)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(status)
    else:
        process.stderr.write(f"sh: 1: {word}: not found\n")
        process.exit(127)


@dataclass
class FakeNode:
    """An SSH server in this event loop. Use as `async with`, or start()/stop()."""

    keys: TestKeys
    handler: Handler = default_handler
    host_key: asyncssh.SSHKey | None = None
    authorized: set[asyncssh.SSHKey] = field(default_factory=set)
    port: int = 0
    auth_delay: float = 0.0
    forwarding: bool = False  # act as a ProxyJump host
    tunnels: list[tuple[str, int]] = field(default_factory=list)
    connects: Counter = field(default_factory=Counter)  # unauthenticated connects in flight
    channels: Counter = field(default_factory=Counter)  # commands running at once
    connections: set[asyncssh.SSHServerConnection] = field(default_factory=set)
    # Answer commands as this simulated node, at sim_clock's time.
    sim: SimNode | None = None
    sim_clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    # What ps prints for the owner query instead of the simulated process table.
    ps_output: str | None = None
    _server: asyncssh.SSHAcceptor | None = None

    def answer(self, cmd: str) -> tuple[str, str, int]:
        """What the simulated node prints for cmd: (stdout, stderr, exit status)."""
        assert self.sim is not None
        now = self.sim_clock()
        if self.ps_output is None:
            return tuple(sim_answer(self.sim, cmd, now))  # type: ignore[return-value]
        sim = self.sim
        ps_output = self.ps_output

        def owners() -> Answer:
            return owners_answer(sim, now, ps_output)

        if (made := answer_with_apps(sim, cmd, now, owners)) is not None:
            return tuple(made)  # type: ignore[return-value]
        if not cmd.startswith(APPS_OWNERS_COMMAND):
            return tuple(sim_answer(sim, cmd, now))  # type: ignore[return-value]
        # What follows the owner query (the host figures in stream mode) as the sim says.
        rest = cmd[len(APPS_OWNERS_COMMAND) :].lstrip("; ")
        said = owners()
        after = sim_answer(sim, rest, now).stdout if rest else ""
        return said.stdout + after, said.stderr, 0

    def __post_init__(self) -> None:
        if self.host_key is None:
            self.host_key = self.keys.host_key
        if not self.authorized:
            self.authorized = {self.keys.client_key.convert_to_public()}

    def accepts(self, key: asyncssh.SSHKey) -> bool:
        return any(key.public_data == k.public_data for k in self.authorized)

    def as_node(self, name: str, **ssh: object) -> Node:
        return Node(name=name, ssh=SshTarget(host="127.0.0.1", port=self.port, **ssh))  # type: ignore[arg-type]

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self, host_key: asyncssh.SSHKey | None = None) -> Self:
        if host_key is not None:
            self.host_key = host_key
        assert self.host_key is not None

        async def process(proc: asyncssh.SSHServerProcess[str]) -> None:
            # OSError / asyncssh.Error: the client went away first.
            with self.channels.held(), contextlib.suppress(OSError, asyncssh.Error):
                await self.handler(proc, self)

        self._server = await asyncssh.create_server(
            lambda: _Server(self),
            "127.0.0.1",
            self.port,
            server_host_keys=[self.host_key],
            process_factory=process,
            encoding="utf-8",
            keepalive_interval=0,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and cut every open connection, like a node going down."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        await asyncio.sleep(0)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def free_port() -> int:
    """A port nothing listens on (bound once, then released)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port
