"""Dead nodes must not starve live ones: three scenarios, zuka beside a baseline, one run.

    python bench/starvation.py                 # about 3 minutes on 2 cores
    python bench/starvation.py --only jump     # one scenario: healthy, poll, jump

Everything listens on 127.0.0.1. A "blackholed" node is a listening socket that is never
accepted from: the kernel completes the TCP handshake into its backlog, and the SSH banner
never comes, so a connect hangs until its timeout. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import asyncssh

from leases.core.models import Node, NodeHealth, SshTarget
from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.poller import NodeStatus, Poller
from tui.cli.fleet import _bounded_sweep

# zuka's default connect timeout: what a user gets.
CONNECT_TIMEOUT = 10.0
# Baselines are cut off here (each scenario stays near a minute).
BASELINE_CAP = 40.0


def blackholes(count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        socks.append(s)
    return socks


def options(known_hosts: Path, *, lanes: bool = True, **extra: object) -> SshOptions:
    """zuka's defaults; lanes=False is the code path with the starvation fix turned off
    (one fleet-wide semaphore held for the whole connect, as before)."""
    base: dict[str, object] = {
        "known_hosts": (known_hosts,),
        "agent_path": None,
        "config": [],
        "connect_timeout": CONNECT_TIMEOUT,
    }
    if not lanes:
        base.update(stall_after=1e9, max_concurrent_retries=32)
    base.update(extra)
    return SshOptions(**base)  # type: ignore[arg-type]


def fmt(seconds: float | None, cap: float | None = None) -> str:
    if seconds is None:
        return f"> {cap:g} s (cut off)" if cap else "-"
    return f"{seconds:.2f} s"


# -- 1. 300 blackholed nodes + 1 healthy --------------------------------------------------


async def first_reading(dead: int, sim: Path, lanes: bool, cap: float) -> float | None:
    """Seconds until the healthy node (queued last) has its first reading, or None."""
    holes = blackholes(dead)
    async with SimFleet([SimNode("live", "A100", 8, Scenario.BUSY)]) as fleet:
        known = fleet.write_known_hosts(sim / "known_hosts")
        key = fleet.write_client_key(sim)
        nodes = [
            Node(f"dead{i}", SshTarget("127.0.0.1", s.getsockname()[1], "root", str(key)))
            for i, s in enumerate(holes)
        ]
        nodes.append(Node("live", fleet["live"].ssh_target(str(key)), "A100", 8))
        done = asyncio.Event()

        def seen(st: NodeStatus) -> None:
            if st.node == "live" and st.health is NodeHealth.OK:
                done.set()

        poller = Poller(nodes, pool=SshPool(options(known, lanes=lanes)), on_update=seen)
        started = time.perf_counter()
        sweep = asyncio.ensure_future(poller.sweep())
        try:
            async with asyncio.timeout(cap):
                await done.wait()
            return time.perf_counter() - started
        except TimeoutError:
            return None
        finally:
            sweep.cancel()
            await asyncio.gather(sweep, return_exceptions=True)
            await poller.close()
            for s in holes:
                s.close()


async def scenario_healthy(args: argparse.Namespace, tmp: Path) -> None:
    print(f"\n1. {args.dead} blackholed nodes + 1 healthy (queued last): its first reading")
    zuka = await first_reading(args.dead, tmp, True, 60)
    print(f"   zuka (lanes: fresh / retry / stalled)      {fmt(zuka, 60)}")
    base = await first_reading(args.dead, tmp, False, BASELINE_CAP)
    print(f"   baseline (same path, one semaphore)        {fmt(base, BASELINE_CAP)}")


# -- 2. 2,000 blackholed nodes: poll --once --timeout -------------------------------------


async def bounded_poll(count: int, limit: float | None, lanes: bool, cap: float) -> str:
    holes = blackholes(count)
    nodes = [
        Node(f"dead{i}", SshTarget("127.0.0.1", s.getsockname()[1], "root"))
        for i, s in enumerate(holes)
    ]
    known = Path(tempfile.mkdtemp()) / "known_hosts"
    poller = Poller(nodes, pool=SshPool(options(known, lanes=lanes)))
    started = time.perf_counter()
    try:
        if limit is not None:
            statuses = await _bounded_sweep(poller, limit)
            took = time.perf_counter() - started
            timeouts = sum(s.health is NodeHealth.TIMEOUT for s in statuses.values())
            return f"{took:.2f} s ({timeouts} of {count} reported timeout)"
        sweep = asyncio.ensure_future(poller.sweep())
        done, _ = await asyncio.wait({sweep}, timeout=cap)
        if done:
            return f"{time.perf_counter() - started:.2f} s"
        sweep.cancel()
        await asyncio.gather(sweep, return_exceptions=True)
        finished = sum(s.checked is not None for s in poller.statuses.values())
        rate = finished / cap
        guess = f"~{count / rate:.0f} s extrapolated" if rate else "none finished"
        return f"> {cap:g} s, {finished} of {count} done ({guess})"
    finally:
        await poller.close()
        for s in holes:
            s.close()


async def scenario_poll(args: argparse.Namespace, tmp: Path) -> None:
    n = args.many
    print(f"\n2. {n} blackholed nodes: one sweep, as `zuka poll --once` runs it")
    rows = [
        (f"zuka --timeout {args.timeout:g}", await bounded_poll(n, args.timeout, True, 0)),
        ("zuka, no --timeout", await bounded_poll(n, None, True, BASELINE_CAP)),
        ("baseline (one semaphore), no bound", await bounded_poll(n, None, False, 20)),
    ]
    for label, figure in rows:
        print(f"   {label:<36} {figure}")


# -- 3. 40 nodes behind one jump host -----------------------------------------------------


class _Jump(asyncssh.SSHServer):
    connects = 0

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        _Jump.connects += 1

    def begin_auth(self, username: str) -> bool:
        return False  # no login needed: a bench jump host

    def connection_requested(self, *args: object) -> bool:
        return True


async def jump_host(tmp: Path) -> tuple[asyncssh.SSHAcceptor, int, Path]:
    key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.create_server(_Jump, "127.0.0.1", 0, server_host_keys=[key])
    port = server.sockets[0].getsockname()[1]
    line = f"[127.0.0.1]:{port} {key.export_public_key().decode().strip()}\n"
    known = tmp / "jump_known_hosts"
    known.write_text(line)
    return server, port, known


async def zuka_jump_round(fleet: SimFleet, key: Path, known: Sequence[Path], jport: int) -> str:
    nodes = [Node(ep.name, ep.ssh_target(str(key)), "A100", 8) for ep in fleet]
    nodes = [
        Node(n.name, SshTarget(n.ssh.host, n.ssh.port, "root", str(key), f"127.0.0.1:{jport}"))
        for n in nodes
    ]
    pool = SshPool(SshOptions(known_hosts=tuple(known), agent_path=None, config=[]))
    poller = Poller(nodes, pool=pool)
    _Jump.connects = 0
    try:
        t = time.perf_counter()
        statuses = await poller.sweep()
        cold = time.perf_counter() - t
        t = time.perf_counter()
        await poller.sweep()
        warm = time.perf_counter() - t
        ok = sum(s.health is NodeHealth.OK for s in statuses.values())
        return (
            f"jump connections {_Jump.connects} (pool counted {pool.jumps.connects}), "
            f"cold round {cold:.2f} s, warm {warm:.2f} s, {ok}/{len(nodes)} ok"
        )
    finally:
        await poller.close()


async def bare_jump_round(fleet: SimFleet, key: Path, jump_known: Path, jport: int) -> str:
    """A bare asyncssh client: each node opens its own tunnel through the jump host."""
    client_key = asyncssh.read_private_key(str(key))
    _Jump.connects = 0

    async def one(port: int) -> None:
        common = {"config": [], "agent_path": None, "client_keys": [client_key], "username": "root"}
        jump = await asyncssh.connect("127.0.0.1", jport, known_hosts=str(jump_known), **common)
        try:
            async with asyncssh.connect(
                "127.0.0.1", port, tunnel=jump, known_hosts=None, **common
            ) as conn:
                await conn.run("nvidia-smi --query-gpu=index,utilization.gpu --format=csv")
        finally:
            jump.close()

    t = time.perf_counter()
    await asyncio.gather(*(one(ep.port) for ep in fleet))
    return f"jump connections {_Jump.connects}, round {time.perf_counter() - t:.2f} s"


async def dead_jump(count: int, known: Path) -> str:
    hole = blackholes(1)[0]
    port = hole.getsockname()[1]
    nodes = [
        Node(f"n{i}", SshTarget("10.0.0.7", 2200 + i, "root", None, f"127.0.0.1:{port}"))
        for i in range(count)
    ]
    pool = SshPool(options(known))
    poller = Poller(nodes, pool=pool)
    t = time.perf_counter()
    try:
        statuses = await poller.sweep()
        took = time.perf_counter() - t
        said = next(iter(statuses.values())).detail
        return f"{took:.2f} s for all {count}; each says: {said[:70]}"
    finally:
        await poller.close()
        hole.close()


async def scenario_jump(args: argparse.Namespace, tmp: Path) -> None:
    n = args.behind
    print(f"\n3. {n} nodes behind one jump host (cold round connects, warm reuses)")
    server, jport, jump_known = await jump_host(tmp)
    try:
        sims = [SimNode(f"j{i:02}", "A100", 8, Scenario.BUSY) for i in range(n)]
        async with SimFleet(sims) as fleet:
            known = fleet.write_known_hosts(tmp / "known_hosts")
            key = fleet.write_client_key(tmp)
            zuka = await zuka_jump_round(fleet, key, [known, jump_known], jport)
            print(f"   zuka                            {zuka}")
            bare = await bare_jump_round(fleet, key, jump_known, jport)
            print(f"   bare asyncssh, tunnel per node  {bare}")
        print(f"   zuka, jump host blackholed: {await dead_jump(n, jump_known)}")
    finally:
        server.close()


SCENARIOS: dict[str, Callable[[argparse.Namespace, Path], object]] = {
    "healthy": scenario_healthy,
    "poll": scenario_poll,
    "jump": scenario_jump,
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dead", type=int, default=300)
    parser.add_argument("--many", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=15.0, help="poll --once --timeout S")
    parser.add_argument("--behind", type=int, default=40)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    # A blackholed peer makes asyncio log each failed send: noise here, not a figure.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))
    print(f"connect timeout {CONNECT_TIMEOUT:g} s (zuka's default), everything on 127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or list(SCENARIOS):
            await SCENARIOS[name](args, Path(tmp))  # type: ignore[misc]


if __name__ == "__main__":
    asyncio.run(main())
