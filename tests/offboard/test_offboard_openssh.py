"""Offboarding on a real OpenSSH node (the integration tier; CI runs it): the SSH steps of
plan_remote carried out by RemoteDriver against a private sshd, logged in as a test user
whose HOME and authorized_keys are this sshd's own.

Real files are shredded under the declared root (and files outside it, reached through a
symbolic link or a hard link, are left as they were); the lab's key is removed from
authorized_keys; a fresh login with it is refused, proved by zuka and by OpenSSH's own
`ssh` client; the platform's key still logs in. That shred overwrote the blocks is not
observable here: the tests check exit statuses and that the files are gone.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.config.sections import Config, OffboardConfig
from leases.core.models import Node, Resource, ResourceKind, SshTarget
from leases.offboard.remote import RemoteDriver, fresh_login
from leases.offboard.remoteplan import plan_remote, scratch_roots
from leases.offboard.steps import PlanInput
from leases.ssh import hostkeys
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from tests.support.sshd import Sshd, sshd_unavailable

_why_not = sshd_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


@pytest.fixture
def keys() -> tuple[asyncssh.SSHKey, asyncssh.SSHKey]:
    """The lab's key and the platform's own (which must keep working)."""
    return asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key(
        "ssh-ed25519"
    )


@pytest.fixture
def sshd(keys: tuple[asyncssh.SSHKey, asyncssh.SSHKey]) -> Iterator[Sshd]:
    with Sshd.start_new(list(keys), own_home=True) as server:
        yield server


def _as_user(server: Sshd, *paths: Path) -> None:
    info = pwd.getpwnam(server.user)
    for path in paths:
        os.lchown(path, info.pw_uid, info.pw_gid)


def _ssh_login(server: Sshd, key_file: Path, known: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "ssh",
            "-F",
            "/dev/null",
            "-i",
            str(key_file),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={known}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentityAgent=none",
            "-p",
            str(server.port),
            f"{server.user}@127.0.0.1",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )


async def test_offboard_a_real_node_over_ssh(
    sshd: Sshd, keys: tuple[asyncssh.SSHKey, asyncssh.SSHKey], tmp_path: Path
) -> None:
    lab_key, platform_key = keys
    assert sshd.home is not None
    # The node's data: a scratch root the test user owns, with what a lab leaves there.
    root = sshd.workdir / "scratch"
    ckpt = root / "ckpt"
    (ckpt / "deep").mkdir(parents=True)
    (ckpt / "epoch_1.pt").write_bytes(os.urandom(256 * 1024))
    (ckpt / "deep" / "shard-0.bin").write_bytes(b"data" * 1000)
    (ckpt / "odd name; rm -rf ~ $(id)\n").write_text("hostile name")
    outside = sshd.workdir / "outside.txt"
    outside.write_text("not ours")
    (ckpt / "link").symlink_to(outside)
    os.link(outside, ckpt / "hard")
    history = sshd.home / ".bash_history"
    history.write_text("huggingface-cli login --token hf_secret\n")
    _as_user(sshd, root, ckpt, ckpt / "deep", outside, history, *ckpt.rglob("*"), *root.rglob("*"))

    key_file = tmp_path / "lab_key"
    lab_key.write_private_key(key_file)
    lab_key.write_public_key(tmp_path / "lab_key.pub")
    platform_file = tmp_path / "platform_key"
    platform_key.write_private_key(platform_file)
    for private in (key_file, platform_file):
        private.chmod(0o600)  # or OpenSSH's ssh ignores it, and "refused" would prove nothing
    known = tmp_path / "known_hosts"
    hostkeys.trust("127.0.0.1", sshd.port, sshd.host_key, known)
    options = SshOptions(
        known_hosts=(known,), client_keys=[], agent_path=None, config=[], connect_timeout=5.0
    )
    node = Node(
        "real1",
        SshTarget("127.0.0.1", port=sshd.port, user=sshd.user, key_path=str(key_file)),
    )
    facts = PlanInput(
        node,
        None,
        None,
        [Resource(lease_id=1, kind=ResourceKind.SCRATCH_PATH, native_id=str(ckpt), id=5)],
        Config(offboard=OffboardConfig(scratch_roots=(str(root),))),
    )
    steps = plan_remote(facts)
    session = NodeSession(node, options)
    driver = RemoteDriver(
        session, roots=scratch_roots(facts), login=fresh_login(node, options), shred_timeout_s=60
    )
    try:
        before = _ssh_login(sshd, key_file, known)
        assert before.returncode == 0, before.stderr
        facts_of: dict[str, dict[str, str]] = {}
        for step in steps:
            outcome = await driver.run(step)
            if step.action == "gpu-processes":
                # The fake nvidia-smi knows no --query-compute-apps: unknown, so the
                # checklist would ask; this test goes on as a user would.
                assert outcome.needs_consent and not outcome.done
                continue
            assert outcome.done, (step.key, outcome)
            assert (await driver.verify(step)).done, step.key
            facts_of[step.key] = dict(outcome.facts)
    finally:
        await session.close()

    assert not list(ckpt.rglob("*.pt")) and not list(ckpt.rglob("*.bin"))
    assert sorted(p.name for p in ckpt.iterdir()) == ["link"]  # left, never followed
    assert outside.read_text() == "not ours"
    assert not history.exists()
    fstype = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "-T", str(root)], capture_output=True, text=True
    ).stdout.strip()
    assert facts_of[f"facts:{ckpt}"]["fstype"] == fstype
    assert facts_of[f"revoke-key:{key_file}"]["fingerprint"] == lab_key.get_fingerprint("sha256")
    keys_text = (sshd.home / ".ssh" / "authorized_keys").read_text()
    assert lab_key.export_public_key().decode().split()[1] not in keys_text
    assert platform_key.export_public_key().decode().split()[1] in keys_text
    # OpenSSH's own client agrees: the lab's key is refused, the platform's still works.
    after = _ssh_login(sshd, key_file, known)
    assert after.returncode == 255 and "Permission denied" in after.stderr
    assert _ssh_login(sshd, platform_file, known).returncode == 0


async def test_a_cancelled_shred_stops_on_a_real_sshd_node(
    sshd: Sshd, keys: tuple[asyncssh.SSHKey, asyncssh.SSHKey], tmp_path: Path
) -> None:
    """OpenSSH keeps a command running when its client goes; zuka's job notices the closed
    channel (its heartbeat write fails) and kills its own process group: nothing of ours
    is left at work, and the resume prints what the cut-off run printed."""
    import asyncio
    import contextlib
    import time

    from tests.offboard.test_offboard_e2e import node_jobs

    lab_key, _ = keys
    assert sshd.home is not None
    root = sshd.workdir / "scratch"
    (root / "ckpt").mkdir(parents=True)
    (root / "ckpt" / "a.bin").write_bytes(b"ours")
    flag = sshd.workdir / "shred-started"
    hang = sshd.workdir / "bin" / "shred"  # first on the user's PATH: a shred that hangs
    hang.write_text(f'#!/bin/sh\n: > "{flag}"\nexec sleep 600\n')
    hang.chmod(0o755)
    _as_user(sshd, root, root / "ckpt", root / "ckpt" / "a.bin", sshd.workdir)
    key_file = tmp_path / "lab_key"
    lab_key.write_private_key(key_file)
    known = tmp_path / "known_hosts"
    hostkeys.trust("127.0.0.1", sshd.port, sshd.host_key, known)
    options = SshOptions(
        known_hosts=(known,), client_keys=[], agent_path=None, config=[], connect_timeout=5.0
    )
    node = Node("real1", SshTarget("127.0.0.1", port=sshd.port, user=sshd.user,
                                   key_path=str(key_file)))  # fmt: skip
    session = NodeSession(node, options)
    driver = RemoteDriver(session, roots=(str(root),), login=fresh_login(node, options))
    step = next(
        s
        for s in plan_remote(
            PlanInput(
                node,
                None,
                None,
                [
                    Resource(
                        lease_id=1,
                        kind=ResourceKind.SCRATCH_PATH,
                        native_id=str(root / "ckpt"),
                        id=5,
                    )
                ],
                Config(offboard=OffboardConfig(scratch_roots=(str(root),))),
            )
        )
        if s.action == "shred"
    )
    try:
        task = asyncio.ensure_future(driver.run(step))
        deadline = time.monotonic() + 30
        while not flag.exists():
            assert time.monotonic() < deadline and not task.done(), task
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 15
        while node_jobs(sshd.workdir):
            assert time.monotonic() < deadline, node_jobs(sshd.workdir)
            await asyncio.sleep(0.05)
        hang.unlink()
        again = await driver.run(step)
        assert again.done and "an earlier run of this step was cut off" in again.output, again
        assert not (root / "ckpt" / "a.bin").exists()
    finally:
        await session.close()
