"""leases.ssh.session against a real OpenSSH sshd (the integration tier; CI runs it)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path

import asyncssh
import pytest

from leases.core.models import Node, NodeHealth, SshTarget
from leases.ssh import hostkeys
from leases.ssh.errors import BackingOff, ConnectionDropped, HostKeyRejected, SshError, StreamExited
from leases.ssh.options import SshOptions
from leases.ssh.session import NodeSession
from leases.ssh.stream import CommandResult
from tests.support.sshd import DRIVER_FAILURE, Sshd, sshd_unavailable
from tests.support.waiting import wait_until

_why_not = sshd_unavailable()
pytestmark = [
    pytest.mark.openssh,
    pytest.mark.skipif(_why_not is not None, reason=_why_not or ""),
]


@pytest.fixture(scope="module")
def client_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture(scope="module")
def sshd(client_key: asyncssh.SSHKey) -> Iterator[Sshd]:
    with Sshd.start_new([client_key]) as server:
        yield server


def options_for(
    server: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path, *, trusted: bool = True, **kw: object
) -> SshOptions:
    known = tmp_path / "known_hosts"
    if trusted:
        hostkeys.trust("127.0.0.1", server.port, server.host_key, known)
    base: dict[str, object] = {
        "known_hosts": (known,),
        "client_keys": [client_key],
        "agent_path": None,
        "config": [],
        "connect_timeout": 5.0,
    }
    base.update(kw)
    return SshOptions(**base)  # type: ignore[arg-type]


def node_for(server: Sshd) -> Node:
    return Node("real1", SshTarget("127.0.0.1", port=server.port, user=server.user))


@pytest.fixture
async def session(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> AsyncIterator[NodeSession]:
    s = NodeSession(node_for(sshd), options_for(sshd, client_key, tmp_path))
    yield s
    await s.close()


async def test_run_a_command_as_the_test_user(session: NodeSession, sshd: Sshd) -> None:
    result = await session.run('id -un; echo "$0"; exit 4')

    assert result.exit_status == 4
    assert session.cipher == "aes128-gcm@openssh.com"
    assert result.stdout.splitlines() == [sshd.user, "sh"]  # sshd runs the login shell as "sh"
    assert session.health is NodeHealth.OK


async def test_fake_nvidia_smi_answers_csv(session: NodeSession) -> None:
    query = (
        "nvidia-smi --query-gpu=index,name,memory.total,power.draw --format=csv,noheader,nounits"
    )

    result = await session.run(query)

    assert result == CommandResult(
        0,
        "0, NVIDIA A100-SXM4-80GB, 81920, 312.45\n1, NVIDIA A100-SXM4-80GB, 81920, 61.20\n",
        "",
    )
    refused = await session.run("nvidia-smi --no-such-flag")
    assert refused.exit_status == 2


async def test_kept_open_shell_runs_many_commands_on_one_channel(
    session: NodeSession, sshd: Sshd
) -> None:
    query = "nvidia-smi --query-gpu=index,memory.total --format=csv,noheader,nounits"
    for _ in range(3):
        result = await session.run_in_shell(query)
        assert result == CommandResult(0, "0, 81920\n1, 81920\n", "")
    assert session.shell_works and session.connects == 1
    no_newline = await session.run_in_shell("printf 'no newline'; echo oops >&2; false")
    assert (no_newline.exit_status, no_newline.stdout) == (1, "no newline")
    assert no_newline.stderr == "oops\n"
    sshd.set_nvidia_smi_mode("nodriver")
    try:
        failed = await session.query(query)
    finally:
        sshd.set_nvidia_smi_mode("ok")
    assert failed.exit_status == 9 and "NVIDIA driver" in failed.stdout


async def test_a_command_cancelled_in_the_kept_shell_leaves_the_next_answer_its_own(
    session: NodeSession,
) -> None:
    """A reading cancelled while its answer is on the way (the poller drops a node's task,
    a restart): the shell it was in is dropped, so that answer never opens the next one."""
    assert await session.run_in_shell("echo warm") == CommandResult(0, "warm\n", "")
    late = asyncio.create_task(session.run_in_shell("sleep 0.3; echo STALE; exit 3"))
    await asyncio.sleep(0.1)
    late.cancel()
    with pytest.raises(asyncio.CancelledError):
        await late
    await asyncio.sleep(0.4)  # the stale answer would have come by now
    assert await session.run_in_shell("echo fresh") == CommandResult(0, "fresh\n", "")


async def test_the_kept_shell_caps_the_output_as_an_exec_does(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    """The cap is on what the command printed, not on the frame's lines around it."""
    session = NodeSession(node_for(sshd), options_for(sshd, client_key, tmp_path, max_output=1000))
    try:
        exact = "printf '%01000d' 0"
        assert (await session.run_in_shell(exact)).stdout == "0" * 1000
        assert (await session.run(exact)).stdout == "0" * 1000
        with pytest.raises(SshError, match="output over 1000 characters"):
            await session.run_in_shell("printf '%01001d' 0")
        # Far over: refused while it comes, and named by the cap the user set (the frame's
        # own lines come on top of it).
        with pytest.raises(SshError, match="output over 1000 characters"):
            await session.run_in_shell("printf '%05000d' 0")
    finally:
        await session.close()


