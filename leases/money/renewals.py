"""Which lease bills a node at a given time, and the chains that renewals make.

A renewal (Ledger.renew_lease) ends a prepaid lease at its own end and starts a new one
there; until that end the old lease still bills, yet the node is paid for until the end of
the last lease of the chain. Pure functions over one node's leases, ordered by start; the
ledger asks here how a renewal is built and whether two leases overlap, and leases.money.billing
sums a chain's cost from the same chains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from leases.core.i18n import _, ngettext
from leases.core.models import ExpiryAction, Lease
from leases.money import periods, schedule


def in_effect(leases: Sequence[Lease], at: datetime) -> Lease | None:
    """Of one node's leases (by start): the one billing at `at`; else the next to start;
    else the last never recorded as ended (a prepaid period past its end, say)."""
    far = datetime.max.replace(tzinfo=UTC)
    for le in reversed(leases):
        if le.start <= at < (le.ended_at or le.end or far):
            return le
    upcoming = [le for le in leases if le.start > at and le.ended_at is None]
    if upcoming:
        return upcoming[0]
    still_open = [le for le in leases if le.ended_at is None]
    return still_open[-1] if still_open else None


def resource_default(leases: Sequence[Lease], at: datetime) -> Lease | None:
    """Of one node's leases (by start): the lease a resource recorded at `at` without a
    lease start goes to: the one billing then; else the latest that started and billed
    (a snapshot is usually recorded after its lease ended), never a renewal cancelled
    before it began; else the next to start (see in_effect)."""
    far = datetime.max.replace(tzinfo=UTC)
    for le in reversed(leases):
        if le.start <= at < (le.ended_at or le.end or far):
            return le
    started = [le for le in leases if le.start <= at and not never_billed(le)]
    if started:
        return started[-1]
    return in_effect(leases, at) or next(
        (le for le in reversed(leases) if not never_billed(le)), leases[-1] if leases else None
    )


def cancelled_by_end(leases: Sequence[Lease], lease: Lease, when: datetime) -> list[Lease]:
    """The renewals of `lease` that ending it at `when` cancels: those not started by then
    (Ledger.end_lease ends them at their start; they never bill)."""
    chain = next((c for c in chains(leases) if lease in c), (lease,))
    return [later for later in chain[chain.index(lease) + 1 :] if later.start >= when]


def renews(before: Lease, after: Lease) -> bool:
    """Whether `after` renews `before`: it starts where `before` ended at its own end, in
    the same currency. One chain is billed in one currency (the ledger refuses a renewal
    or an edit that would change it): a lease in another currency from that end is a new
    lease, a chain of its own, so that no figure of a chain adds two currencies even in a
    ledger edited behind zuka's back."""
    return (
        before.node_key == after.node_key
        and before.end is not None
        and before.ended_at == before.end
        and after.start == before.end
        and before.currency == after.currency
    )


def chains(leases: Sequence[Lease]) -> list[tuple[Lease, ...]]:
    """Leases (of one node or many) as renewal chains, each oldest first; a lease that
    renews nothing and is renewed by nothing is a chain of one. Every lease of a chain has
    one currency (see renews)."""
    out: list[list[Lease]] = []
    last_of: dict[int | str, list[Lease]] = {}
    # By node id, not name: a released node's name may be reused, and the new node's first
    # lease starting where the old one ended renews nothing.
    for le in sorted(leases, key=lambda le: (le.node, str(le.node_key), le.start)):
        chain = last_of.get(le.node_key)
        if chain is not None and renews(chain[-1], le):
            chain.append(le)
        else:
            chain = [le]
            out.append(chain)
        last_of[le.node_key] = chain
    return [tuple(c) for c in out]


def never_billed(lease: Lease) -> bool:
    """Ended at (or before) its start: a renewal cancelled before it began."""
    return lease.ended_at is not None and lease.ended_at <= lease.start


def auto_renews(lease: Lease) -> bool:
    """Whether the provider renews the lease at its end by itself (auto-renew)."""
    return lease.on_expiry is ExpiryAction.RENEWS or lease.auto_renew


def past_end(lease: Lease, at: datetime | None) -> bool:
    """Whether `at` is past the lease's end and the lease was not recorded as ended."""
    return at is not None and lease.ended_at is None and lease.end is not None and lease.end <= at


def lapsed(lease: Lease, at: datetime | None) -> bool:
    """Released by the provider at its end, which has passed, but not recorded as ended:
    it bills no more."""
    return (
        past_end(lease, at)
        and lease.on_expiry is ExpiryAction.RELEASED
        and not (auto_renews(lease))
    )


def hourly_after_end(lease: Lease, at: datetime | None) -> bool:
    """Past its end and billing by the hour (on_expiry hourly, no auto-renew)."""
    return past_end(lease, at) and lease.on_expiry is ExpiryAction.HOURLY and not lease.auto_renew


def paid_until(chain: Sequence[Lease], at: datetime | None = None) -> datetime | None:
    """The end of the last lease of a chain that billed at all (None: no end, or a chain
    that never billed); a renewal cancelled before its start pays for nothing. A lease the
    provider renews by itself is paid until the end of its renewal period that holds `at`
    (the periods of leases.money.periods, from the lease's end)."""
    billed = [le for le in chain if not never_billed(le)]
    if not billed:
        return None
    last = billed[-1]
    if last.end is None or not auto_renews(last):
        return last.end
    if last.ended_at is not None:
        if last.ended_at <= last.end:
            return last.end
        # Ended after the provider renewed it: paid for to the end of the period it ended
        # in (charged before the end; one starting at the end was never charged).
        at = last.ended_at - timedelta(microseconds=1)
    elif not past_end(last, at):
        return last.end
    assert at is not None
    tz, step = periods.zone(last), periods.step_of(last)
    return periods.boundary(last.end, step, periods.period_index(last.end, step, at, tz) + 1, tz)


