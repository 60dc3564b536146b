"""Preflight: the checks before anything is touched. The lease's facts and days left; and
at every place a cloud step calls (driver, endpoint, region), who the credentials act as
there (asked of the cloud at that place), compared with the ledger's provider record
(account id), the resources' region (the one the client calls, as the SDK resolves it) and
the configured blocklist. A mismatch stops the run before any cloud step: a deletion verified "gone"
in the wrong account proves nothing, and one that succeeds there is a disaster.

Preflight steps cannot be skipped and run again on every execute and recheck.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal

from leases.config.sections import Config
from leases.core.cloudids import same_endpoint
from leases.core.i18n import N_
from leases.core.models import Lease
from leases.core.textsafe import visible
from leases.ledger.release import open_at
from leases.ledger.store import Ledger
from leases.offboard.steps import (
    Driver,
    Identity,
    Outcome,
    Phase,
    PlanInput,
    Sighting,
    Step,
    params,
)

NAME = "preflight"
LEASE_KEY = "preflight:lease"
# Drivers that act on no cloud account (no identity to check).
NOT_CLOUD = frozenset({NAME, "ledger", "manual", "ssh"})


def plan_preflight(facts: PlanInput) -> list[Step]:
    lease_id = "" if facts.lease is None or facts.lease.id is None else str(facts.lease.id)
    return [
        Step(
            key=LEASE_KEY,
            phase=Phase.PREFLIGHT,
            driver=NAME,
            action="lease-facts",
            target=facts.node.name,
            destructive=False,
            describe=N_(
                "read the lease's facts from the ledger: billing, end, days left,"
                " deposit, auto-renew"
            ),
            params=params(lease_id=lease_id),
        )
    ]


def identity_places(steps: Sequence[Step]) -> list[tuple[str, str, str]]:
    """Every (driver, endpoint, region) the plan's cloud steps call, in order of first use:
    each is a place whose answer must come from the right account."""
    places: list[tuple[str, str, str]] = []
    for s in steps:
        if s.driver in NOT_CLOUD:
            continue
        place = (s.driver, s.param("endpoint"), s.param("region"))
        if place not in places:
            places.append(place)
    return places


def identity_key(driver: str, endpoint: str, region: str, home_region: str) -> str:
    """preflight:identity:s3 at the provider's own region and the default endpoint; else
    qualified by the place: preflight:identity:s3@eu-west-1@https://s3.example.com."""
    if not endpoint and region in ("", home_region):
        return f"preflight:identity:{driver}"
    return "@".join([f"preflight:identity:{driver}", *(p for p in (region, endpoint) if p)])


def identity_steps(steps: Sequence[Step], facts: PlanInput) -> list[Step]:
    """One identity check per place a cloud step calls (driver, endpoint, region): a second
    endpoint or region is asked on its own, since an answer from one place proves nothing
    of another, and the other receives the lab's signed requests too."""
    p = facts.provider
    account = "" if p is None else p.account_id
    blocked = ",".join(sorted(facts.config.offboard.blocked_accounts))
    out = []
    for name, endpoint, region in identity_places(steps):
        shown_account = account or N_("(none recorded)")
        if region:
            want = N_("account {account} in {region}").format(account=shown_account, region=region)
        else:
            want = N_("account {account}").format(account=shown_account)
        if endpoint:
            describe = N_(
                "ask the cloud at {endpoint} who the {driver} credentials act as: must be {want}"
                " and not a blocked account"
            ).format(endpoint=endpoint, driver=name, want=want)
        else:
            describe = N_(
                "ask the cloud who the {driver} credentials act as: must be {want}"
                " and not a blocked account"
            ).format(driver=name, want=want)
        out.append(
            Step(
                key=identity_key(name, endpoint, region, "" if p is None else p.region),
                phase=Phase.PREFLIGHT,
                driver=NAME,
                action="identity",
                target=name,
                destructive=False,
                describe=describe,
                params=params(
                    driver=name,
                    endpoint=endpoint,
                    provider="" if p is None else p.name,
                    account_id=account,
                    region=region,
                    blocked=blocked,
                ),
            )
        )
    return out


