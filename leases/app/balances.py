"""Prepaid balance use cases: `zuka provider topup`, `zuka provider balance [--set]` and
what they say (the account read by leases.ledger.accounts, its maths in
leases.money.balances)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import Provider
from leases.ledger.accounts import Account, account, account_names
from leases.ledger.books import Record
from leases.ledger.store import Ledger
from leases.money.amounts import fen_json, fen_shown, money_words
from leases.money.balances import RUNWAY_DAYS, stops_said
from leases.money.periods import utc

__all__ = ["Account", "account", "account_json", "account_lines", "account_names",
           "set_reading", "topup"]  # fmt: skip


def _when(ledger: Ledger, at: str | None, tz: str) -> datetime:
    now = ledger.clock()
    if at is None:
        return now.astimezone(fields.timezone(tz, "billing.tz"))
    when = fields.moment("at", at, tz)
    if utc(when) > utc(now):
        raise InputError("at", at, _("is in the future: record what happened, when it happened"))
    return when


def entry_currency(ledger: Ledger, prov: Provider, lab: str) -> str:
    """The currency of an entry given no --currency: the account's (its entries'), else
    the one the provider's leases all share, else the lab's ([billing] currency)."""
    rows = ledger.book_rows("balance", "provider_id = ?", [prov.id])
    if rows:
        return str(rows[0]["currency"])
    ids = [n.id for n in ledger.nodes() if n.provider == prov.name and n.id is not None]
    found = {le.currency for le in ledger.leases(node_ids=ids) if le.node_id in ids}
    return found.pop() if len(found) == 1 else lab


def _entry(ledger: Ledger, name: str, kind: str, amount: str, at: str | None, notes: str | None,
           tz: str, currency: str | None, lab: str) -> tuple[Provider, Record]:  # fmt: skip
    prov = ledger.provider(name)
    cur = entry_currency(ledger, prov, lab) if currency is None else currency
    rec = {"provider_id": prov.id, "kind": kind, "amount": amount, "currency": cur,
           "at": _when(ledger, at, tz), "notes": notes or ""}  # fmt: skip
    return prov, ledger.add_book("balance", rec)


def topup(ledger: Ledger, name: str, amount: str, *, at: str | None = None,
          notes: str | None = None, tz: str, currency: str | None = None,
          lab: str = "CNY") -> tuple[Record, str]:  # fmt: skip
    """`zuka provider topup NAME --amount X [--currency C]`: money put on the provider
    account, in `currency` (default: entry_currency, `lab` the config's)."""
    prov, added = _entry(ledger, name, "topup", amount, at, notes, tz, currency, lab)
    said = money_words(Decimal(added["amount"]), added["currency"])
    return added, _("recorded a top-up of {amount} on {provider} at {at}").format(
        amount=said, provider=prov.name, at=added["at"]
    )


def set_reading(ledger: Ledger, name: str, amount: str, *, at: str | None = None,
                notes: str | None = None, tz: str, currency: str | None = None,
                lab: str = "CNY") -> tuple[Record, str]:  # fmt: skip
    """`zuka provider balance NAME --set X`: the balance read off the provider's console,
    and what zuka had worked out at that moment (`worked_out`, None when it had nothing
    to work from; `gap`: the console's figure less zuka's)."""
    when = _when(ledger, at, tz)
    try:
        before, why = account(ledger, name, when), _("no top-up nor reading before it")
    except InputError as exc:  # a lease whose charges cannot be worked out: still read it
        before, why = None, _("it could not be worked out: {reason}").format(reason=exc.reason)
    prov, added = _entry(ledger, name, "reading", amount, at, notes, tz, currency, lab)
    cur, read = added["currency"], Decimal(added["amount"])
    said = _("recorded {provider}'s balance {amount} as read at {at}").format(
        provider=prov.name, amount=money_words(read, cur), at=added["at"]
    )
    if before is None:
        added = {**added, "worked_out": None, "gap": None}
        return added, _("{said}: zuka had no balance to compare ({why}); the balance is"
                        " worked out from it from now on").format(said=said, why=why)  # fmt: skip
    worked = fen_shown(before.balance.amount)
    gap = fen_shown(read - worked)
    added = {**added, "worked_out": str(worked), "gap": str(gap)}
    if gap:
        diff = (
            _("the console shows {amount} less")
            if gap < 0
            else _("the console shows {amount} more")
        ).format(amount=money_words(abs(gap), cur))
    else:
        diff = _("the console shows the same")
    return added, _("{said}; zuka had worked out {amount}: {diff}; the balance is"
                    " worked out from it from now on").format(
                        said=said, amount=money_words(worked, cur), diff=diff)  # fmt: skip


def account_json(acc: Account, tz: str) -> dict[str, Any]:
    b, r = acc.balance, acc.runway
    zone = fields.timezone(tz, "billing.tz")
    return {
        "provider": acc.provider, "currency": acc.currency,
        "at": b.at.astimezone(zone).isoformat(timespec="seconds"),
        "balance": fen_json(b.amount), "worked_out": True, "since": b.since.isoformat(),
        "since_reading": fen_json(b.reading),
        "topups_since": fen_json(b.topups), "charged_since": fen_json(b.charged),
        "burn_per_day": fen_json(r.per_day),
        "days_left": None if r.days_left is None else str(r.days_left.quantize(Decimal("0.01"))),
        "runs_out": None if r.runs_out is None else fields.shown(r.runs_out, tz),
        "stops_then": list(r.stops),
        "cannot_pay": [{"node": n, "what": w, "amount": fen_json(a)} for n, w, a in r.unpaid],
        "burning": [{"node": x.node, "what": x.what, "per_day": fen_json(x.per_day)}
                    for x in acc.burning],
        "coming_charges": [{"node": n, "at": t.astimezone(zone).isoformat(),
                            "amount": fen_json(a)}
                           for n, t, a in acc.coming],
    }  # fmt: skip


def account_lines(acc: Account, tz: str) -> list[str]:
    """What `zuka provider balance NAME` prints."""
    b, r, cur = acc.balance, acc.runway, acc.currency
    since = fields.shown(b.since, tz)
    source = (
        _("the reading of {amount} at {at}").format(amount=money_words(b.reading, cur), at=since)
        if b.reading is not None
        else _("0 at the first top-up, {at}").format(at=since)
    )
    burning = "".join(
        _("; {node} {what} {amount}").format(
            node=x.node, what=_(x.what), amount=money_words(x.per_day, cur)
        )
        for x in acc.burning
    )
    lines = [
        _("{provider}: balance {amount} at {at}").format(
            provider=acc.provider, amount=money_words(b.amount, cur), at=fields.shown(b.at, tz)
        ),
        _(
            "  worked out by zuka since {source}: + top-ups {topups} - charged {charged}"
            " (zuka's leases at {provider})"
        ).format(
            source=source,
            topups=money_words(b.topups, cur),
            charged=money_words(b.charged, cur),
            provider=acc.provider,
        ),
        _("  burn {amount}/day now").format(amount=money_words(r.per_day, cur)) + burning,
    ]
    if r.days_left is None and r.per_day:
        lines.append(
            _(
                "  it lasts beyond {days} days at the charges recorded (no run-out within them)"
            ).format(days=RUNWAY_DAYS)
        )
    elif r.days_left is None:
        lines.append(
            _(
                "  nothing burns it now (no running pay-as-you-go lease, no storage, no charge"
                " to come within {days} days)"
            ).format(days=RUNWAY_DAYS)
        )
    elif b.amount <= 0:
        stopped = ", ".join(r.stops) or _("no running pay-as-you-go node of zuka's")
        lines.append(_("  it has run out: the provider stops {nodes}").format(nodes=stopped))
    else:
        assert r.runs_out is not None
        stops = stops_said(r, cur) or _("nothing of zuka's (no running pay-as-you-go lease)")
        lines.append(_("  {days} days left: runs out {at}; then stops: {stops}").format(
            days=r.days_left.quantize(Decimal("0.01")), at=fields.shown(r.runs_out, tz),
            stops=stops))  # fmt: skip
    for node, at, amount in acc.coming:
        said = _(
            "  coming before then: {node}'s prepaid charge of {amount} on {at} (not in the burn"
            " rate: the balance falls by it that day)"
        )
        lines.append(
            said.format(node=node, amount=money_words(amount, cur), at=fields.shown(at, tz))
        )
    lines.append(_("  set it from the provider's console: zuka provider balance {provider}"
                   " --set AMOUNT").format(provider=acc.provider))  # fmt: skip
    return lines
