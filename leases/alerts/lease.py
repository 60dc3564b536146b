"""The alert rules on a lease's dates and money: its end drawing near, an auto-renewal's
charge, a prepaid lease billed by the hour past its end, a deposit not refunded."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import date, datetime, timedelta

from leases.alerts.alert import Alert, AlertKind, NodeFacts, make_alert
from leases.alerts.wording import duration
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.models import BillingType, ExpiryAction, Lease, NodeState, RefundState
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.money import periods
from leases.money.amounts import money as yuan
from leases.money.amounts import price as unit_price
from leases.money.deposits import outstanding
from leases.offboard import status as offboard_status


def _renews_itself(lease: Lease) -> bool:
    return lease.auto_renew or lease.on_expiry is ExpiryAction.RENEWS


def lease_end(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    if b is None or b.paid_until is None:
        return
    last = b.chain[-1]
    if _renews_itself(last):
        return  # the autorenew rule speaks for it
    end = b.paid_until
    left = end - now
    own = last.notice_days
    notices = sorted({own, *(d for d in config.lease_end_notice_days if d < own)} if own
                     else set(config.lease_end_notice_days), reverse=True)  # fmt: skip
    if not notices or left <= timedelta(0) or left > timedelta(days=notices[0]):
        return
    name = visible(f.node.name)
    said = offboard_status.phrase(f.offboard)
    p = f.offboard
    if p is not None and p.finished:
        state, action = (
            said,
            f"nothing left before the end; a day later: zuka offboard {name} --recheck",
        )
    elif p is not None and p.stopped:
        state, action = said, f"see why and go on: zuka offboard {name} (or o on the fleet)"
    elif p is not None:
        state = said
        action = f"finish offboarding before the end: zuka offboard {name} (or o on the fleet)"
    elif f.node.state is NodeState.OFFBOARDING:
        state, action = "offboarding has started", "finish offboarding before the end"
    else:
        state = "offboarding has NOT started"
        action = (
            f"copy data off and start offboarding (zuka offboard {name}; by hand: zuka node"
            f" edit {name} --state offboarding), or renew the lease"
        )
    after = ""
    if last.on_expiry is ExpiryAction.HOURLY and last.hourly_price is not None:
        after = (
            f"; after it the provider bills {unit_price(last.hourly_price, last.currency)} an hour"
        )
    elif last.on_expiry is ExpiryAction.HOURLY:
        after = "; after it the provider bills by the hour"
    severity = Severity.CRITICAL if left <= timedelta(days=notices[-1]) else Severity.WARNING
    if p is not None and p.finished:
        severity = Severity.INFO  # the lab left nothing behind: the end is only a date now
    yield make_alert(
        f,
        AlertKind.LEASE_ENDING,
        severity,
        f"{name}: the {last.billing_type.value} lease ends {end:%Y-%m-%d %H:%M %Z} "
        f"(in {duration(left)}); {state}{after}",
        action,
        lease=last,
        # One alert per notice stage: each stage is announced once.
        key=f"{min(d for d in notices if left <= timedelta(days=d))}d",
    )


def autorenew(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    if b is None or b.paid_until is None:
        return
    last = b.chain[-1]
    if not _renews_itself(last) or last.end is None:
        return
    # The end of the period paid for now (renewals go on past the lease's own end).
    charge = b.paid_until - timedelta(days=last.renew_charge_days or 0)
    if not (charge - timedelta(days=config.autorenew_notice_days) <= now < charge):
        return
    # A period's price is the machine's (what `zuka cost` charges); only card-hours are
    # priced per card, and those never renew.
    price = last.unit_price * (
        (last.cards_billed or 1) if last.billing_type is BillingType.CARD_HOUR else 1
    )
    yield make_alert(
        f,
        AlertKind.AUTORENEW,
        Severity.WARNING,
        f"{visible(f.node.name)}: the {last.billing_type.value} lease renews itself; the "
        f"provider charges about {yuan(price, last.currency)} a period on {charge:%Y-%m-%d} (in "
        f"{duration(charge - now)}), before the period paid for ends {b.paid_until:%Y-%m-%d}",
        "turn auto-renew off at the provider before the charge if the node is not needed",
        lease=last,
        amount=price,
    )


def hourly_after_end(f: NodeFacts, now: datetime) -> Iterator[Alert]:
    """A prepaid lease past its end that the provider now bills by the hour (on_expiry
    hourly): the yuan a day it costs until it is released or renewed."""
    b = f.billed
    if b is None or not b.hourly_after_end or b.lease.end is None:
        return
    lease, name = b.lease, visible(f.node.name)
    assert lease.end is not None
    end = lease.end.astimezone(periods.zone(lease))
    price = lease.hourly_price
    rate = (
        f"{unit_price(price, lease.currency)} an hour, {yuan(price * 24, lease.currency)} a day"
        if price is not None
        else "a price not recorded (give --hourly-price)"
    )
    yield make_alert(
        f,
        AlertKind.HOURLY_AFTER_END,
        Severity.WARNING,
        f"{name}: the {lease.billing_type.value} lease ended {end:%Y-%m-%d %H:%M %Z} and the"
        f" provider now bills it by the hour: {rate}",
        f"release it at the provider and record it (zuka lease end {name}), or renew it"
        f" (zuka lease renew {name} --until DATE)",
        lease=lease,
        amount=None if price is None else price * 24,
    )


def deposits(f: NodeFacts, config: AlertsConfig, now: datetime) -> Iterator[Alert]:
    b = f.billed
    open_ = b.chain if b else ()
    for lease in f.leases:
        if not lease.deposit or lease.deposit_refund not in (RefundState.NONE, RefundState.PENDING):
            continue
        if b is not None and b.bills and any(le.id == lease.id for le in open_):
            # Its chain still bills: past its own end, it renews itself (auto-renew) or
            # the provider bills it by the hour (on_expiry hourly); nothing was handed back.
            continue
        ended = lease.ended_at or lease.end
        if ended is None or any(le.start >= ended for le in open_ if le is not lease):
            continue  # still running, or renewed: the deposit carries over
        if now - ended < timedelta(days=config.deposit_refund_days):
            continue
        back = f.refunds.get(lease.id or 0, ())
        left = outstanding(lease, back, date.max)
        if left <= 0:
            continue  # back in full, part by part (zuka lease refund)
        start = shlex.quote(fields.shown(lease.start, lease.billing_tz))
        name = shlex.quote(f.node.name)
        said = yuan(lease.deposit, lease.currency)
        if back:
            said = f"{yuan(left, lease.currency)} of {said} (the rest came back)"
        yield make_alert(
            f,
            AlertKind.DEPOSIT,
            Severity.WARNING,
            f"{visible(f.node.name)}: deposit {said} not refunded "
            f"{duration(now - ended)} after the lease ended {ended:%Y-%m-%d}",
            # The lease by its start: without --start `lease edit` picks the lease billing
            # now, and an ended lease bills no more.
            "ask the provider for the refund, then record it: "
            + visible(
                f"zuka lease refund {name} --lease-start {start} --amount {left} --on YYYY-MM-DD"
                if back
                else f"zuka lease edit {name} --start {start} --deposit-refund refunded"
            ),
            lease=lease,
            amount=left,
        )
