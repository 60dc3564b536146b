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
from the provider record. identity(endpoint, region) asks STS GetCallerIdentity at that
endpoint and region, or the template's whoami command in that region; preflight asks it at
every (driver, endpoint, region) the plan's steps call.

Each step is called in its resource's region (else the provider's): a region is needed for
EC2 and the CLIs, and for S3 at AWS. A plan never sends a step to the SDK's default endpoint
while its other S3/EC2 steps name endpoints: that is refused at plan time (a resource
recorded without its place), never guessed. S3 steps carry the provider's account id as
ExpectedBucketOwner, except at a CLI template's store (OSS, COS, OBS), which does not take
it: the plan says there that ownership is proven by the identity check only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence

from leases.config.sections import Config
from leases.core import cloudids as cloud_ids
from leases.core import valuewords
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.models import Provider, ProviderKind, Resource, ResourceKind
from leases.core.textsafe import visible
from leases.offboard.cloud.access import BotoAccount, Credentials, Timing, credentials
from leases.offboard.cloud.cmd import (
    CmdDriver,
    CommandRunner,
    Template,
    load_templates,
    run_command,
)
from leases.offboard.cloud.ec2 import Ec2Driver
from leases.offboard.cloud.s3 import S3Driver
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


def _located(what: str, region: str, endpoint: str) -> str:
    """what, then where it is called: "... (region R, endpoint E)" (stored English). One
    message each, with its words around what (leases.core.retold says a stored text again
    by a message's words: "{what} ({where})" has none)."""
    if region and endpoint:
        return N_("{what} (region {region}, endpoint {endpoint})").format(
            what=what, region=region, endpoint=endpoint
        )
    if region:
        return N_("{what} (region {region})").format(what=what, region=region)
    if endpoint:
        return N_("{what} (endpoint {endpoint})").format(what=what, endpoint=endpoint)
    return what


