"""Where cloud offboarding looks and acts: identity proven at every (driver, endpoint,
region) a step calls, never the SDK's default endpoint by accident, the bucket's owner bound
on every S3 call, the region the client really calls, and inspect (what is there before a
deletion). Two accounts on one moto server (a proxy in front of it answers as the other
account: moto's x-moto-account-id) and two endpoints (moto itself, and that proxy)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from leases.config.sections import Config, OffboardConfig
from leases.core.errors import InputError
from leases.core.models import Resource, ResourceKind
from leases.offboard.cloud.plan import cloud_drivers, plan_cloud
from leases.offboard.cloud.s3 import S3Driver
from leases.offboard.preflight import PreflightDriver, identity_steps
from leases.offboard.steps import CloudDriver, Driver, Outcome, PlanInput, Step
from tests.support.cloudfixtures import (
    ENVIRON,
    MOTO_ACCOUNT,
    REGION,
    FakeClock,
    RecordingProxy,
    all_versions,
    aws_provider,
    client,
    facts,
    timing,
    versioned_bucket,
)

OTHER_ACCOUNT = "111111111111"


@pytest.fixture
def other(endpoint: str) -> Iterator[RecordingProxy]:
    """A second endpoint: the same moto behind another URL, answering as another account
    whatever credentials sign the request."""
    with RecordingProxy(endpoint, as_account=OTHER_ACCOUNT) as proxy:
        yield proxy


def other_client(service: str, endpoint: str) -> Any:
    """A client of the other account (moto: x-moto-account-id on every request)."""
    made = client(service, endpoint)

    def tag(request: Any, **_: Any) -> None:
        request.headers["x-moto-account-id"] = OTHER_ACCOUNT

    made.meta.events.register("before-sign", tag)
    return made


def resource(kind: ResourceKind, native: str, endpoint: str = "", region: str = "") -> Resource:
    return Resource(lease_id=1, kind=kind, native_id=native, endpoint=endpoint, region=region)


def with_ids(resources: Sequence[Resource]) -> list[Resource]:
    return [Resource(**{**r.__dict__, "id": i + 1}) for i, r in enumerate(resources)]


def drivers_for(plan_input: PlanInput, steps: Sequence[Step]) -> dict[str, CloudDriver]:
    found = cloud_drivers(
        plan_input.provider, steps, plan_input.config, environ=ENVIRON, timing=timing(FakeClock())
    )
    return {d.name: d for d in found}


async def preflight(plan_input: PlanInput, steps: Sequence[Step]) -> list[tuple[Step, Outcome]]:
    """Every identity check the plan needs, run by the preflight driver against the real
    cloud drivers (the ledger is not needed for these)."""
    table: dict[str, Driver] = {}
    checker = PreflightDriver(None, plan_input.config, table)  # type: ignore[arg-type]
    table.update(drivers_for(plan_input, steps))
    return [(s, await checker.run(s)) for s in identity_steps(steps, plan_input)]


# -- identity at every place --------------------------------------------------------------


async def test_identity_is_asked_at_every_endpoint_and_fails_where_another_account_answers(
    endpoint: str, other: RecordingProxy
) -> None:
    """A bucket at the lab's endpoint, a snapshot at an endpoint that acts for another
    account: one check per place; the second names the account that answered there."""
    plan_input = facts(
        with_ids(
            [
                resource(ResourceKind.BUCKET, "lab-ckpt", endpoint),
                resource(ResourceKind.SNAPSHOT, "snap-0abc", other.endpoint),
            ]
        ),
        provider=aws_provider(),
    )
    steps = plan_cloud(plan_input)
    checked = await preflight(plan_input, steps)
    places = {(s.param("driver"), s.param("endpoint")): out for s, out in checked}
    assert set(places) == {("s3", endpoint), ("ec2", other.endpoint)}
    assert places[("s3", endpoint)].done, places[("s3", endpoint)]
    wrong = places[("ec2", other.endpoint)]
    assert not wrong.done
    assert OTHER_ACCOUNT in wrong.detail and MOTO_ACCOUNT in wrong.detail
    assert any("GetCallerIdentity" in s for s in other.seen)


async def test_a_blocked_account_is_refused_at_whichever_endpoint_answers_as_it(
    endpoint: str, other: RecordingProxy
) -> None:
    plan_input = facts(
        with_ids(
            [
                resource(ResourceKind.BUCKET, "lab-ckpt", endpoint),
                resource(ResourceKind.BUCKET, "lab-data", other.endpoint),
            ]
        ),
        provider=aws_provider(),
    )
    plan_input = PlanInput(
        **{
            **plan_input.__dict__,
            "config": Config(offboard=OffboardConfig(blocked_accounts=(OTHER_ACCOUNT,))),
        }
    )
    checked = await preflight(plan_input, plan_cloud(plan_input))
    assert [out.done for _, out in checked] == [True, False]
    assert "blocked account" in checked[1][1].detail


def test_a_resource_without_endpoint_beside_ones_with_is_refused_not_sent_to_aws(
    endpoint: str,
) -> None:
    """A snapshot at an endpoint someone recorded and a bucket with none: before, STS was
    asked at that one endpoint (which could answer with the lab's account id) and the bucket
    went to AWS's default unchecked. Now the plan is refused, naming the bucket."""
    plan_input = facts(
        with_ids(
            [
                resource(ResourceKind.BUCKET, "lab-ckpt"),
                resource(ResourceKind.SNAPSHOT, "snap-0abc", endpoint),
            ]
        ),
        provider=aws_provider(),
    )
    with pytest.raises(InputError) as refused:
        plan_cloud(plan_input)
    assert refused.value.field == "endpoint"
    assert "bucket lab-ckpt has no endpoint" in refused.value.reason


async def test_the_environments_endpoint_never_replaces_the_default(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AWS_ENDPOINT_URL (set for some other tool) would send a step without endpoint, and
    its signed requests, to another store: the clients ignore it."""
    with RecordingProxy(endpoint) as elsewhere:
        monkeypatch.setenv("AWS_ENDPOINT_URL", elsewhere.endpoint)
        plan_input = facts([(ResourceKind.SNAPSHOT, "snap-0abc")], provider=aws_provider())
        [step] = plan_cloud(plan_input)
        driver = drivers_for(plan_input, [step])["ec2"]
        # The read goes to AWS's own endpoint (unreachable from here): never done.
        out = await driver.verify(step, patient=False)
        sighting = await driver.inspect(step)
    assert not out.done
    assert elsewhere.seen == []
    assert sighting.exists is None
    assert sighting.facts["endpoint"] == "https://ec2.us-east-1.amazonaws.com"


async def test_the_region_check_fails_when_the_client_calls_another_region() -> None:
    """The resource is recorded in eu-west-1, but its endpoint is EC2's in us-east-1: the
    region the client really calls differs, and preflight and the driver both refuse
    before any request (the check once compared the provider's region with itself)."""
    plan_input = facts(
        with_ids(
            [
                resource(
                    ResourceKind.SNAPSHOT,
                    "snap-0abc",
                    "https://ec2.us-east-1.amazonaws.com",
                    "eu-west-1",
                )
            ]
        ),
        provider=aws_provider(),
    )
    [step] = plan_cloud(plan_input)
    [(check, out)] = await preflight(plan_input, [step])
    assert check.key == "preflight:identity:ec2@eu-west-1@https://ec2.us-east-1.amazonaws.com"
    assert not out.done
    assert "region us-east-1" in out.detail and "eu-west-1" in out.detail
    ran = await drivers_for(plan_input, [step])["ec2"].run(step)
    assert not ran.done and ran.detail.startswith("not tried") and "eu-west-1" in ran.detail


async def test_a_resource_in_another_region_is_checked_and_called_in_its_own(
    endpoint: str,
) -> None:
    ec2 = boto3.client(
        "ec2",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    volume = ec2.create_volume(AvailabilityZone="eu-west-1a", Size=3)["VolumeId"]
    snapshot = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    plan_input = facts(
        with_ids(
            [
                resource(ResourceKind.SNAPSHOT, snapshot, endpoint, "eu-west-1"),
                resource(ResourceKind.DISK, "vol-0doesnotexist", endpoint),
            ]
        ),
        provider=aws_provider(),
    )
    steps = plan_cloud(plan_input)
    checked = await preflight(plan_input, steps)
    assert sorted(s.param("region") for s, _ in checked) == ["eu-west-1", REGION]
    assert all(out.done for _, out in checked), checked
    driver = drivers_for(plan_input, steps)["ec2"]
    by_kind = {s.param("kind"): s for s in steps}
    seen = await driver.inspect(by_kind["snapshot"])
    assert seen.exists is True, seen
    assert seen.facts["region"] == "eu-west-1" and seen.facts["size_gib"] == "3"
    assert seen.facts["owner"] == MOTO_ACCOUNT and seen.facts["state"] == "completed"
    # The same snapshot looked for in the provider's region: not there (a wrong region is
    # "not found", which the runner will not take for gone).
    elsewhere = Step(
        **{
            **by_kind["snapshot"].__dict__,
            "params": tuple(
                (k, REGION if k == "region" else v) for k, v in by_kind["snapshot"].params
            ),
        }
    )
    assert (await driver.inspect(elsewhere)).exists is False
    assert (await driver.inspect(by_kind["disk"])).exists is False


# -- the bucket's owner ---------------------------------------------------------------------


@pytest.mark.parametrize("native", ["theirs", "theirs/ckpt/"])
async def test_another_accounts_bucket_reachable_with_the_same_credentials_is_not_emptied(
    endpoint: str, native: str
) -> None:
    """The other account's bucket, reachable with the lab's credentials (moto allows it, as
    a bucket policy would): the store refuses every call that names the lab's account as
    owner, so nothing is deleted and the read-back does not say gone."""
    versioned_bucket(other_client("s3", endpoint), "theirs")
    s3 = client("s3", endpoint)
    before = sorted(all_versions(s3, "theirs"))
    assert before  # the lab's credentials can list it
    kind = ResourceKind.BUCKET if "/" not in native else ResourceKind.BUCKET_PREFIX
    with RecordingProxy(endpoint, check_owner=True) as store:
        plan_input = facts([(kind, native)], provider=aws_provider(), endpoint=store.endpoint)
        [step] = plan_cloud(plan_input)
        assert step.param("bucket_owner") == MOTO_ACCOUNT
        assert "ExpectedBucketOwner" in step.describe
        driver = drivers_for(plan_input, [step])["s3"]
        seen = await driver.inspect(step)
        ran = await driver.run(step)
        checked = await driver.verify(step)
        assert store.refused > 0
    assert seen.exists is None and "AccessDenied" in seen.output
    assert not ran.done and "AccessDenied" in ran.output
    assert not checked.done and "AccessDenied" in checked.output
    assert sorted(all_versions(s3, "theirs")) == before


def test_a_template_store_says_ownership_is_proven_by_the_identity_check_only() -> None:
    from leases.core.models import Provider, ProviderKind

    aliyun = Provider(
        ProviderKind.CLOUD, "Aliyun", region="cn-hangzhou", account_id="1234567890123456"
    )
    [step] = plan_cloud(facts([(ResourceKind.BUCKET, "lab-ckpt")], provider=aliyun))
    assert step.param("bucket_owner") == ""
    assert "ownership is proven by the identity check only" in step.describe


# -- inspect ----------------------------------------------------------------------------------


async def test_inspect_counts_a_bucket_and_a_prefix_and_says_where_it_looked(
    endpoint: str,
) -> None:
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "lab-ckpt")
    plan_input = facts(
        [
            (ResourceKind.BUCKET, "lab-ckpt"),
            (ResourceKind.BUCKET_PREFIX, "lab-ckpt/ckpt/"),
            (ResourceKind.BUCKET_PREFIX, "lab-ckpt/typo/"),
            (ResourceKind.BUCKET, "lab-ckpt-typo"),
        ],
        provider=aws_provider(),
        endpoint=endpoint,
    )
    steps = {s.target: s for s in plan_cloud(plan_input)}
    driver = drivers_for(plan_input, list(steps.values()))["s3"]
    bucket = await driver.inspect(steps["lab-ckpt"])
    assert bucket.exists is True, bucket
    assert bucket.facts["versions"] == "4" and bucket.facts["delete_markers"] == "1"
    assert bucket.facts["unfinished_uploads"] == "1" and bucket.facts["bytes"] == "7"
    assert bucket.facts["account"] == MOTO_ACCOUNT and bucket.facts["endpoint"] == endpoint
    assert bucket.facts["region"] == REGION and "created" in bucket.facts
    prefix = await driver.inspect(steps["lab-ckpt/ckpt/"])
    assert prefix.exists is True and prefix.facts["versions"] == "3"
    assert (await driver.inspect(steps["lab-ckpt/typo/"])).exists is False
    typo = await driver.inspect(steps["lab-ckpt-typo"])
    assert typo.exists is False and "check the name" in typo.detail
    assert sorted(all_versions(s3, "lab-ckpt"))  # inspect changed nothing


# -- many versions ----------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_bucket_of_9000_versions_is_emptied_page_by_page(endpoint: str) -> None:
    """Listing markers go stale as their entries are deleted (moto then lists nothing
    more, and passes used to end with "something still writes there" after 5,000): each
    page is listed from the start, deleted (1,000 a DeleteObjects call) and counted.
    The versions are made in moto's own backend (this process): 9,000 PUTs over HTTP would
    take minutes here."""
    from moto.s3.models import s3_backends

    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket="big")
    s3.put_bucket_versioning(Bucket="big", VersioningConfiguration={"Status": "Enabled"})
    backend = s3_backends[MOTO_ACCOUNT]["aws"]
    for i in range(9000):
        backend.put_object("big", f"k/{i % 300:04}", b"x")
    plan_input = facts([(ResourceKind.BUCKET, "big")], provider=aws_provider(), endpoint=endpoint)
    [step] = plan_cloud(plan_input)
    driver = drivers_for(plan_input, [step])["s3"]
    assert isinstance(driver, S3Driver)
    ran = await driver.run(step)
    assert ran.done, ran
    # Nine pages of a thousand: the work is bounded by pages, not by a clock (a loaded CI
    # machine took over three minutes).
    assert "deleted 9000 object version(s)" in ran.output and "9 page(s)" in ran.output
    assert (await driver.verify(step, patient=False)).done


async def test_a_writer_racing_the_deletion_stops_it_with_that_said(endpoint: str) -> None:
    """Objects newer than the run's start (by the store's clock) keep appearing: after a
    few listings the run stops, not done, and says something still writes there."""
    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket="busy")
    plan_input = facts([(ResourceKind.BUCKET, "busy")], provider=aws_provider(), endpoint=endpoint)
    [step] = plan_cloud(plan_input)
    driver = drivers_for(plan_input, [step])["s3"]
    assert isinstance(driver, S3Driver)
    driver.page_size = 1
    from moto.s3.models import s3_backends

    backend = s3_backends[MOTO_ACCOUNT]["aws"]
    written = []

    def write(**_: Any) -> None:
        # A writer in step with the listings: before each, one new object, stamped a
        # minute after now (moto's clock is this machine's): newer than the run's start
        # by the store's clock, without waiting for the clock to move.
        made = backend.put_object("busy", f"w/{len(written)}", b"x")
        made.last_modified = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=1)
        written.append(made.name)

    real = driver.account.client("s3", endpoint, REGION, "path")
    real.meta.events.register("before-call.s3.ListObjectVersions", write)
    ran = await driver.run(step)
    assert not ran.done
    assert "something still writes there" in ran.detail, ran
