"""A provider account's prepaid balance, pure: worked out from the top-ups, the provider's
own figure read off its console (a reading), and what zuka's leases there were charged
(leases.money.billing's charged_between); the burn rate now, the days left, when it runs
out and what stops then (`zuka provider balance`, the `balance_low` alert).

- **The balance at `now`** = the last reading at or before `now` (or 0 at the account's
  first top-up when none was read) + the top-ups after it up to `now` - what the leases
  at the provider were charged in [that moment, now): pay-as-you-go as it runs, prepaid
  charges and renewals on their charge days, storage lines as they run.
- **The burn rate** is what the leases charge per day now: a running pay-as-you-go lease
  its price per hour x 24 (x its cards for card_hour; per second x 86,400); a storage
  line its price per day (per hour x 24, a month's price / 30); a stopped node only what
  its lease bills while stopped (its storage, or nothing); a prepaid lease 0 until its
  next charge (a coming charge, listed apart).
- **It runs out** at the first moment what the leases will have been charged since `now`
  (every charge to come, as recorded: pay-as-you-go as it runs, a payment schedule's
  instalments, renewals and auto-renewals on their charge days, leases starting, storage)
  reaches the balance; found to the second within RUNWAY_DAYS (charges never fall as time
  passes, so a search finds it); days left = from now to then. When it runs out on a
  prepaid charge it cannot pay (`unpaid`: a renewal or an instalment), that charge's node
  stops: the lease is not paid for on, and the money left stays for the running leases.
  Otherwise the burn spent it: the nodes of the running pay-as-you-go leases stop (the
  platform stops the instances). A balance at or below 0 has run out now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from leases.core.i18n import N_, _
from leases.core.models import BillingType, Lease, Resource, StoppedBilling, StoragePeriod
from leases.money import billing, schedule
from leases.money.amounts import money_words
from leases.money.autorenew import renewals
from leases.money.periods import utc
from leases.money.renewals import hourly_after_end

ZERO = Decimal(0)
DAY_SECONDS = Decimal(86400)


@dataclass(frozen=True)
class Entry:
    """A balance book's row: a top-up, or a reading of the provider's own figure."""

    kind: str  # "topup" | "reading"
    amount: Decimal
    at: datetime


@dataclass(frozen=True)
class Billed:
    """A renewal chain at the provider with what its charges need: its node's stops
    (by its lease's stopped_billing), its cards, its priced storage lines."""

    chain: tuple[Lease, ...]
    stops: tuple[billing.Stop, ...] = ()
    cards: int | None = None
    storage: tuple[tuple[Resource, Lease], ...] = ()


def charged(items: Sequence[Billed], since: datetime, until: datetime) -> Decimal:
    """What the chains were charged in [since, until), storage lines in."""
    total = ZERO
    for b in items:
        total += billing.charged_between(b.chain, since, until, stops=b.stops, cards=b.cards)
        for res, le in b.storage:
            total += billing.storage_cost(res, le, until, stops=b.stops)
            total -= billing.storage_cost(res, le, since, stops=b.stops)
    return total


@dataclass(frozen=True)
class Balance:
    amount: Decimal  # worked out at `at`
    at: datetime
    since: datetime  # the reading it starts from, or the first top-up
    reading: Decimal | None  # the reading's figure; None: from 0 at the first top-up
    topups: Decimal  # top-ups after `since` (the first one in when from 0)
    charged: Decimal  # what the leases were charged in [since, at)


def balance(entries: Sequence[Entry], items: Sequence[Billed], at: datetime) -> Balance | None:
    """The balance at `at` (see the module); None when nothing was recorded by then."""
    known = sorted((e for e in entries if utc(e.at) <= utc(at)), key=lambda e: utc(e.at))
    readings = [e for e in known if e.kind == "reading"]
    if readings:
        last = readings[-1]
        since, start, reading = last.at, last.amount, last.amount
        ups = [e for e in known if e.kind == "topup" and utc(e.at) > utc(since)]
    else:
        ups = [e for e in known if e.kind == "topup"]
        if not ups:
            return None
        since, start, reading = ups[0].at, ZERO, None
    topups = sum((e.amount for e in ups), ZERO)
    spent = charged(items, since, at)
    return Balance(start + topups - spent, at, since, reading, topups, spent)


@dataclass(frozen=True)
class Burner:
    """What one node burns per day now."""

    node: str
    per_day: Decimal
    what: str  # "pay-as-you-go", "storage"
    stops: bool  # the node stops when the balance runs out (a running pay-as-you-go lease)


def storage_per_day(res: Resource) -> Decimal:
    if res.price is None:
        return ZERO
    if res.price_per is StoragePeriod.HOUR:
        return res.price * 24
    if res.price_per is StoragePeriod.DAY:
        return res.price
    return res.price / 30


_PER_DAY = {BillingType.PER_SECOND: DAY_SECONDS, BillingType.HOURLY: Decimal(24)}


def burners(lease: Lease, *, cards: int | None, stopped: bool, storage: Sequence[Resource],
            at: datetime) -> list[Burner]:  # fmt: skip
    """What the lease billing at `at` burns per day (see the module): nothing once over."""
    if billing.over(lease, at) or utc(lease.start) > utc(at):
        return []
    out: list[Burner] = []
    bills_running = not stopped or lease.stopped_billing is StoppedBilling.FULL
    if not lease.billing_type.prepaid and bills_running:
        if lease.billing_type is BillingType.CARD_HOUR:
            per_day = lease.unit_price * 24 * billing.cards_of(lease, cards)
        else:
            per_day = lease.unit_price * _PER_DAY[lease.billing_type]
        out.append(Burner(lease.node, per_day, N_("pay-as-you-go"), True))
    elif bills_running and lease.hourly_price is not None and hourly_after_end(lease, at):
        # A prepaid lease past its end that bills by the hour (on_expiry hourly).
        out.append(Burner(lease.node, lease.hourly_price * 24, N_("hourly after its end"), True))
    if not (stopped and lease.stopped_billing is StoppedBilling.NONE):
        gone = [r for r in storage if r.deleted_at is None or utc(r.deleted_at) > utc(at)]
        store = sum((storage_per_day(r) for r in gone), ZERO)
        if store:
            out.append(Burner(lease.node, store, N_("storage"), False))
    return out


def coming(chain: Sequence[Lease], at: datetime, until: datetime, *, cards: int | None = None,
           stops: Sequence[billing.Stop] = ()) -> list[tuple[datetime, Decimal]]:  # fmt: skip
    """The prepaid charges of a chain in (at, until], with their moments: a prepaid lease
    that starts then (charged whole at its start, or its first instalment), each instalment
    of a payment schedule, and each auto-renewal on its charge day."""
    return [(t, a) for t, a, _what in _due(chain, at, until, cards=cards, stops=stops)]


def _due(chain: Sequence[Lease], at: datetime, until: datetime, *, cards: int | None = None,
         stops: Sequence[billing.Stop] = ()) -> list[tuple[datetime, Decimal, str]]:  # fmt: skip
    """`coming`, each charge with what it is: "prepaid charge", "instalment", "renewal"."""
    out: list[tuple[datetime, Decimal, str]] = []
    for le in chain:
        if not le.billing_type.prepaid:
            continue
        if schedule.scheduled(le):
            out += [(t, amount, N_("instalment")) for t, amount in schedule.instalments(le)
                    if utc(at) < utc(t) <= utc(until) and amount]  # fmt: skip
        elif utc(at) < utc(le.start) <= utc(until):
            # A lease of the chain after its first renews the one before (`lease renew`).
            what = N_("renewal") if le is not chain[0] else N_("prepaid charge")
            out.append((le.start, billing.cost_to_date(le, le.start, stops=stops, cards=cards),
                        what))  # fmt: skip
        out += [(r.charged_at, r.amount, N_("renewal")) for r in renewals(le, until)
                if utc(r.charged_at) > utc(at) and r.amount]  # fmt: skip
    return sorted(out, key=lambda c: utc(c[0]))


def unpaid(items: Sequence[Billed], out: datetime) -> tuple[tuple[str, str, Decimal], ...]:
    """The prepaid charges that fall in the second up to `out`, the run-out (a charge made
    at that second counts: run_out): the ones the balance runs out on, which it cannot pay,
    so their leases are not paid for on (their nodes stop too): (node, what, amount) each."""
    lo, found = out - timedelta(seconds=1), []
    for b in items:
        due = _due(b.chain, lo, out, cards=b.cards, stops=b.stops)
        found += [(b.chain[-1].node, what, amount) for _t, amount, what in due]
    return tuple(found)


@dataclass(frozen=True)
class Runway:
    per_day: Decimal
    days_left: Decimal | None  # None: nothing burns
    runs_out: datetime | None
    stops: tuple[str, ...]  # the nodes that stop then
    # The prepaid charges it runs out on, which it cannot pay (node, what, amount): their
    # nodes are in `stops` too (not renewed, the instalment unpaid).
    unpaid: tuple[tuple[str, str, Decimal], ...] = ()


def stops_said(run: Runway, currency: str) -> str:
    """The nodes that stop when it runs out, as said after "then stops: ": the running
    pay-as-you-go ones, then each prepaid charge it cannot pay ("m's renewal of ¥3,000.00
    cannot be paid"); "" when none."""
    owed = {node for node, _what, _amount in run.unpaid}
    words = [", ".join(n for n in run.stops if n not in owed)] if set(run.stops) - owed else []
    words += [_("{node}'s {what} of {amount} cannot be paid").format(
                  node=node, what=_(what), amount=money_words(amount, currency))
              for node, what, amount in run.unpaid]  # fmt: skip
    return _("; ").join(words)


# How far ahead a run-out is looked for: beyond it the balance "lasts".
RUNWAY_DAYS = 400


def runway(
    amount: Decimal, burning: Sequence[Burner], at: datetime, items: Sequence[Billed] = ()
) -> Runway:
    """The burn now, and when the balance runs out (see the module): with `items`, by every
    charge to come; without, at the burn rate now."""
    per_day = sum((b.per_day for b in burning), ZERO)
    stops = tuple(sorted({b.node for b in burning if b.stops}))
    if amount <= 0:
        return Runway(per_day, ZERO, at, stops)
    if not items:
        if not per_day:
            return Runway(per_day, None, None, stops)
        days = amount / per_day
        return Runway(per_day, days, at + timedelta(seconds=int(days * DAY_SECONDS)), stops)
    out = run_out(amount, items, at)
    if out is None:
        return Runway(per_day, None, None, stops)
    days = Decimal(int((utc(out) - utc(at)).total_seconds())) / DAY_SECONDS
    cannot = unpaid(items, out)
    if cannot and amount - charged(items, at, out) > 0:
        # A charge the balance cannot pay ends it, not the burn: the money left stays, and
        # the running pay-as-you-go leases go on on it (only the charge's node stops then).
        stops = ()
    stops = tuple(sorted({*stops, *(node for node, _what, _amount in cannot)}))
    return Runway(per_day, days, out, stops, cannot)


def run_out(amount: Decimal, items: Sequence[Billed], at: datetime) -> datetime | None:
    """The first second by which the chains will have been charged `amount` since `at` (a
    charge made at that second counts: a renewal at 00:00 it cannot pay runs it out at
    00:00); None when not within RUNWAY_DAYS. What is charged by a time never falls as the
    time grows, so halving the interval finds it (25 halvings for 400 days to the second)."""

    def spent_by(second: int) -> bool:
        until = at + timedelta(seconds=second, microseconds=1)
        return charged(items, at, until) >= amount

    lo, hi = -1, RUNWAY_DAYS * 86400  # seconds after `at`: not spent by lo, spent by hi
    if not spent_by(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if spent_by(mid):
            hi = mid
        else:
            lo = mid
    return at + timedelta(seconds=hi)
