"""The cloud part of an offboarding plan, and the drivers that carry it out.

plan_cloud turns the ledger's cloud resources of the lease (images, snapshots, disks,
buckets, bucket prefixes: those ids and nothing else) into steps:
- buckets and bucket prefixes: the "s3" driver, at the resource's endpoint, else the
  provider's CLI template's S3-compatible endpoint for the region (OSS, COS, OBS), else AWS;
- images, snapshots, disks: the "cmd" driver with the provider's CLI template (a provider
  named aliyun / tencent / huawei...: see leases/data/cloud/), else the "ec2" driver at the
  resource's endpoint, else AWS EC2 (only for a provider of kind cloud).
A resource of a platform or colo with neither endpoint nor template gets no cloud step:
there is no API to call, the manual steps cover it.

cloud_drivers builds the drivers for one provider: credentials as leases.offboard
.cloud_access says (credential_ref: a profile, env:PREFIX, or the SDK's default), region
from the provider record. identity() asks STS GetCallerIdentity (at the steps' endpoint for
an EC2/S3-compatible cloud), or the template's whoami command.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from leases.config import Config
from leases.errors import InputError
from leases.models import Provider, ProviderKind, Resource, ResourceKind
from leases.offboard import cloud_ids
from leases.offboard.cloud_access import BotoAccount, Timing, credentials
from leases.offboard.cloud_cmd import (
    CmdDriver,
    CommandRunner,
    Template,
    load_templates,
    run_command,
)
from leases.offboard.cloud_ec2 import Ec2Driver
from leases.offboard.cloud_s3 import S3Driver
from leases.offboard.steps import CloudDriver, Phase, PlanInput, Step, params

_PHASES = {
    ResourceKind.IMAGE: Phase.IMAGES,
    ResourceKind.SNAPSHOT: Phase.SNAPSHOTS,
    ResourceKind.DISK: Phase.DISKS,
    ResourceKind.BUCKET: Phase.BUCKETS,
    ResourceKind.BUCKET_PREFIX: Phase.BUCKETS,
}
_ACTIONS = {
    ResourceKind.IMAGE: "delete-image",
    ResourceKind.SNAPSHOT: "delete-snapshot",
    ResourceKind.DISK: "delete-disk",
    ResourceKind.BUCKET: "delete-bucket",
    ResourceKind.BUCKET_PREFIX: "empty-prefix",
}
_EC2_CALLS = {
    ResourceKind.IMAGE: "DeregisterImage ImageId",
    ResourceKind.SNAPSHOT: "DeleteSnapshot SnapshotId",
    ResourceKind.DISK: "DeleteVolume VolumeId",
}


def templates_for(config: Config) -> dict[str, Template]:
    """The packaged CLI templates, and the user's in a `cloud/` folder beside the config."""
    return load_templates(None if config.path is None else config.path.parent / "cloud")


def template_of(provider: Provider | None, templates: Mapping[str, Template]) -> Template | None:
    if provider is None:
        return None
    return next((t for t in templates.values() if t.serves(provider.name)), None)


def _where(region: str, endpoint: str) -> str:
    parts = [f"region {region}" if region else "", f"endpoint {endpoint}" if endpoint else ""]
    shown = ", ".join(p for p in parts if p)
    return f" ({shown})" if shown else ""


def _need_region(region: str, r: Resource, why: str) -> str:
    if not region:
        raise InputError(
            "region",
            "",
            f"{r.kind} {r.native_id}: {why} needs a region (the resource's or the provider's)",
        )
    return region


