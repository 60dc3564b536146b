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
from leases.alerts.wording import kind_word, node_shown, severity_word, state_word
from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _
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
    said = []
    if states[State.ACKED]:
        said.append(_("{n} acknowledged").format(n=states[State.ACKED]))
    if states[State.SNOOZED]:
        said.append(_("{n} snoozed").format(n=states[State.SNOOZED]))
    if not said:
        return _("no alerts")
    return _("no open alerts ({said}: zuka alerts --all)").format(said=_(", ").join(said))


# The text table's columns (shown with _; --json keeps its own keys).
HEADERS = (N_("ID"), N_("SEVERITY"), N_("STATE"), N_("NODE"), N_("KIND"), N_("SINCE"),
           N_("MESSAGE"), N_("ACTION"))  # fmt: skip


def _print(
    rows: list[StoredAlert], as_json: bool, now: datetime, out: TextIO, tz: ZoneInfo,
    empty: str = "", columns: int | None = None,
) -> None:  # fmt: skip
    if as_json:
        output.dump_json([alert_json(a, now) for a in rows], out)
        return
    if not rows:
        out.write((empty or _("no alerts")) + "\n")
        return
    table = [
        (
            a.id,
            severity_word(a.severity.value),
            state_word(a.state(now).value),
            visible(node_shown(a.node), 40),
            kind_word(a.kind),
            f"{a.first_seen.astimezone(tz):%m-%d %H:%M}",
            visible(a.message, 200),
            visible(a.action, 400),
        )
        for a in rows
    ]
    # Times in the billing zone (as `zuka log` and the dashboard), named once above.
    out.write(zone_header(tz.key, now) + "\n")
    headers = tuple(_(h) for h in HEADERS)
    output.fit_table(headers, table, out, columns=columns, below=headers[-2:])


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
        raise InputError("id", value, _("an alert id: a whole number (see zuka alerts)")) from None
    if number <= 0:
        raise InputError("id", value, _("an alert id: a whole number (see zuka alerts)"))
    if number >= 2**63:  # beyond SQLite's INTEGER: no row can have it
        raise InputError("id", value, _("no alert {id} (see zuka alerts --all)").format(id=number))
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


_CHANGE_WORDS = {
    "new": N_("new"),
    "escalated": N_("escalated"),
    "reopened": N_("reopened"),
    "cleared": N_("cleared"),
}


def _print_changes(changes: list[Changed], out: TextIO) -> None:
    told = [c for c in changes if c.change.value != "updated"]
    for c in told:
        said = _CHANGE_WORDS.get(c.change.value)
        out.write(
            visible(
                _("{change}: #{id} {kind} on {node}").format(
                    change=_(said) if said else c.change.value,
                    id=c.alert.id,
                    kind=kind_word(c.alert.kind),
                    node=node_shown(c.alert.node),
                )
            )
            + "\n"
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
            out.write(
                visible(
                    _("acknowledged #{id} ({kind} on {node})").format(
                        id=done.id, kind=kind_word(done.kind), node=node_shown(done.node)
                    )
                )
                + "\n"
            )
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
                visible(
                    _("snoozed #{id} ({kind} on {node}) until {until}").format(
                        id=done.id,
                        kind=kind_word(done.kind),
                        node=node_shown(done.node),
                        until=f"{until.astimezone(tz):%Y-%m-%d %H:%M %Z}",
                    )
                )
                + "\n"
            )
    return 0
