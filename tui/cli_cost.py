"""`zuka cost [NODE]`: what each lease billing now costs, to date and by its ends, with its
measured use and the hourly-against-monthly verdict (figures from leases.leasecost)."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TextIO

from leases import leasecost
from leases.billing import CardHours
from leases.errors import InputError
from leases.models import Lease, Node
from leases.report import Usage
from leases.rollups import HistoryStore
from leases.textsafe import visible
from tui import output
from tui.cli_ledger import _open as open_ledger


def _usage(store: HistoryStore) -> Usage:
    def usage(lease: Lease, since: datetime, until: datetime, cards: int | None) -> CardHours:
        return store.lease_usage(lease, since, until, cards=cards)

    return usage


def _days(value: int) -> int:
    if not 1 <= value <= 366:
        raise InputError("days", str(value), "must be from 1 to 366")
    return value


def cost(args: argparse.Namespace, out: TextIO) -> int:
    days = _days(int(args.days))
    with open_ledger(args, readonly=True) as ledger:  # a mistyped --ledger: refused
        at = ledger.clock()
        if args.node:
            nodes: dict[str, Node] = {args.node: ledger.node(args.node)}  # UnknownNode: exit 2
        else:
            nodes = {}
            for n in sorted(ledger.nodes(), key=lambda n: n.state != "released"):
                nodes.setdefault(n.name, n)
        leases: dict[str, list[Lease]] = {}
        for le in ledger.leases(args.node) if args.node else ledger.leases():
            leases.setdefault(le.node, []).append(le)
        resources = ledger.resources(args.node) if args.node else ledger.resources()
        usage = _usage(HistoryStore(ledger))
        stops = ledger.stop_spans()
        costs = [
            c
            for name in sorted(leases)
            if (c := leasecost.node_cost(
                nodes.get(name), leases[name], resources, usage, at, days, stops=stops
            )) is not None
        ]  # fmt: skip
    if args.json:
        output.dump_json(
            {"at": at.isoformat(), "days": days, "leases": [leasecost.to_json(c) for c in costs]},
            out,
        )
        return 0
    if not costs:
        where = f"on {visible(args.node)}" if args.node else "on any node"
        node = visible(args.node) if args.node else "NODE"
        out.write(
            f"no lease bills now {where}\n"
            f"(leases not started yet or ended: `zuka lease list {node}`; what past months"
            " cost: `zuka report --month YYYY-MM`)\n"
        )
        return 0
    output.table(leasecost.HEADERS, [leasecost.row(c) for c in costs], out)
    out.write(f"\nusage over the last {days} days (from a lease's start at the earliest)\n")
    for c in costs:
        for note in c.unknown:
            out.write(f"{visible(c.node)}: {visible(note)}\n")
    return 0
