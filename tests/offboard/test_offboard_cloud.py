"""Cloud offboarding against a real S3/EC2/STS API: a moto server on loopback (boto3 over
HTTP, as against a cloud), plus a store of our own that refuses batch deletes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from botocore.exceptions import ClientError

from leases.core.models import ResourceKind
from leases.offboard.cloud.plan import cloud_drivers, plan_cloud
from leases.offboard.cloud.s3 import S3Driver
from leases.offboard.steps import CloudDriver, Outcome, Phase, PlanInput, Step, params
from tests.support.cloudfixtures import (
    ENVIRON,
    MOTO_ACCOUNT,
    REGION,
    BatchRefusingStore,
    FakeClock,
    NotS3,
    all_versions,
    aws_provider,
    client,
    facts,
    reset_moto,
    timing,
    versioned_bucket,
)


def drivers_for(plan_input: PlanInput, steps: Sequence[Step]) -> dict[str, CloudDriver]:
    found = cloud_drivers(
        plan_input.provider, steps, plan_input.config, environ=ENVIRON, timing=timing(FakeClock())
    )
    return {d.name: d for d in found}


async def offboard(plan_input: PlanInput) -> list[tuple[Step, Outcome, Outcome]]:
    """Plan, then run and verify each step in plan order, as the engine does."""
    steps = plan_cloud(plan_input)
    drivers = drivers_for(plan_input, steps)
    done = []
    for step in steps:
        ran = await drivers[step.driver].run(step)
        checked = await drivers[step.driver].verify(step)
        done.append((step, ran, checked))
    return done


async def test_versioned_bucket_loses_everything_then_the_bucket_and_others_stay(
    endpoint: str,
) -> None:
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "lab-ckpt")
    versioned_bucket(s3, "not-in-ledger")
    before_other = sorted(all_versions(s3, "not-in-ledger"))

    done = await offboard(
        facts([(ResourceKind.BUCKET, "lab-ckpt")], provider=aws_provider(), endpoint=endpoint)
    )

    [(step, ran, checked)] = done
    assert step.driver == "s3" and step.phase is Phase.BUCKETS and step.destructive
    assert ran.done, ran
    assert "deleted 4 object version(s), 1 delete marker(s); aborted 1 multipart" in ran.output
    assert checked.done, checked
    with pytest.raises(ClientError) as gone:
        s3.head_bucket(Bucket="lab-ckpt")
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert sorted(all_versions(s3, "not-in-ledger")) == before_other
    assert s3.list_multipart_uploads(Bucket="not-in-ledger").get("Uploads")


async def test_a_prefix_is_emptied_and_nothing_beside_it(endpoint: str) -> None:
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "shared")
    s3.put_object(Bucket="shared", Key="runs/exp1/a.pt", Body=b"1")
    s3.put_object(Bucket="shared", Key="runs/exp1/a.pt", Body=b"2")
    s3.put_object(Bucket="shared", Key="runs/exp10/b.pt", Body=b"3")
    s3.create_multipart_upload(Bucket="shared", Key="runs/exp1/part.pt")

    done = await offboard(
        facts(
            [(ResourceKind.BUCKET_PREFIX, "shared/runs/exp1/")],
            provider=aws_provider(),
            endpoint=endpoint,
        )
    )

    [(_, ran, checked)] = done
    assert ran.done and checked.done, (ran, checked)
    keys = set(all_versions(s3, "shared"))
    assert "runs/exp10/b.pt" in keys and "ckpt/model.pt" in keys
    assert not any(k.startswith("runs/exp1/") for k in keys)
    uploads = s3.list_multipart_uploads(Bucket="shared").get("Uploads", [])
    assert [u["Key"] for u in uploads] == ["ckpt/big.pt"]


async def test_a_bucket_already_gone_counts_as_done_once_verified(endpoint: str) -> None:
    [(_, ran, checked)] = await offboard(
        facts([(ResourceKind.BUCKET, "never-was")], provider=aws_provider(), endpoint=endpoint)
    )
    assert ran.done and ran.detail == "already gone"
    assert checked.done


async def test_a_store_that_refuses_batch_deletes_is_emptied_one_object_at_a_time(
    endpoint: str,
) -> None:
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "oss-like")
    with BatchRefusingStore(endpoint) as store:
        [(_, ran, checked)] = await offboard(
            facts(
                [(ResourceKind.BUCKET, "oss-like")],
                provider=aws_provider(),
                endpoint=store.endpoint,
            )
        )
    assert store.refused == 1  # asked once, then never again in this run
    assert ran.done, ran
    assert "batch delete refused (InvalidArgument" in ran.output
    assert "deleted one at a time" in ran.output
    single_deletes = [
        s for s in store.seen if s.startswith("DELETE /oss-like/") and "versionId" in s
    ]
    assert len(single_deletes) == 5  # 4 versions and 1 delete marker
    assert checked.done


async def test_a_store_without_versions_is_emptied_from_its_plain_listing(endpoint: str) -> None:
    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket="minio-like")
    for key in ("a", "b/c", "d e"):
        s3.put_object(Bucket="minio-like", Key=key, Body=b"x")
    with BatchRefusingStore(endpoint, no_versions=True) as store:
        [(_, ran, checked)] = await offboard(
            facts(
                [(ResourceKind.BUCKET, "minio-like")],
                provider=aws_provider(),
                endpoint=store.endpoint,
            )
        )
    assert ran.done and checked.done, (ran, checked)
    assert "deleted 3 object version(s)" in ran.output
    assert any("list-type=2" in s for s in store.seen)


async def test_images_then_snapshots_then_disks_deleted_and_read_back(endpoint: str) -> None:
    ec2 = client("ec2", endpoint)
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=10)["VolumeId"]
    snapshot = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    other = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]  # not in the ledger
    image = ec2.register_image(
        Name="lab-image",
        RootDeviceName="/dev/sda1",
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"SnapshotId": snapshot}}],
    )["ImageId"]
    # (moto's RegisterImage makes a snapshot of its own too: not in the ledger either)
    before = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert other in before

    done = await offboard(
        facts(
            [
                (ResourceKind.DISK, volume),
                (ResourceKind.SNAPSHOT, snapshot),
                (ResourceKind.IMAGE, image),
            ],
            provider=aws_provider(),
            endpoint=endpoint,
        )
    )

    assert [(s.action, s.target) for s, _, _ in done] == [
        ("delete-image", image),
        ("delete-snapshot", snapshot),
        ("delete-disk", volume),
    ]
    for step, ran, checked in done:
        assert step.driver == "ec2"
        assert ran.done and checked.done, (step.key, ran, checked)
        assert "0 found" in checked.output or "NotFound" in checked.output
    assert ec2.describe_images(Owners=["self"])["Images"] == []
    after = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert after == before - {snapshot}
    assert ec2.describe_volumes()["Volumes"] == []


async def test_with_moto_default_images_on_only_the_ledgers_snapshot_goes(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "true")
    reset_moto(moto_endpoint)
    ec2 = client("ec2", moto_endpoint)

    def self_snapshots() -> set[str]:
        pages = ec2.get_paginator("describe_snapshots").paginate(OwnerIds=["self"])
        return {s["SnapshotId"] for p in pages for s in p["Snapshots"]}

    builtin = self_snapshots()
    assert len(builtin) > 1000  # the trap: all of them "ours" by owner
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    ours = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]

    [(_, ran, checked)] = await offboard(
        facts([(ResourceKind.SNAPSHOT, ours)], provider=aws_provider(), endpoint=moto_endpoint)
    )

    assert ran.done and checked.done
    assert self_snapshots() == builtin
    assert [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]] == [volume]


async def test_an_attached_disk_is_reported_never_forced(endpoint: str) -> None:
    ec2 = client("ec2", endpoint)
    instance = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1)["Instances"][0]
    volume = ec2.create_volume(AvailabilityZone=instance["Placement"]["AvailabilityZone"], Size=1)
    ec2.attach_volume(
        VolumeId=volume["VolumeId"], InstanceId=instance["InstanceId"], Device="/dev/sdf"
    )

    [(_, ran, checked)] = await offboard(
        facts([(ResourceKind.DISK, volume["VolumeId"])], provider=aws_provider(), endpoint=endpoint)
    )

    assert not ran.done
    assert "VolumeInUse" in ran.output and "detach" in ran.detail
    assert not checked.done and "still there" in checked.detail
    assert ec2.describe_volumes(VolumeIds=[volume["VolumeId"]])["Volumes"]


async def test_identity_is_the_callers_account_and_the_providers_region(endpoint: str) -> None:
    plan_input = facts(
        [(ResourceKind.SNAPSHOT, "snap-1"), (ResourceKind.BUCKET, "b-1")],
        provider=aws_provider(),
        endpoint=endpoint,
    )
    drivers = drivers_for(plan_input, plan_cloud(plan_input))
    assert sorted(drivers) == ["ec2", "s3"]
    for driver in drivers.values():
        who = await driver.identity(endpoint, REGION)
        assert (who.account_id, who.region, who.endpoint) == (MOTO_ACCOUNT, REGION, endpoint)
        assert who.arn.startswith("arn:aws:sts::")


async def test_missing_env_credentials_are_named_not_crashed(endpoint: str) -> None:
    plan_input = facts(
        [(ResourceKind.SNAPSHOT, "snap-1")], provider=aws_provider(), endpoint=endpoint
    )
    steps = plan_cloud(plan_input)
    [driver] = cloud_drivers(plan_input.provider, steps, plan_input.config, environ={})
    out = await driver.run(steps[0])
    assert not out.done
    assert "TESTCLOUD_ACCESS_KEY_ID" in out.detail and "testing" not in out.detail


@pytest.mark.parametrize(
    "hostile",
    ["snap-1; rm -rf /", "$(reboot)", "snap-1\nsnap-2", "-snap", "snap'1", "../snap"],
)
async def test_a_stored_step_with_a_hostile_id_is_not_tried(endpoint: str, hostile: str) -> None:
    """A plan read back from a file someone edited: the driver checks the id again."""
    ec2 = client("ec2", endpoint)
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    plan_input = facts([(ResourceKind.DISK, volume)], provider=aws_provider(), endpoint=endpoint)
    [step] = plan_cloud(plan_input)
    forged = Step(
        **{
            **step.__dict__,
            "params": params(**{**dict(step.params), "native_id": hostile}),
        }
    )
    driver = drivers_for(plan_input, [step])["ec2"]
    out = await driver.run(forged)
    assert not out.done and out.detail.startswith("not tried: native_id")
    assert ec2.describe_volumes()["Volumes"]


# -- read-backs that must not prove a deletion that did not happen ---------------------------


async def test_a_prefix_in_a_store_without_versions_is_verified_from_its_plain_listing(
    endpoint: str,
) -> None:
    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket="minio-like")
    for key in ("runs/exp1/a", "runs/exp1/b", "runs/exp10/c"):
        s3.put_object(Bucket="minio-like", Key=key, Body=b"x")
    with BatchRefusingStore(endpoint, no_versions=True) as store:
        plan_input = facts(
            [(ResourceKind.BUCKET_PREFIX, "minio-like/runs/exp1/")],
            provider=aws_provider(),
            endpoint=store.endpoint,
        )
        [(_, ran, checked)] = await offboard(plan_input)
    assert ran.done and checked.done, (ran, checked)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="minio-like")["Contents"]]
    assert keys == ["runs/exp10/c"]


@pytest.mark.parametrize("kind", [ResourceKind.BUCKET, ResourceKind.BUCKET_PREFIX])
async def test_a_404_from_something_that_is_not_s3_proves_nothing(
    endpoint: str, kind: ResourceKind
) -> None:
    """A wrong endpoint (a typo, a web server, a metadata service) answers 404 to
    everything: only the store's own NoSuchBucket says a bucket is gone."""
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "lab-ckpt")
    native = "lab-ckpt" if kind is ResourceKind.BUCKET else "lab-ckpt/ckpt/"
    with NotS3() as web:
        [(_, ran, checked)] = await offboard(
            facts([(kind, native)], provider=aws_provider(), endpoint=web.endpoint)
        )
    assert not ran.done, ran
    assert not checked.done, checked
    assert list(all_versions(s3, "lab-ckpt"))


