"""A cloud instance's state, read by the collector, recorded as stops (leases.ledger.stops).

A node may name its cloud instance (Node.instance_id, and instance_endpoint for an
EC2-compatible API that is not AWS's). Where its provider's cloud speaks EC2 (an endpoint
given, or a provider of kind cloud that no CLI template serves: the rule offboarding
follows to pick its EC2 driver, leases.offboard.cloud.plan), DescribeInstances says whether it
runs, in the provider's region with the provider's credentials (leases.offboard
.cloud_access: the one credentials path).

decide() is the rule, pure: a stopped (or stopping) instance with no open stop gets one,
source "ec2", from when the API says the state began (StateTransitionReason's time, read
as hostile text) else when it was seen, never before the lease's start nor before a
recorded stop's end; a running (or pending) instance whose open stop the collector
recorded is resumed (from its LaunchTime, which EC2 sets at each start, else when seen).
A stop recorded by hand is never resumed nor doubled. A call that failed, was denied,
did not find the instance, or answered for another account changes nothing and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from leases.config.sections import Config
from leases.core import cloudids as cloud_ids
from leases.core.clock import Clock
from leases.core.errors import InputError
from leases.core.models import Lease, Node, NodeState, Provider, ProviderKind
from leases.core.textsafe import visible
from leases.ledger.stops import LeaseStop, covering
from leases.ledger.store import Ledger
from leases.telemetry.pacing import Every

SOURCE = "ec2"  # the source of a stop the collector recorded from EC2's answer
DEFAULT_EVERY_S = 300.0
STOPPED = frozenset({"stopped", "stopping"})
RUNNING = frozenset({"running", "pending"})
_STATES = STOPPED | RUNNING | {"shutting-down", "terminated"}
_BATCH = 100  # instance ids per DescribeInstances call (a filter takes at most 200 values)
# "User initiated (2026-11-02 03:04:05 GMT)": the time in parentheses, UTC.
# [0-9], never \d: a full-width or Arabic-Indic digit is not EC2's.
_REASON_TIME = re.compile(
    r"\(([0-9]{4})-([0-9]{2})-([0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?: (?:GMT|UTC))?\)"
)


@dataclass(frozen=True)
class Target:
    """One node's instance, and where and as whom to read it."""

    node: Node
    instance_id: str
    provider: Provider
    region: str
    endpoint: str  # "" for AWS's own endpoint of the region


@dataclass(frozen=True)
class Seen:
    """What one read said of an instance: its state and since when (as far as the API says),
    or why nothing was read."""

    target: Target
    seen_at: datetime
    state: str = ""
    since: datetime | None = None
    problem: str = ""


@dataclass(frozen=True)
class Decision:
    node: Node
    action: Literal["stop", "resume"]
    at: datetime


def transition_time(reason: object) -> datetime | None:
    """The UTC time in StateTransitionReason's parentheses, or None: hostile text, read
    bounded, and only a real date and time."""
    if not isinstance(reason, str):
        return None
    found = _REASON_TIME.search(reason[:300])
    if found is None:
        return None
    try:
        y, mo, d, h, mi, sec = (int(g) for g in found.groups())
        return datetime(y, mo, d, h, mi, sec, tzinfo=UTC)
    except ValueError:
        return None


def targets(
    nodes: Sequence[Node], providers: Mapping[str, Provider], ec2_serves: Callable[[Provider], bool]
) -> tuple[list[Target], list[tuple[Node, str]]]:
    """The active nodes whose instance can be read through EC2, and the others that name an
    instance with why they cannot be (no provider, no region, not EC2, an id EC2 never gives)."""
    found: list[Target] = []
    skipped: list[tuple[Node, str]] = []
    for node in nodes:
        if node.state is not NodeState.ACTIVE or not node.instance_id or node.problem:
            continue
        provider = providers.get(node.provider or "")
        try:
            if provider is None:
                raise InputError("provider", node.provider, "the node has no provider to ask")
            endpoint = cloud_ids.endpoint(node.instance_endpoint)
            if not endpoint and not ec2_serves(provider):
                raise InputError(
                    "provider",
                    provider.name,
                    "its cloud is not read through EC2 (give --instance-endpoint for an"
                    " EC2-compatible API)",
                )
            region = cloud_ids.region(provider.region)
            if not region:
                raise InputError("region", provider.name, "EC2 needs the provider's region")
            instance = cloud_ids.ec2_instance_id(node.instance_id)
        except InputError as exc:
            skipped.append((node, str(exc)))
            continue
        found.append(Target(node, instance, provider, region, endpoint))
    return found, skipped


