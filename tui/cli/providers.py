"""Handlers of `zuka provider add/edit/list`."""

from __future__ import annotations

import argparse
from typing import TextIO

from leases.app.flags import PROVIDER_FLAGS, PROVIDER_HELP
from leases.app.providers import add_provider, edit_provider
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.money.amounts import fen_json, money
from tui.cli import output
from tui.cli.opening import open_ledger
from tui.cli.options import add_flags, pick
from tui.words import shown


def provider_options(p: argparse.ArgumentParser, required: bool) -> None:
    add_flags(p, PROVIDER_FLAGS, {"kind"} if required else set(), PROVIDER_HELP)


def provider_add(args: argparse.Namespace, out: TextIO) -> int:
    provider = records.provider_from({"name": args.name, **pick(args, PROVIDER_FLAGS)})
    with open_ledger(args, create=True) as ledger:
        added, message = add_provider(ledger, provider)
    return output.done(args, out, records.provider_record(added), message)


def provider_edit_options(p: argparse.ArgumentParser) -> None:
    add_flags(p, {k: PROVIDER_FLAGS[k] for k in Ledger.PROVIDER_EDITABLE}, set(), PROVIDER_HELP)


def provider_edit(args: argparse.Namespace, out: TextIO) -> int:
    changes = pick(args, {k: PROVIDER_FLAGS[k] for k in Ledger.PROVIDER_EDITABLE})
    if not changes:
        raise InputError(
            "provider edit", args.name, _("nothing to change: give at least one option")
        )
    with open_ledger(args, create=False) as ledger:
        edited, message = edit_provider(ledger, args.name, changes)
    return output.done(args, out, records.provider_record(edited), message)


def provider_list(args: argparse.Namespace, out: TextIO) -> int:
    with open_ledger(args, readonly=True) as ledger:
        provs = ledger.providers()
        held = _balances(ledger)
    if args.json:
        docs = [records.provider_record(p) for p in provs]
        for doc in docs:  # the worked-out balance where the provider has entries
            doc["balance"] = held.get(doc["name"], (None, ""))[0]
        output.dump_json(docs, out)
    else:
        rows = [
            (p.name, shown(p.kind), p.region, p.account_alias, p.account_id, p.credential_ref,
             held.get(p.name, (None, ""))[1])
            for p in provs
        ]  # fmt: skip
        head = (
            _("NAME"), _("CHANNEL"), _("REGION"), _("ACCOUNT"), _("ACCOUNT ID"), _("CREDENTIAL"),
            _("BALANCE"),
        )  # fmt: skip
        output.table(head, rows, out)
    return 0


def _balances(ledger: Ledger) -> dict[str, tuple[str | None, str]]:
    """(the balance for JSON, as the table shows it) of each provider with balance entries:
    one whose leases cannot be costed (a card-hour lease without its cards) says so, and
    the others still show theirs."""
    from leases.app.balances import account, account_names  # the money maths, when listing

    out: dict[str, tuple[str | None, str]] = {}
    for name in account_names(ledger):
        try:
            acc = account(ledger, name)
        except InputError as exc:
            out[name] = (
                None,
                _("unknown: {field}: {reason}").format(field=exc.field, reason=exc.reason),
            )
            continue
        if acc is not None:
            amount = acc.balance.amount
            out[name] = (fen_json(amount), money(amount, acc.currency))
    return out
