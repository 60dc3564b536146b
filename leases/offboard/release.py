"""The last step: the ledger says the node was handed back. The lease ends (now), a paid
deposit's refund becomes pending, auto-renew is flagged (zuka cannot turn off a
provider's auto-renew: the evidence says so plainly), and the node is released
(archived). Each part is done only if not done yet, so a rerun after a kill finishes
the rest; verify reads all three back.
"""

from __future__ import annotations

from leases.core.models import Lease, Node, NodeState, RefundState
from leases.ledger.release import open_at
from leases.ledger.store import Ledger
from leases.offboard.steps import Outcome, Phase, PlanInput, Sighting, Step, params

NAME = "ledger"
KEY = "ledger:release"


def plan_release(facts: PlanInput) -> list[Step]:
    lease = facts.lease
    what = "mark the node released (archived)"
    if lease is not None:
        what = (
            "end the lease now, "
            + ("set its deposit refund pending, " if lease.deposit is not None else "")
            + what
        )
    return [
        Step(
            key=KEY,
            phase=Phase.RELEASE,
            driver=NAME,
            action="release",
            target=facts.node.name,
            destructive=False,
            describe=f"in the ledger: {what}",
            params=params(
                node_id=str(facts.node.id),
                lease_id="" if lease is None else str(lease.id),
            ),
        )
    ]


class LedgerDriver:
    name = NAME

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def _facts(self, step: Step) -> tuple[Node | None, Lease | None]:
        node = self.ledger.node_by_id(int(step.param("node_id")))
        lease_id = step.param("lease_id")
        lease = None
        if node is not None and lease_id:
            lease = next((le for le in self.ledger.leases(node) if str(le.id) == lease_id), None)
        return node, lease

    async def run(self, step: Step) -> Outcome:
        node, lease = self._facts(step)
        if node is None:
            return Outcome(False, "", f"node {step.target} is no longer in the ledger")
        said: list[str] = []
        facts: dict[str, str] = {}
        now = self.ledger.clock()
        if lease is not None:
            if open_at(lease, now) and lease.start > now:
                # Not started yet: cancelled at its start, it never billed.
                self.ledger.update_lease(
                    node.name, {"ended_at": lease.start.isoformat()}, start=lease.start
                )
                said.append(f"lease from {lease.start.isoformat()} cancelled before it started")
            elif open_at(lease, now) and node.state is not NodeState.RELEASED:
                # A prepaid period past its end, never recorded as ended, ended at its end.
                at = lease.end if lease.end is not None and lease.end < now else None
                ended = self.ledger.end_lease(node.name, at)
                said.append(f"lease from {lease.start.isoformat()} ended at {ended.ended_at}")
            if lease.deposit is not None and lease.deposit_refund is RefundState.NONE:
                self.ledger.update_lease(
                    node.name, {"deposit_refund": RefundState.PENDING.value}, start=lease.start
                )
                said.append(f"deposit {lease.deposit} {lease.currency}: refund pending")
            if lease.auto_renew:
                said.append(
                    "auto-renew is ON in the ledger: turn it off at the provider, or the lease"
                    " renews and bills"
                )
                facts["auto_renew"] = "on"
        if node.state is not NodeState.RELEASED:
            self.ledger.archive_node(node.name)
            said.append(f"node {node.name} released (archived)")
        return Outcome(True, "\n".join(said) or "already released", facts=facts)

    async def inspect(self, step: Step) -> Sighting:
        # Never called: its steps are not destructive.
        return Sighting(None, "", "nothing to look at: this step changes no resource")

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        node, lease = self._facts(step)
        if node is None:
            return Outcome(False, "", f"node {step.target} is no longer in the ledger")
        problems = []
        if node.state is not NodeState.RELEASED:
            problems.append(f"the node is {node.state.value}, not released")
        if lease is not None:
            if open_at(lease, self.ledger.clock()):
                problems.append("the lease is still open")
            if lease.deposit is not None and lease.deposit_refund is RefundState.NONE:
                problems.append("the deposit's refund is not recorded as pending")
        if problems:
            return Outcome(False, "; ".join(problems), "the ledger does not say released")
        refund = "" if lease is None else f", deposit refund {lease.deposit_refund.value}"
        return Outcome(True, f"node released, lease ended{refund}")
