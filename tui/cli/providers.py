"""Handlers of `zuka provider add/edit/list`."""

from __future__ import annotations

import argparse
from typing import TextIO

from leases.app.flags import PROVIDER_FLAGS, PROVIDER_HELP
from leases.app.providers import add_provider, edit_provider
from leases.core.errors import InputError
from leases.ledger import records
from leases.ledger.store import Ledger
from leases.money.amounts import fen_shown, money
from tui.cli import output
from tui.cli.opening import open_ledger
from tui.cli.options import add_flags, pick


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
        raise InputError("provider edit", args.name, "nothing to change: give at least one option")
    with open_ledger(args, create=False) as ledger:
        edited, message = edit_provider(ledger, args.name, changes)
    return output.done(args, out, records.provider_record(edited), message)


def provider_list(args: argparse.Namespace, out: TextIO) -> int:
    from leases.app.balances import accounts  # the money maths, only when listing

    with open_ledger(args, readonly=True) as ledger:
        provs = ledger.providers()
        held = accounts(ledger)
    if args.json:
        docs = [records.provider_record(p) for p in provs]
        for doc in docs:  # the worked-out balance where the provider has entries
            acc = held.get(doc["name"])
            doc["balance"] = None if acc is None else str(fen_shown(acc.balance.amount))
        output.dump_json(docs, out)
    else:
        rows = [
            (p.name, p.kind.value, p.region, p.account_alias, p.credential_ref,
             money(held[p.name].balance.amount, held[p.name].currency) if p.name in held else "")
            for p in provs
        ]  # fmt: skip
        head = ("NAME", "CHANNEL", "REGION", "ACCOUNT", "CREDENTIAL", "BALANCE")
        output.table(head, rows, out)
    return 0
