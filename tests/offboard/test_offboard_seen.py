""" "Gone" only after zuka saw the thing exist: a deletion of a ledger resource, or the
release of the instance, is verified only if its target was seen to exist (in this run,
an earlier one, or `--inspect`) and then seen gone. A mistyped id, a wrong region or
another account reads "not found" at first contact: the step stops there, the ledger's
resource is not marked, and only the user's word (`--never-existed`, with a reason)
passes it, as absent, never as verified."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leases.config.sections import Config
from leases.core.errors import InputError
from leases.ledger.store import Ledger
from leases.offboard import evidence, readback, report, runner, status
from leases.offboard.evidence import State
from tests.offboard.test_offboard import _plan, _run, served  # noqa: F401  (served: a fixture)
from tests.support.cli import Cli
from tests.support.offboard_files import PLANNERS, calls, drivers
from tests.support.shellnode import ServedNode


def _typo(cli: Cli) -> None:
    """The lab meant bkt-1 and typed bkt-l: the ledger's bucket does not exist."""
    r = cli("resource", "add", "n1", "--kind", "bucket", "--id", "bkt-l", "--region", "cn-north-1")
    assert r.code == 0, r.err


async def test_a_mistyped_bucket_is_not_found_not_verified(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    _typo(cli)
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        result = await _run(ledger, fleet)
        assert not result.finished and result.stopped_at == "s3:bkt-l"
        assert result.reason.startswith("NOT FOUND: bkt-l was never seen to exist")
        assert "account 111" in result.reason and "region cn-north-1" in result.reason
        assert "--never-existed s3:bkt-l" in result.reason
        stored = evidence.load(ledger, result.stored.id)
        assert stored.state("s3:bkt-l").state is State.FAILED
        typo = next(r for _, _, r in ledger.resources("n1") if r.native_id == "bkt-l")
        assert typo.deleted_at is None and typo.verified_at is None
        # Run again: still not found, still not verified (not "already gone").
        again = await _run(ledger, fleet)
        assert again.stopped_at == "s3:bkt-l"
        assert evidence.load(ledger, stored.id).state("s3:bkt-l").state is State.FAILED
    assert "s3:bkt-l acted" not in calls(fleet) and "s3:bkt-l gone" not in calls(fleet)


async def test_never_existed_needs_a_failed_look_and_a_reason_and_is_not_verified(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    _typo(cli)
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        with pytest.raises(InputError, match="has not looked for it"):
            runner.never_existed(ledger, stored, "s3:bkt-l", "typo")
        assert (await _run(ledger, fleet)).stopped_at == "s3:bkt-l"
        with pytest.raises(InputError, match="needs --reason"):
            runner.never_existed(ledger, stored, "s3:bkt-l", " ")
        with pytest.raises(InputError, match="saw it exist"):
            runner.never_existed(ledger, stored, "s3:bkt-1", "x")
        with pytest.raises(InputError, match="only a step that deletes"):
            runner.never_existed(ledger, stored, "preflight:lease", "x")
        runner.never_existed(ledger, stored, "s3:bkt-l", "typo of bkt-1")
        done = await _run(ledger, fleet)
        assert done.finished, done.reason
        assert done.stored.state("s3:bkt-l").state is State.ABSENT
        assert "says it never existed: typo of bkt-1" in done.stored.state("s3:bkt-l").detail
        words = status.outcome(done.stored)
        assert "every step verified" not in words and "1 absent" in words
        typo = next(r for _, _, r in ledger.resources("n1") if r.native_id == "bkt-l")
        assert typo.verified_at is None  # the ledger never says it was verified gone
        md = report.markdown(report.build(ledger, done.stored))
        assert "typo of bkt-1" in md and "absent" in md
        assert ledger.verify_audit().ok and evidence.problems(ledger) == []


async def test_a_thing_seen_then_deleted_by_someone_else_is_verified_gone(
    fleet: Path,
    ledger_path: Path,
) -> None:
    """Seen to exist (by --inspect), gone when the run gets to it: that is proof enough;
    zuka says it was already gone, and acts on nothing."""
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        node = ledger.node("n1")
        looked = await readback.inspect(ledger, stored, drivers(ledger, node, fleet))
        assert looked.ok
        assert {lk.step.key: lk.sighting.exists for lk in looked.looks} == {
            "shred:/data/a": True, "shred:/data/b": True, "s3:bkt-1": True,
            "manual:release-instance": True,
        }  # fmt: skip
        for lk in looked.looks:
            assert evidence.sighting(ledger, looked.stored, lk.step) is not None
        (fleet / "cloud" / "111" / "bkt-1" / "obj").unlink()
        (fleet / "cloud" / "111" / "bkt-1").rmdir()
        result = await _run(ledger, fleet)
        assert result.finished, result.reason
        assert result.stored.state("s3:bkt-1").state is State.VERIFIED


async def test_inspect_changes_nothing_and_says_what_it_saw(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    _typo(cli)
    # A bucket made long before the lease began (2025-06-01): worth a second look.
    old = (fleet / "cloud" / "111" / "bkt-1").stat()
    os.utime(fleet / "cloud" / "111" / "bkt-1", (old.st_atime, 1_500_000_000))
    with Ledger.open(ledger_path) as ledger:
        stored = _plan(ledger)
        node = ledger.node("n1")
        looked = await readback.inspect(ledger, stored, drivers(ledger, node, fleet))
        assert not looked.ok  # bkt-l is not there
        assert [(k, ok) for k, ok, _ in looked.preflight] == [
            ("preflight:lease", True), ("preflight:identity:s3", True)
        ]  # fmt: skip
        looks = {lk.step.key: lk for lk in looked.looks}
        assert looks["s3:bkt-l"].sighting.exists is False
        assert looks["s3:bkt-1"].sighting.exists is True
        assert looks["s3:bkt-1"].sighting.facts["account"] == "111"
        assert any("before this lease began" in r for r in looks["s3:bkt-1"].remarks)
        assert looks["shred:/data/a"].remarks == ()
        # Nothing was deleted; every step is still pending.
        assert calls(fleet) == []
        assert sorted(p.name for p in (fleet / "cloud" / "111").iterdir()) == ["bkt-1", "not-ours"]
        now = evidence.load(ledger, stored.id)
        assert {now.state(s.key).state for s in now.plan.steps} == {State.PENDING}
        # In another account nothing is looked at: preflight stops it first.
        wrong = await readback.inspect(ledger, now, drivers(ledger, node, fleet, account="999"))
        assert not wrong.ok and wrong.looks == ()
        assert evidence.problems(ledger) == []


async def test_a_node_never_seen_answering_is_not_called_released(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    (fleet / "released").touch()  # released before zuka ever looked (or a wrong address)
    with Ledger.open(ledger_path) as ledger:
        node = ledger.node("n1")
        evidence.store(ledger, runner.replan(ledger, node, Config(), PLANNERS))
        result = await _run(ledger, fleet)
        assert result.stopped_at == "manual:release-instance"
        assert "NOT FOUND" in result.reason
        runner.skip_now(ledger, result.stored, "manual:release-instance", "released on Monday")
        done = await _run(ledger, fleet)
        assert done.finished and done.stored.state("manual:release-instance").state is State.SKIPPED


async def test_the_dashboard_inspects_with_i_and_changes_nothing(
    fleet: Path,
    ledger_path: Path,
    cli: Cli,
) -> None:
    from textual.widgets import Static

    from tests.tui.test_offboard_screen import app_on, factory, idle, opened, said
    from tui.screens.offboard import OffboardScreen

    _typo(cli)
    app = app_on(ledger_path)
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await opened(app, OffboardScreen("n1", drivers=factory(fleet), planners=PLANNERS))
        await pilot.press("i")
        await idle(screen, pilot)
        assert "inspection: NOT everything was seen" in said(screen)
        detail = str(screen.query_one("#offboard-detail", Static).render())
        assert "inspection:" in detail and "FAIL s3:bkt-l" in detail
        assert "ok   s3:bkt-1" in detail and "account 111" in detail
        assert calls(fleet) == []


def test_a_mistyped_scratch_path_is_found_by_inspect_and_corrected_by_resource_edit(
    cli: Cli,
    served: ServedNode,  # noqa: F811
    tmp_path: Path,
) -> None:
    """As a user meets it: --inspect says NOT FOUND for the typo (and "not there" for the
    usual histories that simply are not there), resource edit corrects the id, and the
    plan made again sees it."""
    scratch = tmp_path / "scratch"
    (scratch / "run1").mkdir(parents=True)
    (scratch / "run1" / "ckpt.bin").write_bytes(b"x" * 4096)
    config = tmp_path / "config.toml"
    config.write_text(f'[offboard]\nscratch_roots = ["{scratch}"]\n')
    for args in (
        ("node", "add", "n1", "--ssh", served.login),
        ("lease", "add", "n1", "--billing", "hourly", "--price", "3", "--start", "2026-01-01"),
        ("resource", "add", "n1", "--kind", "scratch_path", "--id", f"{scratch}/run1x"),
    ):
        r = cli(*args)
        assert r.code == 0, r.err
    looked = cli("offboard", "n1", "--config", str(config), "--inspect")
    assert looked.code == 1, looked.err
    assert f"NOT FOUND  shred:{scratch}/run1x" in looked.out
    assert "not there  clear:~/.zsh_history" in looked.out
    assert "nothing to clear here" in looked.out
    assert "--new-id" in looked.out
    fixed = cli("resource", "edit", "n1", "--kind", "scratch_path", "--id", f"{scratch}/run1x",
                "--new-id", f"{scratch}/run1")  # fmt: skip
    assert fixed.code == 0, fixed.err
    again = cli("offboard", "n1", "--config", str(config), "--inspect")
    assert f"yes        shred:{scratch}/run1\n" in again.out, again.out
    assert "files 1" in again.out and "NOT FOUND" not in again.out
    assert again.code == 0
    assert (scratch / "run1" / "ckpt.bin").exists()  # looked at, nothing changed


async def test_a_release_never_seen_is_skipped_with_a_reason_never_said_never_existed(
    fleet: Path,
    ledger_path: Path,
) -> None:
    """An instance exists by the lease itself: a node that did not answer the first look
    (an unreachable address reads the same) is no proof it never existed."""
    (fleet / "released").touch()
    with Ledger.open(ledger_path) as ledger:
        _plan(ledger)
        result = await _run(ledger, fleet)
        assert result.stopped_at == "manual:release-instance"
        with pytest.raises(InputError, match="only a step that deletes a resource"):
            runner.never_existed(ledger, result.stored, "manual:release-instance", "gone")
