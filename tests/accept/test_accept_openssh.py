"""The sshd and host checks for real, against a good and a bad OpenSSH sshd, each in a
network namespace of its own (TESTING.md "Many hosts"), with the namespace's /etc/ssh its
own (`ip netns exec` binds /etc/netns/NAME/ssh over /etc/ssh): `sshd -T` and `cat` on the
node read the config the sshd runs with. The bad one lets passwords in (from a cloud-init
style Include file as well) and has a Jupyter-like server on all interfaces answering
/api/kernels without a token; the good one fails none of it."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.accept import sshproofs
from leases.accept.checks import host, sshd
from leases.accept.engine import Settings, Sold, new_context
from leases.core.acceptance import Level, Status
from leases.core.models import Node, SshTarget
from leases.ssh import hostkeys
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from tests.support.sshd import Sshd, ensure_user, sshd_unavailable

_why_not = sshd_unavailable() or (None if shutil.which("ip") else "iproute2 (ip) not found")
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]

# A Jupyter stand-in: GET /api/kernels answers 200 "[]" with no token asked, unless run
# with "token", when it answers 403 as a Jupyter with a token does.
JUPYTER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = 403 if sys.argv[3] == "token" else 200
        self.send_response(code if self.path.startswith("/api/kernels") else 404)
        self.end_headers()
        self.wfile.write(b"[]")
    def log_message(self, *a):
        pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@contextlib.contextmanager
def namespace(tag: int) -> Iterator[tuple[str, str]]:
    """A network namespace with a veth to it: (name, the node's address). Removed after."""
    n = os.getpid() % 10000
    name, host_if, node_if = f"zka{n}n{tag}", f"zka{n}h{tag}", f"zka{n}c{tag}"
    third = n % 250
    host_ip, node_ip = f"10.213.{third}.{tag * 4 + 1}", f"10.213.{third}.{tag * 4 + 2}"
    try:
        _ip("netns", "add", name)
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"network namespaces cannot be made here: {exc}")
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", node_if)
        _ip("link", "set", node_if, "netns", name)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("netns", "exec", name, "ip", "addr", "add", f"{node_ip}/30", "dev", node_if)
        _ip("netns", "exec", name, "ip", "link", "set", node_if, "up")
        _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name, node_ip
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
        shutil.rmtree(f"/etc/netns/{name}", ignore_errors=True)


