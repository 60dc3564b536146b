"""`zuka offboard` end to end: the real CLI, the real wiring (leases.offboard.wiring) and
real peers. The node is an in-process SSH server that runs each command in a real sh on
the test's own files (tests/support/shellnode.py), with the lab's key in its real authorized_keys;
the cloud is a moto server (S3, EC2, STS) behind a proxy that records every request, the
edge where the test counts what the cloud was asked to delete. Credentials come from
`env:TESTCLOUD` (moto checks none); moto's account is the provider's.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from botocore.exceptions import ClientError

from leases.ledger.store import Ledger
from leases.offboard import report
from leases.offboard.nodescripts import shred_script
from tests.support.cli import Cli
from tests.support.cloudfixtures import (
    ENVIRON,
    MOTO_ACCOUNT,
    REGION,
    RecordingProxy,
    all_versions,
    client,
    reset_moto,
    versioned_bucket,
)
from tests.support.shellnode import ServedNode
from tests.support.sshfixtures import TestKeys


@pytest.fixture
def cloud(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    """A fresh moto (its built-in images off), the credentials zuka reads from env:TESTCLOUD,
    and the recording proxy zuka is pointed at."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    reset_moto(moto_endpoint)
    with RecordingProxy(moto_endpoint) as proxy:
        yield proxy


@dataclass
class Lab:
    served: ServedNode
    proxy: RecordingProxy
    config: Path
    scratch: Path  # the declared root
    outside: Path  # beside it: must stay
    snapshot: str  # the ledger's
    other_snapshot: str  # not in the ledger

    @property
    def ckpt(self) -> Path:
        return self.scratch / "ckpt"  # declared: a scratch_path resource

    def s3(self) -> Any:
        return client("s3", self.proxy.upstream)

    def ec2(self) -> Any:
        return client("ec2", self.proxy.upstream)


def make_lab(
    cli: Cli,
    root: Path,
    keys: TestKeys,
    proxy: RecordingProxy,
    ledger: Path,
    account: str,
    verify_timeout_s: float = 30,
) -> Lab:
    """Node n1 on provider Compat (account `account`), its lease, a declared scratch
    directory, a versioned bucket and an EBS snapshot in the ledger; beside them a bucket
    and a snapshot that are not, and files under the root and outside that were not
    declared. The node is served and its host key pinned; stop it with served.close()."""
    scratch, outside = root / "scratch", root / "outside"
    (scratch / "ckpt" / "deep").mkdir(parents=True)
    (scratch / "ckpt" / "epoch_1.pt").write_bytes(b"weights" * 1000)
    (scratch / "ckpt" / "deep" / "data.bin").write_bytes(b"secret")
    (scratch / "keep.txt").write_text("not declared")
    outside.mkdir()
    (outside / "keep.txt").write_text("not ours")
    config = root / "config.toml"
    config.write_text(
        f'[offboard]\nscratch_roots = ["{scratch}"]\nverify_timeout_s = {verify_timeout_s}\n'
    )
    s3, ec2 = client("s3", proxy.upstream), client("ec2", proxy.upstream)
    versioned_bucket(s3, "lab-ckpt")
    versioned_bucket(s3, "not-ours")
    volume = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=1)["VolumeId"]
    ours, other = (
        ec2.create_snapshot(VolumeId=volume, Description=d)["SnapshotId"] for d in ("ours", "x")
    )
    served = ServedNode(keys, root / "n1").start()
    (served.home / ".bash_history").write_text("export HF_TOKEN=hf_secret\n")
    served.pin(ledger)
    where = ("--endpoint", proxy.endpoint, "--region", REGION)
    for args in (
        ("provider", "add", "Compat", "--kind", "cloud", "--account-id", account,
         "--region", REGION, "--credential-ref", "env:TESTCLOUD"),
        ("node", "add", "n1", "--ssh", served.login, "--provider", "Compat"),
        ("lease", "add", "n1", "--billing", "monthly", "--price", "100",
         "--start", "2025-06-01", "--end", "2030-01-01", "--deposit", "500"),
        ("resource", "add", "n1", "--kind", "scratch_path", "--id", str(scratch / "ckpt")),
        ("resource", "add", "n1", "--kind", "bucket", "--id", "lab-ckpt", *where),
        ("resource", "add", "n1", "--kind", "snapshot", "--id", ours, *where),
    ):  # fmt: skip
        r = cli(*args, ledger=ledger)
        assert r.code == 0, (args, r.err)
    return Lab(served, proxy, config, scratch, outside, ours, other)


