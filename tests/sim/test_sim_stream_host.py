"""The simulated fleet (what `zuka demo` runs) read by the poller in stream mode: the host
figures ride on the owner query (hoststats.with_host), so the simulator must answer the
owner query with the host snippet after it, and the process list must follow the node
(a killed process goes from it) rather than freeze at the first exec reading."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from leases.core.models import Node, NodeHealth
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode, answer
from leases.sim.fleet import SimFleet
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry import hoststats, owners
from leases.telemetry.poller import Poller
from leases.telemetry.rollups import HistoryStore
from tests.support.waiting import wait_until

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


def test_the_sim_answers_the_owner_query_with_the_host_snippet_after_it() -> None:
    node = SimNode("sim-001", "A100", 2, Scenario.BUSY, seed=1)
    alone = answer(node, owners.APPS_OWNERS_COMMAND, T0)
    both = answer(node, hoststats.with_host(owners.APPS_OWNERS_COMMAND), T0)
    assert both.stderr == "" and both.exit_status == 0
    own, status, host = hoststats.split_output(both.stdout, last=True)
    assert own == alone.stdout and status == alone.exit_status == 0
    reading = owners.parse_apps_owners(own, "sim-001")
    assert reading.processes and all(p.owner for p in reading.processes)
    parsed = hoststats.parse_host(host)
    assert parsed.problems == () and parsed.mounts and parsed.cpus


def test_something_else_after_the_owner_query_is_run_as_the_shell_would() -> None:
    node = SimNode("sim-001", "A100", 2, Scenario.BUSY, seed=1)
    out = answer(node, owners.APPS_OWNERS_COMMAND + "; echo after $?; nosuch", T0)
    assert out.stdout.endswith("after 0\n")
    assert out.exit_status == 127 and "nosuch: not found" in out.stderr
    # Glued on without a `;` it is no owner query (the simulator's shell refuses it).
    glued = answer(node, owners.APPS_OWNERS_COMMAND + "x", T0)
    assert owners.parse_apps_owners(glued.stdout, "sim-001").processes is None


async def test_the_demo_fleet_in_stream_mode_gives_host_figures_and_fresh_processes(
    tmp_path: Path,
) -> None:
    clock = Clock()
    sim = SimNode("sim-001", "A100", 2, Scenario.BUSY, seed=1)
    async with SimFleet([sim], clock=clock) as fleet:
        known = fleet.write_known_hosts(tmp_path / "known_hosts")
        key = str(fleet.write_client_key(tmp_path))
        with Ledger.open(tmp_path / "l.db") as ledger:
            nodes = [ledger.add_node(Node(ep.name, ep.ssh_target(key))) for ep in fleet]
            options = SshOptions(
                known_hosts=(known,), agent_path=None, config=[], command_timeout=5
            )
            poller = Poller(
                nodes, pool=SshPool(options), clock=clock, store=HistoryStore(ledger),
                interval_s=0.2, apps_every=1,
            )  # fmt: skip
            stop = asyncio.Event()
            task = asyncio.create_task(poller.run(stop, mode="stream", flush_s=0.2))
            try:

                def status_now() -> object:
                    assert not task.done(), task
                    st = poller.statuses.get("sim-001")
                    return st if st and st.host and st.processes else None

                st = await wait_until(status_now, what="a first reading with processes")
                victim = st.processes[0].pid  # type: ignore[attr-defined]
                sim.killed.add(victim)
                clock.now = T0 + timedelta(seconds=30)

                def refreshed() -> bool:
                    assert not task.done(), task
                    s = poller.statuses["sim-001"]
                    return bool(
                        s.host is not None
                        and s.host.cpu_pct is not None
                        and s.processes is not None
                        and victim not in {p.pid for p in s.processes}
                    )

                await wait_until(refreshed, what="a CPU share and the killed process gone")
                s = poller.statuses["sim-001"]
                assert s.health is NodeHealth.OK
                assert s.host is not None and s.host.problems == (), s.host
                assert s.host.mounts and s.host.mem_total_kib
            finally:
                stop.set()
                await task
                await poller.close()
