"""An in-process SSH node that runs each command in a real `sh` on this machine, for the
offboarding tests: what it is told acts on real files under a test's own folders.

    node = ShellNode(keys, handler=shell_handler, home=tmp_path / "home")

HOME is the test's folder; the node accepts exactly the client keys in that folder's
.ssh/authorized_keys, as sshd does, so revoking the key really stops the next login. It
counts every command its sh ran (`ran`), the edge where a test sees what was done.

ServedNode serves one from a thread and event loop of its own, for tests that run the
CLI (which runs its own event loop) against it, and pins its host key where `zuka`
looks (the ledger's trust store).
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from leases.ledger.paths import trust_store
from tests.support.sshfixtures import FakeNode, TestKeys, known_hosts_line

T = TypeVar("T")


@dataclasses.dataclass
class ShellNode(FakeNode):
    """Runs each command in `sh -c` here, HOME=home; accepts the keys in home's
    .ssh/authorized_keys as sshd would."""

    home: Path = Path("/nonexistent")
    bin: Path | None = None  # put first on PATH: stand-ins for the node's own tools
    ran: list[str] = dataclasses.field(default_factory=list)  # every command, in order

    def accepts(self, key: asyncssh.SSHKey) -> bool:
        # As sshd's default AuthorizedKeysFile: authorized_keys, then authorized_keys2.
        for name in ("authorized_keys", "authorized_keys2"):
            try:
                allowed = asyncssh.read_authorized_keys(str(self.home / ".ssh" / name))
            except (OSError, ValueError, asyncssh.KeyImportError):
                continue
            if allowed.validate(key, "127.0.0.1", "127.0.0.1") is not None:
                return True
        return False


async def shell_handler(process: asyncssh.SSHServerProcess[str], node: FakeNode) -> None:
    """Runs the command in sh, its output passed on as it comes. Like sshd, when the client
    goes (the channel closes, the connection drops) it stops reading the command's output
    and closes those pipes: the command's next write fails (SIGPIPE), nothing kills it."""
    assert isinstance(node, ShellNode)
    command = process.command or ""
    node.ran.append(command)
    path = os.environ["PATH"] if node.bin is None else f"{node.bin}{os.pathsep}{os.environ['PATH']}"
    env = {"HOME": str(node.home), "PATH": path, "LC_ALL": "C"}
    proc = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )

    async def pump(reader: asyncio.StreamReader, writer: asyncssh.SSHWriter[str]) -> None:
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := await reader.read(65536):
            writer.write(decode.decode(chunk))
        writer.write(decode.decode(b"", final=True))

    pumps = asyncio.gather(pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr))  # type: ignore[arg-type]
    gone = asyncio.ensure_future(process.channel.wait_closed())
    try:
        await asyncio.wait({pumps, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not pumps.done():
            pumps.cancel()
            transport = proc._transport  # type: ignore[attr-defined]
            for fd in (1, 2):
                pipe = transport.get_pipe_transport(fd)
                if pipe is not None:
                    pipe.close()
            await proc.wait()  # reap it once it ends (it is not killed)
            return
        code = await proc.wait()
        process.exit(code or 0)
    except (asyncssh.Error, OSError, BrokenPipeError):
        await proc.wait()
    finally:
        gone.cancel()


# A GPU node's nvidia-smi, as far as offboarding asks it: the compute apps in apps.csv
# beside it (none when there is no such file).
NVIDIA_SMI = '#!/bin/sh\ncat -- "$(dirname -- "$0")/apps.csv" 2>/dev/null\nexit 0\n'


def shell_home(keys: TestKeys, home: Path) -> Path:
    """A home whose authorized_keys lists the test's client key (and a second, restricted
    one that must stay), and the client key's private half beside it: returns its path.
    A bin folder beside it holds a stand-in nvidia-smi (ShellNode(bin=...))."""
    tools = home.parent / "bin"
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "nvidia-smi").write_text(NVIDIA_SMI)
    (tools / "nvidia-smi").chmod(0o755)
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    other = asyncssh.generate_private_key("ssh-ed25519")
    (home / ".ssh" / "authorized_keys").write_text(
        keys.client_key.export_public_key().decode()
        + 'no-pty,command="true" '
        + other.export_public_key().decode()
    )
    key_path = home.parent / "lab_key"
    keys.client_key.write_private_key(key_path)
    key_path.chmod(0o600)
    return key_path


class ServedNode:
    """A ShellNode at folder/home (see shell_home) served from its own thread and event
    loop; `with ServedNode(keys, folder) as served:`."""

    def __init__(self, keys: TestKeys, folder: Path) -> None:
        self.home = folder / "home"
        self.key_path = shell_home(keys, self.home)
        self.node = ShellNode(keys, handler=shell_handler, home=self.home, bin=folder / "bin")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def login(self) -> str:
        """The login command `zuka node add --ssh` takes for this node."""
        return f"ssh -p {self.node.port} -i {self.key_path} root@127.0.0.1"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self) -> ServedNode:
        self._thread.start()
        self.call(self.node.start())
        return self

    def pin(self, ledger_path: Path) -> None:
        """Trust the node's host key in the ledger's own trust store, as `zuka node trust`
        does."""
        assert self.node.host_key is not None
        with trust_store(ledger_path).open("a") as f:
            f.write(known_hosts_line("127.0.0.1", self.node.port, self.node.host_key))

    def authorized(self) -> str:
        return (self.home / ".ssh" / "authorized_keys").read_text()

    def release(self) -> None:
        """The instance released: the node stops answering at its address."""
        self.call(self.node.stop())

    def close(self) -> None:
        if self.node.running:
            self.release()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> ServedNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
