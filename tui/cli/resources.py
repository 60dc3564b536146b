"""Handlers of `zuka resource add/edit/list`."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any, TextIO

from leases.app.flags import RESOURCE_FLAGS, RESOURCE_HELP
from leases.app.resources import add_resource, edit_resource
from leases.core import fields
from leases.core.i18n import _
from leases.ledger import records
from tui.cli import output
from tui.cli.opening import open_ledger
from tui.cli.options import add_flags, pick
from tui.words import shown


def resource_options(p: argparse.ArgumentParser, editing: bool = False) -> None:
    if not editing:
        add_flags(p, RESOURCE_FLAGS, {"kind", "native_id"}, RESOURCE_HELP)
        return
    keep = ("kind", "native_id", "lease_start", "region", "endpoint", "notes")
    add_flags(
        p,
        {k: RESOURCE_FLAGS[k] for k in keep},
        {"kind", "native_id"},
        {
            **RESOURCE_HELP,
            "notes": _("the notes (required with --verified: how it was checked)"),
            "region": _("correct the region it was recorded in (not once marked deleted)"),
            "endpoint": _("correct the endpoint it was recorded at (not once marked deleted)"),
        },
    )
    p.add_argument(
        "--new-id",
        metavar="ID",
        help=_("correct its id (a typo), as checked when it is added (not once marked deleted)"),
    )
    for flag, what in (
        ("--deleted", _("mark it deleted by hand, at WHEN (default: now)")),
        ("--verified", _("mark it verified deleted by hand, at WHEN (default: now)")),
    ):
        p.add_argument(
            flag,
            nargs="?",
            const="now",
            metavar="WHEN",
            help=what,
        )


def resource_add(args: argparse.Namespace, out: TextIO) -> int:
    rec = pick(args, RESOURCE_FLAGS)
    with open_ledger(args, create=False) as ledger:
        ledger.node(args.node)
    with open_ledger(args, create=True) as ledger:
        doc, message = add_resource(ledger, args.node, rec)
    return output.done(args, out, doc, message)


def resource_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = {
        key: value
        for key, value in (
            ("deleted_at", args.deleted),
            ("verified_at", args.verified),
            ("notes", args.notes),
            ("new_id", args.new_id),
            ("region", args.region),
            ("endpoint", args.endpoint),
        )
        if value is not None
    }
    with open_ledger(args, create=False) as ledger:
        doc, message = edit_resource(
            ledger, args.node, args.kind, args.native_id, changes, args.lease_start
        )
    return output.done(args, out, doc, message)


def _shown_iso(iso: str | None) -> str | None:
    """A record's time (ISO, in its lease's billing zone) as the tables print it."""
    if iso is None:
        return None
    return fields.shown(datetime.fromisoformat(iso).replace(tzinfo=None))


def resource_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    output.table(
        (_("NODE"), _("LEASE START"), _("KIND"), _("ID"), _("REGION"), _("DELETED"),
         _("VERIFIED")),
        [
            (r["node"], _shown_iso(r["lease_start"]), shown(r["kind"]), r["native_id"],
             r["region"] or None, _shown_iso(r["deleted_at"]), _shown_iso(r["verified_at"]))
            for r in rows
        ],
        out,
    )  # fmt: skip


def resource_list(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, readonly=True) as ledger:
        rows = [records.resource_record(r, n, s) for n, s, r in ledger.resources(args.node)]
    if args.json:
        output.dump_json(rows, out)
    else:
        resource_table(rows, out)
    return 0
