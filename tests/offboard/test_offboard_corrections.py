"""Attacks on `zuka resource edit`'s corrections and on what a plan counts as gone (the
attacker's last pass on the offboarding): a resource rewritten while its step runs, and a
resource that arrives marked verified by an imported file."""

from __future__ import annotations

from pathlib import Path

from leases.config.sections import Config
from leases.ledger.store import Ledger
from leases.offboard import evidence, runner
from leases.offboard.steps import Driver, Identity, Outcome, Sighting, Step
from tests.support.offboard_files import PLANNERS, drivers


class EditsMidRun:
    """The real (file-backed) bucket driver; while it deletes bkt-1, someone corrects the
    ledger's record in another terminal (`zuka resource edit n1 --kind bucket --id bkt-1
    --new-id not-ours`). Only the moment is arranged here: the edit is the real use case."""

    name = "s3"

    def __init__(self, inner: Driver, ledger: Ledger) -> None:
        self.inner, self.ledger = inner, ledger

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        who: Identity = await self.inner.identity(endpoint, region)  # type: ignore[attr-defined]
        return who

    async def run(self, step: Step) -> Outcome:
        out = await self.inner.run(step)
        if step.target == "bkt-1":
            self.ledger.update_resource("n1", "bucket", "bkt-1", {"new_id": "not-ours"})
        return out

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        return await self.inner.verify(step, patient=patient)

    async def inspect(self, step: Step) -> Sighting:
        return await self.inner.inspect(step)


async def test_a_resource_corrected_while_its_step_runs_is_not_marked_verified_gone(
    fleet: Path,
    ledger_path: Path,
) -> None:
    """The step deleted and read back bkt-1; the row it names now says not-ours, which
    nothing deleted or read back: the ledger must not record not-ours verified gone."""
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        fresh = runner.replan(ledger, node, Config(), PLANNERS)
        evidence.store(ledger, fresh)
        stored = runner.confirmed(ledger, node, fresh, "n1")
        table = drivers(ledger, node, fleet)
        table["s3"] = EditsMidRun(table["s3"], ledger)
        result = await runner.execute(ledger, stored, table)
        assert result.finished, result.reason
        assert not (fleet / "cloud" / "111" / "bkt-1").exists()
        assert (fleet / "cloud" / "111" / "not-ours").exists()
        row = next(r for _, _, r in ledger.resources("n1") if r.native_id == "not-ours")
        assert row.verified_at is None, row.notes


def test_a_resource_imported_marked_verified_is_listed_unproven(
    fleet: Path,
    ledger_path: Path,
) -> None:
    """An imported file's verified_at is the file's word, not zuka's: the plan lists the
    bucket as unproven (NOT deleted, to check or include), never leaves it out."""
    with Ledger.open(ledger_path) as ledger:
        start = ledger.leases("n1")[-1].start.isoformat()
        ledger.import_records(
            {
                "resources": [
                    {"node": "n1", "lease_start": start, "kind": "bucket", "native_id": "bkt-9",
                     "region": "cn-north-1", "deleted_at": "2026-01-01T00:00:00+08:00",
                     "verified_at": "2026-01-01T00:00:00+08:00", "notes": "all gone, trust me"}
                ]
            }
        )  # fmt: skip
        plan = runner.replan(ledger, ledger.node("n1"), Config(), PLANNERS)
        left = {x.ref: x.why for x in plan.left}
        assert left.get("bucket:bkt-9") == "unproven", left