def plan_cloud(facts: PlanInput, templates: Mapping[str, Template] | None = None) -> list[Step]:
    """One step per cloud resource of the lease, in phase order (images, snapshots, disks,
    buckets), then by key. A refused id, region or endpoint raises InputError naming it:
    the plan is not made."""
    provider = facts.provider
    templates = templates_for(facts.config) if templates is None else templates
    template = template_of(provider, templates)
    is_cloud = provider is not None and provider.kind is ProviderKind.CLOUD
    steps: list[Step] = []
    for r in facts.resources:
        if r.kind not in _PHASES:
            continue
        native = cloud_ids.native_id(r.kind, r.native_id)
        region = cloud_ids.region(r.region or (provider.region if provider else ""))
        endpoint = cloud_ids.endpoint(r.endpoint)
        if not (endpoint or template or is_cloud):
            continue
        key = f"{_ACTIONS[r.kind]}:{region + '/' if region else ''}{native}"
        common = dict(kind=str(r.kind), native_id=native, region=region)
        if r.kind in (ResourceKind.BUCKET, ResourceKind.BUCKET_PREFIX):
            addressing = "path" if endpoint else ""
            if not endpoint and template is not None and template.s3_endpoint:
                region = _need_region(region, r, f"{template.name}'s object storage")
                endpoint = cloud_ids.endpoint(template.s3_endpoint.replace("{region}", region))
                addressing = template.s3_addressing
            bucket, _, prefix = native.partition("/")
            what = (
                f"every object version, delete marker and unfinished upload under s3://{native}"
                if prefix
                else f"every object version, delete marker and unfinished upload in s3://{bucket}/,"
                f" then DeleteBucket {bucket}"
            )
            steps.append(
                Step(
                    key=key,
                    phase=_PHASES[r.kind],
                    driver="s3",
                    action=_ACTIONS[r.kind],
                    target=native,
                    destructive=True,
                    describe=f"S3: delete {what}{_where(region, endpoint)}",
                    params=params(**common, endpoint=endpoint, addressing=addressing),
                    resource_id=r.id,
                )
            )
        elif template is not None and not endpoint:
            if r.kind not in template.actions:
                raise InputError(
                    "kind", str(r.kind), f"the {template.name} template cannot delete a {r.kind}"
                )
            region = _need_region(region, r, f"the {template.name} CLI")
            creds = credentials(provider.credential_ref if provider else "")
            argv = template.argv(
                template.actions[r.kind].delete, native=native, region=region, creds=creds
            )
            steps.append(
                Step(
                    key=key,
                    phase=_PHASES[r.kind],
                    driver="cmd",
                    action=_ACTIONS[r.kind],
                    target=native,
                    destructive=True,
                    describe=shlex.join(argv),
                    params=params(**common, template=template.name),
                    resource_id=r.id,
                )
            )
        else:
            steps.append(
                Step(
                    key=key,
                    phase=_PHASES[r.kind],
                    driver="ec2",
                    action=_ACTIONS[r.kind],
                    target=native,
                    destructive=True,
                    describe=f"EC2 {_EC2_CALLS[r.kind]}={native}{_where(region, endpoint)}",
                    params=params(**common, endpoint=endpoint),
                    resource_id=r.id,
                )
            )
    return sorted(steps, key=lambda s: (s.phase, s.key))


def cloud_drivers(
    provider: Provider | None,
    steps: Sequence[Step],
    config: Config,
    *,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner = run_command,
    timing: Timing | None = None,
    templates: Mapping[str, Template] | None = None,
) -> list[CloudDriver]:
    """The drivers the plan's cloud steps need, acting as the provider's credentials.

    With a CLI template, identity() is the template's whoami for every driver (OSS, COS and
    OBS have no STS GetCallerIdentity); otherwise STS, at the one endpoint the steps use
    (an EC2/S3-compatible cloud), or AWS's own.
    """
    environ = os.environ if environ is None else environ
    timing = timing or Timing(timeout_s=config.offboard.verify_timeout_s)
    templates = templates_for(config) if templates is None else templates
    template = template_of(provider, templates)
    creds = credentials(provider.credential_ref if provider else "")
    region = cloud_ids.region(provider.region if provider else "")
    used = {s.driver for s in steps}
    endpoints = sorted({s.param("endpoint") for s in steps if s.driver in ("s3", "ec2")} - {""})
    account = BotoAccount(
        creds,
        region=region,
        environ=environ,
        sts_endpoint=endpoints[0] if len(endpoints) == 1 and template is None else "",
    )
    drivers: list[CloudDriver] = []
    cmd: CmdDriver | None = None
    if template is not None:
        cmd = CmdDriver(
            templates,
            creds,
            region=region,
            timing=timing,
            environ=environ,
            runner=runner,
            whoami_template=template.name,
        )
    who = None if cmd is None else cmd.identity
    if "cmd" in used:
        if cmd is None:
            name = provider.name if provider else ""
            raise InputError("provider", name, "the plan has CLI steps but no template serves it")
        drivers.append(cmd)
    if "ec2" in used:
        drivers.append(Ec2Driver(account, timing, identity_from=who))
    if "s3" in used:
        drivers.append(S3Driver(account, timing, identity_from=who))
    return drivers