def _need_region(region: str, r: Resource, why: str) -> str:
    if not region:
        raise InputError(
            "region",
            "",
            _("{kind} {id}: {why} needs a region (the resource's or the provider's)").format(
                kind=valuewords.word(r.kind), id=r.native_id, why=why
            ),
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
        account = provider.account_id if provider else ""
        if r.kind in (ResourceKind.BUCKET, ResourceKind.BUCKET_PREFIX):
            addressing = "path" if endpoint else ""
            if not endpoint and template is not None and template.s3_endpoint:
                region = _need_region(
                    region, r, _("{template}'s object storage").format(template=template.name)
                )
                endpoint = cloud_ids.endpoint(template.s3_endpoint.replace("{region}", region))
                addressing = template.s3_addressing
            if not endpoint:
                _need_region(region, r, _("S3 at the SDK's default endpoint"))
            bucket, _slash, prefix = native.partition("/")
            what = (
                N_(
                    "every object version, delete marker and unfinished upload under s3://{native}"
                ).format(native=native)
                if prefix
                else N_(
                    "every object version, delete marker and unfinished upload in s3://{bucket}/,"
                    " then DeleteBucket {bucket}"
                ).format(bucket=bucket)
            )
            # Every S3 call carries ExpectedBucketOwner: a bucket of that name owned by
            # another account the credentials can reach is refused by the store, not
            # emptied. OSS, COS and OBS (the CLI templates' stores) do not take it.
            owner = "" if template is not None else account
            proof = (
                N_("bucket owner {owner} required on every call (ExpectedBucketOwner)").format(
                    owner=owner
                )
                if owner
                else N_(
                    "{store} store does not check a bucket owner: ownership is proven by the"
                    " identity check only"
                ).format(store=template.name if template else "this")
            )
            steps.append(
                Step(
                    key=key,
                    phase=_PHASES[r.kind],
                    driver="s3",
                    action=_ACTIONS[r.kind],
                    target=native,
                    destructive=True,
                    describe=N_("S3: delete {what}; {proof}").format(
                        what=_located(what, region, endpoint), proof=proof
                    ),
                    params=params(
                        **common, endpoint=endpoint, addressing=addressing, bucket_owner=owner
                    ),
                    resource_id=r.id,
                )
            )
        elif template is not None and not endpoint:
            if r.kind not in template.actions:
                raise InputError(
                    "kind",
                    str(r.kind),
                    _("the {template} template cannot delete a {kind}").format(
                        template=template.name, kind=r.kind
                    ),
                )
            region = _need_region(region, r, _("the {template} CLI").format(template=template.name))
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
            _need_region(region, r, _("EC2"))
            steps.append(
                Step(
                    key=key,
                    phase=_PHASES[r.kind],
                    driver="ec2",
                    action=_ACTIONS[r.kind],
                    target=native,
                    destructive=True,
                    describe=_located(f"EC2 {_EC2_CALLS[r.kind]}={native}", region, endpoint),
                    params=params(**common, endpoint=endpoint, account_id=account),
                    resource_id=r.id,
                )
            )
    _refuse_implicit_default(steps)
    return sorted(steps, key=lambda s: (s.phase, s.key))


def _refuse_implicit_default(steps: Sequence[Step]) -> None:
    """A plan whose S3/EC2 steps name endpoints may not send one of them to the SDK's
    default endpoint (AWS) just because its resource names none: that is a resource recorded
    without its place, and the default would receive the lab's signed requests and answer
    "not found" for a thing that lives elsewhere. Refused, in words, rather than guessed."""
    boto = [s for s in steps if s.driver in ("s3", "ec2")]
    named = sorted({s.param("endpoint") for s in boto} - {""})
    bare = [s for s in boto if not s.param("endpoint")]
    if named and bare:
        s = bare[0]
        raise InputError(
            "endpoint",
            "",
            _(
                "{kind} {target} has no endpoint while the plan's other cloud resources are at"
                " {endpoints}: its deletion would go to the SDK's default (AWS) endpoint. Record"
                " each cloud resource with the --endpoint it lives at"
                " (https://s3.REGION.amazonaws.com for AWS's own)"
            ).format(kind=s.param("kind"), target=s.target, endpoints=", ".join(named)),
        )


def _same_keys_for_buckets(
    template: Template | None, creds: Credentials, provider: Provider | None
) -> None:
    """Bucket calls go through boto3; with a CLI template the identity check is the CLI's
    whoami. A profile name (or the default) names two different key stores there (the CLI's
    own config, boto3's AWS_* variables and ~/.aws): the check would prove one account while
    another's keys act, at a store that takes no ExpectedBucketOwner. Only env:PREFIX hands
    both the same keys."""
    if template is None or creds.env_prefix:
        return
    fix = (
        _(
            "give the provider credential_ref env:PREFIX (PREFIX_ACCESS_KEY_ID,"
            " PREFIX_SECRET_ACCESS_KEY) so that both use the same keys"
        )
        if template.env_access_key and template.env_secret_key
        else _(
            "the {template} template takes keys from a profile only, so its buckets"
            " cannot be deleted with proven keys: delete them in the console and record them"
            " deleted and verified by hand"
        ).format(template=template.name)
    )
    raise InputError(
        "credential_ref",
        visible(provider.credential_ref if provider else "", 80) or _("(the default)"),
        _(
            "{template}'s buckets are called through boto3, but who the keys act as is"
            " asked of the {program} CLI, which reads its own profile: {fix}"
        ).format(template=template.name, program=template.program, fix=fix),
    )


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
    OBS have no STS GetCallerIdentity), in the region asked; otherwise STS at the endpoint
    and region asked (preflight asks at every place a step calls).
    """
    environ = os.environ if environ is None else environ
    timing = timing or Timing(timeout_s=config.offboard.verify_timeout_s)
    templates = templates_for(config) if templates is None else templates
    template = template_of(provider, templates)
    creds = credentials(provider.credential_ref if provider else "")
    region = cloud_ids.region(provider.region if provider else "")
    used = {s.driver for s in steps}
    account = BotoAccount(creds, region=region, environ=environ)
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
    if cmd is not None and "s3" in used:
        _same_keys_for_buckets(template, creds, provider)
    if "cmd" in used:
        if cmd is None:
            name = provider.name if provider else ""
            raise InputError(
                "provider", name, _("the plan has CLI steps but no template serves it")
            )
        drivers.append(cmd)
    if "ec2" in used:
        drivers.append(Ec2Driver(account, timing, identity_from=who))
    if "s3" in used:
        drivers.append(S3Driver(account, timing, identity_from=who))
    return drivers
