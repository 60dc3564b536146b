"""The default planners and drivers of `zuka offboard`. The engine takes both injected
(tests give their own); this is the one place that names the real ones.

Today: the engine's own (preflight, manual steps, the ledger's release). The SSH part
(leases.offboard.remote: plan_remote, RemoteDriver) and the cloud part
(leases.offboard.cloud: plan_cloud and its drivers) are added here: their planners to
PLANNERS (the order within a phase follows it), their drivers to `drivers`, each under
the name its steps give in Step.driver. A cloud driver (one with identity()) is checked
by preflight before any of its steps runs: give it the credentials the provider record
names, never others.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from leases.config import Config
from leases.ledger import Ledger
from leases.models import Node
from leases.offboard.manual import ManualDriver, Probe, plan_manual, tcp_answers
from leases.offboard.preflight import PreflightDriver, plan_preflight
from leases.offboard.release import LedgerDriver, plan_release
from leases.offboard.steps import Driver, Planner

# In the order their steps are listed within a phase.
PLANNERS: tuple[Planner, ...] = (plan_preflight, plan_manual, plan_release)


@dataclass(frozen=True)
class RunContext:
    """What the drivers of one run are built from."""

    ledger: Ledger
    node: Node
    config: Config
    did: Collection[str] = ()  # manual steps the user says are done
    probe: Probe = tcp_answers


def drivers(ctx: RunContext) -> dict[str, Driver]:
    table: dict[str, Driver] = {}
    table["preflight"] = PreflightDriver(ctx.ledger, ctx.config, table)
    table["manual"] = ManualDriver(ctx.node.name, ctx.did, ctx.probe, ctx.ledger.actor)
    table["ledger"] = LedgerDriver(ctx.ledger)
    return table
