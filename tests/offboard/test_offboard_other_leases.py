"""Every resource of the node that is not gone is in the plan or in its NOT deleted list,
whatever lease it was recorded on: those of the node's earlier leases are listed with
their lease, never selected, until the user includes one by id (or keeps it, with a
reason). A resource no step can delete is listed too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.offboard import evidence, runner
from leases.offboard.evidence import State
from tests.offboard.test_offboard import _run
from tests.support.cli import Cli
from tests.support.offboard_files import PLANNERS


@pytest.fixture
def earlier(fleet: Path, cli: Cli, ledger_path: Path) -> Path:
    """n1 had a lease before this one, and a bucket recorded on it still billing."""
    for args in (
        ("lease", "add", "n1", "--billing", "monthly", "--price", "50",
         "--start", "2025-01-01", "--end", "2025-05-01"),
        ("resource", "add", "n1", "--kind", "bucket", "--id", "old-bkt",
         "--region", "cn-north-1", "--lease-start", "2025-01-01"),
        ("resource", "add", "n1", "--kind", "bucket", "--id", "older-bkt",
         "--region", "cn-north-1", "--lease-start", "2025-01-01"),
    ):  # fmt: skip
        r = cli(*args)
        assert r.code == 0, r.err
    with Ledger.open(ledger_path) as ledger:  # ended at its end, as `lease end` would
        first = ledger.leases("n1")[0]
        ledger.update_lease("n1", {"ended_at": "2025-05-01T00:00:00+08:00"}, start=first.start)
    for name in ("old-bkt", "older-bkt"):
        (fleet / "cloud" / "111" / name).mkdir()
    return fleet


def _replan(ledger: Ledger, **kw: object) -> evidence.StoredPlan:
    fresh = runner.replan(ledger, ledger.node("n1"), Config(), PLANNERS, **kw)  # type: ignore[arg-type]
    stored, _ = evidence.store(ledger, fresh)
    return stored


def test_an_earlier_leases_bucket_is_listed_not_deleted(
    earlier: Path, ledger_path: Path, cli: Cli
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _replan(ledger)
        assert "s3:old-bkt" not in {s.key for s in stored.plan.steps}
        refs = {x.ref: x for x in stored.plan.left}
        assert set(refs) == {"bucket:old-bkt", "bucket:older-bkt"}
        assert refs["bucket:old-bkt"].why == "other-lease"
        lines = stored.plan.not_deleted()
        line = next(x for x in lines if x.startswith("bucket:old-bkt"))
        assert "recorded on the node's lease from 2025-01-01" in line
        assert "zuka offboard n1 --include bucket:old-bkt" in line
    # The command line prints it (with the real planners), and the JSON has it.
    plan = cli("offboard", "n1")
    assert "NOT deleted: bucket:old-bkt" in plan.out
    data = json.loads(cli("offboard", "n1", "--json").out)
    assert any("bucket:older-bkt" in x for x in data["not_deleted"])


async def test_an_included_bucket_of_an_earlier_lease_is_deleted_and_the_rest_kept(
    earlier: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        first = _replan(ledger)
        with pytest.raises(InputError, match="not a resource of n1's other leases"):
            _replan(ledger, include=["bucket:old-bk"])  # a typo
        with pytest.raises(InputError, match="needs --reason"):
            _replan(ledger, keep={"bucket:older-bkt": ""})
        second = _replan(ledger, include=["bucket:old-bkt"])
        assert second.hash != first.hash
        assert "s3:old-bkt" in {s.key for s in second.plan.steps}
        # Made again without naming it, the plan in force keeps what it included.
        third = _replan(ledger, keep={"bucket:older-bkt": "the next lease reuses it"})
        assert "s3:old-bkt" in {s.key for s in third.plan.steps}
        kept = next(x for x in third.plan.left if x.ref == "bucket:older-bkt")
        assert kept.kept.endswith("the next lease reuses it")
        assert any("kept, as" in x for x in third.plan.not_deleted())
        result = await _run(ledger, earlier)
        assert result.finished, result.reason
        assert result.stored.state("s3:old-bkt").state is State.VERIFIED
        assert not (earlier / "cloud" / "111" / "old-bkt").exists()
        assert (earlier / "cloud" / "111" / "older-bkt").exists()
        old = next(r for _, _, r in ledger.resources("n1") if r.native_id == "old-bkt")
        assert old.verified_at is not None
        assert evidence.problems(ledger) == []


def test_include_and_keep_are_refused_with_execute_and_need_a_reason(
    earlier: Path, cli: Cli
) -> None:
    r = cli("offboard", "n1", "--include", "bucket:old-bkt", "--execute", "--confirm", "n1")
    assert r.code == 2 and "give them alone" in r.err
    r = cli("offboard", "n1", "--keep", "bucket:old-bkt")
    assert r.code == 2 and "needs --reason" in r.err
    r = cli("offboard", "n1", "--include", "snapshot:nope")
    assert r.code == 2 and "bucket:old-bkt" in r.err  # the candidates are named
    ok = cli("offboard", "n1", "--include", "bucket:old-bkt")
    assert ok.code == 0, ok.err
    assert "old-bkt" in ok.out.split("what each step does")[0]  # its step, in the table
    assert "NOT deleted: bucket:old-bkt" not in ok.out and "NOT deleted: bucket:older-bkt" in ok.out
