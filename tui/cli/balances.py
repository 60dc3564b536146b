"""`zuka provider topup` and `zuka provider balance`: a provider account's prepaid balance
(the use cases in leases.app.balances)."""

from __future__ import annotations

import argparse
from typing import TextIO

from leases.app import balances as app
from leases.config.load import load_user_config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def provider_topup(args: argparse.Namespace, out: TextIO) -> int:
    lab = load_user_config(args.config).billing
    with trusted(open_ledger(args, create=False), _("the balance")) as ledger:
        added, message = app.topup(ledger, args.name, args.amount, at=args.at,
                                   notes=args.notes, tz=lab.tz, currency=args.currency,
                                   lab=lab.currency)  # fmt: skip
    return output.done(args, out, added, message)


def provider_balance(args: argparse.Namespace, out: TextIO) -> int:
    lab = load_user_config(args.config).billing
    tz = lab.tz
    if args.reading is not None:
        with trusted(open_ledger(args, create=False), _("the balance")) as ledger:
            added, message = app.set_reading(ledger, args.name, args.reading, at=args.at,
                                             notes=args.notes, tz=tz, currency=args.currency,
                                             lab=lab.currency)  # fmt: skip
        return output.done(args, out, added, message)
    if args.notes is not None:
        raise InputError("--notes", args.notes, _("goes with --set (a note on the reading)"))
    if args.currency is not None:
        raise InputError("--currency", args.currency, _("goes with --set (the reading's currency)"))
    with trusted(open_ledger(args, readonly=True), _("the balance")) as ledger:
        at = fields.moment("at", args.at, tz) if args.at is not None else None
        acc = app.account(ledger, args.name, at)
    if acc is None:
        if args.json:
            output.dump_json(None, out)
        else:
            name = visible(args.name)
            said = _(
                "{name}: no balance recorded: zuka provider topup {name} --amount X,"
                " or zuka provider balance {name} --set AMOUNT"
            )
            out.write(said.format(name=name) + "\n")
        return 0
    if args.json:
        output.dump_json(app.account_json(acc, tz), out)
    else:
        out.write("".join(visible(line) + "\n" for line in app.account_lines(acc, tz)))
    return 0