class PreflightDriver:
    """The engine's checks. `drivers` is the run's whole driver table (filled in by the
    wiring after this driver is made), for the identity checks."""

    name = NAME

    def __init__(self, ledger: Ledger, config: Config, drivers: Mapping[str, Driver]) -> None:
        self.ledger = ledger
        self.config = config
        self.drivers = drivers

    async def run(self, step: Step) -> Outcome:
        if step.action == "lease-facts":
            return self._lease_facts(step)
        if step.action == "identity":
            return await self._identity(step)
        return Outcome(
            False,
            "",
            N_("preflight does not know the action '{action}'").format(action=step.action),
        )

    async def inspect(self, step: Step) -> Sighting:
        # Never called: its steps are not destructive.
        return Sighting(None, "", N_("nothing to look at: this step changes no resource"))

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        # A check has nothing to read back: it passed when it ran, now.
        return Outcome(True, N_("checked when it ran"))

    def _lease_facts(self, step: Step) -> Outcome:
        lease_id = step.param("lease_id")
        lease = None
        if lease_id:
            lease = next((le for le in self.ledger.leases() if str(le.id) == lease_id), None)
        if lease is None:
            return Outcome(
                True,
                N_("no lease recorded for {node}").format(node=step.target),
                N_("no lease: nothing to end or refund"),
                facts={"lease": "none"},
            )
        facts = lease_facts(lease, self.ledger.clock())
        lines = "\n".join(f"{k}: {v}" for k, v in facts.items())
        warn = N_("the lease's facts read from the ledger")
        if lease.auto_renew:
            warn = N_(
                "auto-renew is on: turn it off at the provider, or the lease renews and bills"
            )
        return Outcome(True, lines, warn, facts=facts)

    async def _identity(self, step: Step) -> Outcome:
        name = step.param("driver")
        want = step.param("account_id")
        region = step.param("region")
        blocked = {b for b in step.param("blocked").split(",") if b}
        blocked |= set(self.config.offboard.blocked_accounts)
        if not want:
            return Outcome(
                False,
                "",
                N_(
                    "the ledger's provider {provider} has no account id: cloud deletions are"
                    " refused until it records the account they must happen in: zuka provider"
                    " edit {quoted} --account-id ID"
                ).format(
                    provider=step.param("provider") or N_("(none)"),
                    quoted=_quoted(step.param("provider") or "NAME"),
                ),
            )
        if want in blocked:
            return Outcome(
                False,
                "",
                N_("the ledger's account {account} is on the blocklist ([offboard])").format(
                    account=want
                ),
            )
        driver = self.drivers.get(name)
        ask = getattr(driver, "identity", None)
        if ask is None:
            return Outcome(
                False,
                "",
                N_("no {driver} driver here that can say who it acts as").format(driver=name),
            )
        endpoint = step.param("endpoint")
        try:
            who: Identity = await ask(endpoint=endpoint, region=region)
        except Exception as exc:  # the cloud's answer, whatever it is, is the evidence
            said = visible(f"{type(exc).__name__}: {exc}", 2000)
            return Outcome(
                False,
                said,
                N_("asking who the {driver} credentials act as failed: {error}").format(
                    driver=name, error=said
                ),
            )
        if who.arn and who.endpoint:
            said = N_("account {account} region {region} {arn} at {endpoint}")
        elif who.arn:
            said = N_("account {account} region {region} {arn}")
        elif who.endpoint:
            said = N_("account {account} region {region} at {endpoint}")
        else:
            said = N_("account {account} region {region}")
        said = said.format(
            account=who.account_id,
            region=who.region,
            arn=who.arn,
            endpoint=visible(who.endpoint, 300),
        )
        facts = {"account_id": who.account_id, "region": who.region, "arn": who.arn}
        facts["endpoint"] = who.endpoint
        if who.account_id in blocked:
            return Outcome(
                False, said, N_("the credentials act as a blocked account, {account}").format(
                    account=who.account_id),
                facts=facts,
            )  # fmt: skip
        if who.account_id != want:
            return Outcome(
                False,
                said,
                N_(
                    "the {driver} credentials act as account {account}, but the ledger's"
                    " provider has {want}: refused"
                ).format(driver=name, account=who.account_id, want=want),
                facts=facts,
            )
        # The region the client calls, as the SDK resolved it, against the resource's.
        if region and who.region != region:
            return Outcome(
                False,
                said,
                N_(
                    "the {driver} client calls region {called}, but the ledger's"
                    " resources there are in {region}: refused"
                ).format(driver=name, called=who.region or N_("(none)"), region=region),
                facts=facts,
            )
        if endpoint and who.endpoint and not same_endpoint(who.endpoint, endpoint):
            return Outcome(
                False,
                said,
                N_("the {driver} client calls {called}, not the plan's {endpoint}: refused").format(
                    driver=name,
                    called=visible(who.endpoint, 300),
                    endpoint=visible(endpoint, 300),
                ),
                facts=facts,
            )
        return Outcome(True, said, facts=facts)


def lease_facts(lease: Lease, now: datetime) -> dict[str, str]:
    facts = {
        "lease_id": str(lease.id),
        "billing": f"{lease.billing_type.value} {lease.unit_price} {lease.currency}",
        "start": lease.start.isoformat(),
        "end": "" if lease.end is None else lease.end.isoformat(),
        "open": "yes" if open_at(lease, now) else "no",
        "auto_renew": "on" if lease.auto_renew else "off",
        "deposit": "" if lease.deposit is None else f"{lease.deposit} {lease.currency}",
        "deposit_refund": lease.deposit_refund.value,
    }
    if lease.end is not None:
        days = Decimal((lease.end - now).total_seconds()) / Decimal(86400)
        facts["days_left"] = str(days.quantize(Decimal("0.1")))
    return facts


def _quoted(name: str) -> str:
    """A provider's name as a shell word (names may hold spaces: 'ZhiSuan 智算云')."""
    return shlex.quote(visible(name, 100))