def next_renewal(chain: Sequence[Lease], lease: Lease, at: datetime) -> datetime | None:
    """When `lease` of its renewal chain is next renewed: its end, where a recorded renewal
    follows it or the provider renews it by itself; past that end, for a lease the provider
    renews, the end of the renewal period holding `at`. None when it is not renewed. Never
    before the lease's start: a renewal is at an end, and an end is after its start."""
    if lease.end is None or never_billed(lease):
        return None
    if chain and chain[-1] is not lease:
        return lease.end  # the next lease of the chain starts there
    if not auto_renews(lease) or lease.ended_at is not None:
        return None
    return paid_until([lease], at)


def paid_so_far(chain: Sequence[Lease], at: datetime) -> datetime | None:
    """paid_until, as charged by `at`: a term paid in instalments (leases.money.schedule)
    is paid until the end of the period of the last instalment charged by then (the one
    it ended in, for an early end). The lease-end alert and the fleet keep paid_until, the
    term's end: that is when the node goes."""
    end = paid_until(chain, at)
    billed = [le for le in chain if not never_billed(le)]
    if not billed or not schedule.scheduled(billed[-1]):
        return end
    last = billed[-1]
    assert last.end is not None
    if end is not None and end > last.end:  # renewed by the provider past the term
        return end
    return schedule.paid_to(last, at).astimezone(last.end.tzinfo)


def starts_in(lease: Lease, at: datetime) -> str:
    """'starts in 3 days' for a lease that starts after `at`."""
    days = max(1, math.ceil((lease.start - at).total_seconds() / 86400))
    return ngettext("starts in {n} day", "starts in {n} days", days).format(n=days)


@dataclass(frozen=True)
class BillingNow:
    """A node's lease billing now (or, when none does, the next to start: see started),
    the renewal chain it belongs to, and how long that chain is paid for (None: a lease
    without an end, hourly say)."""

    lease: Lease
    chain: tuple[Lease, ...]
    at: datetime | None = None  # when it was asked; None: treated as started

    @property
    def started(self) -> bool:
        """Whether the lease bills at `at`: a lease that starts later never does."""
        return self.at is None or self.lease.start <= self.at

    @property
    def lapsed(self) -> bool:
        """Released at its end, which has passed, not recorded as ended: bills no more."""
        return lapsed(self.lease, self.at)

    @property
    def hourly_after_end(self) -> bool:
        """Past its end and billing by the hour (on_expiry hourly)."""
        return hourly_after_end(self.lease, self.at)

    @property
    def bills(self) -> bool:
        """Whether the lease bills at `at`: started and not lapsed."""
        return self.started and not self.lapsed

    @property
    def paid_until(self) -> datetime | None:
        return paid_until(self.chain, self.at) if self.started else None

    @property
    def renewed(self) -> bool:
        """Whether a renewal follows the lease billing now."""
        return self.chain[-1] is not self.lease


def billing_now(leases: Sequence[Lease], at: datetime) -> BillingNow | None:
    """Of one node's leases (by start): the lease billing at `at` (see in_effect) and
    the paid-until date of its renewal chain."""
    lease = in_effect(leases, at)
    if lease is None:
        return None
    chain = next(c for c in chains(leases) if any(le is lease for le in c))
    return BillingNow(lease, chain, at)


def describe(lease: Lease, leases: Sequence[Lease], at: datetime) -> str:
    """Which of one node's leases this is, in the words the CLI uses for it: 'the lease
    billing now (from START)', 'the renewal from START (not started)'... START as
    `zuka lease list` prints it (and --start takes it back)."""
    start = lease.start.strftime("%Y-%m-%d %H:%M")
    if never_billed(lease):
        return _("the cancelled lease from {start}").format(start=start)
    if lease.start > at:
        renewal = any(le.id == lease.id for c in chains(leases) for le in c[1:])
        if renewal:
            return _("the renewal from {start} (not started)").format(start=start)
        return _("the lease from {start} (not started)").format(start=start)
    now = billing_now(leases, at)
    if now is not None and now.lease.id == lease.id:
        if now.lapsed:
            return _("the lease from {start} (ended at its end, not recorded as ended)").format(
                start=start
            )
        if now.hourly_after_end:
            return _("the lease billing by the hour past its end (from {start})").format(
                start=start
            )
        return _("the lease billing now (from {start})").format(start=start)
    if lease.ended_at:
        return _("the lease from {start}, ended {ended}").format(
            start=start, ended=lease.ended_at.strftime("%Y-%m-%d %H:%M")
        )
    return _("the lease from {start}").format(start=start)


def overlaps(a: Lease, b: Lease) -> bool:
    """Whether two leases of one node bill at the same time (an open end runs forever);
    a renewal cancelled before its start never billed, so overlaps nothing."""
    if never_billed(a) or never_billed(b):
        return False
    far = datetime.max.replace(tzinfo=UTC)
    a_end = a.ended_at or a.end or far
    b_end = b.ended_at or b.end or far
    return a.start < b_end and b.start < a_end


def chain_of(leases: Sequence[Lease], lease: Lease) -> tuple[Lease, ...]:
    """The renewal chain of one node's leases that holds `lease` (by id)."""
    return next((c for c in chains(leases) if any(le.id == lease.id for le in c)), (lease,))
