"""A provider account's prepaid balance read from the ledger: its balance book's entries
and the renewal chains billed at the provider (their stops, cards and storage lines),
handed to the pure maths of leases.money.balances. What `zuka provider balance`, the
balance column of `zuka provider list` and the `balance_low` alert read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from leases.core import fields
from leases.core.errors import InputError
from leases.core.fields import DEFAULT_TZ
from leases.core.i18n import _
from leases.core.models import ExpiryAction, Lease
from leases.ledger.store import Ledger
from leases.money import balances
from leases.money.balances import Balance, Billed, Burner, Entry, Runway
from leases.money.billing import INSTANT
from leases.money.periods import utc
from leases.money.report import lease_key, node_chains, storage_lines


@dataclass(frozen=True)
class Account:
    """A provider account's balance at a moment and its runway."""

    provider: str
    currency: str
    balance: Balance
    runway: Runway
    burning: tuple[Burner, ...]
    # Prepaid charges due before it runs out (node, when, amount): not in the burn rate,
    # the balance falls by each on its day.
    coming: tuple[tuple[str, datetime, Decimal], ...]
    tz: str = DEFAULT_TZ  # the billing zone of its leases (the latest's), for its times


def entries_of(ledger: Ledger, provider_id: int) -> tuple[list[Entry], str]:
    rows = ledger.book_rows("balance", "provider_id = ?", [provider_id])
    entries = [Entry(r["kind"], Decimal(r["amount"]), datetime.fromisoformat(r["at"]))
               for r in rows]  # fmt: skip
    found = sorted({r["currency"] for r in rows})
    if len(found) > 1:  # a ledger written before the rule of one currency (bookdates)
        raise InputError(
            "balance",
            None,
            _(
                "cannot be worked out: the account's entries are in {currencies}: one account,"
                " one currency"
            ).format(currencies=" and ".join(found)),
        )
    return entries, (found[0] if found else "CNY")


def _in_currency(leases: list[Lease], currency: str, since: datetime) -> list[Lease]:
    """The leases in the account's currency; refused when one in another is charged from
    `since` on (one over before it is no part of the balance)."""
    for le in leases:
        # What bills past its end (an auto-renewal, the hourly fallback) runs on until a
        # recorded end.
        runs_on = le.auto_renew or le.on_expiry is not ExpiryAction.RELEASED
        last = le.ended_at or (None if runs_on else le.end)
        if le.currency != currency and (last is None or utc(last) > utc(since)):
            raise InputError(
                "balance",
                None,
                _(
                    "cannot be worked out: the lease from {shown} of node {node} is in {currency}, "
                    "the account in {currency2}"
                ).format(
                    shown=fields.shown(le.start, le.billing_tz),
                    node=le.node,
                    currency=le.currency,
                    currency2=currency,
                ),
            )
    return [le for le in leases if le.currency == currency]


def account(ledger: Ledger, name: str, at: datetime | None = None) -> Account | None:
    """The balance of provider `name` at `at` (default now) and its runway; None when it
    has no balance entry by then."""
    prov = ledger.provider(name)
    assert prov.id is not None
    when = at or ledger.clock()
    entries, currency = entries_of(ledger, prov.id)
    nodes = {n.id: n for n in ledger.nodes() if n.provider == prov.name and n.id is not None}
    leases = [le for le in ledger.leases(node_ids=list(nodes)) if le.node_id in nodes]
    first = balances.balance(entries, (), when)
    if first is None:
        return None
    leases = _in_currency(leases, currency, first.since)
    spans = ledger.stop_spans()
    storage = storage_lines(leases, ledger.resources())
    items: list[Billed] = []
    burning: list[Burner] = []
    coming: list[tuple[str, datetime, Decimal]] = []
    for chain in node_chains(leases):
        node = nodes.get(chain[-1].node_id) if chain[-1].node_id is not None else None
        cards = node.gpu_count if node is not None and node.gpu_count else None
        stops = tuple(spans.get(chain[-1].id or 0, ()))
        store = tuple(s for le in chain for s in storage.get(lease_key(le), []))
        items.append(Billed(tuple(chain), stops, cards, store))
        stopped = any(utc(a) <= utc(when) and (b is None or utc(b) > utc(when)) for a, b in stops)
        for le in chain:
            mine = [r for r, owner in store if owner is le]
            burning += balances.burners(le, cards=cards, stopped=stopped, storage=mine, at=when)
    found = balances.balance(entries, items, when)
    if found is None:
        return None
    run = balances.runway(found.amount, burning, when, items)
    if run.runs_out is not None and run.runs_out > when:
        # the charges it can pay: not one it runs out on (Runway.unpaid), in its last second
        until = run.runs_out - timedelta(seconds=1) - INSTANT if run.unpaid else run.runs_out
        for b in items:
            coming += [(b.chain[-1].node, at_, amount) for at_, amount in balances.coming(
                b.chain, when, until, cards=b.cards, stops=b.stops)]  # fmt: skip
    coming.sort(key=lambda c: utc(c[1]))
    tz = leases[-1].billing_tz if leases else DEFAULT_TZ
    return Account(prov.name, currency, found, run, tuple(burning), tuple(coming), tz)


def account_names(ledger: Ledger) -> list[str]:
    """The providers that have balance entries, by name."""
    names = {p.id: p.name for p in ledger.providers()}
    return sorted({names[r["provider_id"]] for r in ledger.book_rows("balance")})
