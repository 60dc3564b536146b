"""`zuka offboard NODE`: the offboarding plan (the default: a dry run, stored with its
hash; `--include`/`--keep` for the node's other leases' resources), `--inspect`,
`--execute --confirm NODE [--account ALIAS]`, `--skip`, `--never-existed`, `--recheck`,
`--report`. The use cases are leases.app.offboarding's (the dashboard's offboard screen
calls the same); its planners and drivers come from leases.offboard.wiring."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from rich.cells import cell_len

from leases.app import offboarding
from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Node
from leases.core.retold import shown
from leases.core.textsafe import visible
from leases.lab.layout import find_lab
from leases.ledger import labfiles
from leases.ledger.paths import ledger_choice
from leases.ledger.store import Ledger
from leases.ledger.transfer import write_private
from leases.offboard import manual, report, runner, status, wiring
from leases.offboard.evidence import PASSED, State, StoredPlan
from leases.offboard.words import fact_word, phase_word, state_word
from tui.cli import output
from tui.cli.opening import open_ledger as _open


def offboard(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    said = args.skip if args.skip is not None else args.never_existed
    flag = "--skip" if args.skip is not None else "--never-existed"
    if (args.include or args.keep) and (args.execute or args.recheck or args.report or said):
        raise InputError(
            "include", (args.include or args.keep)[0], _("--include and --keep change the plan:"
            " give them alone (zuka offboard NODE --include KIND:ID), read it, then --execute"),
        )  # fmt: skip
    if args.keep and args.reason is None:
        raise InputError(
            "reason", None, _("--keep {ref} needs --reason TEXT").format(ref=args.keep[0])
        )
    if args.skip is not None and args.never_existed is not None:
        raise InputError("never-existed", args.never_existed, _("one of --skip, --never-existed"))
    if said is not None and args.reason is None:
        raise InputError(
            "reason", None, _("{flag} {key} needs --reason TEXT").format(flag=flag, key=said)
        )
    if args.reason is not None and said is None and not args.keep:
        raise InputError("reason", args.reason, _("--reason goes with --skip or --never-existed"))
    if args.never_existed is not None and args.execute:
        raise InputError("never-existed", args.never_existed, _("say it alone, then --execute"))
    if (args.recheck or args.report or args.inspect) and (
        said or args.did or args.go_on or args.confirm or args.hash
    ):
        raise InputError(
            "--recheck/--report/--inspect", args.node, _("only read: --confirm, --skip, --did,"
            " --go-on go with --execute (or --skip alone)"),
        )  # fmt: skip
    if not args.report:
        # In a lab offboarding is its own group's: said before the editors' rule on writes.
        path, _where = ledger_choice(args.ledger)
        labfiles.check_offboarder(find_lab(path), path, "zuka offboard")
    with _open(args, readonly=args.report) as ledger:
        node = ledger.node(args.node)
        assert node.id is not None
        if args.report:
            return _report(ledger, node, args, out)
        if args.recheck:
            return _recheck(ledger, node, config, args.json, out)
        keep = dict.fromkeys(args.keep, args.reason or "")
        if args.inspect:
            return _inspect(ledger, node, config, args.include, keep, args.json, out)
        if not args.execute and said is None:
            planned = offboarding.plan(
                ledger, node.name, config, wiring.PLANNERS, include=args.include, keep=keep
            )
            assert planned.stored is not None
            return _print_plan(planned.stored, planned.new, args.json, out)
        stored = offboarding.confirm(
            ledger, node.name, config, wiring.PLANNERS, args.confirm, args.account,
            hash_prefix=args.hash, did=args.did,
        )  # fmt: skip
        if args.never_existed is not None:
            done = offboarding.never_existed(ledger, stored, args.never_existed, args.reason)
            out.write(shown(done.said) + "\n")
            return 0
        if not args.execute:
            offboarding.skip(ledger, stored, args.skip, args.reason)
            out.write(
                _("skipped {key}: {reason}").format(
                    key=visible(args.skip), reason=visible(args.reason)
                )
                + "\n"
            )
            return 0
        choices = runner.Choices(
            go_on=args.go_on, skip={args.skip: args.reason} if args.skip else {}
        )
        try:
            ran = asyncio.run(
                offboarding.run(ledger, stored, config, wiring.drivers, choices, did=args.did)
            )
        except KeyboardInterrupt:
            out.write(
                "\n" + _("interrupted: a rerun continues at the first step not verified") + "\n"
            )
            raise
        result = ran.result
    if args.json:
        output.dump_json(
            {
                "plan": result.stored.id,
                "hash": result.stored.hash,
                "finished": result.finished,
                "outcome": status.outcome(result.stored),
                "stopped_at": result.stopped_at,
                "reason": result.reason,
                "steps": _states(result.stored),
            },
            out,
        )
    else:
        _state_table(result.stored, out)
        if result.finished:
            out.write(
                "\n"
                + _(
                    "offboarding of {node} finished: {outcome}.\nreport: zuka offboard {node}"
                    " --report; a day later: zuka offboard {node} --recheck"
                ).format(node=visible(node.name), outcome=status.outcome(result.stored, _))
                + "\n"
            )
        else:
            out.write(_stopped(result, node.name))
    return 0 if result.finished else 1


def _stopped(result: runner.RunResult, name: str) -> str:
    """Where a run stopped and why; a console step waits for the user: what to type next."""
    key = result.stopped_at or ""
    step = result.stored.plan.step(key) if key else None
    if step is not None and step.driver == "manual":
        n, k = visible(name), visible(key)
        said = (
            "" if result.reason.startswith(manual.WAITING) else f"{visible(shown(result.reason))}\n"
        )
        return (
            "\n"
            + _("waiting for you at {key}: {what}").format(
                key=k, what=visible(shown(step.describe))
            )
            + "\n"
            + said
            + _(
                "once done: zuka offboard {node} --execute --confirm {node} --did {key}\n"
                "or, with a reason: zuka offboard {node} --skip {key} --reason TEXT"
                " --confirm {node}"
            ).format(node=n, key=k)
            + "\n"
        )
    return (
        "\n"
        + _("stopped at {key}: {reason}\na rerun continues there").format(
            key=visible(key), reason=visible(shown(result.reason))
        )
        + "\n"
    )


def _states(stored: StoredPlan) -> list[dict[str, object]]:
    return [
        {
            "key": s.key,
            "phase": s.phase.name.lower(),
            "driver": s.driver,
            "action": s.action,
            "target": s.target,
            "destructive": s.destructive,
            "command": s.describe,
            "params": dict(s.params),
            "resource_id": s.resource_id,
            "state": stored.state(s.key).state.value,
            "detail": stored.state(s.key).detail,
        }
        for s in stored.plan.steps
    ]


def _print_plan(stored: StoredPlan, new: bool, as_json: bool, out: TextIO) -> int:
    name = stored.plan.node
    if as_json:
        output.dump_json(
            {"node": name, "plan": stored.id, "hash": stored.hash, "new": new,
             "not_deleted": stored.plan.not_deleted(), "steps": _states(stored)},
            out,
        )  # fmt: skip
        return 0
    out.write(
        _("offboarding plan for {node} (a dry run: nothing was touched)").format(node=visible(name))
        + "\n\n"
    )
    _state_table(stored, out)
    _whats(stored, out)
    for kept in stored.plan.not_deleted():
        said = _("NOT deleted: {what}").format(what=shown(kept))
        lines = output.wrap(said, output.terminal_columns(out), indent="  ")
        out.write("\n" + "\n".join(x[2:] if i == 0 else x for i, x in enumerate(lines)) + "\n")
    started = any(stored.state(s.key).state is not State.PENDING for s in stored.plan.steps)
    out.write(
        "\n"
        + _("plan {id}, hash {hash}").format(id=stored.id, hash=stored.hash)
        + "\n"
        + (_("stored") if new else _("unchanged since it was stored"))
        + "\n"
        + (
            _("(some steps have run: a rerun continues at the first one not done)") + "\n"
            if started
            else ""
        )
        + _(
            "to carry it out: zuka offboard {node} --execute --confirm {node} --hash {hash}"
        ).format(node=visible(name), hash=stored.hash[:12])
        + "\n"
    )
    return 0


def _state_table(stored: StoredPlan, out: TextIO) -> None:
    """The steps' table: where each stands (the commands: _whats)."""
    rows = []
    for i, s in enumerate(stored.plan.steps, 1):
        st = stored.state(s.key)
        rows.append(
            (
                i,
                phase_word(s.phase.name.lower()),
                visible(s.key, 60),
                _("yes") if s.destructive else "",
                _("waiting for you (--did {key})").format(key=visible(s.key, 60))
                if offboarding.waiting(stored, s.key)
                else state_word(st.state.value)
                + (
                    _(": {detail}").format(detail=visible(shown(st.detail), 80))
                    if st.detail and (st.state not in PASSED or st.state is State.SKIPPED)
                    else ""
                ),
            )
        )
    output.table(("#", _("phase"), _("step"), _("deletes"), _("state")), rows, out)


