"""The host snippet on real machines: this one's /bin/sh, /proc and df, and through the
poller to a real OpenSSH sshd (the integration tier: its fake nvidia-smi, this machine's
/proc), with the GPU query's failure still classified as before."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from leases.core.host import MountKind
from leases.core.models import NodeHealth
from leases.ssh.pool import SshPool
from leases.telemetry import hoststats
from leases.telemetry.poller import Poller
from tests.ssh.test_ssh_openssh import node_for, options_for
from tests.support.sshd import Sshd, sshd_unavailable
from tests.support.waiting import wait_until

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("df") is None, reason="needs /proc, df"
)


@linux_only
def test_this_machines_own_proc_and_df_read_whole() -> None:
    out = subprocess.run(
        ["/bin/sh", "-c", f"true; echo {hoststats.HOST_MARK} $?; {hoststats.SNIPPET}"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    own, status, host = hoststats.split_output(out)
    assert (own, status) == ("", 0)
    r = hoststats.parse_host(host)
    assert r.problems == ()
    assert r.cpus == os.cpu_count()
    assert r.load is not None and r.uptime_s is not None and r.cpu is not None
    assert r.mem["MemTotal"] > 0 and r.net is not None
    root = [m for m in r.mounts if m.path == "/"]
    assert root and root[0].kind is MountKind.ROOT and root[0].total_kib > 0
    assert all(m.fs_type not in ("proc", "sysfs", "cgroup2") for m in r.mounts)


_why_not = sshd_unavailable()


@pytest.fixture(scope="module")
def client_key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519")


@pytest.fixture(scope="module")
def sshd(client_key: asyncssh.SSHKey) -> Iterator[Sshd]:
    if _why_not is not None:
        pytest.skip(_why_not)
    with Sshd.start_new([client_key]) as server:
        yield server


@pytest.mark.openssh
@pytest.mark.skipif(_why_not is not None, reason=_why_not or "")
async def test_over_real_openssh_with_the_gpus(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    poller = Poller(
        [node_for(sshd)], pool=SshPool(options_for(sshd, client_key, tmp_path)), apps_every=1
    )
    try:
        st = (await poller.sweep())["real1"]
        assert st.health is NodeHealth.OK, st
        assert len(st.samples) == 2
        assert st.host is not None and st.host.problems == ()
        assert st.host.cpus == os.cpu_count() and st.host.mem_total_kib
        second = (await poller.sweep())["real1"].host
        assert second is not None and second.cpu_pct is not None
        # The GPU query fails: classified from its own status, the host still read.
        sshd.set_nvidia_smi_mode("nodriver")
        failed = (await poller.sweep())["real1"]
        assert failed.health is NodeHealth.DRIVER_NOT_LOADED, failed
        assert "@zh" not in failed.detail
        assert failed.host is not None and failed.host.mem_total_kib
    finally:
        sshd.set_nvidia_smi_mode("ok")
        await poller.close()


@pytest.mark.openssh
@pytest.mark.skipif(_why_not is not None, reason=_why_not or "")
async def test_stream_mode_over_real_openssh_reads_the_host_and_fresh_processes(
    sshd: Sshd, client_key: asyncssh.SSHKey, tmp_path: Path
) -> None:
    """A real /bin/sh runs the owner query with the host snippet after it: host figures
    (a CPU share from two readings) and a process list that follows the node."""
    sshd.set_nvidia_smi_mode(f"apps:{os.getpid()}")
    poller = Poller(
        [node_for(sshd)], pool=SshPool(options_for(sshd, client_key, tmp_path)),
        interval_s=0.3, apps_every=1,
    )  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(poller.run(stop, mode="stream", flush_s=0.3))

    def pids() -> set[int]:
        assert not task.done(), task
        st = poller.statuses.get("real1")
        return {p.pid for p in (st.processes or ())} if st else set()

    try:
        await wait_until(lambda: os.getpid() in pids(), what="our pid listed")
        sshd.set_nvidia_smi_mode(f"apps:{os.getppid()}")
        await wait_until(lambda: pids() == {os.getppid()}, what="the list refreshed")

        def cpu() -> bool:
            host = poller.statuses["real1"].host
            return host is not None and host.cpu_pct is not None

        await wait_until(cpu, what="a CPU share over the stream")
        st = poller.statuses["real1"]
        assert st.health is NodeHealth.OK and st.host is not None and st.host.problems == ()
    finally:
        stop.set()
        await task
        sshd.set_nvidia_smi_mode("ok")
        await poller.close()
