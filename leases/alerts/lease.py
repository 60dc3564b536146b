"""The alert rules on a lease's dates and money: its end drawing near, an auto-renewal's
charge, a prepaid lease billed by the hour past its end, a deposit not refunded."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from leases.alerts.alert import Alert, AlertKind, NodeFacts, make_alert
from leases.alerts.said import Said, call, joined, phrase, say
from leases.config.sections import AlertsConfig
from leases.core import fields
from leases.core.i18n import N_
from leases.core.models import BillingType, ExpiryAction, Lease, NodeState, RefundState
from leases.core.severity import Severity
from leases.core.textsafe import visible
from leases.money import periods
from leases.money.deposits import outstanding

if TYPE_CHECKING:
    from leases.offboard.evidence import Progress


def _renews_itself(lease: Lease) -> bool:
    return lease.auto_renew or lease.on_expiry is ExpiryAction.RENEWS


def _offboarding(progress: Progress | None) -> Said:
    """What the lease-end alert says of the offboarding (leases.offboard.status.phrase's
    words, said again in each language)."""
    if progress is None:
        return phrase("")
    if progress.finished:
        return say(N_("offboarded"))
    if progress.stopped:
        return say(
            N_("offboarding stopped at {step} ({passed}/{steps} steps)"),
            step=visible(progress.stopped, 80),
            passed=progress.passed,
            steps=progress.steps,
        )
    if progress.passed == 0:
        return say(N_("offboarding planned, not started (0/{steps} steps)"), steps=progress.steps)
    return say(
        N_("offboarding in progress ({passed}/{steps} steps)"),
        passed=progress.passed,
        steps=progress.steps,
    )


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
    said = _offboarding(f.offboard)
    p = f.offboard
    state: Said
    action: Said
    if p is not None and p.finished:
        state = said
        action = say(
            N_("nothing left before the end; a day later: zuka offboard {name} --recheck"),
            name=name,
        )
    elif p is not None and p.stopped:
        state = said
        action = say(N_("see why and go on: zuka offboard {name} (or o on the fleet)"), name=name)
    elif p is not None:
        state = said
        action = say(
            N_("finish offboarding before the end: zuka offboard {name} (or o on the fleet)"),
            name=name,
        )
    elif f.node.state is NodeState.OFFBOARDING:
        state = say(N_("offboarding has started"))
        action = say(N_("finish offboarding before the end"))
    else:
        state = say(N_("offboarding has NOT started"))
        action = say(
            N_(
                "copy data off and start offboarding (zuka offboard {name}; by hand: zuka node"
                " edit {name} --state offboarding), or renew the lease"
            ),
            name=name,
        )
    clauses: list[Said] = [state]
    if last.on_expiry is ExpiryAction.HOURLY and last.hourly_price is not None:
        clauses.append(
            say(
                N_("after it the provider bills {price} an hour"),
                price=call("price", last.hourly_price, last.currency),
            )
        )
    elif last.on_expiry is ExpiryAction.HOURLY:
        clauses.append(say(N_("after it the provider bills by the hour")))
    severity = Severity.CRITICAL if left <= timedelta(days=notices[-1]) else Severity.WARNING
    if p is not None and p.finished:
        severity = Severity.INFO  # the lab left nothing behind: the end is only a date now
    yield make_alert(
        f,
        AlertKind.LEASE_ENDING,
        severity,
        joined(
            N_("; "),
            say(
                N_("{name}: the {billing} lease ends {end} (in {span})"),
                name=name,
                billing=call("billing", last.billing_type.value),
                end=f"{end:%Y-%m-%d %H:%M %Z}",
                span=call("duration", left.total_seconds()),
            ),
            *clauses,
        ),
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
        say(
            N_(
                "{name}: the {billing} lease renews itself; the provider charges about {money}"
                " a period on {date} (in {span}), before the period paid for ends {end}"
            ),
            name=visible(f.node.name),
            billing=call("billing", last.billing_type.value),
            money=call("money", price, last.currency),
            date=f"{charge:%Y-%m-%d}",
            span=call("duration", (charge - now).total_seconds()),
            end=f"{b.paid_until:%Y-%m-%d}",
        ),
        say(N_("turn auto-renew off at the provider before the charge if the node is not needed")),
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
        say(
            N_("{price} an hour, {money} a day"),
            price=call("price", price, lease.currency),
            money=call("money", price * 24, lease.currency),
        )
        if price is not None
        else say(N_("a price not recorded (give --hourly-price)"))
    )
    yield make_alert(
        f,
        AlertKind.HOURLY_AFTER_END,
        Severity.WARNING,
        say(
            N_(
                "{name}: the {billing} lease ended {end} and the provider now bills it by the"
                " hour: {rate}"
            ),
            name=name,
            billing=call("billing", lease.billing_type.value),
            end=f"{end:%Y-%m-%d %H:%M %Z}",
            rate=rate,
        ),
        say(
            N_(
                "release it at the provider and record it (zuka lease end {name}), or renew it"
                " (zuka lease renew {name} --until DATE)"
            ),
            name=name,
        ),
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
        said = call("money", lease.deposit, lease.currency)
        if back:
            said = say(
                N_("{left} of {deposit} (the rest came back)"),
                left=call("money", left, lease.currency),
                deposit=said,
            )
        yield make_alert(
            f,
            AlertKind.DEPOSIT,
            Severity.WARNING,
            say(
                N_("{name}: deposit {deposit} not refunded {span} after the lease ended {end}"),
                name=visible(f.node.name),
                deposit=said,
                span=call("duration", (now - ended).total_seconds()),
                end=f"{ended:%Y-%m-%d}",
            ),
            # The lease by its start: without --start `lease edit` picks the lease billing
            # now, and an ended lease bills no more.
            say(
                N_("ask the provider for the refund, then record it: {command}"),
                command=visible(
                    f"zuka lease refund {name} --lease-start {start} --amount {left}"
                    " --on YYYY-MM-DD"
                    if back
                    else f"zuka lease edit {name} --start {start} --deposit-refund refunded"
                ),
            ),
            lease=lease,
            amount=left,
        )
