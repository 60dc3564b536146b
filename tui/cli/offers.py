"""Handlers of `zuka offer add/list/edit/delete` (the price book) and `zuka plan job` (a
job priced under every offer and current lease of its GPU model): leases.app.offers
does the work; this module reads the flags and prints."""

from __future__ import annotations

import argparse
import io
import sys
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, TextIO

from leases.app import offers
from leases.config.load import load_user_config
from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import BillingType
from leases.core.spoken import percent
from leases.core.textsafe import visible
from leases.money import quote
from leases.money.amounts import bare, fen_json, money, money_words, price_words
from leases.money.amounts import price as price_text
from leases.money.reporttotals import HUNDREDTH, to_step
from leases.money.words import billing_word, channel_word
from tui.cli import output
from tui.cli.opening import open_ledger, trusted


def _config(args: argparse.Namespace) -> Config:
    config = load_user_config(args.config)
    for warning in config.warnings:
        print(_("zuka: warning: {warning}").format(warning=visible(warning)), file=sys.stderr)
    return config


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The offer's fields given as flags (record key -> value as typed)."""
    return offers.offer_changes({k: getattr(args, k, None) for k in offers.OFFER_FLAGS})


def _day(args: argparse.Namespace, ledger: Any, config: Config) -> date:
    if getattr(args, "on", None) is None:
        return offers.today_in(ledger, config)
    return fields.day("--on", str(args.on))


def offer_add(args: argparse.Namespace, out: TextIO) -> int:
    config = _config(args)
    rec = _given(args)
    with trusted(open_ledger(args, create=True), _("the offer")) as ledger:
        added, message = offers.add_offer(ledger, rec, offers.today_in(ledger, config))
    return output.done(args, out, added, message)


def offer_edit(args: argparse.Namespace, out: TextIO) -> int:
    offer_id = offers.offer_ids(args.id)
    with trusted(open_ledger(args), _("the offer")) as ledger:
        edited, message = offers.edit_offer(ledger, offer_id, _given(args))
    return output.done(args, out, edited, message)


def offer_delete(args: argparse.Namespace, out: TextIO) -> int:
    offer_id = offers.offer_ids(args.id)
    with trusted(open_ledger(args), _("the offer")) as ledger:
        gone, message = offers.delete_offer(ledger, offer_id)
    return output.done(args, out, gone, message)


def offer_list(args: argparse.Namespace, out: TextIO) -> int:
    config = _config(args)
    with trusted(open_ledger(args, readonly=True), _("the offers")) as ledger:
        day = _day(args, ledger, config)
        rows = offers.list_offers(ledger, day, everything=args.all)
    if args.json:
        output.dump_json([{**r.offer, "valid": r.valid} for r in rows], out)
        return 0
    table = []
    for r in rows:
        o = r.offer
        until = o["valid_until"] or "-"
        if not r.valid:
            later = str(o["quoted_on"]) > day.isoformat()
            until = (_("{day} (quoted later)") if later else _("{day} (expired)")).format(day=until)
        table.append((
            o["id"], o["provider"], channel_word(str(o["channel"])), o["gpu_model"],
            o["gpus"] or "-",
            billing_word(str(o["billing_type"])),
            price_text(Decimal(o["unit_price"]), o["currency"]),
            o["min_term"] or "-",
            "-" if o["deposit"] is None else money(Decimal(o["deposit"]), o["currency"]),
            o["region"] or "-", o["quoted_on"], until,
        ))  # fmt: skip
    headers = (_("ID"), _("PROVIDER"), _("CHANNEL"), _("GPU MODEL"), _("GPUS"), _("BILLING"),
               _("PRICE"), _("MIN TERM"), _("DEPOSIT"), _("REGION"), _("QUOTED"),
               _("VALID UNTIL"))  # fmt: skip
    output.table(headers, table, out)
    return 0


# -- zuka plan job ------------------------------------------------------------------------


def plan_job(args: argparse.Namespace, out: TextIO) -> int:
    config = _config(args)
    try:
        work = offers.job_from(args.cards, args.hours, args.within)
    except InputError as exc:
        raise offers.flagged(exc) from None
    with trusted(open_ledger(args, readonly=True), _("the quote")) as ledger:
        day = _day(args, ledger, config)
        at = ledger.clock()
        if args.on is not None:
            tz = fields.timezone(config.billing.tz, "billing.tz")
            at = datetime.combine(day, time(12), tz)
        try:
            q = offers.quote_job(ledger, config, model=args.model, work=work, day=day, at=at,
                                 project=args.project, region=args.region)  # fmt: skip
        except InputError as exc:
            raise offers.flagged(exc) from None
    if args.json:
        output.dump_json(quote_json(q), out)
    else:
        out.write("\n".join(quote_lines(q)) + "\n")
    return 0


def _units(p: quote.Priced) -> str:
    n = p.units
    word = quote.unit_word(p.option.billing_type, plural=n != 1)
    return f"{n:,} {word}"