def decide(seen: Seen, stops: Sequence[LeaseStop], leases: Sequence[Lease]) -> Decision | None:
    """What to record for one reading, given the node's stops and leases (by start)."""
    if seen.problem or not seen.state:
        return None
    node = seen.target.node
    opened = next((s for s in stops if s.end is None), None)
    if seen.state in STOPPED:
        if opened is not None:
            return None  # recorded already (by hand or by us): never doubled
        now_lease = covering(leases, seen.seen_at)
        if now_lease is None:
            return None  # not rented now: nothing bills, nothing to record
        at = seen.since if seen.since is not None and seen.since <= seen.seen_at else seen.seen_at
        if covering(leases, at) is None:
            at = max(at, now_lease.start)  # stopped before the lease began: from its start
        ends = [s.end for s in stops if s.end is not None]
        if ends and max(ends) > at:
            at = max(ends)  # a recorded stop says it ran until then: never overridden
        return Decision(node, "stop", at)
    if seen.state in RUNNING:
        if opened is None or opened.source != SOURCE:
            return None  # a stop recorded by hand is a person's word: left alone
        since = seen.since
        at = since if since is not None and opened.start < since <= seen.seen_at else seen.seen_at
        if at <= opened.start:
            return None
        return Decision(node, "resume", at)
    return None


