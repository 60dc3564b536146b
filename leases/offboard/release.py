"""The last step: the ledger says the node was handed back. The lease ends (now), a paid
deposit's refund becomes pending, auto-renew is flagged (zuka cannot turn off a
provider's auto-renew: the evidence says so plainly), and the node is released
(archived). Each part is done only if not done yet, so a rerun after a kill finishes
the rest; verify reads all three back.
"""

from __future__ import annotations

from leases.core.i18n import N_
from leases.core.models import Lease, Node, NodeState, RefundState
from leases.ledger.release import open_at
from leases.ledger.store import Ledger
from leases.offboard.steps import Outcome, Phase, PlanInput, Sighting, Step, params

NAME = "ledger"
KEY = "ledger:release"


def plan_release(facts: PlanInput) -> list[Step]:
    lease = facts.lease
    what = N_("in the ledger: mark the node released (archived)")
    if lease is not None and lease.deposit is not None:
        what = N_(
            "in the ledger: end the lease now, set its deposit refund pending, mark the node"
            " released (archived)"
        )
    elif lease is not None:
        what = N_("in the ledger: end the lease now, mark the node released (archived)")
    return [
        Step(
            key=KEY,
            phase=Phase.RELEASE,
            driver=NAME,
            action="release",
            target=facts.node.name,
            destructive=False,
            describe=what,
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
            return Outcome(
                False, "", N_("node {node} is no longer in the ledger").format(node=step.target)
            )
        said: list[str] = []
        facts: dict[str, str] = {}
        now = self.ledger.clock()
        if lease is not None:
            if open_at(lease, now) and lease.start > now:
                # Not started yet: cancelled at its start, it never billed.
                self.ledger.update_lease(
                    node.name, {"ended_at": lease.start.isoformat()}, start=lease.start
                )
                said.append(
                    N_("lease from {start} cancelled before it started").format(
                        start=lease.start.isoformat()
                    )
                )
            elif open_at(lease, now) and node.state is not NodeState.RELEASED:
                # A prepaid period past its end, never recorded as ended, ended at its end.
                at = lease.end if lease.end is not None and lease.end < now else None
                ended = self.ledger.end_lease(node.name, at)
                said.append(
                    N_("lease from {start} ended at {end}").format(
                        start=lease.start.isoformat(), end=ended.ended_at
                    )
                )
            if lease.deposit is not None and lease.deposit_refund is RefundState.NONE:
                self.ledger.update_lease(
                    node.name, {"deposit_refund": RefundState.PENDING.value}, start=lease.start
                )
                said.append(
                    N_("deposit {amount} {currency}: refund pending").format(
                        amount=lease.deposit, currency=lease.currency
                    )
                )
            if lease.auto_renew:
                said.append(
                    N_(
                        "auto-renew is ON in the ledger: turn it off at the provider, or the lease"
                        " renews and bills"
                    )
                )
                facts["auto_renew"] = "on"
        if node.state is not NodeState.RELEASED:
            self.ledger.archive_node(node.name)
            said.append(N_("node {node} released (archived)").format(node=node.name))
        return Outcome(True, "\n".join(said) or N_("already released"), facts=facts)

    async def inspect(self, step: Step) -> Sighting:
        # Never called: its steps are not destructive.
        return Sighting(None, "", N_("nothing to look at: this step changes no resource"))

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        node, lease = self._facts(step)
        if node is None:
            return Outcome(
                False, "", N_("node {node} is no longer in the ledger").format(node=step.target)
            )
        problems = []
        if node.state is not NodeState.RELEASED:
            problems.append(N_("the node is {state}, not released").format(state=node.state.value))
        if lease is not None:
            if open_at(lease, self.ledger.clock()):
                problems.append(N_("the lease is still open"))
            if lease.deposit is not None and lease.deposit_refund is RefundState.NONE:
                problems.append(N_("the deposit's refund is not recorded as pending"))
        if problems:
            return Outcome(False, "; ".join(problems), N_("the ledger does not say released"))
        if lease is None:
            return Outcome(True, N_("node released, lease ended"))
        said = {
            RefundState.NONE: N_("node released, lease ended, deposit refund none"),
            RefundState.PENDING: N_("node released, lease ended, deposit refund pending"),
            RefundState.REFUNDED: N_("node released, lease ended, deposit refund refunded"),
            RefundState.FORFEITED: N_("node released, lease ended, deposit refund forfeited"),
        }
        return Outcome(True, said[lease.deposit_refund])
