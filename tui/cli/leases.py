"""Handlers of `zuka lease add/renew/end/stop/resume/edit/delete/list`."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, TextIO

from leases.app.flags import LEASE_FLAGS, LEASE_HELP
from leases.app.leases import (
    add_lease,
    delete_lease,
    edit_lease,
    end_lease,
    renew_lease,
    resume_node,
    stop_node,
)
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import N_, _, pgettext
from leases.core.models import ExpiryAction, Lease
from leases.core.valuewords import word
from leases.ledger import records, release, stops
from leases.money import renewals, schedule
from leases.money.amounts import price
from tui.cli import output
from tui.cli.opening import open_ledger
from tui.cli.options import add_flags, pick
from tui.words import schedule_word, shown, when


def lease_options(
    p: argparse.ArgumentParser, required: bool, renewing: bool = False, editing: bool = False
) -> None:
    table = dict(LEASE_FLAGS)
    if renewing:
        for key in ("start", "end", "deposit_refund", "deposit_refunded_on"):
            table.pop(key)
    if editing:
        # --start picks the lease, as in lease delete; --new-start moves it.
        table.pop("start")
        p.add_argument("--start", dest="pick_start", metavar="WHEN", help=_(_PICK_HELP))
        p.add_argument("--new-start", dest="start", metavar="WHEN", help=_("move the start"))
        p.add_argument(
            "--whole-chain",
            action="store_true",
            help=_(
                "with --currency: record every lease of its renewal chain in that currency"
                " (one chain has one currency)"
            ),
        )
    add_flags(p, table, {"billing_type", "unit_price"} if required else set(), LEASE_HELP)
    p.add_argument(
        "--auto-renew",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=LEASE_HELP["auto_renew"],
    )


def _lease_changes(args: argparse.Namespace) -> dict[str, Any]:
    changes = pick(args, LEASE_FLAGS)
    if args.auto_renew is not None:
        changes["auto_renew"] = args.auto_renew
    return changes


def lease_add(args: argparse.Namespace, out: TextIO) -> int:
    rec = {"node": args.node, **_lease_changes(args)}
    if rec.get("start") is None:
        tz = fields.timezone(str(rec.get("billing_tz") or fields.DEFAULT_TZ), "billing_tz")
        rec["start"] = datetime.now(tz).replace(second=0, microsecond=0)
    lease = records.lease_from(rec)
    with open_ledger(args, create=False) as ledger:
        ledger.node(args.node)
    with open_ledger(args, create=True) as ledger:
        added, message = add_lease(ledger, lease)
    return output.done(args, out, records.lease_record(added), message)


def lease_renew(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        lease, message = renew_lease(ledger, args.node, args.until, _lease_changes(args))
    return output.done(args, out, records.lease_record(lease), message)


def lease_end(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        ended, message = end_lease(ledger, args.node, args.at)
    return output.done(args, out, records.lease_record(ended), message)


def lease_stop(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        stop, message = stop_node(ledger, args.node, args.at)
    return output.done(args, out, stops.record(stop), message)


def lease_resume(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        stop, message = resume_node(ledger, args.node, args.at)
    return output.done(args, out, stops.record(stop), message)


_PICK_HELP = N_(
    "the lease that starts then, as `zuka lease list` prints it (default: the lease billing"
    " now; if none does, the next to start; never a renewal while its lease still bills)"
)


def lease_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = _lease_changes(args)
    if not changes:
        raise InputError("lease edit", args.node, _("nothing to change: give at least one option"))
    with open_ledger(args, create=False) as ledger:
        lease, message = edit_lease(
            ledger, args.node, changes, args.pick_start, whole_chain=args.whole_chain
        )
    return output.done(args, out, records.lease_record(lease), message)


def lease_delete(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, create=False) as ledger:
        bundle, message = delete_lease(ledger, args.node, args.start, force=args.force)
    return output.done(args, out, bundle, message)


def lease_list(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, readonly=True) as ledger:
        every = ledger.leases(args.node)
        now = ledger.clock()
    leases = [le for le in every if not args.open or release.open_at(le, now)]
    # Each lease's renewal chain: which lease it renews, and until when the chain is paid.
    chain_of = {le.id: chain for chain in renewals.chains(every) for le in chain}
    billing = {
        b.lease.id
        for b in (renewals.billing_now(c, now) for c in _by_node(every).values())
        if b is not None and b.bills
    }
    lapsed = {le.id for le in every if renewals.lapsed(le, now)}

    def ended(le: Lease) -> str | None:
        if renewals.never_billed(le):
            return _("cancelled")  # a renewal ended before it started: it never billed
        if le.start > now:
            return _("not started")
        if le.id in lapsed:
            return _("end, not recorded")  # released at its end: `zuka lease end` records it
        if chain_of[le.id][-1] is not le:
            return _("renewed")
        return when(le.ended_at) or pgettext("lease state", "open")

    def bills(le: Lease) -> str | None:
        if le.id in billing:
            return shown("hourly") if renewals.hourly_after_end(le, now) else _("yes")
        if le.start > now and not renewals.never_billed(le):
            return renewals.starts_in(le, now)
        return None

    def renews(le: Lease) -> Lease | None:
        chain = chain_of[le.id]
        i = chain.index(le)
        return chain[i - 1] if i else None

    def next_renewal(le: Lease) -> datetime | None:
        return renewals.next_renewal(chain_of[le.id], le, now)

    if args.json:
        output.dump_json(
            [
                {
                    **records.lease_record(le),
                    "renews": output.iso(prev.start) if (prev := renews(le)) else None,
                    "next_renewal": output.iso(next_renewal(le)),
                    "paid_until": output.iso(renewals.paid_so_far(chain_of[le.id], now)),
                    "bills_now": le.id in billing,
                }
                for le in leases
            ],
            out,
        )
        return 0
    rows = [
        (
            le.node,
            shown(le.billing_type)
            + (f", {schedule_word(le.payment_schedule)}" if schedule.scheduled(le) else ""),
            price(le.unit_price, le.currency),
            le.cards_billed,
            when(le.start),
            when(le.end),
            word("renews", ExpiryAction) if renewals.auto_renews(le) else word(le.on_expiry),
            ended(le),
            when(next_renewal(le)),
            when(renewals.paid_so_far(chain_of[le.id], now)),
            bills(le),
        )
        for le in leases
    ]
    headers = (
        _("NODE"), _("BILLING"), _("PRICE"), _("CARDS"), _("START"), _("END"), _("AT END"),
        _("ENDED"), _("RENEWS"), _("PAID UNTIL"), _("BILLS NOW"),
    )  # fmt: skip
    output.table(headers, rows, out)
    return 0


def _by_node(leases: list[Lease]) -> dict[str, list[Lease]]:
    out: dict[str, list[Lease]] = {}
    for le in leases:
        out.setdefault(le.node, []).append(le)
    return out
