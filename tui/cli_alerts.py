"""Handlers of `zuka alerts`: list (evaluated on read, so never stale), check, ack, snooze.

Listing evaluates the rules first and stores the outcome (leases.alertwatch.check): with
or without a collector running, what it prints holds now.
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any, TextIO

from leases import alertstate
from leases.alertstate import Changed, StoredAlert
from leases.alertwatch import check
from leases.config import load_user_config
from leases.errors import InputError
from leases.ledger import Ledger, resolve_ledger_path
from leases.textsafe import visible
from tui import output


def alert_json(a: StoredAlert, now: Any) -> dict[str, Any]:
    def iso(at: Any) -> str | None:
        return None if at is None else at.isoformat()

    return {
        "id": a.id,
        "kind": a.kind,
        "severity": a.severity.value,
        "state": a.state(now).value,
        "node": a.node,
        "lease": iso(a.lease_start),
        "key": a.key,
        "message": a.message,
        "action": a.action,
        "yuan": None if a.yuan is None else str(a.yuan),
        "first_seen": iso(a.first_seen),
        "last_seen": iso(a.last_seen),
        "cleared_at": iso(a.cleared_at),
        "acked_at": iso(a.acked_at),
        "acked_by": a.acked_by,
        "snoozed_until": iso(a.snoozed_until),
    }


def _print(rows: list[StoredAlert], as_json: bool, now: Any, out: TextIO) -> None:
    if as_json:
        output.dump_json([alert_json(a, now) for a in rows], out)
        return
    if not rows:
        out.write("no alerts\n")
        return
    table = [
        (
            a.id,
            a.severity.value,
            a.state(now).value,
            visible(a.node, 40),
            a.kind,
            f"{a.first_seen.astimezone():%m-%d %H:%M}",
            visible(a.message, 200),
        )
        for a in rows
    ]
    output.table(("ID", "SEVERITY", "STATE", "NODE", "KIND", "SINCE", "MESSAGE"), table, out)


def _ledger(args: argparse.Namespace) -> Ledger:
    return Ledger.open(resolve_ledger_path(args.ledger), create=False)


def _id(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InputError("id", value, "an alert id: a whole number (see zuka alerts)") from None
    if number <= 0:
        raise InputError("id", value, "an alert id: a whole number (see zuka alerts)")
    if number >= 2**63:  # beyond SQLite's INTEGER: no row can have it
        raise InputError("id", value, f"no alert {number} (see zuka alerts --all)")
    return number


def list_alerts(args: argparse.Namespace, out: TextIO) -> int:
    config = load_user_config(args.config)
    with _ledger(args) as ledger:
        check(ledger, config.alerts, ledger.clock)
        now = ledger.clock()
        _print(alertstate.alerts(ledger, now, everything=args.all), args.json, now, out)
    return 0


def check_now(args: argparse.Namespace, out: TextIO) -> int:
    """Evaluate now and say what changed (and what is open)."""
    config = load_user_config(args.config)
    with _ledger(args) as ledger:
        changes = check(ledger, config.alerts, ledger.clock)
        now = ledger.clock()
        if args.json:
            output.dump_json(
                {
                    "changes": [{"change": c.change.value, **alert_json(c.alert, now)}
                                for c in changes],
                    "open": [alert_json(a, now) for a in alertstate.alerts(ledger, now)],
                },
                out,
            )  # fmt: skip
            return 0
        _print_changes(changes, out)
        _print(alertstate.alerts(ledger, now), False, now, out)
    return 0


def _print_changes(changes: list[Changed], out: TextIO) -> None:
    told = [c for c in changes if c.change.value != "updated"]
    for c in told:
        out.write(
            visible(f"{c.change.value}: #{c.alert.id} {c.alert.kind} on {c.alert.node}") + "\n"
        )
    if told:
        out.write("\n")


def ack(args: argparse.Namespace, out: TextIO) -> int:
    with _ledger(args) as ledger:
        done = alertstate.ack(
            ledger, _id(args.id), ledger.clock(), ledger.actor or getpass.getuser()
        )
        now = ledger.clock()
        if args.json:
            output.dump_json(alert_json(done, now), out)
        else:
            out.write(visible(f"acknowledged #{done.id} ({done.kind} on {done.node})") + "\n")
    return 0


def snooze(args: argparse.Namespace, out: TextIO) -> int:
    span = alertstate.parse_duration(args.for_)
    with _ledger(args) as ledger:
        until = ledger.clock() + span
        done = alertstate.snooze(ledger, _id(args.id), until)
        now = ledger.clock()
        if args.json:
            output.dump_json(alert_json(done, now), out)
        else:
            out.write(
                visible(f"snoozed #{done.id} ({done.kind} on {done.node}) until "
                        f"{until.astimezone():%Y-%m-%d %H:%M}") + "\n"
            )  # fmt: skip
    return 0
