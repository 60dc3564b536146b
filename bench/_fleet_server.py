"""A fleet of simulated GPU nodes behind delay proxies, in a process of its own.

Starts `SimFleet` with N busy A100 nodes and, in front of each, an asyncio TCP proxy on
127.0.0.1 that holds every chunk --delay-ms in each direction (RTT + 2 x delay; netem is
missing on these machines). Writes the client key and a known_hosts file naming the proxy
ports into --dir, prints one JSON line, and serves until killed:

  {"nodes": [{"name", "port", "direct_port"}], "known_hosts": PATH, "key": PATH,
   "delay_ms": D}

--speed K runs the nodes' clock K times as fast as the wall's: the simulated readings move
every 10 s of their own time, so --speed 10 makes every GPU row change about every second,
as a busy GPU's power and utilisation do on a real node (the default, 1, leaves most
warm sweeps reading the same rows again).

Used by bench/poll.py; run it by hand with `python bench/_fleet_server.py --nodes 10`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.sim import Scenario, SimNode
from leases.sim.fleet import SimFleet

_CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer, each chunk delay seconds late, in order, then close."""
    loop = asyncio.get_running_loop()
    pending: deque[bytes | None] = deque()

    def release() -> None:
        # Timers with equal deadlines may fire in any order: always write the oldest chunk.
        data = pending.popleft()
        if writer.is_closing():
            return
        if data is None:
            writer.close()
        else:
            writer.write(data)

    try:
        while data := await reader.read(_CHUNK):
            pending.append(data)
            loop.call_later(delay, release)
    except (ConnectionError, OSError):
        pass
    pending.append(None)
    loop.call_later(delay, release)


class DelayProxy:
    """127.0.0.1:port -> 127.0.0.1:upstream, delay seconds added in each direction."""

    def __init__(self, upstream: int, delay: float) -> None:
        self.upstream = upstream
        self.delay = delay
        self.server: asyncio.Server | None = None
        # asyncio keeps only weak references to tasks: hold the per-connection ones here.
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024)

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            u_reader, u_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            c_writer.close()
            return
        try:
            await asyncio.gather(
                _pipe(c_reader, u_writer, self.delay), _pipe(u_reader, c_writer, self.delay)
            )
        except asyncio.CancelledError:
            # Shutting down. Return rather than raise: asyncio 3.11's start_server callback
            # logs a traceback for a cancelled client task.
            c_writer.close()
            u_writer.close()


def _clock(speed: float) -> Callable[[], datetime]:
    """The nodes' clock: the wall's, run `speed` times as fast from now on."""
    start, began = datetime.now(UTC), time.monotonic()
    return lambda: start + timedelta(seconds=(time.monotonic() - began) * speed)


async def serve(count: int, delay_ms: float, directory: Path, speed: float = 1.0) -> None:
    nodes = [SimNode(f"bench-{i + 1:03d}", "A100", 8, Scenario.BUSY, seed=i) for i in range(count)]
    fleet = SimFleet(nodes, seed=1, clock=_clock(speed))
    await fleet.start()
    proxies: list[DelayProxy] = []
    try:
        key = fleet.write_client_key(directory)
        lines = []
        for ep in fleet:
            proxy = DelayProxy(ep.port, delay_ms / 1000)
            await proxy.start()
            proxies.append(proxy)
            trusted = ep.trusted_key.export_public_key().decode().strip()
            lines.append(f"[127.0.0.1]:{proxy.port} {trusted}\n")
            lines.append(ep.known_hosts_line() + "\n")
        known_hosts = directory / "known_hosts"
        known_hosts.write_text("".join(lines))
        info = {
            "nodes": [
                {"name": ep.name, "port": p.port, "direct_port": ep.port}
                for ep, p in zip(fleet, proxies, strict=True)
            ],
            "known_hosts": str(known_hosts),
            "key": str(key),
            "delay_ms": delay_ms,
        }
        print(json.dumps(info), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        for proxy in proxies:
            if proxy.server is not None:
                proxy.server.close()
        with contextlib.suppress(Exception):
            await fleet.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--delay-ms", type=float, default=25.0, help="added in each direction")
    ap.add_argument("--dir", type=Path, required=True, help="where key and known_hosts go")
    ap.add_argument("--speed", type=float, default=1.0, help="the nodes' clock, times the wall's")
    args = ap.parse_args(argv)
    if not 0 < args.speed <= 1000:  # NaN and inf too
        ap.error("--speed: must be above 0 and at most 1000")
    asyncio.run(serve(args.nodes, args.delay_ms, args.dir, args.speed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