def _whats(stored: StoredPlan, out: TextIO) -> None:
    """Every step's full command or description, wrapped to the terminal: this is what
    the user confirms, so nothing in it is cut."""
    columns = output.terminal_columns(out)
    out.write("\n" + _("what each step does:") + "\n")
    for i, s in enumerate(stored.plan.steps, 1):
        head = output.wrap(visible(s.key), columns, indent="     ")
        out.write(f"{i:>3}  {head[0][5:]}\n" + "".join(line + "\n" for line in head[1:]))
        for line in output.wrap(visible(shown(s.describe)), columns, indent="       "):
            out.write(line + "\n")


def _inspect(
    ledger: Ledger,
    node: Node,
    config: Config,
    include: Sequence[str],
    keep: Mapping[str, str],
    as_json: bool,
    out: TextIO,
) -> int:
    """`--inspect`: preflight, then every thing the plan deletes read where the plan will
    delete it, as a table; what was seen is kept as evidence. Nothing changes."""
    try:
        result = asyncio.run(
            offboarding.inspect(
                ledger, node.name, config, wiring.PLANNERS, wiring.drivers,
                include=include, keep=keep,
            )
        ).result  # fmt: skip
    except KeyboardInterrupt:
        out.write("\n" + _("inspection interrupted: nothing was changed") + "\n")
        raise
    n = visible(node.name)
    if as_json:
        looks = [
            {"step": lk.step.key, "target": lk.step.target, "exists": lk.sighting.exists,
             "said": lk.sighting.detail or lk.sighting.output,
             "facts": dict(lk.sighting.facts), "remarks": list(lk.remarks)}
            for lk in result.looks
        ]  # fmt: skip
        preflight = [{"step": k, "ok": ok, "said": said} for k, ok, said in result.preflight]
        output.dump_json(
            {"plan": result.stored.id, "hash": result.stored.hash, "ok": result.ok,
             "preflight": preflight, "looks": looks},
            out,
        )  # fmt: skip
        return 0 if result.ok else 1
    out.write(
        _("inspection of {node}'s offboarding plan {id} (nothing was changed)").format(
            node=n, id=result.stored.id
        )
        + "\n\n"
    )
    for key, ok, said in result.preflight:
        mark = _mark(_("ok") if ok else _("FAIL"), 4)
        out.write(f"{mark}  {visible(key, 80)}  {visible(shown(said), 160)}\n")
    if not result.looks and not all(ok for _k, ok, _s in result.preflight):
        out.write("\n" + _("preflight failed: nothing was looked at") + "\n")
        return 1
    # Each thing in full (what a person weighs before confirming is in its facts), wrapped.
    columns = output.terminal_columns(out)
    out.write("\n")
    for lk in result.looks:
        seen = lk.sighting.exists
        promised = runner.must_be_seen(lk.step)
        mark = _mark(
            _("yes") if seen
            else "?" if seen is None
            else _("NOT FOUND") if promised
            else _("not there"),
            9,
        )  # fmt: skip
        out.write(f"{mark}  {visible(lk.step.key, 200)}\n")
        facts = ", ".join(f"{fact_word(k)} {shown(v)}" for k, v in lk.sighting.facts.items())
        said = facts or shown(lk.sighting.detail) or lk.sighting.output
        if seen is False and not promised:
            said = _("nothing to clear here (a usual path, not a resource the ledger records)")
        for text in (said, *(shown(x) for x in lk.remarks)):
            for line in output.wrap(visible(text, 4000), columns, indent="           "):
                out.write(line + "\n")
    if result.ok:
        out.write(
            "\n"
            + _(
                "everything the plan deletes was seen where it will be deleted.\n"
                "to carry it out: zuka offboard {node} --execute --confirm {node} --hash {hash}"
            ).format(node=n, hash=result.stored.hash[:12])
            + "\n"
        )
    else:
        out.write(
            "\n"
            + _(
                "NOT everything was seen: a thing not found is a typo, another region or another"
                " account as often as a thing already gone. Correct the record (zuka resource"
                " edit ... --new-id | --region | --endpoint), make the plan again (zuka offboard"
                " {node}); the run stops at what it cannot see"
            ).format(node=n)
            + "\n"
        )
    return 0 if result.ok else 1


