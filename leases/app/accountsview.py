"""What the dashboard's accounts screen (`$` on the fleet, tui/screens/accounts.py) shows,
worked out without Textual: an accountant's view of this month in the billing zone, each
section from the use case the command line calls for it (nothing recomputed here):

- prepaid balances: leases.app.balances (`zuka provider balance`);
- deposits outstanding: leases.app.deposits (`zuka lease refunds`);
- the month's charges invoiced and uninvoiced: leases.app.monthreport (`zuka report`);
- the last complete month's bill: leases.alerts.billfacts (`zuka bill check`, the alerts);
- the offers still valid: leases.app.offers (`zuka offer list`).

A ledger holding a row changed outside zuka shows no figure: the refusal the fleet's
month's cost gives (leases.ledger.rowaudit), in words, instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from leases.alerts import billfacts
from leases.app import balances, deposits, monthreport, offers
from leases.config.sections import Config
from leases.core import fields
from leases.core.errors import InputError, LedgerError, said
from leases.core.gpumodels import gpu_key
from leases.core.i18n import N_, _
from leases.core.textsafe import visible
from leases.ledger import rowaudit
from leases.ledger.store import Ledger
from leases.money import quote
from leases.money.amounts import money_words
from leases.money.bills.reconcile import tolerance
from leases.money.words import billing_word

WHAT = N_("the accounts")  # what the refusal says would rest on drifted rows


@dataclass(frozen=True)
class Section:
    """A titled block of lines; `lines` empty never: an empty section says so."""

    key: str
    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class AccountsView:
    month: str  # this month in the billing zone, YYYY-MM
    at: str  # when it was worked out, as shown
    sections: tuple[Section, ...] = ()
    refused: str | None = None  # rows changed outside zuka: no figure, this instead


def _balances(ledger: Ledger, config: Config, now: datetime) -> tuple[str, list[str]]:
    lines: list[str] = []
    for name in balances.account_names(ledger):
        acc = balances.account(ledger, name, now)
        if acc is not None:
            lines += [visible(x, 400) for x in balances.account_lines(acc, config.billing.tz)]
    if not lines:
        lines = [_("no prepaid balance recorded: zuka provider topup NAME --amount X")]
    return _("Prepaid balances"), lines


def _deposits(ledger: Ledger, config: Config, now: datetime) -> tuple[str, list[str]]:
    provider = {n.id: n.provider or "-" for n in ledger.nodes()}
    lines = []
    for s in deposits.deposit_states(ledger):
        if not s.outstanding:
            continue
        le, cur = s.lease, s.lease.currency
        lines.append(
            _(
                "{provider} {node} (lease from {start}): deposit {deposit}, back so far"
                " {back}, outstanding {outstanding}"
            ).format(
                provider=visible(provider.get(le.node_id, "-"), 40),
                node=visible(le.node, 60),
                start=fields.shown(le.start, le.billing_tz),
                deposit=money_words(le.deposit, cur),
                back=money_words(s.refunded, cur),
                outstanding=money_words(s.outstanding, cur),
            )
        )
    if not lines:
        lines = [_("no deposit outstanding (a lease's --deposit; back with zuka lease refund)")]
    return _("Deposits outstanding"), lines


def _invoicing(ledger: Ledger, config: Config, now: datetime) -> tuple[str, list[str]]:
    month = this_month(now, config)
    rep = monthreport.month_report(ledger, month, config, now)
    lines = []
    for c in rep.invoicing:
        who = visible(c.provider, 40) + (f" {visible(c.node, 60)}" if c.node else "")
        lines.append(
            _("{who}: charged {charged}, invoiced {invoiced}, uninvoiced {uninvoiced}").format(
                who=who,
                charged=money_words(c.charged, c.currency),
                invoiced=money_words(c.invoiced, c.currency),
                uninvoiced=money_words(c.uninvoiced, c.currency),
            )
            + (f" ({visible(c.remark, 200)})" if c.remark else "")
        )
    if not lines:
        lines = [_("no invoice recorded: zuka invoice add --provider P --number N --issued DAY"
                   " --period YYYY-MM --amount X --vat 6%")]  # fmt: skip
    return _("Invoicing {month}").format(month=month), lines


def _bill(ledger: Ledger, config: Config, now: datetime) -> tuple[str, list[str]]:
    tz, month = config.billing.tz, billfacts.last_month(now, config.billing.tz)
    rec = billfacts.month_check(ledger, month, tz=tz, currency=config.billing.currency,
                                tol=tolerance(config.bills.tolerance), now=now)  # fmt: skip
    title = _("Bill {month} (the last complete month)").format(month=month)
    if rec is None:
        return title, [
            _("no bill imported for {month}: zuka bill import FILE --provider NAME").format(
                month=month
            )
        ]
    lines = [billfacts.summary(rec, month)]
    for r in rec.differing:
        who = f"{visible(r.provider, 40)} {visible(r.node, 60)}"
        if r.lines == 0:
            lines.append(
                _("{who}: not on the bill, zuka charged {amount}").format(
                    who=who, amount=money_words(r.zuka, r.currency)
                )
            )
        else:
            lines.append(_("{who}: differs: bill {bill}, zuka {zuka}, difference {difference}")
                         .format(who=who, bill=money_words(r.billed, r.currency),
                                 zuka=money_words(r.zuka, r.currency),
                                 difference=money_words(r.difference, r.currency)))  # fmt: skip
    for u in rec.unmatched:
        lines.append(_("unmatched: {provider} {resource} ({product}) {amount}: {why}").format(
            provider=visible(u.provider, 40), resource=visible(u.resource_id, 80),
            product=visible(u.product, 40) or _("no product"),
            amount=money_words(u.amount, u.currency), why=visible(u.why, 200)))  # fmt: skip
    if rec.agrees:
        lines.append(
            _("every lease agrees with the bill ({count} checked)").format(count=len(rec.rows))
        )
    return title, lines


def _offers(ledger: Ledger, config: Config, now: datetime) -> tuple[str, list[str]]:
    day = offers.today_in(ledger, config)
    found = offers.list_offers(ledger, day)
    lines = []
    for row in found:
        o = row.offer
        cards = f"{o['gpus']}x " if o.get("gpus") else ""
        lines.append(
            _("#{id} {provider} {cards}{model} {billing} {price}, valid until {until}").format(
                id=o["id"],
                provider=visible(o["provider"], 40),
                cards=cards,
                model=visible(o["gpu_model"], 40),
                billing=billing_word(o["billing_type"]),
                price=money_words(Decimal(o["unit_price"]), o["currency"]),
                until=o.get("valid_until") or _("no end"),
            )
        )
    lines += _cheapest([row.offer for row in found])
    if not lines:
        return _("Offers"), [
            _(
                "no offer valid today: zuka offer add --provider P --gpu-model M"
                " --billing card_hour --price X"
            )
        ]
    return _("Offers valid on {day}: {count}").format(day=day.isoformat(), count=len(found)), lines


def card_hour_equivalent(offer: Mapping[str, Any]) -> Decimal:
    """An offer's price a card-hour: pay-as-you-go as leases.money.quote prices it; a
    prepaid period's price over its hours (a quote's month: 720 h) and cards, at full use."""
    option = offers.offer_option(offer)
    if option.billing_type in quote.PAY_AS_YOU_GO:
        return quote.card_hour_price(option)
    hours = quote.PERIOD_HOURS[option.billing_type]
    return option.unit_price / (hours * (option.gpus or 1))


def _cheapest(found: Sequence[Mapping[str, Any]]) -> list[str]:
    """The cheapest offer of each GPU model (names made comparable) and currency, a
    card-hour at full use."""
    best: dict[tuple[str, str], tuple[Decimal, Mapping[str, Any]]] = {}
    for o in found:
        key, each = (gpu_key(str(o["gpu_model"])), str(o["currency"])), card_hour_equivalent(o)
        if key not in best or each < best[key][0]:
            best[key] = (each, o)
    return [
        _("cheapest {model}: #{id} {provider} {billing}, {price} a card-hour at full use").format(
            model=visible(o["gpu_model"], 40),
            id=o["id"],
            provider=visible(o["provider"], 40),
            billing=billing_word(o["billing_type"]),
            price=money_words(each, cur),
        )
        for (_model, cur), (each, o) in sorted(best.items())
    ]


Part = Callable[[Ledger, Config, datetime], tuple[str, list[str]]]
PARTS: tuple[tuple[str, Part], ...] = (
    ("balances", _balances),
    ("deposits", _deposits),
    ("invoicing", _invoicing),
    ("bill", _bill),
    ("offers", _offers),
)


def this_month(now: datetime, config: Config) -> str:
    return f"{now.astimezone(fields.timezone(config.billing.tz, 'billing.tz')):%Y-%m}"


def accounts_view(ledger: Ledger, config: Config, now: datetime) -> AccountsView:
    """Every section at `now`; a section that cannot be worked out says why, the others
    show. Rows changed outside zuka: no section, the refusal's words."""
    month = this_month(now, config)
    at = fields.shown(now, config.billing.tz)
    try:
        rowaudit.refuse(rowaudit.drifted_since(ledger), _(WHAT))
    except (InputError, LedgerError) as exc:
        return AccountsView(month, at, refused=visible(said(exc), 2000))
    out = []
    for key, part in PARTS:
        try:
            title, lines = part(ledger, config, now)
        except (InputError, LedgerError) as exc:
            why = visible(said(exc), 400)
            title, lines = key, [_("cannot be worked out: {why}").format(why=why)]
        out.append(Section(key, title, tuple(lines)))
    return AccountsView(month, at, tuple(out))
