"""Handlers of `zuka alerts`: list (evaluated on read, so never stale), check, ack, snooze.

Listing evaluates the rules first and stores the outcome (leases.alerts.watch.check): with
or without a collector running, what it prints holds now. What is new or worse is queued
for the notifier in that same write (leases.alerts.state), so listing never swallows it.
"""

from __future__ import annotations

import argparse
import getpass
from collections import Counter
from datetime import datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from leases.alerts import state as alertstate
from leases.alerts.state import Changed, State, StoredAlert
from leases.alerts.watch import check
from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.textsafe import visible
from leases.ledger.store import Ledger
from tui.cli import output
from tui.cli.opening import open_ledger
from tui.words import zone_header


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
        "currency": a.currency,  # of the amount: its lease's (None: the lease is gone)
        "first_seen": iso(a.first_seen),
        "last_seen": iso(a.last_seen),
        "cleared_at": iso(a.cleared_at),
        "acked_at": iso(a.acked_at),
        "acked_by": a.acked_by,
        "snoozed_until": iso(a.snoozed_until),
    }


def _hidden(ledger: Ledger, now: datetime) -> str:
    """'no open alerts (1 acknowledged, 1 snoozed: zuka alerts --all)', or 'no alerts'."""
    states = Counter(a.state(now) for a in alertstate.alerts(ledger, now, everything=True))
    said = [
        f"{states[s]} {word}"
        for s, word in ((State.ACKED, "acknowledged"), (State.SNOOZED, "snoozed"))
        if states[s]
    ]
    return f"no open alerts ({', '.join(said)}: zuka alerts --all)" if said else "no alerts"


def _print(
    rows: list[StoredAlert], as_json: bool, now: datetime, out: TextIO, tz: ZoneInfo,
    empty: str = "no alerts", columns: int | None = None,
) -> None:  # fmt: skip
    if as_json:
        output.dump_json([alert_json(a, now) for a in rows], out)
        return
    if not rows:
        out.write(empty + "\n")
        return
    table = [
        (
            a.id,
            a.severity.value,
            a.state(now).value,
            visible(a.node, 40),
            a.kind,
            f"{a.first_seen.astimezone(tz):%m-%d %H:%M}",
            visible(a.message, 200),
            visible(a.action, 400),
        )
        for a in rows
    ]
    # Times in the billing zone (as `zuka log` and the dashboard), named once above.
    out.write(zone_header(tz.key, now) + "\n")
    headers = ("ID", "SEVERITY", "STATE", "NODE", "KIND", "SINCE", "MESSAGE", "ACTION")
    output.fit_table(headers, table, out, columns=columns, below=("MESSAGE", "ACTION"))


def _zone(config: Config) -> ZoneInfo:
    return fields.timezone(config.billing.tz, "billing.tz")


def _ledger(args: argparse.Namespace) -> Ledger:
    """A mistyped --ledger is refused: "no alerts" from a ledger that is not there would
    keep a cron job watching them green."""
    return open_ledger(args)


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
        rows = alertstate.alerts(ledger, now, everything=args.all)
        columns = output.fitted_columns(args, out)
        _print(rows, args.json, now, out, _zone(config), _hidden(ledger, now), columns)
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
        rows, columns = alertstate.alerts(ledger, now), output.fitted_columns(args, out)
        _print(rows, False, now, out, _zone(config), _hidden(ledger, now), columns)
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
    tz = _zone(load_user_config(args.config))
    with _ledger(args) as ledger:
        until = ledger.clock() + span
        done = alertstate.snooze(ledger, _id(args.id), until)
        now = ledger.clock()
        if args.json:
            output.dump_json(alert_json(done, now), out)
        else:
            out.write(
                visible(f"snoozed #{done.id} ({done.kind} on {done.node}) until "
                        f"{until.astimezone(tz):%Y-%m-%d %H:%M %Z}") + "\n"
            )  # fmt: skip
    return 0