def _recheck(ledger: Ledger, node: Node, config: Config, as_json: bool, out: TextIO) -> int:
    try:
        done = asyncio.run(offboarding.recheck(ledger, node.name, config, wiring.drivers))
    except KeyboardInterrupt:
        out.write(
            "\n"
            + _("recheck interrupted: nothing was changed; run it again to read all back")
            + "\n"
        )
        raise
    stored, result = done.stored, done.result
    assert stored is not None
    if as_json:
        lines = [
            {"step": k, "ok": ok, "state": stored.state(k).state.value, "said": said}
            for k, ok, said in result.lines
        ]
        output.dump_json({"plan": stored.id, "ok": result.ok, "steps": lines}, out)
        return 0 if result.ok else 1
    for key, ok, said in result.lines:
        skipped = stored.state(key).state is State.SKIPPED
        word = _("skip") if skipped else _("n/a") if ok is None else _("ok") if ok else _("FAIL")
        out.write(f"{_mark(word, 4)}  {visible(key, 80)}  {visible(shown(said), 160)}\n")
    unproven = done.unproven
    if not result.ok:
        out.write(_("NOT everything is still gone: see above") + "\n")
    elif unproven:
        out.write(
            _(
                "everything verified is still gone; {count} step(s) were never verified"
                " (skipped or gone on past: see above)"
            ).format(count=unproven)
            + "\n"
        )
    else:
        out.write(_("everything is still gone") + "\n")
    return 0 if result.ok else 1


def _report(ledger: Ledger, node: Node, args: argparse.Namespace, out: TextIO) -> int:
    data = offboarding.report_of(ledger, node.name)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        if not args.output:
            output.dump_json(data, out)
            return 0
        text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    else:
        text = report.markdown(data)
    if args.output:
        write_private(Path(args.output), text)
    else:
        out.write(text)
    return 0


def _mark(word: str, cells: int) -> str:
    """A short mark padded to `cells` terminal cells (a CJK character counts two)."""
    return word + " " * max(0, cells - cell_len(word))
