"""In-process asyncssh servers, one per simulated node, answering like real GPU nodes.

Each node listens on its own 127.0.0.1 port with its own host key; one client key is
authorised on all of them. Scenarios that concern the connection itself live here:
flaky (dropped connections, channels closed mid-output), unreachable (a port that refuses),
changed_hostkey (the server presents a key other than the one known_hosts pins).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import asyncssh

from leases.core.models import SshTarget
from leases.sim.commands import answer, loop_interval
from leases.sim.gpu import Scenario, SimNode, utcnow
from leases.sim.keptshell import Command, shell_commands
from leases.sim.pty import pty_shell, tmux_stand_in
from leases.sim.traps import Trap

Clock = Callable[[], datetime]


@dataclass(eq=False)
class SimEndpoint:
    """One simulated node as the network sees it."""

    node: SimNode
    host: str
    port: int
    host_key: asyncssh.SSHKey
    # The key known_hosts pins; differs from host_key once the key has "changed".
    trusted_key: asyncssh.SSHKey
    rng: random.Random
    acceptor: asyncssh.SSHAcceptor | None = None
    # A bound but not listening socket: keeps the port ours while connects are refused.
    holder: socket.socket | None = None
    # The key the running listener was started with.
    presented: asyncssh.SSHKey | None = None
    conns: set[asyncssh.SSHServerConnection] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def host_public_key(self) -> str:
        """The key the server presents now, in OpenSSH format."""
        return self.host_key.export_public_key().decode().strip()

    def known_hosts_line(self) -> str:
        key = self.trusted_key.export_public_key().decode().strip()
        return f"[{self.host}]:{self.port} {key}"

    def ssh_target(self, key_path: str | None = None, user: str = "root") -> SshTarget:
        return SshTarget(host=self.host, port=self.port, user=user, key_path=key_path)


class _Server(asyncssh.SSHServer):
    def __init__(self, fleet: SimFleet, ep: SimEndpoint) -> None:
        self._fleet = fleet
        self._ep = ep

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._ep.conns.add(conn)
        if self._fleet.misbehaves(self._ep):
            # Dropped before the handshake completes: the client sees ConnectionLost.
            asyncio.get_running_loop().call_soon(conn.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        self._ep.conns = {c for c in self._ep.conns if not c.is_closed()}

    def begin_auth(self, username: str) -> bool:
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        """A node whose sshd lets passwords in (Trap.PASSWORD_SSHD) asks for one, as its
        `sshd -T` says; no password is ever right here."""
        return Trap.PASSWORD_SSHD in self._ep.node.traps

    def validate_password(self, username: str, password: str) -> bool:
        return False

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        """As sshd reads authorized_keys: the node's lines now (a revoked key is refused)."""
        try:
            allowed = asyncssh.import_authorized_keys("\n".join(self._ep.node.keys) + "\n")
        except (ValueError, asyncssh.KeyImportError):
            return False
        return allowed.validate(key, "127.0.0.1", "127.0.0.1") is not None