@pytest.mark.parametrize("kind", [ResourceKind.SNAPSHOT, ResourceKind.DISK])
async def test_a_cloud_that_ignores_the_id_filter_proves_nothing(
    endpoint: str, kind: ResourceKind
) -> None:
    """Describe by id answered with others and not ours: the filter was ignored, and ours
    may be on a page not shown. That is no proof it is gone (the CLI driver says the same)."""
    ec2 = client("ec2", endpoint)
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    ours = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    snapshot = ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    ec2.create_snapshot(VolumeId=volume)
    native = snapshot if kind is ResourceKind.SNAPSHOT else ours
    with BatchRefusingStore(endpoint, ignore_ids=True) as cloud:
        plan_input = facts([(kind, native)], provider=aws_provider(), endpoint=cloud.endpoint)
        [step] = plan_cloud(plan_input)
        driver = drivers_for(plan_input, [step])["ec2"]
        before = await driver.verify(step)
        assert not before.done, before  # listed among the others: there
        if kind is ResourceKind.SNAPSHOT:
            ec2.delete_snapshot(SnapshotId=snapshot)
        else:
            ec2.delete_volume(VolumeId=ours)
        after = await driver.verify(step)
    assert not after.done and "filter" in after.detail, after
    assert ec2.describe_volumes()["Volumes"]  # the others: never touched