async def test_odd_commands_in_the_kept_shell_answer_and_leave_it_working(
    session: NodeSession,
) -> None:
    """An empty or comment-only command, a heredoc, an exit, and a cut output that lost its
    NULs: each answered with its own status (a cut one with none), the shell kept after
    all but the last."""
    assert await session.run_in_shell("") == CommandResult(0, "", "")
    assert await session.run_in_shell("# nothing )") == CommandResult(0, "", "")
    assert await session.run_in_shell("cat <<EOF\nhere\nEOF") == CommandResult(0, "here\n", "")
    assert await session.run_in_shell("exit 4") == CommandResult(4, "", "")
    assert session.shell_works
    # 20 MB of NULs, then what would look like a status: sh drops the NULs from what it
    # held, head cut it, and no status line with the frame's nonce came: no status.
    cut = await session.run_in_shell("head -c 20000000 /dev/zero; printf 'x\n42'; exit 1")
    assert cut.exit_status is None and "42" not in cut.stdout
    assert await session.run_in_shell("echo after") == CommandResult(0, "after\n", "")


async def test_fake_nvidia_smi_fails_like_a_missing_driver(
    session: NodeSession, sshd: Sshd
) -> None:
    sshd.set_nvidia_smi_mode("nodriver")
    try:
        result = await session.run("nvidia-smi --query-gpu=index --format=csv")
    finally:
        sshd.set_nvidia_smi_mode("ok")

    assert result.exit_status == 9
    assert result.stdout.strip() == DRIVER_FAILURE
    assert "couldn't communicate with the NVIDIA driver" in result.stdout
    assert session.health is NodeHealth.OK  # SSH is fine; nvsmi decides what exit 9 means


async def test_streaming_nvidia_smi_loop(session: NodeSession) -> None:
    cmd = "nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -lms 50"
    lines: list[str] = []

    async with aclosing(session.stream(cmd, idle_timeout=5)) as stream:
        async for line in stream:
            lines.append(line)
            if len(lines) == 6:
                break

    assert lines == ["0, 87", "1, 0"] * 3
    assert (await session.run("echo after")).ok


async def test_streaming_nvidia_smi_that_fails_says_why(session: NodeSession, sshd: Sshd) -> None:
    sshd.set_nvidia_smi_mode("nodriver")
    try:
        with pytest.raises(StreamExited) as caught:
            async for _ in session.stream("nvidia-smi --query-gpu=index --format=csv -lms 50"):
                pass
    finally:
        sshd.set_nvidia_smi_mode("ok")

    assert caught.value.result.exit_status == 9
    assert caught.value.result.stdout.strip() == DRIVER_FAILURE


