"""`zuka ps` (the fleet's GPU processes) and `zuka kill NODE PID` (stop one, confirmed by
its pid typed): parse, call leases.app.processes, show."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime
from typing import TextIO

from leases.app import processes
from leases.core.errors import InputError, no_ledger
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger.paths import ledger_choice
from leases.ledger.store import Ledger
from tui.cli import output

DEFAULT_GRACE_S = 10.0


def _ledger(args: argparse.Namespace, *, readonly: bool = False) -> Ledger:
    path, why = ledger_choice(args.ledger)
    if not path.exists():
        raise no_ledger(path, why)
    # ps only reads (a lab's viewer may run it); kill writes its audit entries.
    return Ledger.open(path, create=False, readonly=readonly, action=f"zuka {args.command}")


def ps(args: argparse.Namespace, out: TextIO) -> int:
    with _ledger(args, readonly=True) as ledger:
        statuses = processes.read_statuses(ledger)
    rows = processes.rows_of(statuses)
    words = [f"user:{args.user}"] if args.user else []
    words += [f"node:{args.node}"] if args.node else []
    rows = processes.sort_rows(processes.filter_rows(rows, " ".join(words)), args.sort)
    if args.json:
        output.dump_json([processes.row_json(r) for r in rows], out)
        return 0
    age = processes.readings_age(statuses, datetime.now(UTC))
    if not rows:
        out.write(_("no GPU processes in the last readings") + (f" ({age})" if age else "") + "\n")
        return 0
    if age:
        out.write(age + "\n")
    cut = output.terminal_columns(out, 200) if out.isatty() else None
    table = [
        (
            visible(r.node, 30),
            "?" if r.gpu is None else str(r.gpu),
            str(r.pid) + ("" if r.visible else "*"),
            visible(r.user, 20),
            "?" if r.used_mib is None else f"{r.used_mib:.0f}",
            "?" if r.share_pct is None else f"{r.share_pct:.0f}%",
            processes.elapsed_words(r.elapsed_s),
            r.command if cut is None else visible(r.command, max(cut - 70, 20)),
        )
        for r in rows
    ]
    headers = (
        _("NODE"), "GPU", "PID", _("USER"), "MiB", _("SHARE"), _("ELAPSED"), _("COMMAND"),
    )  # fmt: skip
    output.table(headers, table, out)
    if any(not r.visible for r in rows):
        out.write("* " + _("not visible to the login (a container's host PID)") + "\n")
    return 0


def kill(args: argparse.Namespace, out: TextIO) -> int:
    grace = processes.check_grace(args.grace)
    with _ledger(args) as ledger:
        row = processes.find_row(processes.read_rows(ledger), args.node, args.pid)
        typed = args.yes_i_typed
        if typed is None:
            if not sys.stdin.isatty():
                raise InputError(
                    "confirm",
                    None,
                    _("not a terminal: pass --yes-i-typed {pid} to confirm").format(pid=row.pid),
                )
            out.write(
                _("{node} GPU {gpu} pid {pid} of {user}: {command}").format(
                    node=visible(row.node),
                    gpu=row.gpu,
                    pid=row.pid,
                    user=visible(row.user),
                    command=row.command,
                )
                + "\n"
            )
            typed = input(
                _("Type the pid, {pid}, to stop it (SIGTERM, then SIGKILL): ").format(pid=row.pid)
            )
        processes.check_confirmation(row.pid, typed)
        runner = processes.runner_for(ledger, row.node)
        stopped = asyncio.run(_stop(ledger, row, typed, grace, runner))
    if args.json:
        doc = {"node": row.node, "pid": row.pid, "user": row.user, "ok": stopped.ok,
               "outcome": stopped.outcome.name.lower(), "steps": list(stopped.steps)}  # fmt: skip
        output.dump_json(doc, out)
        return 0 if stopped.ok else 1
    for step in stopped.steps:
        # A refusal is said by the outcome's sentence below; its raw words (the node's
        # shell error) stay in the audit and --json.
        if not step.startswith("refused:"):
            out.write("  " + visible(step, 300) + "\n")
    out.write(
        _("{node} pid {pid}: {outcome}").format(
            node=visible(row.node), pid=row.pid, outcome=_(stopped.outcome.value)
        )
        + "\n"
    )
    return 0 if stopped.ok else 1


async def _stop(
    ledger: Ledger,
    row: processes.ProcessRow,
    typed: str,
    grace: float,
    runner: processes.Runner,
) -> processes.Stopped:
    try:
        return await processes.stop_process(
            row.node,
            row.pid,
            row.process.start,
            row.process.cmdline,
            typed,
            grace,
            runner,
            time.monotonic,
            ledger,
            user=row.user,
            visible_to_login=row.visible,
        )
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            await close()