class SimFleet:
    """Start, steer and stop many simulated nodes in this process's event loop."""

    def __init__(
        self,
        nodes: Iterable[SimNode],
        *,
        host: str = "127.0.0.1",
        clock: Clock = utcnow,
        flaky_rate: float = 0.3,
        seed: int = 0,
    ) -> None:
        self._host = host
        self.clock = clock
        self.flaky_rate = flaky_rate
        self._seed = seed
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self._nodes = list(nodes)
        # Each node's authorized_keys: the fleet's client key, and a restricted key of
        # the platform's own that offboarding must leave alone.
        lab = self.client_key.export_public_key().decode().strip()
        ops = (
            'no-pty,command="true" '
            + asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
        )
        for node in self._nodes:
            if not node.keys:
                node.keys[:] = [lab, ops]
        names = [n.name for n in self._nodes]
        if len(set(names)) != len(names):
            raise ValueError("nodes: names must be unique")
        self.endpoints: dict[str, SimEndpoint] = {}

    def __getitem__(self, name: str) -> SimEndpoint:
        return self.endpoints[name]

    def __iter__(self) -> Iterator[SimEndpoint]:
        return iter(self.endpoints.values())

    def __len__(self) -> int:
        return len(self.endpoints)

    async def __aenter__(self) -> SimFleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self.endpoints:
            raise RuntimeError("fleet already started")
        for i, node in enumerate(self._nodes):
            key = asyncssh.generate_private_key("ssh-ed25519")
            # changed_hostkey: known_hosts holds the key first seen, the server shows another.
            shown = key
            if node.scenario is Scenario.CHANGED_HOSTKEY:
                shown = asyncssh.generate_private_key("ssh-ed25519")
            self.endpoints[node.name] = SimEndpoint(
                node=node,
                host=self._host,
                port=0,
                host_key=shown,
                trusted_key=key,
                rng=random.Random(f"fleet/{self._seed}/{i}/{node.seed}"),
            )
        await asyncio.gather(*(self._apply(ep) for ep in self))

    async def stop(self) -> None:
        await asyncio.gather(*(self._close(ep) for ep in self))

    async def set_scenario(self, name: str, scenario: Scenario) -> None:
        """Switch a running node to another scenario, restarting its listener if needed."""
        ep = self.endpoints[name]
        old = ep.node.scenario
        ep.node = dataclasses.replace(ep.node, scenario=Scenario(scenario))
        if scenario is Scenario.CHANGED_HOSTKEY and old is not Scenario.CHANGED_HOSTKEY:
            ep.host_key = asyncssh.generate_private_key("ssh-ed25519")
        await self._apply(ep)

    async def rotate_host_key(self, name: str, *, trust: bool = False) -> SimEndpoint:
        """Restart the node on the same port with a new host key (a reinstalled node).

        With trust=True known_hosts follows the new key, as after the user accepted it.
        """
        ep = self.endpoints[name]
        ep.host_key = asyncssh.generate_private_key("ssh-ed25519")
        if trust:
            ep.trusted_key = ep.host_key
        await self._close(ep)
        await self._apply(ep)
        return ep

    def known_hosts(self) -> str:
        return "".join(ep.known_hosts_line() + "\n" for ep in self)

    def write_known_hosts(self, path: str | os.PathLike[str]) -> Path:
        out = Path(path)
        out.write_text(self.known_hosts())
        return out

    def write_client_key(self, directory: str | os.PathLike[str]) -> Path:
        """Write id_ed25519 (mode 0600) and id_ed25519.pub; returns the private key's path."""
        private = Path(directory) / "id_ed25519"
        private.touch(mode=0o600)
        private.write_bytes(self.client_key.export_private_key())
        private.chmod(0o600)
        private.with_suffix(".pub").write_bytes(self.client_key.export_public_key())
        return private

    def misbehaves(self, ep: SimEndpoint) -> bool:
        """A seeded coin toss: does this flaky node drop the next connection or channel?"""
        return ep.node.scenario is Scenario.FLAKY and ep.rng.random() < self.flaky_rate

    async def _apply(self, ep: SimEndpoint) -> None:
        """Make the listener match the node's scenario and current host key."""
        if ep.node.scenario is Scenario.UNREACHABLE:
            if ep.acceptor is not None:
                await self._close(ep)
            if ep.holder is None:
                ep.holder = _hold_port(ep.host, ep.port)
                ep.port = ep.holder.getsockname()[1]
            return
        if ep.acceptor is not None and ep.presented is ep.host_key:
            return
        await self._close(ep)
        ep.acceptor = await asyncssh.create_server(
            lambda: _Server(self, ep),
            ep.host,
            ep.port,
            server_host_keys=[ep.host_key],
            process_factory=lambda process: self._serve(ep, process),
            line_editor=False,
            encoding="utf-8",
        )
        ep.port = ep.acceptor.sockets[0].getsockname()[1]
        ep.presented = ep.host_key

    async def _close(self, ep: SimEndpoint) -> None:
        if ep.holder is not None:
            ep.holder.close()
            ep.holder = None
        if ep.acceptor is not None:
            ep.acceptor.close()
            await ep.acceptor.wait_closed()
            ep.acceptor = None
        for conn in list(ep.conns):
            conn.abort()
        ep.conns.clear()

    async def _serve(self, ep: SimEndpoint, process: asyncssh.SSHServerProcess[str]) -> None:
        status: int | None = 0
        try:
            tmux = tmux_stand_in(process.command or "")
            if process.get_terminal_type() is not None and (process.command is None or tmux):
                status = await pty_shell(ep.node, process, self.clock, tmux=tmux)
            elif process.command in _SHELLS:
                status = await self._shell(ep, process)
            else:
                status = await self._run(ep, process, process.command)
        except (BrokenPipeError, ConnectionError, asyncssh.Error):
            return
        if status is None:
            process.close()
        elif not process.is_closing():
            process.exit(status)

    async def _run(
        self,
        ep: SimEndpoint,
        process: asyncssh.SSHServerProcess[str],
        command: str,
        last_status: int = 0,
        framed: Command | None = None,
    ) -> int | None:
        """Run one command; None means the channel was closed without an exit status.

        last_status is what $? expands to before the command's own first part runs. A
        framed command (leases.ssh.shell) is answered as sh answers it: its output held
        and printed with its status and marker in one write."""
        if ep.node.scenario in _FLOODS and command.startswith("nvidia-smi"):
            return await _flood(process, ep.node.scenario)
        interval = loop_interval(command)
        if interval is None:
            out, err, status = answer(ep.node, command, self.clock(), last_status)
            if out and self.misbehaves(ep):
                process.stdout.write(out[: len(out) // 2])
                return None
            if framed is not None:
                framed.reply(out, err, status)
                return 0
            process.stdout.write(out)
            process.stderr.write(err)
            return status
        # Streaming: a round every interval until the client closes the channel (framed,
        # sh holds what it prints: nothing comes).
        stop_after = 1 + ep.rng.randrange(5) if self.misbehaves(ep) else None
        rounds = 0
        while not process.is_closing():
            out, err, status = answer(ep.node, command, self.clock())
            if framed is None:
                process.stdout.write(out)
            if status != 0:
                process.stderr.write(err)
                if framed is not None:
                    framed.reply("", "", status)
                    return 0
                return status
            rounds += 1
            if stop_after is not None and rounds >= stop_after:
                return None
            await asyncio.sleep(interval)
        return 0

    async def _shell(self, ep: SimEndpoint, process: asyncssh.SSHServerProcess[str]) -> int | None:
        """A shell channel without a terminal (or `sh` reading its stdin): runs each command
        it is sent (leases.sim.keptshell), prints no prompt, and keeps $? from one to the
        next."""
        status: int | None = 0
        async for command in shell_commands(process):
            framed = command if command.marker is not None else None
            status = await self._run(ep, process, command.text, status or 0, framed)
            if status is None:
                return None
        return status


_FLOODS = (Scenario.ENDLESS_OUTPUT, Scenario.HUGE_LINE)
HUGE_LINE_CHARS = 100 * 1000 * 1000
_FLOOD_CHUNK = "x" * 65536


async def _flood(process: asyncssh.SSHServerProcess[str], scenario: Scenario) -> int:
    """Print without a newline: for ever, or 100 MB and then one. Waits on the client
    between chunks (drain), so the node costs this process one chunk, not the flood."""
    sent = 0
    while scenario is Scenario.ENDLESS_OUTPUT or sent < HUGE_LINE_CHARS:
        if process.is_closing():
            return 0
        process.stdout.write(_FLOOD_CHUNK)
        sent += len(_FLOOD_CHUNK)
        await process.stdout.drain()
    process.stdout.write("\n")
    return 0


# What a client may run to get a shell on its channel: no command, or sh itself.
_SHELLS = (None, "sh", "/bin/sh", "exec sh")


def _hold_port(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock
