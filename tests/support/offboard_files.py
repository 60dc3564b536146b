"""Test planners and drivers for the offboarding engine that act on REAL files: a "files"
driver deletes files under a root (standing in for the SSH part's shred), a "s3" cloud
driver deletes directories (standing in for buckets) and says which account it acts as.
Every run call is logged to calls.log (fsync'd) so a test can count the actions; the
Killer wrapper SIGKILLs its own process at a chosen point of a chosen step.
"""

from __future__ import annotations

import os
import shutil
import signal
from datetime import UTC, datetime
from pathlib import Path

from leases.config.sections import Config
from leases.core.models import Node, ResourceKind
from leases.ledger.store import Ledger
from leases.offboard.manual import ManualDriver, plan_manual
from leases.offboard.preflight import PreflightDriver, plan_preflight
from leases.offboard.release import LedgerDriver, plan_release
from leases.offboard.steps import (
    Driver,
    Identity,
    Outcome,
    Phase,
    PlanInput,
    Sighting,
    Step,
    params,
)


def plan_files(facts: PlanInput) -> list[Step]:
    steps = [
        Step(
            key="facts:root",
            phase=Phase.FACTS,
            driver="ssh",
            action="facts",
            target="root",
            destructive=False,
            describe="list the root",
        )
    ]
    for r in facts.resources:
        if r.kind is ResourceKind.SCRATCH_PATH:
            steps.append(
                Step(
                    key=f"shred:{r.native_id}",
                    phase=Phase.SHRED,
                    driver="ssh",
                    action="delete",
                    target=r.native_id,
                    destructive=True,
                    describe=f"rm -- {r.native_id}",
                    resource_id=r.id,
                )
            )
        elif r.kind is ResourceKind.BUCKET:
            steps.append(
                Step(
                    key=f"s3:{r.native_id}",
                    phase=Phase.BUCKETS,
                    driver="s3",
                    action="delete-bucket",
                    target=r.native_id,
                    destructive=True,
                    describe=f"delete bucket {r.native_id}",
                    params=params(region=r.region),
                    resource_id=r.id,
                )
            )
    return steps


PLANNERS = (plan_preflight, plan_files, plan_manual, plan_release)


def _log(root: Path, line: str) -> None:
    fd = os.open(root / "calls.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def calls(root: Path) -> list[str]:
    path = root / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


class FileDriver:
    """Stands in for the SSH part's driver (so it is named "ssh")."""

    name = "ssh"

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, step: Step) -> Path:
        return self.root / "node" / step.target.lstrip("/")

    async def run(self, step: Step) -> Outcome:
        if step.action == "facts":
            return Outcome(True, "\n".join(sorted(p.name for p in (self.root / "node").iterdir())))
        path = self._path(step)
        if path.exists():
            path.unlink()
            _log(self.root, f"{step.key} acted")
            return Outcome(True, f"deleted {step.target}")
        _log(self.root, f"{step.key} gone")
        return Outcome(True, f"{step.target} already gone")

    async def inspect(self, step: Step) -> Sighting:
        path = self._path(step)
        if not path.exists():
            return Sighting(False, f"{step.target}: No such file", facts={"path": step.target})
        return Sighting(
            True, f"{step.target}: {path.stat().st_size} bytes", facts={"path": step.target}
        )

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        if step.action == "facts":
            return Outcome(True, "a fact")
        gone = not self._path(step).exists()
        return Outcome(gone, f"{step.target} {'not found' if gone else 'still there'}")


class BucketDriver:
    """A cloud driver over directories: root/cloud/<account>/<bucket>."""

    name = "s3"

    def __init__(self, root: Path, account: str = "111", region: str = "cn-north-1") -> None:
        self.root = root
        self.account = account
        self.region = region

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        return Identity(self.account, self.region, f"arn:test:{self.account}")

    def _path(self, step: Step) -> Path:
        return self.root / "cloud" / self.account / step.target

    async def run(self, step: Step) -> Outcome:
        path = self._path(step)
        if path.exists():
            shutil.rmtree(path)
            _log(self.root, f"{step.key} acted")
            return Outcome(True, f"DeleteBucket {step.target}: 204")
        _log(self.root, f"{step.key} gone")
        return Outcome(True, f"HeadBucket {step.target}: 404 (already gone)")

    async def inspect(self, step: Step) -> Sighting:
        path = self._path(step)
        there = path.exists()
        where = {"account": self.account, "region": self.region}
        if there:
            made = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()
            where["created"] = made
        return Sighting(
            there, f"HeadBucket {step.target}: {'200' if there else '404'}", facts=where
        )

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        gone = not self._path(step).exists()
        return Outcome(gone, f"HeadBucket {step.target}: {'404' if gone else '200'}")


class Killer:
    """A driver that SIGKILLs this process at one point of one step: before its run acts,
    after its run acted (before the engine records it), or in its verify."""

    def __init__(self, inner: Driver, kill_at: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.kill_at = kill_at

    def _maybe(self, step: Step, point: str) -> None:
        if self.kill_at == f"{step.key}@{point}":
            os.kill(os.getpid(), signal.SIGKILL)

    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        ask = self.inner.identity  # type: ignore[attr-defined]
        who: Identity = await ask(endpoint, region)
        return who

    async def run(self, step: Step) -> Outcome:
        self._maybe(step, "before")
        out = await self.inner.run(step)
        self._maybe(step, "after")
        return out

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        self._maybe(step, "verify")
        return await self.inner.verify(step, patient=patient)

    async def inspect(self, step: Step) -> Sighting:
        self._maybe(step, "inspect")
        return await self.inner.inspect(step)


async def gone(_: Step) -> bool:
    return False


class ReleasedByHand(ManualDriver):
    """The console step as the user does it: the node answers at its address until the
    step's run, once the user said they released it (--did); then root/released exists
    and it answers no more."""

    def __init__(self, root: Path, node: str, did: frozenset[str], actor: str) -> None:
        async def answers(_: Step) -> bool:
            return not (root / "released").exists()

        super().__init__(node, did, answers, actor)
        self.root = root

    async def run(self, step: Step) -> Outcome:
        out = await super().run(step)
        if out.done:
            (self.root / "released").touch()
        return out


def drivers(
    ledger: Ledger, node: Node, root: Path, *, account: str = "111", kill_at: str = ""
) -> dict[str, Driver]:
    table: dict[str, Driver] = {}
    inner: list[Driver] = [
        PreflightDriver(ledger, Config(), table),
        FileDriver(root),
        BucketDriver(root, account),
        ReleasedByHand(root, node.name, frozenset({"manual:release-instance"}), ledger.actor),
        LedgerDriver(ledger),
    ]
    for d in inner:
        table[d.name] = Killer(d, kill_at) if kill_at else d
    return table
