"""Two leases claiming one cloud thing: refused at `zuka resource add` and `zuka import`,
naming both; and the pure check the planner runs over a ledger that already holds one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leases.core.models import ResourceKind
from leases.ledger.claims import Claim, ledger_claims, overlap, overlaps
from leases.ledger.store import Ledger
from tests.support.cli import Cli


@pytest.fixture
def two_leases(cli: Cli) -> Cli:
    """Nodes a and b on one cloud account (111, cn-north-1), an open lease each."""
    for args in (
        ("provider", "add", "Cloudy", "--kind", "cloud", "--account-id", "111",
         "--region", "cn-north-1"),
        ("provider", "add", "Other", "--kind", "cloud", "--account-id", "222",
         "--region", "cn-north-1"),
        ("node", "add", "a", "--ssh", "ssh root@127.0.0.1", "--provider", "Cloudy"),
        ("node", "add", "b", "--ssh", "ssh root@127.0.0.2", "--provider", "Cloudy"),
        ("node", "add", "c", "--ssh", "ssh root@127.0.0.3", "--provider", "Other"),
        ("lease", "add", "a", "--billing", "hourly", "--price", "10", "--start", "2026-01-01"),
        ("lease", "add", "b", "--billing", "hourly", "--price", "10", "--start", "2026-01-01"),
        ("lease", "add", "c", "--billing", "hourly", "--price", "10", "--start", "2026-01-01"),
    ):  # fmt: skip
        r = cli(*args)
        assert r.code == 0, r.err
    return cli


def add(cli: Cli, node: str, kind: str, native: str, *more: str) -> tuple[int, str]:
    r = cli("resource", "add", node, "--kind", kind, "--id", native, *more)
    return r.code, r.out + r.err


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (("bucket", "lab-ckpt"), ("bucket", "lab-ckpt"), "the same bucket"),
        (("bucket", "lab-ckpt"), ("bucket_prefix", "lab-ckpt/runs/"), "a bucket and a prefix"),
        (("bucket_prefix", "lab-ckpt/runs/"), ("bucket", "lab-ckpt"), "a bucket and a prefix"),
        (("bucket_prefix", "lab/runs/"), ("bucket_prefix", "lab/runs/exp1/"), "one prefix inside"),
        (("snapshot", "snap-0abc"), ("snapshot", "snap-0abc"), "the same snapshot id"),
        (("disk", "vol-0abc"), ("disk", "vol-0abc"), "the same disk id"),
    ],
)
def test_a_resource_another_lease_still_claims_is_refused_naming_both(
    two_leases: Cli, ledger_path: Path, first: tuple[str, str], second: tuple[str, str], why: str
) -> None:
    assert add(two_leases, "a", *first)[0] == 0
    code, said = add(two_leases, "b", *second)
    assert code != 0
    assert why in said and "node a's lease" in said and first[1] in said, said
    with Ledger.open(ledger_path) as ledger:
        assert [r.native_id for _, _, r in ledger.resources("b")] == []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("bucket_prefix", "lab/runs/"), ("bucket_prefix", "lab/logs/")),
        (("bucket", "lab-ckpt"), ("bucket", "lab-ckpt-2")),
        (("snapshot", "snap-0abc"), ("snapshot", "snap-0abd")),
    ],
)
def test_things_that_do_not_overlap_are_taken(
    two_leases: Cli, first: tuple[str, str], second: tuple[str, str]
) -> None:
    assert add(two_leases, "a", *first)[0] == 0
    assert add(two_leases, "b", *second)[0] == 0


def test_the_same_snapshot_id_elsewhere_is_another_snapshot(two_leases: Cli) -> None:
    """Another region, or another account (node c's provider): not the same snapshot.
    A bucket at another endpoint is another bucket."""
    assert add(two_leases, "a", "snapshot", "snap-0abc")[0] == 0
    assert add(two_leases, "b", "snapshot", "snap-0abc", "--region", "cn-south-1")[0] == 0
    assert add(two_leases, "c", "snapshot", "snap-0abc")[0] == 0
    assert add(two_leases, "a", "bucket", "lab", "--endpoint", "https://minio.lab.cn")[0] == 0
    assert add(two_leases, "b", "bucket", "lab", "--endpoint", "https://s3.example.cn")[0] == 0
    assert add(two_leases, "c", "bucket", "lab", "--endpoint", "https://minio.lab.cn:443/")[0]


def test_a_claim_verified_deleted_no_longer_blocks(two_leases: Cli) -> None:
    assert add(two_leases, "a", "bucket", "lab-ckpt")[0] == 0
    r = two_leases(
        "resource", "edit", "a", "--kind", "bucket", "--id", "lab-ckpt",
        "--deleted", "--verified", "--notes", "deleted in the console, seen gone",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert add(two_leases, "b", "bucket", "lab-ckpt")[0] == 0


def test_the_refusal_names_only_flags_resource_edit_takes(two_leases: Cli) -> None:
    """The way out the refusal gives must be one `zuka resource edit` accepts: it named
    --verified-at, which argparse refuses (the flag is --verified)."""
    assert add(two_leases, "a", "bucket", "lab-ckpt")[0] == 0
    code, said = add(two_leases, "b", "bucket", "lab-ckpt")
    assert code != 0 and "zuka resource edit" in said, said
    hint = said.split("zuka resource edit", 1)[1].split(")", 1)[0]
    flags = re.findall(r"--[a-z][a-z-]*", hint)
    assert flags, said
    usage = two_leases("resource", "edit", "--help").out
    for flag in flags:
        assert re.search(rf"{flag}\b(?!-)", usage), f"{flag} is not a resource edit flag: {said}"
    r = two_leases(
        "resource", "edit", "a", "--kind", "bucket", "--id", "lab-ckpt",
        *[f if f != "--notes" else f"{f}=seen gone in the console" for f in flags],
    )  # fmt: skip
    assert r.code == 0, r.err
    assert add(two_leases, "b", "bucket", "lab-ckpt")[0] == 0


def test_an_import_that_claims_what_a_lease_holds_is_refused_whole(
    two_leases: Cli, tmp_path: Path, ledger_path: Path
) -> None:
    assert add(two_leases, "a", "bucket", "lab-ckpt")[0] == 0
    export = json.loads(two_leases("export", "--format", "json").out)
    # The same node b and its lease in another file, now holding a prefix of a's bucket.
    lease_b = next(le for le in export["leases"] if le["node"] == "b")
    records = ("providers", "nodes", "leases", "resources")
    doc = {
        **{k: v for k, v in export.items() if k not in records},
        "resources": [
            {
                "node": "b",
                "lease_start": lease_b["start"],
                "kind": "bucket_prefix",
                "native_id": "lab-ckpt/runs/",
            }
        ],
    }
    dump = tmp_path / "more.json"
    dump.write_text(json.dumps(doc))
    r = two_leases("import", str(dump))
    assert r.code != 0
    assert "resource 1" in r.err + r.out and "a bucket and a prefix in it" in r.err + r.out
    with Ledger.open(ledger_path) as ledger:
        assert [r.native_id for _, _, r in ledger.resources("b")] == []


def test_overlaps_finds_the_pairs_already_in_a_ledger(two_leases: Cli, ledger_path: Path) -> None:
    """A ledger edited behind zuka's back already holds two claims on one bucket: the pure
    check the planner runs names both leases."""
    assert add(two_leases, "a", "bucket", "lab-ckpt")[0] == 0
    assert add(two_leases, "b", "bucket", "lab-other")[0] == 0
    with Ledger.open(ledger_path) as ledger:
        ledger.conn.execute("UPDATE resources SET native_id = 'lab-ckpt' WHERE native_id = ?",
                            ["lab-other"])  # fmt: skip
        ledger.conn.commit()
        found = overlaps(ledger_claims(ledger.conn))
    assert len(found) == 1
    text = found[0].text()
    assert "node a's lease" in text and "node b's lease" in text and "the same bucket" in text


def test_overlap_is_symmetric_and_a_missing_region_hides_nothing() -> None:
    def claim(lease: int, kind: ResourceKind, native: str, region: str = "") -> Claim:
        return Claim(lease, f"n{lease}", kind, native, region, "", "111")

    a = claim(1, ResourceKind.SNAPSHOT, "snap-1", "cn-north-1")
    b = claim(2, ResourceKind.SNAPSHOT, "snap-1")
    assert overlap(a, b) and overlap(b, a)
    p = claim(1, ResourceKind.BUCKET_PREFIX, "lab/runs/exp1/")
    q = claim(2, ResourceKind.BUCKET_PREFIX, "lab/runs/")
    assert overlap(p, q) == overlap(q, p) == "one prefix inside the other"
    assert overlaps([p, claim(1, ResourceKind.BUCKET, "lab")]) == []  # one lease: no clash


def test_an_overlap_already_in_the_ledger_blocks_the_plan_naming_both(
    two_leases: Cli, ledger_path: Path
) -> None:
    """Through `zuka offboard`: no plan is made (nor run) for a node whose bucket another
    lease also claims; the other node's plan is blocked too; a node apart plans as ever."""
    assert add(two_leases, "a", "bucket", "lab-ckpt", "--region", "cn-north-1")[0] == 0
    assert add(two_leases, "b", "bucket", "lab-other", "--region", "cn-north-1")[0] == 0
    assert add(two_leases, "c", "bucket", "lab-c", "--region", "cn-north-1")[0] == 0
    with Ledger.open(ledger_path) as ledger:
        ledger.conn.execute("UPDATE resources SET native_id = 'lab-ckpt' WHERE native_id = ?",
                            ["lab-other"])  # fmt: skip
        ledger.conn.commit()
        (rid,) = ledger.conn.execute(
            "SELECT r.id FROM resources r JOIN leases l ON l.id = r.lease_id"
            " JOIN nodes n ON n.id = l.node_id WHERE n.name = 'b'"
        ).fetchone()
    # b's plan rests on a row nobody recorded (leases.ledger.rowaudit); taken as it is, the
    # overlap itself blocks both.
    edited = two_leases("offboard", "b")
    assert edited.code == 2 and f"resource {rid} of node 'b' was edited outside zuka" in edited.err
    assert two_leases("audit", "accept", "resource", str(rid)).code == 0
    for node in ("a", "b"):
        for args in ((), ("--execute", "--confirm", node), ("--inspect",)):
            r = two_leases("offboard", node, *args)
            assert r.code == 2, (node, args, r.out)
            assert "two leases claim the same thing" in r.err
            assert "node a's lease" in r.err and "node b's lease" in r.err
    assert two_leases("offboard", "c").code == 0
    with Ledger.open(ledger_path) as ledger:
        planned = {n for (n,) in ledger.conn.execute(
            "SELECT n.name FROM offboard_plans p JOIN nodes n ON n.id = p.node_id")}  # fmt: skip
    assert planned == {"c"}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Recorded without an endpoint (the provider's default: AWS, or a CLI template's
        # store) and with AWS's own endpoint named: one bucket. A missing fact never hides
        # an overlap.
        ("", "https://s3.cn-north-1.amazonaws.com.cn"),
        ("https://s3.cn-north-1.amazonaws.com.cn", ""),
        # AWS bucket names are one namespace across its regions (and Aliyun OSS's across
        # its own, public or -internal endpoints): another regional host is the same store.
        ("https://s3.amazonaws.com", "https://s3.eu-west-1.amazonaws.com"),
        ("https://oss-cn-hangzhou.aliyuncs.com", "https://oss-cn-hangzhou-internal.aliyuncs.com"),
        # A host name's trailing dot names the same host.
        ("https://minio.lab.cn", "https://MINIO.lab.cn./"),
    ],
)
def test_one_bucket_recorded_at_two_spellings_of_its_place_is_refused(
    two_leases: Cli, ledger_path: Path, first: str, second: str
) -> None:
    """Found by the attacker review: lease a's bucket recorded without an endpoint, lease b's
    at https://s3.cn-north-1.amazonaws.com.cn: both were taken, and offboarding b would have
    emptied and deleted a's bucket (the plan's own overlap check missed it too)."""
    at_first = ("--endpoint", first) if first else ()
    at_second = ("--endpoint", second) if second else ()
    assert add(two_leases, "a", "bucket", "lab-ckpt", *at_first)[0] == 0
    code, said = add(two_leases, "b", "bucket_prefix", "lab-ckpt/runs/", *at_second)
    assert code != 0, said
    assert "node a's lease" in said, said
    with Ledger.open(ledger_path) as ledger:
        assert [r.native_id for _, _, r in ledger.resources("b")] == []


