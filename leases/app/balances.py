"""Prepaid balance use cases: `zuka provider topup`, `zuka provider balance [--set]`, the
balance column of `zuka provider list` and the `balance_low` alert's figures. The maths is
leases.money.balances'; here the ledger is read for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.models import Provider
from leases.ledger.books import Record
from leases.ledger.store import Ledger
from leases.money import balances, billing
from leases.money.amounts import fen_shown, money
from leases.money.balances import Balance, Billed, Burner, Entry, Runway
from leases.money.periods import utc
from leases.money.report import lease_key, node_chains, storage_lines


def _when(ledger: Ledger, at: str | None, tz: str) -> datetime:
    now = ledger.clock()
    if at is None:
        return now.astimezone(fields.timezone(tz, "billing.tz"))
    when = fields.moment("at", at, tz)
    if utc(when) > utc(now):
        raise InputError("at", at, "is in the future: record what happened, when it happened")
    return when


def _entry(ledger: Ledger, name: str, kind: str, amount: str, at: str | None, notes: str | None,
           tz: str) -> tuple[Provider, Record]:  # fmt: skip
    prov = ledger.provider(name)
    rec = {"provider_id": prov.id, "kind": kind, "amount": amount,
           "at": _when(ledger, at, tz), "notes": notes or ""}  # fmt: skip
    return prov, ledger.add_book("balance", rec)


def topup(ledger: Ledger, name: str, amount: str, *, at: str | None = None,
          notes: str | None = None, tz: str) -> tuple[Record, str]:  # fmt: skip
    """`zuka provider topup NAME --amount X`: money put on the provider account."""
    prov, added = _entry(ledger, name, "topup", amount, at, notes, tz)
    said = money(Decimal(added["amount"]), added["currency"])
    return added, f"recorded a top-up of {said} on {prov.name} at {added['at']}"


def set_reading(ledger: Ledger, name: str, amount: str, *, at: str | None = None,
                notes: str | None = None, tz: str) -> tuple[Record, str]:  # fmt: skip
    """`zuka provider balance NAME --set X`: the balance read off the provider's console."""
    prov, added = _entry(ledger, name, "reading", amount, at, notes, tz)
    said = money(Decimal(added["amount"]), added["currency"])
    return added, (f"recorded {prov.name}'s balance {said} as read at {added['at']}: the balance"
                   " is worked out from it from now on")  # fmt: skip


@dataclass(frozen=True)
class Account:
    """A provider account's balance at a moment and its runway."""

    provider: str
    currency: str
    balance: Balance
    runway: Runway
    burning: tuple[Burner, ...]
    coming: tuple[tuple[str, Decimal], ...]  # prepaid charges due before it runs out


def entries_of(ledger: Ledger, provider_id: int) -> tuple[list[Entry], str]:
    rows = ledger.book_rows("balance", "provider_id = ?", [provider_id])
    entries = [Entry(r["kind"], Decimal(r["amount"]), datetime.fromisoformat(r["at"]))
               for r in rows]  # fmt: skip
    return entries, (rows[-1]["currency"] if rows else "CNY")


def account(ledger: Ledger, name: str, at: datetime | None = None) -> Account | None:
    """The balance of provider `name` at `at` (default now) and its runway; None when it
    has no balance entry by then."""
    prov = ledger.provider(name)
    assert prov.id is not None
    when = at or ledger.clock()
    entries, currency = entries_of(ledger, prov.id)
    nodes = {n.id: n for n in ledger.nodes() if n.provider == prov.name and n.id is not None}
    leases = [le for le in ledger.leases(node_ids=list(nodes)) if le.node_id in nodes]
    spans = ledger.stop_spans()
    storage = storage_lines(leases, ledger.resources())
    items: list[Billed] = []
    burning: list[Burner] = []
    coming: list[tuple[str, Decimal]] = []
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
    run = balances.runway(found.amount, burning, when)
    if run.runs_out is not None and run.runs_out > when:
        for b in items:
            if any(le.billing_type.prepaid for le in b.chain):
                due = billing.charged_between(b.chain, when, run.runs_out, stops=b.stops,
                                              cards=b.cards)  # fmt: skip
                if due:
                    coming.append((b.chain[-1].node, due))
    return Account(prov.name, currency, found, run, tuple(burning), tuple(coming))


def account_json(acc: Account, tz: str) -> dict[str, Any]:
    b, r = acc.balance, acc.runway
    return {
        "provider": acc.provider, "currency": acc.currency, "at": b.at.isoformat(),
        "balance": str(_fen(b.amount)), "worked_out": True, "since": b.since.isoformat(),
        "since_reading": None if b.reading is None else str(b.reading),
        "topups_since": str(b.topups), "charged_since": str(_fen(b.charged)),
        "burn_per_day": str(_fen(r.per_day)),
        "days_left": None if r.days_left is None else str(r.days_left.quantize(Decimal("0.01"))),
        "runs_out": None if r.runs_out is None else fields.shown(r.runs_out, tz),
        "stops_then": list(r.stops),
        "burning": [{"node": x.node, "what": x.what, "per_day": str(_fen(x.per_day))}
                    for x in acc.burning],
        "coming_charges": [{"node": n, "amount": str(_fen(a))} for n, a in acc.coming],
    }  # fmt: skip


def _fen(x: Decimal) -> Decimal:
    return fen_shown(x)


def account_lines(acc: Account, tz: str) -> list[str]:
    """What `zuka provider balance NAME` prints."""
    b, r, cur = acc.balance, acc.runway, acc.currency
    source = (f"the reading of {money(b.reading, cur)} at {fields.shown(b.since, tz)}"
              if b.reading is not None
              else f"0 at the first top-up, {fields.shown(b.since, tz)}")  # fmt: skip
    lines = [
        f"{acc.provider}: balance {money(b.amount, cur)} at {fields.shown(b.at, tz)}",
        f"  worked out by zuka since {source}: + top-ups {money(b.topups, cur)}"
        f" - charged {money(b.charged, cur)} (zuka's leases at {acc.provider})",
        f"  burn {money(r.per_day, cur)}/day now"
        + "".join(f"; {x.node} {x.what} {money(x.per_day, cur)}" for x in acc.burning),
    ]
    if r.days_left is None:
        lines.append("  nothing burns it now (no running pay-as-you-go lease, no storage)")
    elif b.amount <= 0:
        lines.append("  it has run out: " + (f"{', '.join(r.stops)} stop(s)" if r.stops
                                             else "nothing of zuka's stops"))  # fmt: skip
    else:
        assert r.runs_out is not None
        stops = ", ".join(r.stops) or "nothing of zuka's (no running pay-as-you-go lease)"
        lines.append(f"  {r.days_left.quantize(Decimal('0.01'))} days left: runs out"
                     f" {fields.shown(r.runs_out, tz)}; then stops: {stops}")  # fmt: skip
    for node, amount in acc.coming:
        lines.append(f"  coming before then: {node}'s prepaid charge of {money(amount, cur)}")
    lines.append("  set it from the provider's console: zuka provider balance"
                 f" {acc.provider} --set AMOUNT")  # fmt: skip
    return lines


def balances_of(ledger: Ledger, names: Mapping[int, str]) -> dict[str, Account]:
    """The accounts of the providers that have balance entries, by name."""
    ids = {r["provider_id"] for r in ledger.book_rows("balance")}
    out = {}
    for pid in ids:
        acc = account(ledger, names[pid])
        if acc is not None:
            out[acc.provider] = acc
    return out
