"""`zuka accept NODE`: hand-over acceptance of a node, checks printed as they run, then
each finding, the verdict and until when the node can be returned; `--last` the stored
verdict without a run. Exit status: 0 passed or warned, 1 failed, 3 not checked."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import TextIO

from leases.accept.engine import Check
from leases.app import acceptance
from leases.app.acceptance import Stored
from leases.app.acceptreport import report_md, returnable_words, to_json
from leases.config.load import load_user_config
from leases.core import fields
from leases.core.acceptance import CheckResult, Level
from leases.core.errors import InputError
from leases.core.textsafe import visible
from tui.cli import output
from tui.cli.acceptargs import EXIT
from tui.cli.opening import open_ledger


def _when(stored: Stored) -> str:
    """When a stored run finished, in its lease's billing zone."""
    return f"checked {fields.shown(stored.verdict.finished, stored.lease_tz)} ({stored.lease_tz})"


def _line(r: CheckResult) -> str:
    return (
        f"  {r.status.value.replace('_', ' '):<11} {visible(r.title, 80)}: {visible(r.words, 600)}"
    )


def accept(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    for warning in config.warnings:
        print(f"zuka: warning: {visible(warning)}", file=sys.stderr)
    progress = sys.stderr if args.json or args.report else out

    def started(check: Check) -> None:
        print(f"checking: {visible(check.title, 120)}", file=progress, flush=True)

    def found(result: CheckResult) -> None:
        print(_line(result), file=progress, flush=True)

    if args.json and args.report:
        raise InputError("--report", args.report, "prints the report, --json the run: give one")
    if args.last and args.level:
        raise InputError("--level", args.level, "--last shows the stored run; it runs nothing")
    with open_ledger(args, create=False) as ledger:
        if args.last:
            stored = acceptance.last(ledger, args.node)
            if stored is None:
                raise InputError(
                    "node", args.node, "has no acceptance run recorded yet: zuka accept NODE"
                )
        else:
            stored = asyncio.run(
                acceptance.accept(
                    ledger,
                    args.node,
                    config,
                    level=Level(args.level or Level.QUICK.value),
                    clock=lambda: datetime.now(UTC),
                    started=started,
                    found=found,
                )
            )
    if args.json:
        output.dump_json(to_json(stored), out)
    elif args.report:
        out.write(report_md(stored))
    else:
        if args.last:
            for r in stored.verdict.results:
                print(_line(r), file=out)
        counts = stored.verdict.counts()
        tally = ", ".join(f"{n} {s.value.replace('_', ' ')}" for s, n in counts.items() if n)
        print(
            f"{visible(stored.node, 100)}: {stored.status.value.replace('_', ' ')}"
            f" ({tally or 'no findings'}; level {stored.verdict.level.value}, run {stored.id}"
            f"{', ' + _when(stored) if args.last else ''});"
            f" {returnable_words(stored)}",
            file=out,
        )
    return EXIT[stored.status]
