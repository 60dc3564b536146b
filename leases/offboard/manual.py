"""Manual steps: what a person does in a console ("release the instance") where zuka has
no API. The user says it is done (`--did KEY`); zuka then verifies what it can see from
here: the node no longer answers at its SSH address.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection

from leases.core.i18n import N_
from leases.core.models import ProviderKind
from leases.offboard.steps import Outcome, Phase, PlanInput, Sighting, Step, params

NAME = "manual"
RELEASE_KEY = "manual:release-instance"
# How a console step not yet done begins its detail: it waits for the user, not failed.
WAITING = N_("waiting for you")
# Whether the node still answers: True, False, or None when zuka cannot tell from here.
Probe = Callable[[Step], Awaitable[bool | None]]

_WHAT = {
    ProviderKind.PLATFORM: N_("release the instance in {p}'s console (its data disk goes with it)"),
    ProviderKind.CLOUD: N_("release (terminate) the instance in {p}'s console"),
    ProviderKind.COLO: N_(
        "hand the machine back to {p}; have its disks wiped or returned as the contract says"
    ),
}


def plan_manual(facts: PlanInput) -> list[Step]:
    node = facts.node
    if node.local:
        return []  # this very machine: nothing to release in a console
    p = facts.provider
    what = (
        _WHAT[p.kind].format(p=p.name)
        if p is not None
        else N_("release or hand back the machine where it was rented")
    )
    ssh = node.ssh
    return [
        Step(
            key=RELEASE_KEY,
            phase=Phase.MANUAL,
            driver=NAME,
            action="release-instance",
            target=node.name,
            destructive=True,
            describe=N_("by hand: {what}; zuka then checks that {host} no longer answers").format(
                what=what, host=ssh.host
            ),
            params=params(
                host=ssh.host,
                port=str(ssh.port or 22),
                jump=ssh.jump or "",
                alias="yes" if ssh.alias else "no",
            ),
        )
    ]


class ManualDriver:
    name = NAME

    def __init__(self, node: str, did: Collection[str], probe: Probe, actor: str) -> None:
        self.node = node
        self.did = frozenset(did)
        self.probe = probe
        self.actor = actor

    async def run(self, step: Step) -> Outcome:
        if step.key in self.did:
            return Outcome(True, N_("{actor} said it was done by hand").format(actor=self.actor))
        return Outcome(
            False,
            "",
            N_(
                "waiting for you: {what}; once done: zuka offboard {node} --execute"
                " --confirm {node} --did {key}"
            ).format(what=step.describe, node=self.node, key=step.key),
        )

    async def inspect(self, step: Step) -> Sighting:
        where = f"{step.param('host')}:{step.param('port')}"
        answers = await self.probe(step)
        if answers is None:
            said = N_(
                "zuka cannot check {where} from here (an ssh config alias or a jump host)"
            ).format(where=where)
            return Sighting(None, "", said)
        if answers:
            return Sighting(
                True, N_("{where} accepts connections").format(where=where), N_("the node answers")
            )
        return Sighting(
            False,
            N_("{where} does not accept connections").format(where=where),
            N_("the node does not answer"),
        )

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        where = f"{step.param('host')}:{step.param('port')}"
        answers = await self.probe(step)
        if answers is None:
            return Outcome(
                False,
                "",
                N_(
                    "zuka cannot check {where} from here (an ssh config alias or a jump host):"
                    " check by hand, then skip this step with a reason"
                ).format(where=where),
            )
        if answers:
            return Outcome(
                False,
                N_("{where} still accepts connections").format(where=where),
                N_(
                    "the node still answers at {where}: release it in the console first (or, if"
                    " the address now belongs to another machine, skip this step with a reason:"
                    " zuka offboard {node} --skip {key} --reason TEXT --confirm"
                    " {node}), then run again with --did {key}"
                ).format(where=where, node=self.node, key=step.key),
            )
        return Outcome(True, N_("{where} no longer accepts connections").format(where=where))


async def tcp_answers(step: Step, timeout: float = 5.0) -> bool | None:
    """Whether the node's SSH port still accepts a TCP connection (no login tried)."""
    if step.param("alias") == "yes" or step.param("jump"):
        return None
    try:
        port = int(step.param("port") or 22)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(step.param("host"), port), timeout
        )
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
