"""Wiring a ledger to the pieces that read its nodes: SSH options, the poller, the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from leases.core.clock import Clock, utc_now
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Node
from leases.ledger.paths import sim_trust_store, trust_store
from leases.ledger.store import Ledger
from leases.ssh.fdlimit import raise_open_files
from leases.ssh.options import SshOptions
from leases.ssh.pool import SshPool
from leases.telemetry.faultlog import fault_logger
from leases.telemetry.history import RecentHistory
from leases.telemetry.housekeeping import fleet_nodes
from leases.telemetry.poller import Poller
from leases.telemetry.probecache import ProbeCache
from leases.telemetry.promtarget import ledger_nodes
from leases.telemetry.rollups import HistoryStore

if TYPE_CHECKING:  # imported by the collector and the dashboard, which make one
    from leases.alerts.watch import AlertWatch


def ssh_options(ledger_path: Path, **overrides: object) -> SshOptions:
    paths = [trust_store(ledger_path)]
    if sim_trust_store(ledger_path).exists():
        paths.append(sim_trust_store(ledger_path))
    paths += [Path("~/.ssh/known_hosts").expanduser(), Path("/etc/ssh/ssh_known_hosts")]
    return SshOptions(known_hosts=tuple(paths), **overrides)  # type: ignore[arg-type]


def polled_nodes(ledger: Ledger, names: list[str] | None = None) -> list[Node]:
    """Active and offboarding nodes (or the named ones, which must exist), less those
    whose stored row holds a refused value (Node.problem): nothing connects to those."""
    if names:
        nodes = ledger_nodes(ledger, [ledger.node(n) for n in names])
        for node in nodes:
            if node.problem:
                raise InputError(
                    "node", node.name, _("not polled: {problem}").format(problem=node.problem)
                )
        return nodes
    return fleet_nodes(ledger)[0]


def make_poller(
    ledger: Ledger,
    ledger_path: Path,
    *,
    names: list[str] | None = None,
    clock: Clock = utc_now,
    interval_s: float = 5.0,
    recent: RecentHistory | None = None,
    store: bool = True,
    alerts: AlertWatch | None = None,
    nodes: list[Node] | None = None,
    processes: bool = True,
    kept_shell: bool = True,
    settle_gc: bool = False,
    reuse_probes: bool = False,
    identity: Path | None = None,
) -> Poller:
    """The poller of the ledger's fleet (or the named nodes; or `nodes`, already read),
    starting from the nvidia-smi probes the ledger keeps (leases.telemetry.probecache).
    identity: the one key every connect uses (a service's own; no agent)."""
    raise_open_files()  # a socket a node (leases.ssh.fdlimit)
    options = (
        ssh_options(ledger_path)
        if identity is None
        else ssh_options(ledger_path, identity=identity)
    )
    return Poller(
        polled_nodes(ledger, names) if nodes is None else nodes,
        pool=SshPool(options),
        clock=clock,
        store=HistoryStore(ledger) if store else None,
        recent=recent,
        interval_s=interval_s,
        log=fault_logger(ledger_path),
        alerts=alerts,
        probes=ProbeCache(ledger) if store else None,
        reuse_probes=reuse_probes,
        processes=processes,
        kept_shell=kept_shell,
        settle_gc=settle_gc,
    )