def _described(client: Any, ids: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """(owner account, instance) for every instance the answer lists, all pages."""
    out: list[tuple[str, dict[str, Any]]] = []
    token: str | None = None
    for _ in range(50):  # a bound on pages: an endpoint that always answers a token
        kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-id", "Values": list(ids)}]}
        if token:
            kwargs["NextToken"] = token
        answer = client.describe_instances(**kwargs)
        for reservation in answer.get("Reservations") or []:
            owner = str(reservation.get("OwnerId") or "")
            listed = reservation.get("Instances") or []
            out.extend((owner, i) for i in listed if isinstance(i, dict))
        token = answer.get("NextToken") or None
        if not token:
            break
    return out


def _seen(target: Target, owner: str, instance: Mapping[str, Any], at: datetime) -> Seen:
    want = target.provider.account_id
    if want and owner and owner != want:
        problem = f"answered by account {visible(owner, 64)}, not the provider's {want}"
        return Seen(target, at, problem=problem)
    state = str((instance.get("State") or {}).get("Name") or "")
    if state not in _STATES:
        return Seen(target, at, problem=f"an unknown state {visible(state, 40)!r}")
    since: datetime | None = None
    if state in STOPPED:
        since = transition_time(instance.get("StateTransitionReason"))
    elif isinstance(instance.get("LaunchTime"), datetime):
        launched: datetime = instance["LaunchTime"]
        since = launched.astimezone(UTC) if launched.tzinfo is not None else None
    return Seen(target, at, state, since)


def read(targets: Sequence[Target], environ: Mapping[str, str], clock: Clock) -> list[Seen]:
    """DescribeInstances for every target (blocking: run it in a thread), by the ids and
    nothing else; one call per place (provider, endpoint, region) and batch of ids. A record
    counts only by its own InstanceId (an endpoint that ignores the filter lists others)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from leases.offboard.cloud.access import (
        BotoAccount,
        CloudError,
        check_place,
        client_error,
        credentials,
    )

    places: dict[tuple[str, str, str], list[Target]] = {}
    for t in targets:
        places.setdefault((t.provider.name, t.endpoint, t.region), []).append(t)
    out: list[Seen] = []
    for (_, endpoint, region), group in places.items():
        provider = group[0].provider
        account: BotoAccount | None = None
        for start in range(0, len(group), _BATCH):
            batch = group[start : start + _BATCH]
            try:
                if account is None:
                    creds = credentials(provider.credential_ref)
                    account = BotoAccount(creds, region=region, environ=environ)
                client = account.client("ec2", endpoint, region)
                check_place(client, region=region, endpoint=endpoint)
                listed = _described(client, [t.instance_id for t in batch])
            except (BotoCoreError, ClientError, CloudError, ValueError) as exc:
                code, message, _ = client_error(exc)
                problem = f"DescribeInstances failed: {code or type(exc).__name__} {message}"
                out.extend(Seen(t, clock(), problem=problem.strip()) for t in batch)
                continue
            at = clock()
            by_id: dict[str, tuple[str, dict[str, Any]]] = {}
            for owner, instance in listed:
                by_id.setdefault(str(instance.get("InstanceId") or ""), (owner, instance))
            for t in batch:
                if t.instance_id not in by_id:
                    problem = f"instance {t.instance_id} not found in region {region}"
                    out.append(Seen(t, at, problem=problem))
                else:
                    out.append(_seen(t, *by_id[t.instance_id], at))
    return out


def ec2_serves_for(config: Config) -> Callable[[Provider], bool]:
    """Whether a provider's instances are read through EC2 at the SDK's endpoint: a provider
    of kind cloud that no CLI template serves (as offboarding picks its EC2 driver)."""
    from leases.offboard.cloud.plan import template_of, templates_for

    templates = templates_for(config)
    return lambda p: p.kind is ProviderKind.CLOUD and template_of(p, templates) is None


def apply(ledger: Ledger, seen: Sequence[Seen], log: logging.Logger) -> list[Decision]:
    """Record what the readings say, node by node; a refusal (a person recorded something
    in between) is logged and changes nothing."""
    done: list[Decision] = []
    for s in seen:
        node = s.target.node
        if s.problem:
            log.warning(
                "cloud state of %s (%s): %s", visible(node.name), s.target.instance_id, s.problem
            )
            continue
        try:
            stops = ledger.stops(node)
            decision = decide(s, stops, ledger.leases(node))
            if decision is None:
                continue
            if decision.action == "stop":
                ledger.stop_node(node.name, decision.at, source=SOURCE)
            else:
                ledger.resume_node(node.name, decision.at, source=SOURCE)
        except InputError as exc:
            log.warning("cloud state of %s: not recorded: %s", visible(node.name), exc)
            continue
        log.info("%s: recorded %s at %s (%s)", visible(node.name), decision.action,
                 decision.at.isoformat(), SOURCE)  # fmt: skip
        done.append(decision)
    return done


async def run_once(
    ledger: Ledger,
    config: Config,
    *,
    clock: Clock,
    environ: Mapping[str, str] | None = None,
    log: logging.Logger | None = None,
) -> list[Decision]:
    """Read every readable instance once and record what changed. Never raises for a
    cloud's answer; the reads run in a thread (boto3 blocks), the writes here."""
    log = log or logging.getLogger(__name__)
    env = os.environ if environ is None else environ
    nodes = ledger.nodes([NodeState.ACTIVE])
    if not any(n.instance_id for n in nodes):
        return []  # no boto3 import, no template reading, for a fleet without instances
    providers = {p.name: p for p in ledger.providers()}
    found, skipped = targets(nodes, providers, ec2_serves_for(config))
    for node, why in skipped:
        log.info("cloud state of %s not read: %s", visible(node.name), why)
    if not found:
        return []
    seen = await asyncio.to_thread(read, found, env, clock)
    return apply(ledger, seen, log)


class CloudWatch:
    """run_once every `every_s` seconds at most, beside the poll (as AlertWatch is)."""

    def __init__(
        self,
        ledger: Ledger,
        config: Config,
        *,
        clock: Clock,
        every_s: float = DEFAULT_EVERY_S,
        environ: Mapping[str, str] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self.ledger = ledger
        self.config = config
        self.clock = clock
        self.every_s = every_s
        self._pace = Every(every_s, monotonic)
        self.environ = environ
        self.log = log or logging.getLogger(__name__)
        self.runs = 0

    def due(self) -> bool:
        return self._pace.due()

    async def tick(self) -> list[Decision]:
        """run_once if due; never raises (a failure is logged and tried next time)."""
        if not self._pace.take():
            return []
        try:
            done = await run_once(
                self.ledger, self.config, clock=self.clock, environ=self.environ, log=self.log
            )
        except Exception:
            self.log.exception("reading cloud instance states failed")
            return []
        self.runs += 1
        return done

    async def run(self, stop: asyncio.Event) -> None:
        """tick every `every_s` seconds until `stop` is set (0: never), beside the poll as
        alerts are: a slow or failing cloud never holds a reading up. What `zuka collect`
        and a dashboard that polls in its place both run."""
        while self.every_s and not stop.is_set():
            await self.tick()  # never raises
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)
