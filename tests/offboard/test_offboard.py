"""The offboarding engine (leases.offboard): plan and hash, preflight, a resumable run
with evidence on the audit chain, skip, consent, recheck, report, and `zuka offboard`.

The drivers here act on REAL files (tests/support/offboard_files.py): an "ssh" driver deletes
files, a cloud-like "s3" driver deletes directories standing for buckets. The SSH and
cloud parts test their own drivers against sshd and moto.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leases.config.sections import Config, OffboardConfig
from leases.core.models import NodeState, RefundState
from leases.ledger.files import SCHEMA_VERSION
from leases.ledger.store import Ledger
from leases.offboard import evidence, readback, report, runner
from leases.offboard.evidence import State
from leases.offboard.plan import Plan, plan_from_body
from leases.offboard.steps import Identity, Outcome, Phase, PlanInput, Sighting, Step
from tests.support.cli import Cli
from tests.support.offboard_files import PLANNERS, BucketDriver, FileDriver, calls, drivers
from tests.support.shellnode import ServedNode
from tests.support.sshfixtures import TestKeys
from tui.cli import output

TESTS = Path(__file__).parent.parent / "support"


def _plan(ledger: Ledger, config: Config | None = None) -> evidence.StoredPlan:
    node = ledger.node("n1")
    fresh = runner.replan(ledger, node, config or Config(), PLANNERS)
    stored, _ = evidence.store(ledger, fresh)
    return stored


async def _run(
    ledger: Ledger, root: Path, *, account: str = "111", choices: runner.Choices | None = None
) -> runner.RunResult:
    node = ledger.node("n1")
    fresh = runner.replan(ledger, node, Config(), PLANNERS)
    stored = runner.confirmed(ledger, node, fresh, "n1")
    table = drivers(ledger, node, root, account=account)
    return await runner.execute(ledger, stored, table, choices or runner.Choices())


def _blob(served: ServedNode) -> str:
    """The lab's public key as authorized_keys holds it (its base64 part)."""
    return served.node.keys.client_key.export_public_key().decode().split()[1]


def _destructive(stored: evidence.StoredPlan) -> list[str]:
    return [s.key for s in stored.plan.steps if s.destructive and s.driver in ("ssh", "s3")]