@pytest.fixture
def lab(
    cli: Cli, tmp_path: Path, keys: TestKeys, cloud: RecordingProxy, ledger_path: Path
) -> Iterator[Lab]:
    made = make_lab(cli, tmp_path, keys, cloud, ledger_path, MOTO_ACCOUNT)
    try:
        yield made
    finally:
        made.served.close()


def node_jobs(folder: Path) -> list[str]:
    """Processes on this machine (the test's node) at work for an offboarding under folder:
    a job of remote_job (its files under ~/.zuka-offboard), or anything whose command line
    or working directory lies under folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cmd.startswith(("sshd", "/usr/sbin/sshd")):
            continue  # the node's sshd itself (its config lies under folder)
        if ".zuka-offboard" in cmd or str(folder) in cmd or cwd.startswith(str(folder) + "/"):
            found.append(f"{entry.name}: {cmd[:200]}")
    return found


def node_jobs_end(folder: Path, timeout: float = 15.0) -> bool:
    """True once no node job of ours runs (a cut-off job is killed within about a second
    of its channel closing: remote_job's heartbeat)."""
    deadline = time.monotonic() + timeout
    while node_jobs(folder):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def blob(keys: TestKeys) -> str:
    return keys.client_key.export_public_key().decode().split()[1]


async def logs_in(served: ServedNode) -> bool:
    """A fresh login offering only the lab's key: False when the node refuses it."""
    try:
        conn = await asyncssh.connect(
            "127.0.0.1",
            served.node.port,
            username="root",
            client_keys=[str(served.key_path)],
            known_hosts=None,
            agent_path=None,
            config=[],
        )
    except asyncssh.PermissionDenied:
        return False
    conn.close()
    await conn.wait_closed()
    return True


def snapshot_ids(lab: Lab) -> set[str]:
    found = lab.ec2().describe_snapshots(OwnerIds=["self"])["Snapshots"]
    return {s["SnapshotId"] for s in found}


def bucket_gone(lab: Lab, name: str) -> bool:
    try:
        lab.s3().head_bucket(Bucket=name)
    except ClientError as exc:
        return bool(exc.response["ResponseMetadata"]["HTTPStatusCode"] == 404)
    return False


def test_offboard_end_to_end_through_the_cli_and_the_real_wiring(
    cli: Cli, lab: Lab, ledger_path: Path, keys: TestKeys
) -> None:
    cfg = ("--config", str(lab.config))
    assert asyncio.run(logs_in(lab.served))  # the lab's key works before
    others_before = sorted(all_versions(lab.s3(), "not-ours"))
    plan = cli("offboard", "n1", *cfg, "--json")
    assert plan.code == 0, plan.err
    keys_of_plan = [s["key"] for s in json.loads(plan.out)["steps"]]
    # The identity checks: one per place the steps call (driver, region, endpoint).
    at = f"@us-east-1@{lab.proxy.endpoint}"
    for key in (f"shred:{lab.ckpt}", "clear:~/.bash_history", "delete-bucket:us-east-1/lab-ckpt",
                f"delete-snapshot:us-east-1/{lab.snapshot}", f"preflight:identity:ec2{at}",
                f"preflight:identity:s3{at}", "manual:release-instance", "ledger:release"):  # fmt: skip
        assert key in keys_of_plan, (key, keys_of_plan)
    assert any(k.startswith("revoke-key:") for k in keys_of_plan)
    assert lab.served.node.ran == []  # a plan touches nothing
    assert not [s for s in lab.proxy.seen if "Delete" in s or s.startswith("DELETE")]

    first = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1")
    assert first.code == 1 and "waiting for you at manual:release-instance" in first.out, first.out
    # The node: the declared directory shredded, what was not declared untouched, the
    # history cleared, the lab's key gone (the other key stays), a fresh login refused.
    assert files(lab.scratch) == ["keep.txt"]
    assert files(lab.outside) == ["keep.txt"] and (lab.outside / "keep.txt").read_text() == (
        "not ours"
    )
    assert not (lab.served.home / ".bash_history").exists()
    assert blob(keys) not in lab.served.authorized()
    assert 'command="true"' in lab.served.authorized()
    assert not asyncio.run(logs_in(lab.served))
    # The cloud, read back: the ledger's bucket and snapshot gone, the others untouched.
    assert bucket_gone(lab, "lab-ckpt") and not bucket_gone(lab, "not-ours")
    assert sorted(all_versions(lab.s3(), "not-ours")) == others_before
    assert snapshot_ids(lab) == {lab.other_snapshot}
    assert lab.proxy.count("DELETE /lab-ckpt") == 1
    assert lab.proxy.count("POST / DeleteSnapshot") == 1
    assert not [s for s in lab.proxy.seen if "not-ours" in s and s.split()[0] in ("DELETE", "POST")]

    lab.served.release()  # the user releases the instance in the console
    done = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1",
               "--did", "manual:release-instance")  # fmt: skip
    assert done.code == 0 and "finished" in done.out, done.out + done.err
    with Ledger.open(ledger_path) as ledger:
        for _, _, res in ledger.resources("n1"):
            assert res.deleted_at is not None and res.verified_at is not None, res

    js = json.loads(cli("offboard", "n1", "--report", "--format", "json").out)
    assert js["finished"] and js["audit_chain"]["ok"]
    assert [s["key"] for s in js["steps"]] == keys_of_plan
    assert {s["state"] for s in js["steps"]} == {"verified"}
    md = cli("offboard", "n1", "--report").out
    for key in keys_of_plan:  # as the report shows text: inert in Markdown
        assert report.inert(key) in md, key
    assert cli("audit", "verify").code == 0
    # One byte of one offboarding audit entry (the revoke step's output) changed.
    raw = ledger_path.read_bytes()
    assert not Path(f"{ledger_path}-wal").exists()
    said = b"rewritten without the key"
    assert raw.count(said) == 1
    at = raw.index(said)
    ledger_path.write_bytes(raw[:at] + b"R" + raw[at + 1 :])
    broken = cli("audit", "verify")
    assert broken.code == 1 and "changed" in broken.out, broken.out