def test_resource_edit_corrects_a_typo_a_region_or_an_endpoint_as_add_checks_them(
    two_leases: Cli, ledger_path: Path
) -> None:
    """A disk recorded in the wrong region, a mistyped snapshot id: corrected in place (an
    audit entry, undone by undo), checked as an added one is (the same lease twice,
    another lease's claim, a bad endpoint); never once marked deleted."""
    cli = two_leases
    assert add(cli, "a", "disk", "vol-1", "--region", "cn-north-2")[0] == 0
    assert add(cli, "a", "snapshot", "snap-typo", "--region", "cn-north-1")[0] == 0
    assert add(cli, "a", "snapshot", "snap-2", "--region", "cn-north-1")[0] == 0
    assert add(cli, "b", "snapshot", "snap-b", "--region", "cn-north-1")[0] == 0
    r = cli("resource", "edit", "a", "--kind", "disk", "--id", "vol-1", "--region", "cn-north-1")
    assert r.code == 0, r.err
    with Ledger.open(ledger_path) as ledger:
        disk = next(x for _, _, x in ledger.resources("a") if x.native_id == "vol-1")
    assert disk.region == "cn-north-1"
    for args, said in (
        (("--new-id", "snap-2"), "already recorded"),  # the same lease holds it
        (("--new-id", "snap-b"), "node b's lease"),  # another lease claims it
        (("--endpoint", "http://10.0.0.1"), "endpoint"),  # plain http off this machine
    ):
        r = cli("resource", "edit", "a", "--kind", "snapshot", "--id", "snap-typo", *args)
        assert r.code == 2 and said in r.err, (args, r.err)
    r = cli(
        "resource", "edit", "a", "--kind", "snapshot", "--id", "snap-typo", "--new-id", "snap-1"
    )
    assert r.code == 0, r.err
    assert cli("undo").code == 0  # the correction is one command, undone whole
    with Ledger.open(ledger_path) as ledger:
        ids = {x.native_id for _, _, x in ledger.resources("a")}
    assert "snap-typo" in ids and "snap-1" not in ids
    assert (
        cli("resource", "edit", "a", "--kind", "snapshot", "--id", "snap-2", "--deleted").code == 0
    )
    r = cli("resource", "edit", "a", "--kind", "snapshot", "--id", "snap-2", "--new-id", "snap-3")
    assert r.code == 2 and "marked deleted" in r.err