async def test_host_key_trust_flow(sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path) -> None:
    options = options_for(sshd, client_key, tmp_path, trusted=False)
    session = NodeSession(node_for(sshd), options)

    with pytest.raises(HostKeyRejected) as caught:
        await session.run("true")

    assert session.health is NodeHealth.UNTRUSTED
    assert caught.value.offered.port == sshd.port
    if shutil.which("ssh-keygen"):
        # The fingerprint we show is the one OpenSSH itself prints for that key.
        listed = subprocess.run(
            ["ssh-keygen", "-l", "-f", str(sshd.host_key_path.with_suffix(".pub"))],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[1]
        assert session.fingerprint == listed
    assert session.fingerprint == hostkeys.fingerprint(sshd.host_key)

    assert session.accept_host_key(hostkeys.fingerprint(sshd.host_key))
    assert (await session.run("echo trusted")).stdout == "trusted\n"
    assert session.health is NodeHealth.OK
    await session.close()


async def test_changed_host_key_is_refused(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    hostkeys.trust("127.0.0.1", sshd.port, impostor, known)
    options = options_for(sshd, client_key, tmp_path, trusted=False)
    session = NodeSession(node_for(sshd), options)

    with pytest.raises(HostKeyRejected):
        await session.run("true")

    assert session.health is NodeHealth.HOSTKEY_CHANGED
    assert session.fingerprint == hostkeys.fingerprint(sshd.host_key)
    assert not session.accept_host_key(hostkeys.fingerprint(sshd.host_key))


async def test_twenty_parallel_commands_on_one_connection(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    session = NodeSession(node_for(sshd), options_for(sshd, client_key, tmp_path))

    results = await asyncio.gather(*(session.run(f"sleep 0.2; echo {i}") for i in range(20)))

    assert [r.stdout for r in results] == [f"{i}\n" for i in range(20)]
    assert session.connects == 1
    await session.close()


async def test_without_the_channel_bound_sshd_max_sessions_refuses_some(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    # The control for the test above: it is the bound that keeps us under MaxSessions 10.
    options = options_for(sshd, client_key, tmp_path, max_channels_per_connection=20)
    session = NodeSession(node_for(sshd), options)

    # Each command holds its channel until every channel is open or refused: no fixed
    # sleep (a loaded machine opened the last channels after the first had ended).
    # In a folder of /tmp the node's login user (not this one) may write.
    shared = Path(tempfile.mkdtemp(prefix="zuka-channels-"))
    shared.chmod(0o777)
    go, started = shared / "go", shared / "started"
    started.mkdir(mode=0o777)
    started.chmod(0o777)
    held = f"touch {started}/$$; while [ ! -e {go} ]; do sleep 0.05; done; echo ok"
    try:
        runs = [asyncio.ensure_future(session.run(held)) for _ in range(20)]
        await wait_until(
            lambda: len(list(started.iterdir())) + sum(r.done() for r in runs) >= 20,
            timeout=60,
            what="every channel open or refused",
        )
        go.touch()
        results = await asyncio.gather(*runs, return_exceptions=True)
    finally:
        go.touch()
        await session.close()
        shutil.rmtree(shared, ignore_errors=True)

    refused = [r for r in results if isinstance(r, SshError)]
    assert refused, "expected sshd to refuse channels beyond MaxSessions"
    assert all("channel" in r.message.lower() for r in refused)
    assert sum(isinstance(r, CommandResult) and r.ok for r in results) >= 10, results


async def test_killed_sshd_is_unreachable_and_a_restart_recovers(
    client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    now = [1000.0]
    with Sshd.start_new([client_key]) as server:
        options = options_for(server, client_key, tmp_path)
        session = NodeSession(node_for(server), options, clock=lambda: now[0], random=lambda: 1.0)
        assert (await session.run("echo up")).ok

        server.kill()
        with pytest.raises((ConnectionDropped, SshError)) as caught:
            await session.run("echo down")
        assert caught.value.health is NodeHealth.UNREACHABLE
        if not isinstance(caught.value, ConnectionDropped):
            # The drop was noticed before the command: the reconnect was refused.
            assert session.failures == 1
        else:
            with pytest.raises(SshError) as refused:
                await session.run("echo down")
            assert refused.value.health is NodeHealth.UNREACHABLE
        assert session.health is NodeHealth.UNREACHABLE

        server.restart()
        with pytest.raises(BackingOff):
            await session.run("echo too soon")
        now[0] = session.next_attempt_at

        assert (await session.run("echo back")).stdout == "back\n"
        assert session.health is NodeHealth.OK
        await session.close()
