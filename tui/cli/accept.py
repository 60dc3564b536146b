"""`zuka accept NODE`: hand-over acceptance of a node, checks printed as they run, then
each finding, the verdict and until when the node can be returned; `--last` the stored
verdict without a run. Exit status: 0 passed or warned, 1 failed, 3 not checked."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from typing import TextIO

from rich.cells import cell_len

from leases.accept.engine import Check
from leases.app import acceptance
from leases.app.acceptance import Stored, told
from leases.app.acceptreport import (
    level_words,
    report_md,
    returnable_words,
    status_words,
    to_json,
)
from leases.config.load import load_user_config
from leases.core import fields
from leases.core.acceptance import CheckResult, Level
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from tui.cli import output
from tui.cli.acceptargs import EXIT
from tui.cli.opening import open_ledger


def _when(stored: Stored) -> str:
    """When a stored run finished, in its lease's billing zone."""
    when = fields.shown(stored.verdict.finished, stored.lease_tz)
    return _("checked {when} ({tz})").format(when=when, tz=stored.lease_tz)


def _line(r: CheckResult) -> str:
    status = status_words(r.status)
    pad = " " * max(0, 11 - cell_len(status))
    said = _("{title}: {words}").format(title=visible(r.title, 80), words=visible(r.words, 600))
    return f"  {status}{pad} {said}"


def accept(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    for warning in config.warnings:
        print(_("zuka: warning: {warning}").format(warning=visible(warning)), file=sys.stderr)
    progress = sys.stderr if args.json or args.report else out

    def started(check: Check) -> None:
        title = visible(_(check.title), 120)
        print(_("checking: {check}").format(check=title), file=progress, flush=True)

    def found(result: CheckResult) -> None:
        print(_line(result), file=progress, flush=True)

    if args.json and args.report:
        raise InputError("--report", args.report, _("prints the report, --json the run: give one"))
    if args.last and args.level:
        raise InputError("--level", args.level, _("--last shows the stored run; it runs nothing"))
    with open_ledger(args, create=False) as ledger:
        if args.last:
            stored = acceptance.last(ledger, args.node)
            if stored is None:
                raise InputError(
                    "node", args.node, _("has no acceptance run recorded yet: zuka accept NODE")
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
            for r in told(stored, config.accept):
                print(_line(r), file=out)
        counts = stored.verdict.counts()
        tally = _(", ").join(
            _("{count} {status}").format(count=n, status=status_words(s))
            for s, n in counts.items()
            if n
        )
        if args.last:
            words = _("{node}: {status} ({tally}; level {level}, run {run}, {when}); {window}")
        else:
            words = _("{node}: {status} ({tally}; level {level}, run {run}); {window}")
        print(
            words.format(
                node=visible(stored.node, 100),
                status=status_words(stored.status),
                tally=tally or _("no findings"),
                level=level_words(stored.verdict.level),
                run=stored.id,
                when=_when(stored) if args.last else "",
                window=returnable_words(stored),
            ),
            file=out,
        )
    return EXIT[stored.status]
