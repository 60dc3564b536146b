"""Cloud offboarding through a cloud's own CLI (the aliyun, tccli and hcloud templates),
with stand-in executables of those names that record their arguments (tests/support/standin_cli.py),
and the one entry every id and name passes (leases.core.cloudids), hypothesis-tested."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.config.sections import Config
from leases.core import cloudids as cloud_ids
from leases.core.errors import InputError
from leases.core.models import Provider, ProviderKind, Resource, ResourceKind
from leases.offboard.cloud.access import Credentials
from leases.offboard.cloud.cmd import load_templates
from leases.offboard.cloud.plan import cloud_drivers, plan_cloud, templates_for
from leases.offboard.preflight import PreflightDriver, identity_steps
from leases.offboard.steps import CloudDriver, Phase, Step
from tests.support.cloudfixtures import FakeClock, client, facts, start_moto, timing

ACCOUNT = "1234567890123456"
STANDIN = Path(__file__).parent.parent / "support" / "standin_cli.py"


@dataclass
class Cloud:
    bin: Path
    state: Path
    log: Path
    environ: dict[str, str]

    def ids(self) -> list[str]:
        return list(json.loads(self.state.read_text())["ids"])

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def cloud(tmp_path: Path) -> Cloud:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("aliyun", "tccli", "hcloud"):
        exe = bin_dir / name
        exe.write_text(f"#!{sys.executable}\n" + STANDIN.read_text())
        exe.chmod(0o755)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"ids": [], "account": ACCOUNT}))
    log = tmp_path / "calls.jsonl"
    environ = {
        "PATH": f"{bin_dir}{os.pathsep}{os.defpath}",
        "STANDIN_STATE": str(state),
        "STANDIN_LOG": str(log),
        "LAB_ACCESS_KEY_ID": "key-id-for-test",
        "LAB_SECRET_ACCESS_KEY": "secret-for-test",
    }
    return Cloud(bin_dir, state, log, environ)


def provider(name: str, credential_ref: str = "lab-profile") -> Provider:
    return Provider(
        ProviderKind.CLOUD,
        name,
        region="cn-hangzhou",
        account_id=ACCOUNT,
        credential_ref=credential_ref,
    )


def drivers(
    p: Provider, steps: list[Step], cloud: Cloud, clock: FakeClock | None = None
) -> dict[str, CloudDriver]:
    made = cloud_drivers(
        p, steps, Config(), environ=cloud.environ, timing=timing(clock or FakeClock(), 30.0)
    )
    return {d.name: d for d in made}


THREE = [
    (ResourceKind.DISK, "d-bp1disk"),
    (ResourceKind.SNAPSHOT, "s-bp1snap"),
    (ResourceKind.IMAGE, "m-bp1image"),
]

EXPECTED = {
    "Aliyun": [
        ["ecs", "DeleteImage", "--RegionId", "cn-hangzhou", "--ImageId", "m-bp1image"],
        ["ecs", "DeleteSnapshot", "--SnapshotId", "s-bp1snap"],
        ["ecs", "DeleteDisk", "--DiskId", "d-bp1disk"],
    ],
    "Tencent Cloud": [
        ["cvm", "DeleteImages", "--ImageIds", '["m-bp1image"]'],
        ["cbs", "DeleteSnapshots", "--SnapshotIds", '["s-bp1snap"]'],
        ["cbs", "TerminateDisks", "--DiskIds", '["d-bp1disk"]'],
    ],
    "Huawei Cloud": [
        ["IMS", "GlanceDeleteImage", "--image_id=m-bp1image"],
        ["EVS", "DeleteSnapshot", "--snapshot_id=s-bp1snap"],
        ["EVS", "DeleteVolume", "--volume_id=d-bp1disk"],
    ],
}
PROGRAM = {"Aliyun": "aliyun", "Tencent Cloud": "tccli", "Huawei Cloud": "hcloud"}
OPTIONS = {
    "aliyun": ["--region", "cn-hangzhou", "--profile", "lab-profile"],
    "tccli": ["--region", "cn-hangzhou", "--profile", "lab-profile"],
    "hcloud": ["--cli-region=cn-hangzhou", "--cli-profile=lab-profile"],
}


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_each_template_deletes_in_order_and_proves_it_by_reading_back(
    cloud: Cloud, name: str
) -> None:
    cloud.state.write_text(
        json.dumps({"ids": ["m-bp1image", "s-bp1snap", "d-bp1disk", "s-other"], "account": ACCOUNT})
    )
    p = provider(name)
    steps = plan_cloud(facts(THREE, provider=p))
    assert [s.phase for s in steps] == [Phase.IMAGES, Phase.SNAPSHOTS, Phase.DISKS]
    program = PROGRAM[name]
    assert all(s.driver == "cmd" and s.param("template") == program for s in steps)
    driver = drivers(p, steps, cloud)["cmd"]

    for step in steps:
        ran = await driver.run(step)
        assert ran.done, ran
        checked = await driver.verify(step)
        assert checked.done, checked

    delete_calls = {e[1] for e in EXPECTED[name]}
    deletes = [c for c in cloud.calls() if c["argv"][1] in delete_calls]
    assert [c["program"] for c in deletes] == [program] * 3
    assert [c["argv"] for c in deletes] == [e + OPTIONS[program] for e in EXPECTED[name]]
    # The plan shows the very command that ran.
    assert shlex.split(steps[1].describe) == [program, *EXPECTED[name][1], *OPTIONS[program]]
    assert cloud.ids() == ["s-other"]
    assert not any("--Force" in a or "force" in a.lower() for c in cloud.calls() for a in c["argv"])


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_identity_comes_from_the_templates_whoami(cloud: Cloud, name: str) -> None:
    # Buckets with a template need env:PREFIX keys (the CLI and boto3 get the same ones);
    # hcloud reads keys from its profile only: its buckets are refused.
    p = provider(name, credential_ref="" if name == "Huawei Cloud" else "env:LAB")
    steps = plan_cloud(
        facts([(ResourceKind.SNAPSHOT, "s-1"), (ResourceKind.BUCKET, "lab-b")], provider=p)
    )
    if name == "Huawei Cloud":
        with pytest.raises(InputError, match="takes keys from a profile only"):
            drivers(p, steps, cloud)
        steps = [s for s in steps if s.driver == "cmd"]
    made = drivers(p, steps, cloud)
    assert sorted(made) == (["cmd"] if name == "Huawei Cloud" else ["cmd", "s3"])
    for driver in made.values():
        who = await driver.identity()
        assert (who.account_id, who.region) == (ACCOUNT, "cn-hangzhou")


async def test_a_success_that_deleted_nothing_is_not_verified(cloud: Cloud) -> None:
    """Aliyun answers success to a DeleteSnapshot that did nothing: only the read-back tells."""
    cloud.state.write_text(json.dumps({"ids": ["s-bp1snap"], "account": ACCOUNT, "lazy": True}))
    p = provider("Aliyun")
    [step] = plan_cloud(facts([(ResourceKind.SNAPSHOT, "s-bp1snap")], provider=p))
    clock = FakeClock()
    driver = drivers(p, [step], cloud, clock)["cmd"]

    assert (await driver.run(step)).done
    checked = await driver.verify(step)

    assert not checked.done
    assert "still listed" in checked.detail and "retry later" in checked.detail
    assert clock.slept[:3] == [1.0, 2.0, 4.0] and clock.now <= 30.0
    verifies = [c for c in cloud.calls() if c["argv"][1] == "DescribeSnapshots"]
    assert len(verifies) == len(clock.slept) + 1


@pytest.mark.parametrize("name", ["Huawei", "Aliyun"])
async def test_a_deletion_the_cloud_finishes_later_is_read_back_until_it_shows(
    cloud: Cloud, name: str
) -> None:
    cloud.state.write_text(json.dumps({"ids": ["s-1", "s-2"], "account": ACCOUNT, "later": 3}))
    p = provider(name)
    [step] = plan_cloud(facts([(ResourceKind.SNAPSHOT, "s-1")], provider=p))
    clock = FakeClock()
    driver = drivers(p, [step], cloud, clock)["cmd"]

    assert (await driver.run(step)).done
    assert cloud.ids() == ["s-1", "s-2"]  # accepted, not yet done
    checked = await driver.verify(step)

    assert checked.done and "read back 3 time(s)" in checked.detail
    assert clock.slept == [1.0, 2.0]
    assert cloud.ids() == ["s-2"]


async def test_env_credentials_reach_the_cli_as_its_own_variables_never_in_argv(
    cloud: Cloud,
) -> None:
    cloud.state.write_text(json.dumps({"ids": ["s-1"], "account": ACCOUNT}))
    p = provider("Aliyun", credential_ref="env:LAB")
    [step] = plan_cloud(facts([(ResourceKind.SNAPSHOT, "s-1")], provider=p))
    assert (await drivers(p, [step], cloud)["cmd"].run(step)).done
    [call] = cloud.calls()
    assert call["env"] == {
        "ALIBABA_CLOUD_ACCESS_KEY_ID": "key-id-for-test",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "secret-for-test",
    }
    assert "--profile" not in call["argv"]
    assert not any("secret-for-test" in a for a in call["argv"])
    assert "secret-for-test" not in step.describe


async def test_hcloud_with_env_credentials_says_to_use_a_profile(cloud: Cloud) -> None:
    p = provider("Huawei", credential_ref="env:LAB")
    [step] = plan_cloud(facts([(ResourceKind.SNAPSHOT, "s-1")], provider=p))
    out = await drivers(p, [step], cloud)["cmd"].run(step)
    assert not out.done and "profile" in out.detail
    assert cloud.calls() == []


async def test_a_missing_cli_is_named(cloud: Cloud) -> None:
    shutil.rmtree(cloud.bin)
    p = provider("Aliyun")
    [step] = plan_cloud(facts([(ResourceKind.DISK, "d-1")], provider=p))
    out = await drivers(p, [step], cloud)["cmd"].run(step)
    assert not out.done and "aliyun: not found on PATH" in out.detail


def test_buckets_of_a_template_cloud_go_to_its_s3_compatible_endpoint() -> None:
    steps = plan_cloud(
        facts(
            [(ResourceKind.BUCKET, "lab-ckpt"), (ResourceKind.BUCKET_PREFIX, "shared/lab/")],
            provider=provider("Aliyun"),
        )
    )
    assert [(s.driver, s.param("endpoint"), s.param("addressing")) for s in steps] == [
        ("s3", "https://oss-cn-hangzhou.aliyuncs.com", "virtual")
    ] * 2


@pytest.mark.parametrize("ref", ["", "lab-profile"])
async def test_bucket_calls_act_with_the_keys_the_identity_check_proved(
    cloud: Cloud, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the attacker review. With a CLI template (OSS, COS, OBS: no
    ExpectedBucketOwner), preflight asks the CLI's whoami, which reads the CLI's own profile
    (~/.aliyun...), while bucket calls go through boto3, which reads other keys (AWS_*
    variables, ~/.aws). The check passed as the ledger's account, and a bucket of another
    account (moto's) was emptied, deleted and verified gone. A profile or the default names
    two different key stores: refused, say env:PREFIX (the same keys reach both)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    server, endpoint = start_moto()
    try:
        theirs = client("s3", endpoint)
        theirs.create_bucket(Bucket="lab-ckpt")
        bucket = Resource(lease_id=1, kind=ResourceKind.BUCKET, native_id="lab-ckpt",
                          endpoint=endpoint)  # fmt: skip
        p = provider("Aliyun", credential_ref=ref)
        steps = plan_cloud(facts([bucket], provider=p))
        with pytest.raises(InputError, match="env:PREFIX"):
            made = drivers(p, steps, cloud)
            # (before the fix:) preflight passed as the ledger's account, then this ran
            pre = PreflightDriver(None, Config(), made)  # type: ignore[arg-type]
            for check in identity_steps(steps, facts([bucket], provider=p)):
                assert (await pre.run(check)).done
            await made["s3"].run(steps[0])
        assert [b["Name"] for b in theirs.list_buckets()["Buckets"]] == ["lab-ckpt"]
        # env:PREFIX: the CLI and boto3 get the same keys: taken.
        p = provider("Aliyun", credential_ref="env:LAB")
        assert "s3" in drivers(p, plan_cloud(facts([bucket], provider=p)), cloud)
    finally:
        server.stop()


def test_only_cloud_resources_of_a_cloud_or_with_an_endpoint_are_planned() -> None:
    platform = Provider(ProviderKind.PLATFORM, "AutoDL", region="")
    steps = plan_cloud(
        facts(
            [
                (ResourceKind.DISK, "d-1"),
                (ResourceKind.SCRATCH_PATH, "/root/autodl-tmp"),
                (ResourceKind.SSH_KEY, "lab"),
            ],
            provider=platform,
        )
    )
    assert steps == []  # no API to call: the manual steps cover it
    aws = Provider(ProviderKind.CLOUD, "AWS", region="us-east-1")
    [step] = plan_cloud(facts([(ResourceKind.DISK, "vol-1")], provider=aws))
    assert (step.driver, step.key, step.param("endpoint")) == (
        "ec2",
        "delete-disk:us-east-1/vol-1",
        "",
    )


def test_a_cli_cloud_without_a_region_is_refused_naming_the_field() -> None:
    p = Provider(ProviderKind.CLOUD, "Aliyun")
    with pytest.raises(InputError) as refused:
        plan_cloud(facts([(ResourceKind.SNAPSHOT, "s-1")], provider=p))
    assert refused.value.field == "region"


def test_a_users_template_beside_the_config_adds_a_cloud(tmp_path: Path) -> None:
    (tmp_path / "cloud").mkdir()
    (tmp_path / "cloud" / "volc.toml").write_text(
        'name = "volc"\nprogram = "ve"\nproviders = ["volc"]\n'
        '[whoami]\nargv = ["sts", "GetCallerIdentity"]\naccount = "AccountId"\n'
        '[snapshot]\ndelete = ["ecs", "DeleteSnapshot", "--SnapshotId", "{id}"]\n'
        'verify = ["ecs", "DescribeSnapshots", "--SnapshotIds", "{id}"]\nlisted = "Snapshots"\n'
    )
    config = Config(path=tmp_path / "config.toml")
    assert sorted(templates_for(config)) == ["aliyun", "hcloud", "tccli", "volc"]


def test_a_template_with_an_unknown_placeholder_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(
        'name = "bad"\nprogram = "bad"\n[whoami]\nargv = ["who"]\naccount = "A"\n'
        '[disk]\ndelete = ["rm", "{id.__class__}"]\nverify = ["ls", "{id}"]\n'
    )
    with pytest.raises(InputError) as refused:
        load_templates(tmp_path)
    assert refused.value.field.endswith("bad.toml: disk.delete")


@pytest.mark.parametrize(
    ("words", "why"),
    [
        # No {id}: it would delete what the template names, not what the ledger does.
        ('delete = ["ecs", "DeleteSnapshots", "--All"]', "{id}"),
        ('delete = ["ecs", "DeleteSnapshot", "--SnapshotId", "{id}", "--Force", "true"]', "force"),
        ('delete = ["evs", "delete", "--force={region}", "{id}"]', "force"),
    ],
)
def test_a_template_that_deletes_more_than_the_id_or_forces_is_refused(
    tmp_path: Path, words: str, why: str
) -> None:
    (tmp_path / "bad.toml").write_text(
        'name = "bad"\nprogram = "bad"\n[whoami]\nargv = ["who"]\naccount = "A"\n'
        f'[snapshot]\n{words}\nverify = ["ls", "{{id}}"]\n'
    )
    with pytest.raises(InputError) as refused:
        load_templates(tmp_path)
    assert refused.value.field.endswith("bad.toml: snapshot.delete")
    assert why in refused.value.reason


# Hostile ids: shell words, substitutions, newlines, quotes, options, traversal.
HOSTILE = st.one_of(
    st.sampled_from(
        [
            "; rm -rf /",
            "$(reboot)",
            "`id`",
            "a\nb",
            "a'b",
            'a"b',
            "-rf",
            "--Force",
            "../x",
            "a b",
            "",
        ]
    ),
    st.text(min_size=1, max_size=40),
    st.builds(lambda a, b: f"s-{a}{b}", st.text(max_size=5), st.sampled_from(";$`\n'\" |&<>*")),
)


@given(HOSTILE, st.sampled_from([ResourceKind.SNAPSHOT, ResourceKind.IMAGE, ResourceKind.DISK]))
def test_an_id_is_refused_or_stays_one_plain_argument(value: str, kind: ResourceKind) -> None:
    try:
        checked = cloud_ids.native_id(kind, value)
    except InputError as exc:
        assert exc.field == "native_id"
        return
    assert checked == value
    assert not value.startswith("-")
    assert not set(value) & set(";$`\n'\" |&<>*/\\")
    t = load_templates()["aliyun"]
    argv = t.argv(t.actions[kind].delete, native=value, region="cn-hangzhou", creds=_NO_CREDS)
    assert len(argv) == 1 + len(t.actions[kind].delete) + 2
    assert sum(value in a for a in argv) >= 1


@given(HOSTILE)
def test_hostile_bucket_names_and_prefixes_are_refused(value: str) -> None:
    for kind in (ResourceKind.BUCKET, ResourceKind.BUCKET_PREFIX):
        try:
            checked = cloud_ids.native_id(kind, value)
        except InputError:
            continue
        assert not set(checked) & set(";$`\n'\" |&<>*\\")
        assert ".." not in checked.split("/")


@given(HOSTILE)
def test_a_plan_with_a_hostile_id_is_not_made(value: str) -> None:
    try:
        cloud_ids.native_id(ResourceKind.SNAPSHOT, value)
    except InputError:
        with pytest.raises(InputError):
            plan_cloud(facts([(ResourceKind.SNAPSHOT, value)], provider=provider("Aliyun")))


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://user:pw@127.0.0.1:9000",
        "file:///etc/passwd",
        "http://127.0.0.1:9000/other-bucket",
        "http://127.0.0.1:9000?x=1",
        "http://host\n.example",
        "https://",
        # Instance metadata services (AWS, GCP, Aliyun, Tencent) are never object stores.
        "http://169.254.169.254",
        "http://2852039166",  # the same address as one number, as the resolver reads it
        "http://0xa9fea9fe",
        "http://169.254.43518",
        "http://[fd00:ec2::254]",
        "http://metadata.google.internal",
        "http://100.100.100.200",
        "http://metadata.tencentyun.com",
        # A public cloud's own endpoint over plain HTTP: the session token in clear.
        "http://s3.amazonaws.com",
        "http://oss-cn-hangzhou.aliyuncs.com",
        "http://cos.ap-guangzhou.myqcloud.com",
        "http://obs.cn-north-4.myhuaweicloud.com",
        # Plain http to anything but a loopback address: signed requests and answers in
        # clear, and anyone on the path can answer for the store. A name is no address.
        "http://minio.lab:9000",
        "http://localhost:9000",
        "http://10.0.0.5:9000",
        "http://[fe80::1]:9000",
        # A lookalike host (Cyrillic а): not the cloud it reads as.
        "https://s3.\u0430mazonaws.com",
    ],
)
def test_bad_endpoints_are_refused(endpoint: str) -> None:
    with pytest.raises(InputError) as refused:
        cloud_ids.endpoint(endpoint)
    assert refused.value.field == "endpoint"


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:9000",
        "http://127.8.9.10:9000",
        "http://[::1]:9000",
        "https://minio.lab:9000",
        "https://s3.us-east-1.amazonaws.com",
    ],
)
def test_local_and_tls_endpoints_are_taken(endpoint: str) -> None:
    assert cloud_ids.endpoint(endpoint) == endpoint


def test_a_prefix_must_end_with_a_slash() -> None:
    """ "runs/exp1" would also match runs/exp10/, which is not ours."""
    with pytest.raises(InputError, match="must end with '/'"):
        cloud_ids.native_id(ResourceKind.BUCKET_PREFIX, "shared/runs/exp1")
    with pytest.raises(InputError, match="kind bucket"):
        cloud_ids.native_id(ResourceKind.BUCKET_PREFIX, "shared/")


_NO_CREDS = Credentials()


@pytest.mark.parametrize("name", ["Aliyun", "Tencent Cloud", "Huawei Cloud"])
async def test_inspect_sees_what_is_there_and_a_typo_is_not_found(cloud: Cloud, name: str) -> None:
    """inspect is the read-back call read as a sighting: there, or not found (a typo, a
    wrong region: what the runner will not count as gone); it deletes nothing."""
    state = json.loads(cloud.state.read_text())
    cloud.state.write_text(json.dumps({**state, "ids": ["s-bp1snap"]}))
    p = provider(name)
    steps = plan_cloud(
        facts(
            [(ResourceKind.SNAPSHOT, "s-bp1snap"), (ResourceKind.SNAPSHOT, "s-bp1typo")], provider=p
        )
    )
    driver = drivers(p, steps, cloud)["cmd"]
    there, typo = [await driver.inspect(s) for s in sorted(steps, key=lambda s: s.target)]
    assert there.exists is True, there
    assert there.facts["region"] == "cn-hangzhou" and there.facts["cli"] == PROGRAM[name]
    assert typo.exists is False, typo
    assert cloud.ids() == ["s-bp1snap"]
    assert not [c for c in cloud.calls() if any("Delete" in a for a in c["argv"])]


async def test_inspect_that_cannot_tell_says_so(cloud: Cloud) -> None:
    shutil.rmtree(cloud.bin)
    p = provider("Aliyun")
    [step] = plan_cloud(facts([(ResourceKind.DISK, "d-1")], provider=p))
    seen = await drivers(p, [step], cloud)["cmd"].inspect(step)
    assert seen.exists is None and "not found on PATH" in seen.detail