def test_a_mismatched_account_is_refused_at_preflight_and_nothing_is_deleted(
    cli: Cli, tmp_path: Path, keys: TestKeys, cloud: RecordingProxy, ledger_path: Path
) -> None:
    lab = make_lab(cli, tmp_path, keys, cloud, ledger_path, account="999999999999")
    try:
        cfg = ("--config", str(lab.config))
        assert cli("offboard", "n1", *cfg).code == 0
        run = cli("offboard", "n1", *cfg, "--execute", "--confirm", "n1", "--json")
        assert run.code == 1, run.out + run.err
        said = json.loads(run.out)
        assert said["stopped_at"] == f"preflight:identity:ec2@us-east-1@{lab.proxy.endpoint}"
        assert "999999999999" in said["reason"] and MOTO_ACCOUNT in said["reason"]
        # Nothing was touched: no command on the node, no deletion asked of the cloud.
        assert lab.served.node.ran == []
        assert not [s for s in lab.proxy.seen if "Delete" in s or s.startswith("DELETE")]
        assert files(lab.ckpt) == ["deep/data.bin", "epoch_1.pt"]
        assert blob(keys) in lab.served.authorized()
        assert not bucket_gone(lab, "lab-ckpt")
        assert snapshot_ids(lab) == {lab.snapshot, lab.other_snapshot}
    finally:
        lab.served.close()


TESTS = Path(__file__).parent.parent / "support"
KILL_POINTS = ("before", "after", "verify")


class Forks:
    """tests/support/offboard_cli_worker.py: zuka imported once, a forked child per run."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent.parent), str(TESTS)])}
        self.proc = subprocess.Popen(
            [sys.executable, str(TESTS / "offboard_cli_worker.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
        )  # fmt: skip

    def __enter__(self) -> Forks:
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "ready\n"
        return self

    def run(self, kill_at: str, output: Path, args: list[str]) -> int:
        """The exit code of one CLI run, killed at kill_at (-9 when it was)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([kill_at, str(output), *args]) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def __exit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def test_killed_at_every_step_through_the_real_wiring_each_deletion_happens_once(
    cli: Cli, tmp_path: Path, keys: TestKeys, cloud: RecordingProxy, ledger_path: Path
) -> None:
    """One offboarding through the real CLI and wiring whose process is SIGKILLed at each
    step in turn (tests/support/offboard_cli_worker.py wraps the drivers the wiring builds in
    offboard_files.Killer): the first child dies at step 1, the next resumes and dies at
    step 2, and so on; at every point (before the driver acts, after it acted but before
    the engine recorded it, in the read-back) of each step that deletes something there,
    before each other step (and in the read-back of those found gone). The node is
    released before the children reach the manual step. What was done is counted at the
    test's edge: the commands the node's sh ran (in this process) and the requests the
    recording proxy passed to moto.

    A read-back before acting waits for a deletion the cloud may finish later (up to
    [offboard] verify_timeout_s, 300 s by default): 2 s here, moto deletes at once."""
    lab = make_lab(cli, tmp_path, keys, cloud, ledger_path, MOTO_ACCOUNT, verify_timeout_s=2)
    try:
        _kill_at_every_step(cli, lab, ledger_path, keys)
    finally:
        lab.served.close()