async def test_every_page_of_versions_and_markers_only_keys_goes(endpoint: str) -> None:
    """More entries than a page (a page of 7 here: S3's is 1000, DeleteObjects' batch too),
    some keys with only a delete marker left: every page is emptied, then the bucket."""
    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket="big")
    s3.put_bucket_versioning(Bucket="big", VersioningConfiguration={"Status": "Enabled"})
    for i in range(20):
        s3.put_object(Bucket="big", Key=f"v/{i:02}", Body=b"x")
    for i in range(6):
        version = s3.put_object(Bucket="big", Key=f"m/{i:02}", Body=b"x")["VersionId"]
        s3.delete_object(Bucket="big", Key=f"m/{i:02}")
        s3.delete_object(Bucket="big", Key=f"m/{i:02}", VersionId=version)  # marker only
    assert len(list(all_versions(s3, "big"))) == 26
    plan_input = facts([(ResourceKind.BUCKET, "big")], provider=aws_provider(), endpoint=endpoint)
    [step] = plan_cloud(plan_input)
    driver = drivers_for(plan_input, [step])["s3"]
    assert isinstance(driver, S3Driver)
    driver.page_size = 7

    ran = await driver.run(step)
    checked = await driver.verify(step)

    assert ran.done and checked.done, (ran, checked)
    assert "deleted 20 object version(s), 6 delete marker(s)" in ran.output