async def test_a_full_run_deletes_exactly_the_ledgers_things_and_verifies_each(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        keys = [s.key for s in stored.plan.steps]
        # Phase order: checks, the node's data, the cloud, manual, the ledger last.
        assert keys[0] == "preflight:lease" and "preflight:identity:s3" in keys
        assert keys[-2:] == ["manual:release-instance", "ledger:release"]
        assert keys.index("shred:/data/a") < keys.index("s3:bkt-1")
        result = await _run(ledger, fleet)
        assert result.finished, result.reason
        # Only what the ledger names went; the rest is untouched.
        assert sorted(p.name for p in (fleet / "node" / "data").iterdir()) == ["keep"]
        assert sorted(p.name for p in (fleet / "cloud" / "111").iterdir()) == ["not-ours"]
        assert Counter(calls(fleet)) == Counter(f"{k} acted" for k in _destructive(stored))
        # The ledger: every resource verified (with a note naming the evidence), the
        # lease ended, the deposit's refund pending, the node released.
        for _, _, res in ledger.resources("n1"):
            assert res.deleted_at is not None and res.verified_at is not None
            assert "offboarding plan" in res.notes and "audit entry" in res.notes
        lease = ledger.leases("n1")[0]
        assert lease.ended_at is not None and lease.deposit_refund is RefundState.PENDING
        assert ledger.node("n1").state is NodeState.RELEASED
        assert ledger.verify_audit().ok
        # Every step left its evidence on the chain: start, run and verify.
        done = evidence.load(ledger, stored.id)
        events = [(e.after or {}).get("step") for e in evidence.entries(ledger, [stored.id])]
        for key in keys:
            assert done.state(key).state is State.VERIFIED
            assert events.count(key) >= 3, key


async def test_a_rerun_after_the_end_acts_on_nothing(fleet: Path, ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        assert (await _run(ledger, fleet)).finished
        before = calls(fleet)
        again = await _run(ledger, fleet)
        assert again.finished
        assert calls(fleet) == before
        assert set(again.acted) == {"preflight:lease", "preflight:identity:s3"}


KILL_POINTS = ("before", "after", "verify")


def test_killed_at_every_step_a_rerun_finishes_with_each_destructive_action_once(
    fleet: Path, ledger_path: Path, tmp_path: Path
) -> None:
    """A child process runs the offboarding and SIGKILLs itself at one point of one step
    (before the driver acts, after it acted but before the engine recorded it, in the
    read-back); a rerun in this process must finish, with every deletion done once and
    a deletion that happened before the kill never attempted again."""
    with Ledger.open(ledger_path) as ledger:
        keys = [s.key for s in _plan(ledger).plan.steps]
    pristine = ledger_path.read_bytes()
    assert not Path(f"{ledger_path}-wal").exists() or Path(f"{ledger_path}-wal").stat().st_size == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent.parent), str(TESTS)])}
    for key in keys:
        for point in KILL_POINTS:
            case = tmp_path / f"case-{keys.index(key)}-{point}"
            root = case / "root"
            import shutil

            shutil.copytree(fleet, root)
            db = case / "ledger.db"
            db.write_bytes(pristine)
            child = subprocess.run(
                [sys.executable, str(TESTS / "offboard_worker.py"), str(db), str(root), f"{key}@{point}"],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            where = f"killed at {key}@{point}"
            assert child.returncode == -9, f"{where}: {child.returncode} {child.stderr[-2000:]}"

            with Ledger.open(db) as ledger:
                result = asyncio.run(_run(ledger, root))
                assert result.finished, f"{where}: {result.reason}"
                stored = evidence.latest(ledger, ledger.node("n1").id or 0)
                assert stored is not None
                log = calls(root)
                for k in _destructive(stored):
                    assert log.count(f"{k} acted") == 1, f"{where}: {k}: {log}"
                    if k == key and point == "after":
                        # It acted, was killed before it could say so: read back, not redone.
                        assert log.count(f"{k} gone") == 0, f"{where}: {log}"
                assert sorted(p.name for p in (root / "node" / "data").iterdir()) == ["keep"]
                assert sorted(p.name for p in (root / "cloud" / "111").iterdir()) == ["not-ours"]
                ends = [e for e in ledger.history("n1") if e.action == "lease.end"]
                assert len(ends) == 1, where
                assert ledger.verify_audit().ok, where


async def test_a_mismatched_account_is_refused_before_any_cloud_step(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        result = await _run(ledger, fleet, account="999")
        assert not result.finished
        assert result.stopped_at == "preflight:identity:s3"
        assert "999" in result.reason and "111" in result.reason
        assert calls(fleet) == []
        assert (fleet / "node" / "data" / "a").exists()
        said = ledger.last_entries(1)[0].after or {}
        assert said["state"] == "failed" and "arn:test:999" in str(said["output"])


async def test_a_blocked_account_is_refused(fleet: Path, ledger_path: Path) -> None:
    config = Config(offboard=OffboardConfig(blocked_accounts=("111",)))
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        stored, _ = evidence.store(ledger, runner.replan(ledger, node, config, PLANNERS))
        table = drivers(ledger, node, fleet)
        result = await runner.execute(ledger, stored, table)
        assert result.stopped_at == "preflight:identity:s3"
        assert "blocklist" in result.reason
        assert calls(fleet) == []


async def test_a_preflight_check_cannot_be_skipped_but_a_step_can_with_a_reason(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        with pytest.raises(ValueError, match="cannot be skipped"):
            runner.skip(ledger, stored, "preflight:identity:s3", "trust me")
        with pytest.raises(ValueError, match="needs a reason"):
            runner.skip(ledger, stored, "shred:/data/b", "  ")
        result = await _run(
            ledger, fleet, choices=runner.Choices(skip={"shred:/data/b": "a colleague keeps it"})
        )
        assert result.finished
        assert (fleet / "node" / "data" / "b").exists()
        skipped = [e for e in ledger.history() if e.action == "offboard.skip"]
        assert len(skipped) == 1
        assert "a colleague keeps it" in str((skipped[0].after or {})["detail"])
        b = next(r for _, _, r in ledger.resources("n1") if r.native_id == "/data/b")
        assert b.verified_at is None


class Asks:
    """The file driver, whose processes step asks consent (GPU processes still running)."""

    name = "ssh"

    def __init__(self, root: Path) -> None:
        self.files = FileDriver(root)

    async def run(self, step: Step) -> Outcome:
        if step.action != "processes":
            return await self.files.run(step)
        return Outcome(False, "pid 4242 python train.py", "1 GPU process still running",
                       needs_consent=True)  # fmt: skip

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        if step.action != "processes":
            return await self.files.verify(step, patient=patient)
        return Outcome(True, "")

    async def inspect(self, step: Step) -> Sighting:
        return await self.files.inspect(step)


def plan_processes(facts: PlanInput) -> list[Step]:
    return [
        Step("ssh:processes", Phase.PROCESSES, "ssh", "processes", facts.node.name, False,
             "nvidia-smi --query-compute-apps=pid,process_name --format=csv")
    ]  # fmt: skip


async def test_running_gpu_processes_stop_the_run_until_the_user_goes_on(
    fleet: Path, ledger_path: Path
) -> None:
    planners = (*PLANNERS, plan_processes)
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        stored, _ = evidence.store(ledger, runner.replan(ledger, node, Config(), planners))
        table = {**drivers(ledger, node, fleet), "ssh": Asks(fleet)}
        first = await runner.execute(ledger, stored, table)
        assert first.stopped_at == "ssh:processes" and "--go-on" in first.reason
        assert calls(fleet) == []
        stored = evidence.load(ledger, stored.id)
        assert stored.state("ssh:processes").state is State.CONSENT
        second = await runner.execute(ledger, stored, table, runner.Choices(go_on=True))
        assert second.finished
        assert evidence.load(ledger, stored.id).state("ssh:processes").state is State.CONSENTED


async def test_the_plan_hash_changes_when_the_ledger_changes_and_an_old_plan_is_refused(
    fleet: Path, ledger_path: Path, cli: Cli
) -> None:
    with Ledger.open(ledger_path) as ledger:
        first = _plan(ledger)
    assert cli("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/keep").code == 0
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        fresh = runner.replan(ledger, node, Config(), PLANNERS)
        assert fresh.hash != first.hash
        with pytest.raises(ValueError, match="changed since this plan was made"):
            runner.confirmed(ledger, node, fresh, "n1")
        with pytest.raises(ValueError, match="type the node's name"):
            runner.confirmed(ledger, node, fresh, "n2")
    assert calls(fleet) == []
    # The provider's account is part of the plan too.
    with Ledger.open(ledger_path) as ledger:
        second = _plan(ledger)
        (provider,) = ledger.providers()
        ledger.update_provider(provider.name, {"account_id": "222"})
        again = runner.replan(ledger, ledger.node("n1"), Config(), PLANNERS)
        assert again.hash != second.hash


class RefusingBucket(BucketDriver):
    async def run(self, step: Step) -> Outcome:
        return Outcome(False, "DeleteBucket: 409 BucketNotEmpty", "the store refused")


async def test_a_new_plan_keeps_the_state_of_steps_it_shares_with_the_old(
    fleet: Path, ledger_path: Path, cli: Cli
) -> None:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        first = _plan(ledger)
        table = {**drivers(ledger, node, fleet), "s3": RefusingBucket(fleet)}
        stopped = await runner.execute(ledger, first, table)
        assert stopped.stopped_at == "s3:bkt-1" and "refused" in stopped.reason
    assert cli("resource", "add", "n1", "--kind", "scratch_path", "--id", "/data/keep").code == 0
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        assert stored.id != first.id
        assert stored.state("shred:/data/a").state is State.VERIFIED  # carried over
        assert stored.state("shred:/data/keep").state is State.PENDING
        assert stored.state("s3:bkt-1").state is State.FAILED
        result = await _run(ledger, fleet)
        assert result.finished
        assert "shred:/data/a" not in result.acted
    log = Counter(calls(fleet))
    assert log["shred:/data/a acted"] == 1 and log["shred:/data/keep acted"] == 1
    assert log["s3:bkt-1 acted"] == 1 and sum(log.values()) == 4


async def test_recheck_finds_a_thing_that_came_back(fleet: Path, ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        assert (await _run(ledger, fleet)).finished
        node = ledger.node("n1")
        stored = evidence.latest(ledger, node.id or 0)
        assert stored is not None
        ok = await readback.recheck(ledger, stored, drivers(ledger, node, fleet))
        assert ok.ok
        (fleet / "cloud" / "111" / "bkt-1").mkdir()
        back = await readback.recheck(ledger, stored, drivers(ledger, node, fleet))
        assert not back.ok
        assert [k for k, good, _ in back.lines if not good] == ["s3:bkt-1"]
        # Under another account a "not found" proves nothing: preflight stops it first.
        wrong = await readback.recheck(ledger, stored, drivers(ledger, node, fleet, account="999"))
        assert not wrong.ok and wrong.lines[-1][0] == "preflight:identity:s3"
        assert [e.action for e in ledger.last_entries(1)] == ["offboard.recheck"]


async def test_the_report_of_a_finished_offboarding(fleet: Path, ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        assert (await _run(ledger, fleet)).finished
        data = report.build(ledger, evidence.load(ledger, stored.id))
    assert data["finished"] and data["audit_chain"]["ok"] and data["hash"] == stored.hash
    assert [s["state"] for s in data["steps"]] == ["verified"] * len(stored.plan.steps)
    outputs = [e["output"] for e in data["evidence"] if e["output"]]
    assert "deleted /data/a" in outputs and "DeleteBucket bkt-1: 204" in outputs
    text = report.markdown(json.loads(json.dumps(data)))
    assert stored.hash in text and "| shred:/data/a | rm -- /data/a | yes | verified |" in text
    assert "best effort" in text


async def test_the_report_says_who_and_from_where(fleet: Path, ledger_path: Path) -> None:
    """Each piece of evidence names its user and where they came from (their SSH login)."""
    with Ledger.open(ledger_path, actor="alice", origin="ssh 203.0.113.7") as ledger:
        stored = _plan(ledger)
        assert (await _run(ledger, fleet)).finished
        data = report.build(ledger, evidence.load(ledger, stored.id))
    assert {(e["actor"], e["origin"]) for e in data["evidence"]} == {("alice", "ssh 203.0.113.7")}
    text = report.markdown(json.loads(json.dumps(data)))
    assert "by alice from 203.0.113.7\n" in text
    assert " by alice\n" not in text


@pytest.fixture
def served(keys: TestKeys, tmp_path: Path, ledger_path: Path) -> Iterator[ServedNode]:
    """Node n1's machine: an in-process SSH node that runs each command in a real sh on
    the test's own files (tests/support/shellnode.py), its host key pinned in the ledger's trust
    store, the lab's key in its authorized_keys."""
    with ServedNode(keys, tmp_path / "n1") as node:
        node.pin(ledger_path)
        yield node


def test_zuka_offboard_plans_executes_reports_and_audit_verify_catches_one_byte(
    cli: Cli, ledger_path: Path, served: ServedNode
) -> None:
    """The CLI with the real wiring: the SSH steps run on the served node; released
    (stopped) after them, the node "no longer answers"."""
    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    assert cli("lease", "add", "n1", "--billing", "monthly", "--price", "9",
               "--start", "2025-06-01", "--end", "2030-01-01").code == 0  # fmt: skip
    plan = cli("offboard", "n1")
    assert plan.code == 0 and "nothing was touched" in plan.out and "stored" in plan.out
    digest = plan.out.split("hash ")[1].split()[0]
    again = cli("offboard", "n1", "--json")
    assert json.loads(again.out)["hash"] == digest and json.loads(again.out)["new"] is False
    other = cli("offboard", "n1", "--execute", "--confirm", "n1", "--hash", "0123456789ab")
    assert other.code == 2 and "not the stored plan's hash" in other.err
    assert f"--hash {digest[:12]}" in plan.out
    refused = cli("offboard", "n1", "--execute", "--confirm", "n")
    assert refused.code == 2 and "type the node's name, n1" in refused.err
    stop = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert stop.code == 1 and "--did manual:release-instance" in stop.out
    assert cli("lease", "list", "n1", "--open").out.count("n1") == 1  # not released yet
    # The node's own steps ran: the lab's key is out of authorized_keys, the other stays.
    assert _blob(served) not in served.authorized()
    assert 'command="true"' in served.authorized()
    served.release()  # the user releases the instance in the console
    done = cli("offboard", "n1", "--execute", "--confirm", "n1", "--hash", digest[:8],
               "--did", "manual:release-instance")  # fmt: skip
    assert done.code == 0, done.out + done.err
    assert "finished" in done.out
    assert cli("offboard", "n1", "--recheck").code == 0
    rechecked = json.loads(cli("offboard", "n1", "--recheck", "--json").out)
    assert rechecked["ok"] and [s["step"] for s in rechecked["steps"]][-1] == "ledger:release"
    # The key is revoked and the node released: its steps cannot be read again, and say so.
    said = {s["step"]: (s["ok"], s["said"]) for s in rechecked["steps"]}
    revoke = next(k for k in said if k.startswith("revoke-key:"))
    assert said[revoke][0] is None and "not read again" in said[revoke][1]
    prove = next(k for k in said if k.startswith("prove-refused:"))
    assert said[prove][0] is None and "no longer answers" in said[prove][1]
    assert said["manual:release-instance"][0] is True
    # The node's own log holds its offboarding, step by step.
    log = cli("log", "n1").out
    assert "offboard.plan" in log and "plan 1 ledger:release: verified" in log
    md = cli("offboard", "n1", "--report")
    assert md.code == 0 and digest in md.out and "no longer accepts connections" in md.out
    js = json.loads(cli("offboard", "n1", "--report", "--format", "json").out)
    assert js["finished"] and js["audit_chain"]["ok"]
    assert cli("audit", "verify").code == 0
    # One byte of one piece of evidence changed behind zuka's back: verify fails there.
    raw = ledger_path.read_bytes()
    assert not Path(f"{ledger_path}-wal").exists()
    at = raw.index(b"no longer accepts connections")
    ledger_path.write_bytes(raw[:at] + b"N" + raw[at + 1 :])
    broken = cli("audit", "verify")
    assert broken.code == 1 and "changed" in broken.out


async def test_progress_says_where_each_nodes_offboarding_stands(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        assert evidence.progress(ledger) == {}
        stored = _plan(ledger)
        node_id = ledger.node("n1").id or 0
        assert evidence.progress(ledger)[node_id] == evidence.Progress(
            stored.id, len(stored.plan.steps), 0, False
        )
        await _run(ledger, fleet, account="999")
        now = evidence.progress(ledger)[node_id]
        assert now.passed == 1 and now.stopped == "preflight:identity:s3" and not now.finished
        assert (await _run(ledger, fleet)).finished
        done = evidence.progress(ledger)[node_id]
        assert done.finished and done.passed == done.steps and not done.stopped


async def test_a_node_brought_back_is_offboarded_afresh(
    fleet: Path, ledger_path: Path, cli: Cli
) -> None:
    with Ledger.open(ledger_path) as ledger:
        first = _plan(ledger)
        assert (await _run(ledger, fleet)).finished
    assert cli("node", "restore", "n1").code == 0
    (fleet / "released").unlink()  # the node is back: it answers again
    # A lease that has not started yet: the release cancels it at its start.
    start = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%d")
    assert (
        cli("lease", "add", "n1", "--billing", "hourly", "--price", "3", "--start", start).code == 0
    )
    with Ledger.open(ledger_path) as ledger:
        second = _plan(ledger)
        assert second.id != first.id and second.plan.lease_id != first.plan.lease_id
        # Nothing carried over from the finished offboarding: the instance is released anew.
        assert {second.state(s.key).state for s in second.plan.steps} == {State.PENDING}
        assert (await _run(ledger, fleet)).finished
        data = report.build(ledger, evidence.load(ledger, second.id))
        new = ledger.leases("n1")[-1]
        assert new.id == second.plan.lease_id and new.ended_at == new.start
    assert {e["plan"] for e in data["evidence"]} == {second.id}


def test_the_report_goes_to_a_private_file(cli: Cli, ledger_path: Path, tmp_path: Path) -> None:
    assert cli("node", "add", "n1", "--ssh", "ssh -p 1 root@127.0.0.1").code == 0
    assert cli("offboard", "n1", "--report").code == 2  # no plan yet: says so
    assert cli("offboard", "n1").code == 0
    target = tmp_path / "report.json"
    assert cli("offboard", "n1", "--report", "--format", "json", "-o", str(target)).code == 0
    assert target.stat().st_mode & 0o777 == 0o600
    assert json.loads(target.read_text())["node"] == "n1"
    assert "plan 1 preflight:lease" not in cli("log").out  # no step ran: only the plan
    assert "offboard.plan" in cli("log").out


_text = st.text(st.characters(codec="utf-8"), max_size=30)


@given(
    st.lists(
        st.tuples(_text, st.sampled_from(list(Phase)), _text, st.booleans(),
                  st.dictionaries(_text, _text, max_size=3)),
        max_size=6, unique_by=lambda t: t[0],
    )
)  # fmt: skip
def test_a_plan_body_reads_back_as_the_same_plan_and_hash(
    raw: list[tuple[str, Phase, str, bool, dict[str, str]]],
) -> None:
    steps = tuple(
        Step(key, phase, "ssh", "act", target, destructive, f"do {target}",
             tuple(sorted(p.items())), resource_id=i or None)
        for i, (key, phase, target, destructive, p) in enumerate(raw)
    )  # fmt: skip
    plan = Plan(node_id=1, node="n1", lease_id=None, steps=steps)
    back = plan_from_body(plan.body())
    assert back == plan and back.hash == plan.hash


class Blocking(FileDriver):
    """Holds its first deletion until the test lets it go."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.inside = asyncio.Event()
        self.go = asyncio.Event()

    async def run(self, step: Step) -> Outcome:
        if step.destructive and not self.go.is_set():
            self.inside.set()
            await self.go.wait()
        return await super().run(step)


async def test_a_second_run_is_refused_while_one_is_at_work(fleet: Path, ledger_path: Path) -> None:
    """A step a live run started looks like one a killed run left: a second run at the
    same time would read it back, find it there, and act again."""
    with Ledger.open(ledger_path) as ledger, Ledger.open(ledger_path) as other:
        node = ledger.node("n1")
        stored = _plan(ledger)
        slow = Blocking(fleet)
        first = asyncio.create_task(
            runner.execute(ledger, stored, {**drivers(ledger, node, fleet), "ssh": slow})
        )
        await asyncio.wait_for(slow.inside.wait(), 30)
        with pytest.raises(ValueError, match=rf"another offboarding run \(pid {os.getpid()}\)"):
            await runner.execute(other, stored, drivers(other, node, fleet))
        slow.go.set()
        assert (await first).finished
    assert Counter(calls(fleet))["shred:/data/a acted"] == 1


def test_zuka_offboard_skip_and_did_name_steps_of_the_plan(cli: Cli, served: ServedNode) -> None:
    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    assert cli("offboard", "n1").code == 0
    bad = cli("offboard", "n1", "--execute", "--confirm", "n1", "--did", "manual:nope")
    assert bad.code == 2 and "manual:nope" in bad.err
    assert (
        cli("offboard", "n1", "--execute", "--confirm", "n1", "--did", "ledger:release").code == 2
    )
    assert cli("offboard", "n1", "--skip", "manual:release-instance").code == 2  # no reason
    no_confirm = cli("offboard", "n1", "--skip", "manual:release-instance", "--reason", "gone")
    assert no_confirm.code == 2 and "--confirm n1" in no_confirm.err
    assert (
        cli("offboard", "n1", "--skip", "preflight:lease", "--reason", "x", "--confirm", "n1").code
        == 2
    )
    skipped = cli("offboard", "n1", "--skip", "manual:release-instance", "--reason",
                  "the data centre took it back on 11-30", "--confirm", "n1")  # fmt: skip
    assert skipped.code == 0, skipped.err
    done = cli("offboard", "n1", "--execute", "--confirm", "n1", "--json")
    assert done.code == 0, done.err
    states = {s["key"]: s["state"] for s in json.loads(done.out)["steps"]}
    assert states["manual:release-instance"] == "skipped"
    report_md = cli("offboard", "n1", "--report").out
    assert "the data centre took it back on 11-30" in report_md


HOSTILE = "\x1b[31mred\x1b]0;owned\x07 | # head \udcff\x00 ``` <b>[bold]x[/]" + "A" * 100_000


class Hostile(FileDriver):
    """Deletes for real, and answers like a hostile node: escapes, a lone surrogate (bytes
    decoded with surrogateescape), NUL, markup, 100 KB."""

    async def run(self, step: Step) -> Outcome:
        done = await super().run(step)
        return Outcome(done.done, HOSTILE, HOSTILE[:200], facts={"fs\udcff": HOSTILE[:50]})


async def test_hostile_output_is_kept_as_evidence_bounded_and_shown_harmless(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        stored = _plan(ledger)
        table = {**drivers(ledger, node, fleet), "ssh": Hostile(fleet)}
        assert (await runner.execute(ledger, stored, table)).finished
        assert ledger.verify_audit().ok
        runs = [e.after or {} for e in ledger.history() if e.action == "offboard.run"]
        said = next(a for a in runs if a.get("step") == "shred:/data/a")
        assert said["output_cut"] == len(HOSTILE)
        # Stored as it came, cut at 64 KiB; the lone surrogate as a visible escape.
        assert 64 * 1024 <= len(str(said["output"])) <= 64 * 1024 + 5
        assert str(said["output"]).startswith("\x1b[31mred") and "\\udcff" in str(said["output"])
        data = report.build(ledger, evidence.load(ledger, stored.id))
    text = report.markdown(data)
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "\\|" in text  # a pipe in a table cell cannot end the cell
    # No heading but the report's own: "# head" from the node stays inside its line.
    assert text.count("\n#") == text.count("\n## ") + text.count("\n### ")


def test_release_flags_auto_renew_and_preflight_says_the_days_left(
    cli: Cli, served: ServedNode
) -> None:
    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    assert cli("lease", "add", "n1", "--billing", "monthly", "--price", "9", "--auto-renew",
               "--start", "2025-06-01", "--end", "2030-01-01").code == 0  # fmt: skip
    assert cli("offboard", "n1").code == 0
    # The node's steps first (the node must answer), then it is released by hand.
    first = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert first.code == 1 and "waiting for you at manual:release-instance" in first.out, first.out
    served.release()
    done = cli("offboard", "n1", "--execute", "--confirm", "n1", "--did", "manual:release-instance")
    assert done.code == 0, done.out
    data = json.loads(cli("offboard", "n1", "--report", "--format", "json").out)
    facts = next(
        e["facts"] for e in data["evidence"] if e["step"] == "preflight:lease" and e["facts"]
    )
    assert facts["auto_renew"] == "on" and float(facts["days_left"]) > 365
    release = next(
        e for e in data["evidence"] if e["step"] == "ledger:release" and e["event"] == "run"
    )
    assert "auto-renew is ON" in release["output"] and release["facts"] == {"auto_renew": "on"}


def test_a_version_10_ledger_is_upgraded_with_the_offboarding_tables(ledger_path: Path) -> None:
    with Ledger.open(ledger_path) as ledger:
        ledger.conn.executescript(
            "DROP TABLE offboard_steps; DROP TABLE offboard_plans;"
            " DELETE FROM _sqlite_migrations WHERE name IN ('m011_offboard',"
            " 'm012_offboard_absent');"
            " PRAGMA user_version = 10;"
        )
    with Ledger.open(ledger_path) as ledger:
        assert ledger.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        tables = {r[0] for r in ledger.conn.execute("SELECT name FROM sqlite_master")}
        assert {"offboard_plans", "offboard_steps"} <= tables
        assert ledger.verify_audit().ok


def test_a_version_11_ledger_keeps_its_step_states_and_may_say_absent(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        ledger.conn.executescript(
            "CREATE TABLE old (plan_id INTEGER NOT NULL REFERENCES offboard_plans(id),"
            " key TEXT NOT NULL, seq INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'pending'"
            " CHECK (state IN ('pending', 'started', 'done', 'verified', 'failed', 'skipped',"
            " 'consent', 'consented')), updated_at TEXT, detail TEXT NOT NULL DEFAULT '',"
            " PRIMARY KEY (plan_id, key)) WITHOUT ROWID;"
            " INSERT INTO old SELECT * FROM offboard_steps; DROP TABLE offboard_steps;"
            " ALTER TABLE old RENAME TO offboard_steps;"
            " DELETE FROM _sqlite_migrations WHERE name = 'm012_offboard_absent';"
            " PRAGMA user_version = 11;"
        )
    with Ledger.open(ledger_path) as ledger:
        assert ledger.conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert evidence.load(ledger, stored.id).plan == stored.plan
        ledger.conn.execute("UPDATE offboard_steps SET state = 'absent' WHERE key = 's3:bkt-1'")


def test_a_finish_with_skipped_steps_says_so_and_the_report_and_recheck_list_them(
    cli: Cli, served: ServedNode
) -> None:
    """A run that skipped steps does not claim every step was verified; the report's head
    and --recheck name the skipped step and its reason."""
    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    assert cli("offboard", "n1").code == 0
    why = "the data centre took it back on 11-30"
    assert cli("offboard", "n1", "--skip", "manual:release-instance", "--reason", why,
               "--confirm", "n1").code == 0  # fmt: skip
    done = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert done.code == 0, done.out + done.err
    assert "every step verified" not in done.out
    assert "finished:" in done.out and "verified, 1 skipped (with reasons)" in done.out
    assert why in done.out  # the table shows the skip's reason
    md = cli("offboard", "n1", "--report").out
    head = md.split("## Steps")[0]
    assert "1 skipped (with reasons)" in head and "manual:release-instance: " in head
    assert why in head
    js = json.loads(cli("offboard", "n1", "--report", "--format", "json").out)
    assert js["counts"]["skipped"] == 1 and js["skipped"][0]["key"] == "manual:release-instance"
    again = cli("offboard", "n1", "--recheck")
    line = next(x for x in again.out.splitlines() if "manual:release-instance" in x)
    assert line.startswith("skip") and why in line
    assert "1 step(s) were never verified" in again.out and "everything is still" not in again.out
    rechecked = json.loads(cli("offboard", "n1", "--recheck", "--json").out)
    states = {s["step"]: s["state"] for s in rechecked["steps"]}
    assert states["manual:release-instance"] == "skipped"


def test_the_plan_prints_every_steps_full_command_wrapped_never_cut(
    cli: Cli, served: ServedNode
) -> None:
    """The plan is what the user confirms: each step's whole description is printed,
    wrapped at spaces and never inside a character (a CJK provider name)."""
    name = "ZhiSuan 智算云 " + "长" * 70
    assert cli("provider", "add", name, "--kind", "platform").code == 0
    assert cli("node", "add", "n1", "--ssh", served.login, "--provider", name).code == 0
    plan = cli("offboard", "n1")
    assert plan.code == 0, plan.err
    flat = " ".join(line.strip() for line in plan.out.splitlines())
    release = f"by hand: release the instance in {name}'s console"
    assert release.replace(" ", "") in flat.replace(" ", "")
    # A long key may be cut in the table (marked …): the section below gives it whole.
    whole = plan.out.split("what each step does:")[1].split("\nplan ")[0]
    assert "no longer answers" in flat and "…" not in whole and "\ufffd" not in plan.out
    assert all(output.width(line) <= 100 for line in whole.splitlines())


@given(st.text(alphabet="ab 智算云長x", max_size=200), st.integers(12, 60))
def test_wrap_keeps_every_character_within_the_width(text: str, columns: int) -> None:
    lines = output.wrap(text, columns, indent="  ")
    assert all(output.width(line) <= columns for line in lines)
    assert "".join(x[2:] for x in lines).replace(" ", "") == text.replace(" ", "")


def test_the_plan_and_report_say_plainly_what_is_not_deleted(cli: Cli, served: ServedNode) -> None:
    assert cli("provider", "add", "AutoDL", "--kind", "platform").code == 0
    assert cli("node", "add", "n1", "--ssh", served.login, "--provider", "AutoDL").code == 0
    plan = cli("offboard", "n1")
    assert plan.code == 0, plan.err
    said = "NOT deleted: /root/autodl-fs: shared storage that outlives the instance"
    assert said in plan.out
    assert said in cli("offboard", "n1", "--report").out.split("## Steps")[0]
    assert json.loads(cli("offboard", "n1", "--json").out)["not_deleted"][0].startswith(
        "/root/autodl-fs:"
    )


class NoCredentials(BucketDriver):
    async def identity(self, endpoint: str = "", region: str = "") -> Identity:
        raise RuntimeError("credential_ref env:MOTO: set MOTO_ACCESS_KEY_ID and its secret")


async def test_a_refused_identity_says_why_and_a_missing_account_names_provider_edit(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        table = drivers(ledger, ledger.node("n1"), fleet)
        table["s3"] = NoCredentials(fleet)
        stored = evidence.latest(ledger, ledger.node("n1").id or 0)
        assert stored is not None
        result = await runner.execute(ledger, stored, table)
        assert result.stopped_at == "preflight:identity:s3"
        assert "set MOTO_ACCESS_KEY_ID" in result.reason
        ledger.update_provider("Cloudy", {"account_id": ""})
        _plan(ledger)
        result = await _run(ledger, fleet)
        assert "zuka provider edit Cloudy --account-id ID" in result.reason
        ledger.update_provider("Cloudy", {"account_id": "111"})
        _plan(ledger)
        assert (await _run(ledger, fleet)).finished


class Impatient(BucketDriver):
    """Records how each read-back was asked for."""

    asked: ClassVar[list[tuple[str, bool]]] = []

    async def verify(self, step: Step, *, patient: bool = True) -> Outcome:
        Impatient.asked.append((step.key, patient))
        return await super().verify(step, patient=patient)


async def test_recheck_and_the_read_before_acting_again_are_single_reads(
    fleet: Path, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        step = next(s for s in stored.plan.steps if s.driver == "s3")
        # A killed run left the bucket step started: the rerun reads it back once first.
        evidence.record(ledger, stored, step, "start", State.STARTED, detail=step.describe)
        table = drivers(ledger, ledger.node("n1"), fleet)
        table["s3"] = Impatient(fleet)
        Impatient.asked = []
        result = await runner.execute(ledger, evidence.load(ledger, stored.id), table)
        assert result.finished
        assert Impatient.asked == [(step.key, False), (step.key, True)]
        Impatient.asked = []
        again = await readback.recheck(ledger, result.stored, table)
        assert again.ok and Impatient.asked == [(step.key, False)]


def test_a_console_step_waits_for_the_user_and_says_what_to_type(
    cli: Cli, served: ServedNode
) -> None:
    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    plan = cli("offboard", "n1")
    digest = plan.out.split("hash ")[1].split()[0]
    wrong = cli("offboard", "n1", "--execute", "--confirm", "n1", "--hash", "0123456789ab")
    assert wrong.code == 2 and "read the plan again: zuka offboard n1" in wrong.err
    assert digest[:8] not in wrong.err  # never the right hash to copy unread
    stop = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert stop.code == 1
    assert "failed: by hand" not in stop.out and "waiting for you at manual:release-instance" in (
        stop.out
    )
    assert "once done: zuka offboard n1 --execute --confirm n1 --did manual:release-instance" in (
        stop.out
    )
    assert "zuka offboard n1 --skip manual:release-instance --reason TEXT --confirm n1" in stop.out
    assert "waiting for you (--did manual:release-instance)" in stop.out  # the table's state
    # Said done while the node still answers: what to do next.
    early = cli(
        "offboard", "n1", "--execute", "--confirm", "n1", "--did", "manual:release-instance"
    )
    assert early.code == 1 and "the node still answers at" in early.out
    assert "release it in the console first" in early.out
    # No facts step in this plan: the report does not point at file-system evidence.
    md = cli("offboard", "n1", "--report").out
    assert "best effort" in md and "mount options are in the evidence" not in md


def test_ctrl_c_during_a_run_or_a_recheck_says_what_it_left(
    cli: Cli, served: ServedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def interrupted(*_: object, **__: object) -> runner.RunResult:
        raise KeyboardInterrupt

    assert cli("node", "add", "n1", "--ssh", served.login).code == 0
    assert cli("offboard", "n1").code == 0
    monkeypatch.setattr(runner, "execute", interrupted)
    run = cli("offboard", "n1", "--execute", "--confirm", "n1")
    assert run.code == 130
    assert "interrupted: a rerun continues at the first step not verified" in run.out
    monkeypatch.undo()
    assert cli("offboard", "n1", "--skip", "manual:release-instance", "--reason", "gone",
               "--confirm", "n1").code == 0  # fmt: skip
    assert cli("offboard", "n1", "--execute", "--confirm", "n1").code == 0
    monkeypatch.setattr(readback, "recheck", interrupted)
    again = cli("offboard", "n1", "--recheck")
    assert again.code == 130 and "recheck interrupted" in again.out