def _kill_at_every_step(cli: Cli, lab: Lab, ledger_path: Path, keys: TestKeys) -> None:
    cfg = ("--config", str(lab.config))
    steps = json.loads(cli("offboard", "n1", *cfg, "--json").out)["steps"]
    shred = f"shred:{lab.ckpt}"
    snapshot = f"delete-snapshot:us-east-1/{lab.snapshot}"
    bucket = "delete-bucket:us-east-1/lab-ckpt"
    revoke = next(s["key"] for s in steps if s["action"] == "revoke-key")
    acting = {shred, "clear:~/.bash_history", snapshot, bucket, revoke, "ledger:release"}
    kills = [
        (s["key"], point)
        for s in steps
        for point in (
            KILL_POINTS if s["key"] in acting
            else ("before", "verify") if s["destructive"]  # gone already: read back only
            else ("before",)
        )
    ]  # fmt: skip
    args = ["offboard", "n1", "--execute", "--confirm", "n1", "--did", "manual:release-instance",
            *cfg, "--ledger", str(ledger_path)]  # fmt: skip
    output = lab.scratch.parent / "child.out"
    with Forks() as forks:
        for key, point in kills:
            # The user releases the instance in the console once the node's own steps are
            # through: after the child killed before the manual step.
            if key == "manual:release-instance" and point != "before" and lab.served.node.running:
                lab.served.release()
            code = forks.run(f"{key}@{point}", output, args)
            assert code == -9, f"{key}@{point}: {code} {output.read_text()[-3000:]}"
            # Nothing of the killed run is left at work on the node (no shred, find or
            # walker of ours), once the node's jobs notice the channel is gone.
            assert node_jobs_end(lab.scratch.parent), (
                f"{key}@{point}: {node_jobs(lab.scratch.parent)}"
            )
    done = cli(*args[:-2])
    assert done.code == 0 and "finished" in done.out, done.out + done.err

    # Each deletion of something there happened exactly once: on the node ...
    ran = lab.served.node.ran
    assert sum(shred_script(str(lab.ckpt), (str(lab.scratch),)) in c for c in ran) == 1
    cleared = [c for c in ran if 'p="$h"/.bash_history\n' in c and "shred -n 1 -z -u" in c]
    assert len(cleared) == 1, cleared
    assert len([c for c in ran if "mktemp" in c]) == 1  # the one rewrite of authorized_keys
    # ... what was not there was never acted on twice ...
    for s in steps:
        if s["action"] == "clear":
            word = f'p="$h"/{shlex.quote(s["target"].removeprefix("~/"))}\n'
            assert len([c for c in ran if word in c and "shred -n 1 -z -u" in c]) <= 1
    # ... and in the cloud (the batch delete of the versions, the bucket, the snapshot).
    # One DeleteObjects of the one page (its versions and delete markers together), as in
    # a run not killed; the unfinished upload aborted once.
    assert lab.proxy.count("POST /lab-ckpt") == 1, lab.proxy.seen
    assert lab.proxy.count("DELETE /lab-ckpt/ckpt/big.pt") == 1
    assert lab.proxy.count("DELETE /lab-ckpt") == 1
    assert lab.proxy.count("POST / DeleteSnapshot") == 1
    assert files(lab.scratch) == ["keep.txt"] and files(lab.outside) == ["keep.txt"]
    assert blob(keys) not in lab.served.authorized()
    assert bucket_gone(lab, "lab-ckpt") and not bucket_gone(lab, "not-ours")
    assert snapshot_ids(lab) == {lab.other_snapshot}
    with Ledger.open(ledger_path) as ledger:
        assert [e.action for e in ledger.history("n1")].count("lease.end") == 1
        assert ledger.verify_audit().ok
    js = json.loads(cli("offboard", "n1", "--report", "--format", "json").out)
    assert js["finished"] and {s["state"] for s in js["steps"]} == {"verified"}