@pytest.mark.parametrize("native", ["lab-ckpt", "lab-ckpt/ckpt/"])
async def test_a_store_that_says_deleted_but_keeps_the_objects_is_not_done(
    endpoint: str, native: str
) -> None:
    """DeleteObjects answers success and nothing goes: the run itself says not done (a
    run taken for done would not be run again), and the read-back agrees."""
    s3 = client("s3", endpoint)
    versioned_bucket(s3, "lab-ckpt")
    before = sorted(all_versions(s3, "lab-ckpt"))
    kind = ResourceKind.BUCKET if "/" not in native else ResourceKind.BUCKET_PREFIX
    with BatchRefusingStore(endpoint, fake_deletes=True) as store:
        [(_, ran, checked)] = await offboard(
            facts([(kind, native)], provider=aws_provider(), endpoint=store.endpoint)
        )
    assert not ran.done and not checked.done, (ran, checked)
    assert sorted(all_versions(s3, "lab-ckpt")) == before


async def test_a_read_back_that_is_not_patient_is_one_read(endpoint: str) -> None:
    """A recheck, or the read before acting again, reads once; a run's verify waits for a
    deletion the cloud finishes later (here: it never does, on an injected clock)."""
    ec2 = client("ec2", endpoint)
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    plan_input = facts([(ResourceKind.DISK, volume)], provider=aws_provider(), endpoint=endpoint)
    [step] = plan_cloud(plan_input)
    clock = FakeClock()
    [driver] = cloud_drivers(
        plan_input.provider, [step], plan_input.config, environ=ENVIRON, timing=timing(clock)
    )
    once = await driver.verify(step, patient=False)
    assert not once.done and clock.slept == [] and "retry later" not in once.detail
    waited = await driver.verify(step)
    assert not waited.done and sum(clock.slept) > 30 and "retry later" in waited.detail
