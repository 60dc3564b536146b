"""Simulated fleets wired to a ledger: `zuka sim` and `zuka demo`.

A ledger node becomes a simulated one from its GPU model and a `sim:SCENARIO` tag; the
running fleet's ports, client key and host keys are written where the poller looks for
them (the ledger's ssh fields, its sim_known_hosts file), and past readings are backfilled
as hour roll-ups (and minute roll-ups for the last hours) so charts have something to show.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from leases.core.i18n import _
from leases.core.models import Lease, Node, OwnerHour
from leases.ledger import records
from leases.ledger.paths import sim_dir, sim_trust_store
from leases.ledger.store import Ledger
from leases.sim import Scenario, SimNode, gpu_user, history
from leases.sim.fleet import SimFleet
from leases.sim.traps import Trap
from leases.telemetry.attribution import minute_shares
from leases.telemetry.history import GpuHour, GpuMinute, NodeHour, NodeMinute, busy_verdict
from leases.telemetry.lock import PollerLock
from leases.telemetry.rollups import HistoryStore

T = TypeVar("T")
SIM_TAG = "sim:"
# `sim-trap:NAME` tags give a simulated node its acceptance traps (leases.sim.traps).
TRAP_TAG = "sim-trap:"
_MODEL_WORDS = (
    ("H800", "H800"), ("H100", "H100"), ("A800", "A800"), ("A100", "A100"),
    ("4090", "RTX 4090"), ("V100", "V100"), ("A10", "A10"),
)  # fmt: skip


def sim_model(gpu_model: str) -> str:
    for word, key in _MODEL_WORDS:
        if word.lower() in gpu_model.lower():
            return key
    return "A10"


def sim_node_for(node: Node) -> SimNode:
    scenario = Scenario.BUSY
    for tag in node.tags:
        if tag.startswith(SIM_TAG):
            scenario = Scenario(tag.removeprefix(SIM_TAG))
    traps = frozenset(Trap(t.removeprefix(TRAP_TAG)) for t in node.tags if t.startswith(TRAP_TAG))
    return SimNode(
        node.name,
        sim_model(node.gpu_model),
        max(1, min(8, node.gpu_count or 1)),
        scenario,
        seed=zlib.crc32(node.name.encode()),
        vram_gib=node.vram_gib,
        spoof_name=scenario is Scenario.FAKE_VRAM,
        traps=traps,
    )


def attach(ledger: Ledger, ledger_path: Path, fleet: SimFleet) -> None:
    """Point the ledger's nodes at the running fleet and trust the fleet's host keys."""
    folder = sim_dir(ledger_path)
    folder.mkdir(mode=0o700, exist_ok=True)
    key_path = fleet.write_client_key(folder)
    sim_trust_store(ledger_path).write_text(fleet.known_hosts())
    sim_trust_store(ledger_path).chmod(0o600)
    for ep in fleet:
        ledger.update_node(
            ep.name,
            {
                "ssh_host": ep.host,
                "ssh_port": ep.port,
                "ssh_user": "root",
                "ssh_key_path": str(key_path),
                "ssh_jump": None,
                "ssh_alias": False,
            },
        )


def backfill(
    store: HistoryStore,
    sim: SimNode,
    start: datetime,
    end: datetime,
    minute_span: timedelta = timedelta(hours=6),
    coarse_step: timedelta = timedelta(minutes=5),
    stopped: Callable[[], bool] = lambda: False,
) -> int:
    """Write plausible history from start to end; returns the hours written.

    `stopped` is asked at every reading, before anything is written: once it says yes
    the backfill ends with KeyboardInterrupt, having written none of this node's history
    (Ctrl-C in `zuka sim` within a moment, never half a node).

    The last minute_span gets minute roll-ups from one-minute readings; before that only
    hour roll-ups are written, from a reading every coarse_step standing for that many
    minutes (a full-rate backfill of 30 days would make `zuka demo` start slowly).
    """
    split = max(start, end - minute_span)
    hours: dict[int, list[list[float]]] = {}
    # Busy card-minutes by owner per hour: each GPU's jobs belong to its sim user.
    owner_of = [gpu_user(sim, i).owner for i in range(sim.count)]
    by_owner: dict[int, dict[str, float]] = {}
    minutes: list[NodeMinute] = []
    for a, b, step, keep_minutes in ((start, split, coarse_step, False), (split, end, None, True)):
        step = step or timedelta(minutes=1)
        weight = int(step.total_seconds()) // 60
        n = sim.count
        limits = [g.power_limit_w for g in sim.gpus]
        for row in history(sim, a, b, step):
            if stopped():
                raise KeyboardInterrupt
            t = int(row.at.timestamp()) // 60
            acc = hours.get(t // 60)
            if acc is None:
                acc = hours[t // 60] = [[0, 0, 0.0, 0.0, 0.0, 0.0] for _gpu in range(n)]
            owners = by_owner.setdefault(t // 60, {})
            for i in range(n):
                u = row.util_gpu[i]
                g = acc[i]
                g[0] += weight
                # The one busy rule (leases.telemetry.history), as the poller's roll-ups apply it.
                busy = bool(busy_verdict(u, row.mem_used_mib[i], row.power_w[i], limits[i]))
                g[1] += weight if busy else 0
                if busy and not keep_minutes:
                    owners[owner_of[i]] = owners.get(owner_of[i], 0.0) + weight
                g[2] += u * weight
                g[3] = max(g[3], u)
                g[4] += row.mem_used_mib[i] * weight
                g[5] += row.power_w[i] * weight
            if keep_minutes:
                gpus = tuple(
                    GpuMinute(i, 1, row.util_gpu[i], row.util_gpu[i], row.mem_used_mib[i],
                              row.power_w[i], limits[i])
                    for i in range(n)
                )  # fmt: skip
                per_gpu = tuple((i, (owner_of[i],)) for i in range(n))
                minutes.append(NodeMinute(sim.name, t, gpus, per_gpu))
                for share_owner, share in minute_shares(gpus, dict(per_gpu)).items():
                    owners[share_owner] = owners.get(share_owner, 0.0) + share
    store.write_hours(_hour(sim.name, h, acc) for h, acc in sorted(hours.items()))
    store.write_owner_hours(
        OwnerHour(sim.name, o, h, v) for h, owners in by_owner.items() for o, v in owners.items()
    )
    store.write_minutes(minutes, refresh_hours=False)
    return len(hours)


def _hour(node: str, hour: int, acc: list[list[float]]) -> NodeHour:
    gpus = tuple(
        GpuHour(i, min(60, int(k)), min(60, int(b)), s / k, mx, mem / k, p / k)
        for i, (k, b, s, mx, mem, p) in enumerate(acc)
        if k
    )
    return NodeHour(node, hour, gpus)


# -- `zuka sim --nodes N`: a fleet of simulated nodes registered in a ledger -------------


@dataclass(frozen=True)
class _Kind:
    channel: str
    provider: str
    model: str
    count: int
    vram: int
    interconnect: str
    billing: str
    price: str
    scenario: Scenario


_KINDS = (
    _Kind("platform", "SimPlatform", "RTX 4090", 8, 24, "pcie", "card_hour", "1.98", Scenario.BUSY),
    _Kind("platform", "SimPlatform", "A100 80GB SXM", 8, 80, "nvlink", "monthly", "52000",
          Scenario.IDLE_MONTHLY),
    _Kind("platform", "SimPlatform", "H800 80GB SXM", 8, 80, "nvlink", "monthly", "98000",
          Scenario.BUSY),
    _Kind("colo", "SimColo", "A800 80GB SXM", 8, 80, "nvlink", "contract", "36000",
          Scenario.BUSY),
    _Kind("cloud", "SimCloud", "A10", 1, 24, "pcie", "hourly", "10.50", Scenario.BURSTY),
    _Kind("platform", "SimPlatform", "RTX 4090", 4, 24, "pcie", "card_hour", "2.20",
          Scenario.BURSTY),
    _Kind("cloud", "SimCloud", "V100 32GB", 8, 32, "nvlink", "hourly", "98", Scenario.FLAKY),
    _Kind("platform", "SimPlatform", "A100 80GB", 1, 80, "pcie", "card_hour", "4.80",
          Scenario.FAKE_VRAM),
)  # fmt: skip


class SimLock(PollerLock):
    """One `zuka sim` per ledger: a second would move the nodes the first serves to ports
    of its own, and leave them unreachable (and the first's host keys unknown) when it
    stops. The kernel drops the lock when its holder dies, even by SIGKILL."""

    def __init__(self, ledger_path: Path) -> None:
        super().__init__(ledger_path)
        self.path = sim_dir(ledger_path) / "lock"


def register_sim_nodes(
    ledger: Ledger, count: int, now: datetime, prefix: str = "sim"
) -> list[Node]:
    """Nodes prefix-001... with leases across the three channels; existing ones are kept."""
    existing = {n.name for n in ledger.nodes()}
    providers = {p.name for p in ledger.providers()}
    out: list[Node] = []
    for i in range(count):
        kind = _KINDS[i % len(_KINDS)]
        name = f"{prefix}-{i + 1:03d}"
        if name in existing:
            out.append(ledger.node(name))
            continue
        new_provider = None
        if kind.provider not in providers:
            new_provider = records.provider_from({"kind": kind.channel, "name": kind.provider})
            providers.add(kind.provider)
        node = records.node_from(
            {
                "name": name,
                "provider": kind.provider,
                "ssh_host": "127.0.0.1",
                "gpu_model": kind.model,
                "gpu_count": kind.count,
                "vram_gib": kind.vram,
                "interconnect": kind.interconnect,
                "tags": ["simulated", f"{SIM_TAG}{kind.scenario.value}"],
            }
        )
        out.append(ledger.add_node(node, new_provider=new_provider))
        ledger.add_lease(_lease_for(name, kind, now))
    return out


def _lease_for(node: str, kind: _Kind, now: datetime) -> Lease:
    start = (now - timedelta(days=20)).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    prepaid = kind.billing in ("monthly", "contract")
    rec: dict[str, object] = {
        "node": node,
        "billing_type": kind.billing,
        "unit_price": kind.price,
        "start": start.isoformat(),
        "end": (start + timedelta(days=30 if kind.billing == "monthly" else 365)).isoformat()
        if prepaid
        else None,
        "cards_billed": kind.count if kind.billing == "card_hour" else None,
    }
    if kind.billing == "contract":
        rec |= {"deposit": str(Decimal(kind.price) * 2), "contract_no": f"SIM-{node}"}
    return records.lease_from(rec)


def sim_nodes_of(nodes: Sequence[Node]) -> list[SimNode]:
    return [sim_node_for(n) for n in nodes]


def serve_ledger_nodes(ledger: Ledger, ledger_path: Path, nodes: Sequence[Node]) -> FleetThread:
    """Simulate these ledger nodes from a thread of their own and point the ledger at them."""
    runner = FleetThread(sim_nodes_of(nodes))
    try:
        attach(ledger, ledger_path, runner.start())
    except BaseException:
        runner.stop()
        raise
    return runner


class FleetThread:
    """A SimFleet served from its own thread and event loop, beside a UI's own loop."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.fleet = SimFleet(nodes)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="zuka-sim", daemon=True)

    def start(self, timeout: float = 30.0) -> SimFleet:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(_("the simulated fleet did not start in time"))
        if self._error is not None:
            raise RuntimeError(
                _("the simulated fleet failed to start: {why}").format(why=self._error)
            )
        return self.fleet

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.fleet.start())
        except BaseException as exc:  # reported to start()'s caller
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self.fleet.stop())
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine (set_scenario, rotate_host_key...) on the fleet's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
