"""`zuka cost [NODE]`: what each lease billing now costs, to date and by its ends, with its
measured use and the hourly-against-monthly verdict (figures from leases.money.leasecost)."""

from __future__ import annotations

import argparse
from typing import TextIO

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Lease
from leases.core.textsafe import visible
from leases.money import leasecost, report
from leases.telemetry.rollups import HistoryStore
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def _days(value: int) -> int:
    if not 1 <= value <= 366:
        raise InputError("days", str(value), _("must be from 1 to 366"))
    return value


def cost(args: argparse.Namespace, out: TextIO) -> int:
    days = _days(int(args.days))
    # A mistyped --ledger, or a row changed outside zuka: refused.
    with trusted(open_ledger(args, readonly=True), _("the costs")) as ledger:
        at = ledger.clock()
        # UnknownNode: exit 2. Nodes and leases by node id: a released node's name may be
        # reused, and each node's leases are costed at its own cards.
        nodes = report.nodes_by_key([ledger.node(args.node)] if args.node else ledger.nodes())
        leases: dict[int | str, list[Lease]] = {}
        for le in ledger.leases(args.node) if args.node else ledger.leases():
            leases.setdefault(le.node_key, []).append(le)
        resources = ledger.resources(args.node) if args.node else ledger.resources()
        stops = ledger.stop_spans()
        usage = HistoryStore(ledger).usage_by(stops)
        costs = [
            c
            for key in sorted(leases, key=lambda k: (leases[k][0].node, str(k)))
            if (c := leasecost.node_cost(
                nodes.get(key), leases[key], resources, usage, at, days, stops=stops
            )) is not None
        ]  # fmt: skip
    if args.json:
        output.dump_json(
            {"at": at.isoformat(), "days": days, "leases": [leasecost.to_json(c) for c in costs]},
            out,
        )
        return 0
    if not costs:
        node = visible(args.node) if args.node else "NODE"
        said = (
            _("no lease bills now on {node}").format(node=node)
            if args.node
            else _("no lease bills now on any node")
        )
        hint = _(
            "(leases not started yet or ended: `zuka lease list {node}`; what past months"
            " cost: `zuka report --month YYYY-MM`)"
        ).format(node=node)
        out.write(f"{said}\n{hint}\n")
        return 0
    rows = [leasecost.row(c) for c in costs]
    columns = output.fitted_columns(args, out)
    output.fit_table(leasecost.headers(), rows, out, columns=columns, below=(_("VERDICT"),), key=2)
    out.write(
        "\n"
        + _("usage over the last {days} days (from a lease's start at the earliest)").format(
            days=days
        )
        + "\n"
    )
    for c in costs:
        for note in c.unknown:
            said = f"{visible(c.node)}: {visible(note)}"
            lines = [said] if columns is None else output.wrap(said, columns)
            out.write("\n".join(lines) + "\n")
    return 0
