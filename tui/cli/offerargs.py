"""The command line of the price book and of quotes for planned work: `zuka offer
add/list/edit/delete` and `zuka plan job` (handlers in tui.cli.offers, loaded when run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from leases.core.i18n import N_, _
from leases.core.models import BillingType, ProviderKind
from tui.cli import choicewords, lazy

Handler = Callable[[argparse.Namespace, TextIO], int]
# main.build_parser's `cmd`: (parent, name, handler, help) -> the subcommand's parser.
Cmd = Callable[[Any, str, Handler, str], argparse.ArgumentParser]

_ON = N_("price as on this day, YYYY-MM-DD (default: today in the billing time zone)")


def _offer_fields(p: argparse.ArgumentParser, *, adding: bool) -> None:
    p.add_argument(
        "--provider",
        required=adding,
        metavar="NAME",
        help=_("who quoted it (need not be in the ledger yet)"),
    )
    p.add_argument(
        "--channel",
        required=adding,
        choices=[k.value for k in ProviderKind],
        type=choicewords.typed(ProviderKind),
        help=choicewords.help_of(ProviderKind),
    )
    p.add_argument(
        "--gpu-model",
        dest="gpu_model",
        required=adding,
        metavar="M",
        help=_("as quoted: H800, A800-SXM4-80G (matched without vendor, memory, form)"),
    )
    p.add_argument("--gpus", metavar="N", help=_("cards a machine (default: priced a card)"))
    p.add_argument(
        "--billing",
        dest="billing_type",
        required=adding,
        choices=[b.value for b in BillingType],
        type=choicewords.typed(BillingType),
        help=choicewords.help_of(BillingType),
    )
    p.add_argument(
        "--price",
        dest="unit_price",
        required=adding,
        metavar="PRICE",
        help=_(
            "a billing unit's price: a machine's (a card's without --gpus);"
            " a card-hour's for card_hour; a contract's a month"
        ),
    )
    p.add_argument("--currency", metavar="C", help=_("default CNY"))
    p.add_argument(
        "--min-term",
        dest="min_term",
        metavar="N",
        help=_("minimum term, in billing units (3 for three months)"),
    )
    p.add_argument("--deposit", metavar="AMOUNT", help=_("deposit asked"))
    p.add_argument("--region", metavar="R", help=_("where the data would sit"))
    p.add_argument(
        "--quoted", dest="quoted_on", metavar="DATE", help=_("YYYY-MM-DD quoted (default: today)")
    )
    p.add_argument("--valid-until", dest="valid_until", metavar="DATE", help=_("YYYY-MM-DD"))
    p.add_argument("--notes", help=_("free notes"))  # fmt: skip


def add(sub: Any, plans: Any, cmd: Cmd) -> None:
    """The offer group under `sub` and `plan job` under `plans`."""
    offer = sub.add_parser("offer", help=_("the price book: offers collected from providers"))
    offer_sub = offer.add_subparsers(dest="action", required=True, parser_class=type(offer))
    p = cmd(offer_sub, "add", lazy.offer_add, _("record a provider's offer"))
    _offer_fields(p, adding=True)
    p = cmd(offer_sub, "list", lazy.offer_list, _("the offers still valid (--all: expired too)"))
    p.add_argument("--all", action="store_true", help=_("also expired offers, marked"))
    p.add_argument("--on", metavar="DATE", help=_(_ON))
    p = cmd(offer_sub, "edit", lazy.offer_edit, _("change an offer"))
    p.add_argument("id", help=_("the offer's id (zuka offer list --all)"))
    _offer_fields(p, adding=False)
    p = cmd(offer_sub, "delete", lazy.offer_delete, _("delete an offer (zuka undo puts it back)"))
    p.add_argument("id", help=_("the offer's id"))

    p = cmd(
        plans,
        "job",
        lazy.plan_job,
        _("price planned work under every valid offer and current lease of its GPU model"),
    )
    p.add_argument("--model", required=True, metavar="M", help=_("GPU model: H800, A100..."))
    p.add_argument("--cards", required=True, metavar="N", help=_("cards the job needs"))
    p.add_argument("--hours", required=True, metavar="H", help=_("hours on each card"))
    p.add_argument(
        "--within",
        metavar="DAYS",
        help=_("the hours are spread over this many days (default: back-to-back)"),
    )
    p.add_argument(
        "--region",
        metavar="R",
        help=_(
            "allow only this data region; with --project it narrows the project's regions"
            " to R, which must be one of them"
        ),
    )
    p.add_argument(
        "--project",
        metavar="P",
        help=_("check the project's allowed regions ([projects.P] regions)"),
    )
    p.add_argument("--on", metavar="DATE", help=_(_ON))  # fmt: skip