@contextlib.contextmanager
def http_server(netns: str, address: str, port: int, mode: str, reach: str) -> Iterator[None]:
    proc = subprocess.Popen(
        ["ip", "netns", "exec", netns, sys.executable, "-c", JUPYTER, address, str(port), mode],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:  # until it listens (asked from inside the namespace when not reachable)
            probe = subprocess.run(
                ["ip", "netns", "exec", netns, sys.executable, "-c",
                 f"import socket; socket.create_connection(({reach!r}, {port}), 1).close()"],
                capture_output=True, timeout=10,
            )  # fmt: skip
            if probe.returncode == 0:
                break
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        yield
    finally:
        proc.kill()
        proc.wait(timeout=10)


@contextlib.contextmanager
def node(tag: int, key: asyncssh.SSHKey, *, bad: bool) -> Iterator[tuple[Sshd, str]]:
    ensure_user()
    with namespace(tag) as (netns, node_ip):
        etc_ssh = Path(f"/etc/netns/{netns}/ssh")
        (etc_ssh / "sshd_config.d").mkdir(parents=True)
        if bad:  # as Ubuntu cloud images do: an Include file that turns passwords back on
            (etc_ssh / "sshd_config.d" / "50-cloud-init.conf").write_text(
                "PasswordAuthentication yes\nPermitRootLogin yes\n"
            )
        server = Sshd.start_new(
            [key],
            own_home=True,
            listen=node_ip,
            port=22,
            netns=netns,
            password_auth=bad,
            config_path=etc_ssh / "sshd_config",
            extra_config="Include /etc/ssh/sshd_config.d/*.conf\n",
        )
        if not bad:
            # The login user may read the host key: `sshd -T` works for it, the first way
            # the check tries (the bad node's is root's: the check falls back to cat).
            info = pwd.getpwnam(server.user)
            os.chown(server.host_key_path, info.pw_uid, info.pw_gid)
        try:
            if bad:
                with http_server(netns, "0.0.0.0", 8888, "open", "127.0.0.1"):
                    yield server, node_ip
            else:
                # On loopback only (not probed) and one on all interfaces asking a token.
                with http_server(netns, "127.0.0.1", 8888, "open", "127.0.0.1"), \
                        http_server(netns, "0.0.0.0", 8890, "token", "127.0.0.1"):  # fmt: skip
                    yield server, node_ip
        finally:
            server.stop()


async def accept(server: Sshd, node_ip: str, key: asyncssh.SSHKey, tmp_path: Path,
                 settings: Settings) -> tuple[dict[str, Status], str]:  # fmt: skip
    known = tmp_path / "known_hosts"
    hostkeys.trust(node_ip, None, server.host_key, known)
    options = SshOptions(known_hosts=(known,), client_keys=[key], agent_path=None, config=[],
                         connect_timeout=5.0)  # fmt: skip
    the_node = Node("real1", SshTarget(node_ip, user=server.user))
    session = NodeSession(the_node, options)
    try:
        ctx = new_context(
            Sold("real1", expected_keys=(key.get_fingerprint("sha256"),)),
            session,
            Level.QUICK,
            settings,
            password_proof=sshproofs.password_proof(the_node, options),
            throughput=sshproofs.throughput(session, timeout=30),
        )
        results = [*await sshd.run(ctx), *await host.run(ctx)]
    finally:
        await session.close()
    assert all("\x1b" not in r.words for r in results)
    words = "\n".join(f"{r.check}: {r.words}" for r in results)
    return {r.check: r.status for r in results}, words


@pytest.fixture
def key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


async def test_good_sshd_passes_each(key: asyncssh.SSHKey, tmp_path: Path) -> None:
    with node(1, key, bad=False) as (server, node_ip):
        got, words = await accept(server, node_ip, key, tmp_path,
                           Settings(data_paths=("/", "/no/such/data"), min_free_gib=0))  # fmt: skip
    assert got == {
        "sshd.password": Status.PASSED,
        "sshd.kbdint": Status.PASSED,
        "sshd.rootlogin": Status.PASSED,
        "sshd.proof": Status.PASSED,
        "sshd.keys": Status.PASSED,
        "sshd.keysources": Status.PASSED,
        "sshd.ports": Status.PASSED,
        "sshd.services": Status.PASSED,
        "host.disk:/no/such/data": Status.SKIPPED,
        "host.disk:/": Status.PASSED,
        "host.throughput": Status.PASSED,
    }, words
    assert "read with `/usr/sbin/sshd -T`" in words
    assert "methods offered: publickey" in words
    assert "asked: 8890" in words  # the token-protected one was asked, and refused


async def test_bad_sshd_fails_each(key: asyncssh.SSHKey, tmp_path: Path) -> None:
    with node(2, key, bad=True) as (server, node_ip):
        # A key the lab never recorded, as a provider's would be.
        stranger = asyncssh.generate_private_key("ssh-ed25519", comment="ops@provider")
        with server.keys_path.open("a") as f:
            f.write(stranger.export_public_key().decode())
        got, words = await accept(server, node_ip, key, tmp_path,
                           Settings(data_paths=("/", "/dev/shm"), min_free_gib=10**6))  # fmt: skip
    assert got == {
        "sshd.password": Status.FAILED,
        "sshd.kbdint": Status.PASSED,  # KbdInteractiveAuthentication no, UsePAM no
        "sshd.rootlogin": Status.FAILED,
        "sshd.proof": Status.FAILED,
        "sshd.keys": Status.FAILED,
        "sshd.keysources": Status.PASSED,
        "sshd.ports": Status.PASSED,  # 8888 is in the training range
        "sshd.services": Status.FAILED,
        "host.disk:/": Status.WARNED,  # less than a million GiB free
        "host.disk:/dev/shm": Status.WARNED,  # tmpfs
        "host.throughput": Status.PASSED,
    }, words
    assert "50-cloud-init.conf line 1" in words
    assert "the node asked for a password" in words
    assert "0.0.0.0:8888" in words
