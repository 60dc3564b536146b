"""The shapes the offboarding parts share: a plan is an ordered tuple of Steps; a Driver
carries a step out and proves it by reading back; a Planner turns ledger facts into steps.

Every value in a Step is a plain string, so that a plan hashes the same on every machine
and a stored plan can be compared with one made again from the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from leases.config.sections import Config
from leases.core.models import Lease, Node, Provider, ProviderKind, Resource


class Phase(IntEnum):
    """The order steps run in: checks, then the node's data, then the cloud (images before
    the snapshots they use, snapshots before disks, buckets), the keys last of all SSH
    steps, manual steps, and the ledger's release."""

    PREFLIGHT = 0  # lease facts, caller identity (engine)
    PROCESSES = 10  # GPU processes still running (ssh)
    FACTS = 20  # file systems' type, mount options, what shred cannot guarantee (ssh)
    SHRED = 30  # declared scratch paths, file by file (ssh)
    CLEAR = 40  # declared histories and caches (ssh)
    IMAGES = 50  # (ec2 / cmd)
    SNAPSHOTS = 60  # (ec2 / cmd)
    DISKS = 70  # (ec2 / cmd)
    BUCKETS = 80  # every version, delete marker, multipart upload, then the bucket (s3)
    REVOKE = 90  # the lab's keys out of authorized_keys: the last SSH step (ssh)
    PROVE = 95  # a fresh login with that key fails (ssh)
    MANUAL = 100  # what a person does in a console, confirmed, then verified (manual)
    RELEASE = 110  # the ledger: lease ended, deposit refund pending (engine)


@dataclass(frozen=True)
class Step:
    key: str  # unique in its plan and stable across re-plans: "shred:/root/autodl-tmp/x"
    phase: Phase
    driver: str  # "ssh" | "s3" | "ec2" | "cmd" | "manual" | "ledger"
    action: str  # what the driver does: "shred", "delete-snapshot", "revoke-key", ...
    target: str  # the thing as the ledger names it: a path, a snapshot id, a bucket
    destructive: bool
    describe: str  # one line a person reads in the plan: the command or the API call
    # Everything the driver needs, sorted by name; strings only (hashed with the plan).
    params: tuple[tuple[str, str], ...] = ()
    resource_id: int | None = None  # the ledger's resource this step deletes, if any

    def param(self, name: str, default: str = "") -> str:
        return dict(self.params).get(name, default)


def params(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


@dataclass(frozen=True)
class Outcome:
    """What one run or verify of a step gave. For run: done means the action took place
    or the thing was already gone. For verify: done means proven gone (read back: not
    found / 404 / the file no longer exists / the login was refused)."""

    done: bool
    output: str  # what the tool or API said: evidence, stored as it came (shown via visible)
    detail: str = ""  # one line for a person: why not done, what to do
    # Facts worth keeping beside the evidence (file system type, account id ...).
    facts: Mapping[str, str] = field(default_factory=dict)
    # run only: stop the checklist here until the user says go on (GPU processes running).
    needs_consent: bool = False


@dataclass(frozen=True)
class Sighting:
    """What a look at one step's target found, before anything is done to it: whether it
    exists, as the driver saw it in the account and place the step names. A deletion is
    called verified only if its target was once seen to exist and is then seen gone: "not
    found" at first contact is a typo, a wrong region or another account as often as it is
    a thing already deleted."""

    exists: bool | None  # None: could not tell (unreachable, access denied, no answer)
    output: str  # what the tool or API said, as it came (shown via visible)
    detail: str = ""  # one line for a person: what is there, or why it could not tell
    # What a person checks before confirming: size, files, versions, created time, and
    # where it was looked for (account, region, endpoint, host).
    facts: Mapping[str, str] = field(default_factory=dict)


class Driver(Protocol):
    name: str  # the Step.driver value it serves

    # Look at a destructive step's target without changing anything (`zuka offboard
    # --inspect`, and before each deletion). Non-destructive steps are never inspected.
    async def inspect(self, step: Step) -> Sighting: ...

    async def run(self, step: Step) -> Outcome: ...

    # patient: keep reading back while a cloud finishes a deletion later (up to
    # [offboard] verify_timeout_s); False: one read (a recheck, a read before acting again).
    async def verify(self, step: Step, *, patient: bool = True) -> Outcome: ...


@dataclass(frozen=True)
class PlanInput:
    """What a planner reads: the ledger's facts about one node, nothing live."""

    node: Node
    provider: Provider | None
    lease: Lease | None  # the lease billing now, or the latest one
    # The resources the plan deletes: that lease's not yet verified deleted, and those of
    # the node's other leases the user included by id.
    resources: Sequence[Resource]
    config: Config
    # The node's other resources not yet verified deleted, recorded on its other leases:
    # listed (NOT deleted, with their lease), never selected unless included; by id, the
    # reason the user gave to keep one.
    others: Sequence[tuple[Resource, Lease]] = ()
    kept: Mapping[int, str] = field(default_factory=dict)
    # The ids in `resources` that are there because the user included them.
    included: frozenset[int] = frozenset()

    @property
    def provider_kind(self) -> ProviderKind | None:
        return None if self.provider is None else self.provider.kind


class Planner(Protocol):
    def __call__(self, facts: PlanInput) -> list[Step]: ...


@dataclass(frozen=True)
class Identity:
    """Who a cloud driver's credentials act as, asked of the cloud itself (STS
    GetCallerIdentity, `aliyun sts GetCallerIdentity`...), for preflight to compare with
    the ledger's provider record (account_id, region) and the configured blocklist."""

    account_id: str
    region: str  # the region the client calls, as the SDK resolved it (not what was asked)
    arn: str = ""  # or the cloud's own name for the caller, shown in the evidence
    endpoint: str = ""  # the URL the client calls; "" for a CLI (its own default)


class CloudDriver(Driver, Protocol):
    # Who the credentials act as at one place a step will call: the step's endpoint (""
    # for the SDK's or CLI's default) and region. Preflight asks once per such place.
    async def identity(self, endpoint: str = "", region: str = "") -> Identity: ...
