"""The default planners and drivers of `zuka offboard`. The engine takes both injected
(tests give their own); this is the one place that names the real ones.

The engine's own (preflight, manual steps, the ledger's release), the node's over SSH
(leases.offboard.remoteplan, remote) and the cloud's (leases.offboard.cloud.plan: S3, EC2 and CLI
templates): planners in PLANNERS (the order within a phase follows it), drivers under the
name their steps give in Step.driver. A cloud driver (one with identity()) is checked by
preflight before any of its steps runs, with the credentials the provider record names.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from leases.config.sections import Config
from leases.core.models import Node
from leases.ledger.store import Ledger
from leases.offboard.cloud.plan import cloud_drivers, plan_cloud
from leases.offboard.manual import ManualDriver, Probe, plan_manual, tcp_answers
from leases.offboard.plan import Plan, facts_for
from leases.offboard.preflight import PreflightDriver, plan_preflight
from leases.offboard.release import LedgerDriver, plan_release
from leases.offboard.remote import RemoteDriver, fresh_login
from leases.offboard.remoteplan import plan_remote, scratch_roots
from leases.offboard.steps import Driver, PlanInput, Planner, Step
from leases.ssh.session import NodeSession
from leases.telemetry.wiring import ssh_options

# In the order their steps are listed within a phase.
PLANNERS: tuple[Planner, ...] = (plan_preflight, plan_remote, plan_cloud, plan_manual, plan_release)


@dataclass(frozen=True)
class RunContext:
    """What the drivers of one run are built from."""

    ledger: Ledger
    node: Node
    config: Config
    did: Collection[str] = ()  # manual steps the user says are done
    probe: Probe = tcp_answers
    steps: Sequence[Step] = ()  # the plan's: which cloud drivers it needs
    facts: PlanInput | None = None  # the plan's facts: the provider, the scratch roots
    # Opened SSH sessions, closed by close() when the run ends.
    sessions: list[NodeSession] = field(default_factory=list)


def context_for(
    ledger: Ledger, node: Node, config: Config, plan: Plan, did: Collection[str] = ()
) -> RunContext:
    """The context a stored plan's run, recheck or inspection builds its drivers from: the
    plan's steps and the ledger's facts for its lease (the command line and the dashboard
    alike)."""
    facts = facts_for(ledger, node, config, lease_id=plan.lease_id)
    return RunContext(ledger, node, config, did=tuple(did), steps=plan.steps, facts=facts)


def drivers(ctx: RunContext) -> dict[str, Driver]:
    table: dict[str, Driver] = {}
    table["preflight"] = PreflightDriver(ctx.ledger, ctx.config, table)
    table["manual"] = ManualDriver(ctx.node.name, ctx.did, ctx.probe, ctx.ledger.actor)
    table["ledger"] = LedgerDriver(ctx.ledger)
    used = {s.driver for s in ctx.steps}
    if "ssh" in used and ctx.facts is not None and ctx.ledger.path is not None:
        options = ssh_options(ctx.ledger.path)
        session = NodeSession(ctx.node, options)  # connects on its first command
        ctx.sessions.append(session)
        table["ssh"] = RemoteDriver(
            session, roots=scratch_roots(ctx.facts), login=fresh_login(ctx.node, options)
        )
    if used & {"s3", "ec2", "cmd"}:
        provider = None if ctx.facts is None else ctx.facts.provider
        for driver in cloud_drivers(provider, ctx.steps, ctx.config):
            table[driver.name] = driver
    return table


async def close(ctx: RunContext) -> None:
    for session in ctx.sessions:
        await session.close()
    ctx.sessions.clear()