def quote_json(q: quote.Quote) -> dict[str, Any]:
    def option(p: quote.Priced) -> dict[str, Any]:
        o = p.option
        return {
            "option": o.label, "provider": o.provider, "channel": o.channel,
            "gpu_model": o.gpu_model, "billing_type": o.billing_type.value,
            "unit_price": str(o.unit_price), "currency": o.currency, "gpus": o.gpus,
            "machines": p.machines, "billed_units": str(p.units), "unit": p.unit,
            "cost": fen_json(p.cost), "min_term": o.min_term, "min_term_binds": p.min_term_binds,
            "deposit": fen_json(o.deposit), "first_payment": fen_json(p.first_payment),
            "up_front": fen_json(p.up_front), "region": o.region, "allowed": p.allowed,
            "compared": p.compared, "note": p.why or None,
        }  # fmt: skip

    best = q.cheapest
    return {
        "model": q.model,
        "cards": q.job.cards,
        "hours": str(q.job.hours),
        "card_hours": str(q.job.card_hours),
        "within_days": q.job.within_days,
        "currency": q.currency,
        "regions": None if q.regions is None else list(q.regions),
        "regions_rule": q.rule or None,
        "options": [option(p) for p in q.options],
        "cheapest": None if best is None else best.option.label,
        "saves": fen_json(q.saves),
        "break_even": [
            {
                "monthly": b.monthly.label,
                "hourly": b.hourly.label,
                "hours_a_month": None if b.hours is None else str(to_step(b.hours, HUNDREDTH)),
                "reason": b.reason or None,
            }
            for b in q.break_evens
        ],
    }


def _name(p: quote.Priced) -> str:
    o = p.option
    return _("{label} ({provider} {billing})").format(
        label=o.label, provider=visible(o.provider, 60), billing=billing_word(o.billing_type.value)
    )


def quote_lines(q: quote.Quote) -> list[str]:
    j = q.job
    span = (
        _("back-to-back")
        if j.within_days is None
        else _("within {days} days").format(days=j.within_days)
    )
    lines = [
        _(
            "{cards} cards x {hours:,} h = {card_hours:,} card-hours of {model}, {span};"
            " compared in {currency}"
        ).format(
            cards=j.cards,
            hours=j.hours,
            card_hours=j.card_hours,
            model=visible(q.model, 60),
            span=span,
            currency=q.currency,
        ),
    ]
    if q.regions is not None:
        lines.append(
            _("data regions allowed ({rule}): {regions}").format(
                rule=visible(q.rule), regions=visible(", ".join(q.regions))
            )
        )
    rows = []
    for p in q.options:
        o = p.option
        if o.billing_type is BillingType.CARD_HOUR:
            per = _(" a card-hour")
        else:
            per = _(" per {gpus}-card machine").format(gpus=o.gpus) if o.gpus else _(" per card")
        term = "-" if o.min_term is None else f"{o.min_term:,}" + (_(" (binds)") if p.min_term_binds
                                                                  else "")  # fmt: skip
        rows.append((
            o.label, o.provider, channel_word(o.channel), billing_word(o.billing_type.value),
            f"{price_text(o.unit_price, o.currency)}{per}", p.machines, _units(p),
            money(p.cost, o.currency), term, money(o.deposit, o.currency),
            money(p.up_front, o.currency), o.region or "-", p.why,
        ))  # fmt: skip
    lines.append("")
    buf = io.StringIO()
    headers = (_("OPTION"), _("PROVIDER"), _("CHANNEL"), _("BILLING"), _("PRICE"), _("MACHINES"),
               _("BILLED"), _("COST"), _("MIN TERM"), _("DEPOSIT"), _("UP FRONT"), _("REGION"),
               _("NOTE"))  # fmt: skip
    output.table(headers, rows, buf)
    lines += buf.getvalue().rstrip("\n").split("\n")
    lines.append("")
    best, next_ = q.cheapest, q.runner_up
    if best is None:
        lines.append(
            _("cheapest: none of the options is allowed and in {currency}").format(
                currency=q.currency
            )
        )
    elif next_ is None:
        lines.append(_("cheapest: {option} {cost}, the only option allowed").format(
            option=_name(best), cost=money_words(best.cost, q.currency)))  # fmt: skip
    else:
        saves = q.saves or Decimal(0)
        share = percent(f"{saves * 100 / next_.cost:.1f}") if next_.cost else "-"
        lines.append(
            _("cheapest: {option} {cost}, {saves} ({share}) less than {next} {next_cost}").format(
                option=_name(best),
                cost=money_words(best.cost, q.currency),
                saves=money_words(saves, q.currency),
                share=share,
                next=_name(next_),
                next_cost=money_words(next_.cost, q.currency),
            )
        )
    lines.append(_("up front: the first payment (one period of a prepaid option) and the deposit;"
                   " pay-as-you-go bills as it runs"))  # fmt: skip
    if q.break_evens:
        lines.append(
            _("break-even, hours of use a month above which the monthly price costs less:")
        )
        for b in q.break_evens:
            cards = b.monthly.gpus or 1
            lines.append(
                _(
                    "  {monthly} ({price} a month, {cards} cards) against {hourly} ({per_hour} an"
                    " hour for {cards} cards): {verdict}"
                ).format(
                    monthly=b.monthly.label,
                    price=price_words(b.monthly.unit_price, b.monthly.currency),
                    cards=cards,
                    hourly=b.hourly.label,
                    per_hour=_per_machine(b, words=True),
                    verdict=b.reason
                    if b.hours is None
                    else _("{hours} h").format(hours=bare(to_step(b.hours, HUNDREDTH))),
                )
            )
    return lines


def _per_machine(b: quote.BreakEven, words: bool = False) -> str:
    """The pay-as-you-go option's price an hour for the monthly option's cards (words: as
    a sentence says it)."""
    hourly = quote.card_hour_price(b.hourly) * (b.monthly.gpus or 1)
    said = price_words if words else price_text
    return said(hourly.quantize(Decimal("0.0001")), b.hourly.currency)
