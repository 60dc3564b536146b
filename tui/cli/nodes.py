"""Handlers of `zuka node add/list/show/edit/archive/restore/delete`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from leases.app.flags import NODE_FLAGS, NODE_HELP
from leases.app.nodes import (
    add_node,
    archive_node,
    delete_node,
    edit_node,
    new_node,
    node_changes,
    readings_line,
    restore_node,
)
from leases.core import recordfields
from leases.core.errors import InputError, UnknownNode
from leases.core.i18n import _
from leases.core.models import Lease, Node, NodeState, ProviderKind
from leases.ledger import records
from leases.ledger.lease_rows import billing_of as billing_of_leases
from leases.money import leasecost, renewals
from leases.money.amounts import money, price
from leases.money.renewals import BillingNow
from leases.ssh.pasted import dropped_from
from tui.cli import output
from tui.cli.opening import lab_zone, open_ledger
from tui.cli.options import add_flags, pick
from tui.cli.resources import resource_table
from tui.words import billing_line, day, field_word, shown, when


def node_options(p: argparse.ArgumentParser, editing: bool = False) -> None:
    p.add_argument("--ssh", help=NODE_HELP["ssh"])
    p.add_argument("--local", action="store_true", default=None, help=NODE_HELP["local"])
    p.add_argument(
        "--channel",
        help=_("for a new --provider: {choices}").format(
            choices=recordfields.choices(ProviderKind)
        ),
    )
    table = dict(NODE_FLAGS)
    if not editing:
        table.pop("state")
    add_flags(p, table, set(), NODE_HELP)


def _node_changes(args: argparse.Namespace) -> dict[str, Any]:
    return node_changes(pick(args, NODE_FLAGS), args.ssh, bool(args.local))


def _say_dropped(args: argparse.Namespace) -> None:
    """What of a pasted --ssh was dropped (a password line), on stderr: --json stays JSON."""
    said = dropped_from(args.ssh) if args.ssh else None
    if said:
        print(_("zuka: note: {said}").format(said=said), file=sys.stderr)


def node_add(args: argparse.Namespace, out: TextIO) -> int:
    node = new_node(args.name, _node_changes(args))
    with open_ledger(args, create=True) as ledger:
        added, message = add_node(ledger, node, args.provider, args.channel)
    _say_dropped(args)
    return output.done(args, out, records.node_record(added), message)


def _node_row(n: Node, now: BillingNow | None, channels: Mapping[str, str]) -> tuple[Any, ...]:
    gpus = f"{n.gpu_count}x {n.gpu_model}" if n.gpu_count else n.gpu_model or "-"
    lease = now.lease if now else None
    return (
        n.name,
        shown(channels.get(n.provider or "", "-")),
        n.provider,
        gpus,
        shown(lease.billing_type) if lease else "-",
        price(lease.unit_price, lease.currency) if lease else "-",
        _ends(now),
        when(now.paid_until if now else None) or "-",
        _("{state} (refused value: see node show)").format(state=shown(n.state))
        if n.problem
        else shown(n.state),
    )


def _ends(now: BillingNow | None) -> str:
    """The end of the lease billing now; for a lease booked but not started, when it starts."""
    if now is None:
        return "-"
    if not now.started and now.at is not None:
        return renewals.starts_in(now.lease, now.at)
    return when(now.lease.end) or "-"


def node_list(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, readonly=True) as ledger:
        states = None if args.all else [NodeState.ACTIVE, NodeState.OFFBOARDING]
        nodes = ledger.nodes(states)
        now = ledger.clock()
        # A lease or provider row the ledger refuses is left out and said, not fatal.
        leases, problems = ledger.readable_leases()
        providers, unread = ledger.readable_providers()
        # By node id: an archived node's own leases, never those of the live node that
        # took its name (nor the other way round).
        billing = billing_of_leases(leases, now)
        channels = {p.name: p.kind.value for p in providers}
    for problem in [*problems, *unread]:
        print(_("zuka: {problem}").format(problem=problem), file=sys.stderr)

    def billing_of(n: Node) -> BillingNow | None:
        return billing.get(n.id) if n.id is not None else None

    if args.json:
        output.dump_json(
            [
                {
                    **records.node_record(n),
                    "problem": n.problem or None,
                    "channel": channels.get(n.provider or ""),
                    # The lease billing now; paid_until: the end of its renewal chain.
                    "lease": records.lease_record(b.lease) if (b := billing_of(n)) else None,
                    "paid_until": output.iso(b.paid_until) if b else None,
                }
                for n in nodes
            ],
            out,
        )
    else:
        rows = [_node_row(n, billing_of(n), channels) for n in nodes]
        headers = (
            _("NAME"), _("CHANNEL"), _("PROVIDER"), _("GPUS"), _("BILLING"), _("PRICE"),
            _("ENDS"), _("PAID UNTIL"), _("STATE"),
        )  # fmt: skip
        output.table(headers, rows, out)
    return 0


def node_show(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, readonly=True) as ledger:
        try:
            node = ledger.node(args.name)
        except UnknownNode:
            moved = ledger.renamed(args.name)
            if moved is None:
                raise
            raise InputError(
                "name",
                args.name,
                _(
                    "no node of that name; it was renamed to {new} on {day}: `zuka node show {new}`"
                ).format(new=moved[0], day=day(moved[1], lab_zone(args))),
            ) from None
        leases = ledger.leases(node.name)
        resources = ledger.resources(node.name)
        at = ledger.clock()
        now = renewals.billing_now(leases, at)
        cost = leasecost.node_cost(node, leases, resources, None, at, stops=ledger.stop_spans())
        readings = readings_line(ledger, node)
    doc: dict[str, Any] = {
        "node": records.node_record(node),
        "ssh_command": node.ssh.command(),
        "readings": readings.removeprefix("readings: "),
        "problem": node.problem or None,
        "lease_now": records.lease_record(now.lease) if now else None,
        "bills_now": now.bills if now else False,
        "paid_until": output.iso(now.paid_until) if now else None,
        "leases": [records.lease_record(le) for le in leases],
        "resources": [records.resource_record(r, n, s) for n, s, r in resources],
    }
    if args.json:
        output.dump_json(doc, out)
        return 0
    extra = [(_("problem"), node.problem)] if node.problem else []
    said = [
        (field_word(k), shown(v) if k in ("state", "interconnect") else v)
        for k, v in doc["node"].items()
    ]
    said.append((_("ssh command"), doc["ssh_command"]))
    output.fields([*said, (_("readings"), doc["readings"]), *extra], out)
    out.write(f"\n{billing_line(now)}\n")
    if cost is not None:
        out.write(f"{leasecost.cost_line(cost)}\n")
    out.write("\n" + _("leases") + "\n")
    output.table(
        (_("START"), _("END"), _("BILLING"), _("PRICE"), _("DEPOSIT"), _("CONTRACT"), _("ENDED")),
        [
            (
                le.start.strftime("%Y-%m-%d %H:%M"),
                le.end.strftime("%Y-%m-%d %H:%M") if le.end else None,
                shown(le.billing_type),
                price(le.unit_price, le.currency),
                _deposit(le),
                le.contract_no or None,
                _("renewed") if now and le in now.chain[:-1] else when(le.ended_at),
            )
            for le in leases
        ],
        out,
    )
    out.write("\n" + _("resources") + "\n")
    resource_table(doc["resources"], out)
    return 0


def node_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _node_changes(args)
    if args.rename is not None:
        changes["name"] = args.rename
    if not changes and args.channel is None:
        raise InputError("node edit", args.name, _("nothing to change: give at least one option"))
    with open_ledger(args, create=False) as ledger:
        edited, message = edit_node(ledger, args.name, changes, args.provider, args.channel)
    _say_dropped(args)
    return output.done(args, out, records.node_record(edited), message)


def node_archive(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        node, message = archive_node(ledger, args.name)
    return output.done(args, out, records.node_record(node), message)


def node_restore(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        node, message = restore_node(ledger, args.name)
    return output.done(args, out, records.node_record(node), message)


def node_delete(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        counts, message = delete_node(ledger, args.name, force=args.force)
    return output.done(args, out, counts, message)


def _deposit(le: Lease) -> str | None:
    if le.deposit is None:
        return None
    refund = shown(le.deposit_refund)
    if le.deposit_paid_on:
        return _("{deposit}, paid {paid}, refund {refund}").format(
            deposit=money(le.deposit, le.currency), paid=le.deposit_paid_on, refund=refund
        )
    return _("{deposit}, refund {refund}").format(
        deposit=money(le.deposit, le.currency), refund=refund
    )
