"""The rules that tie a lease's fields together (each field already read on its own by
leases.ledger.records): decimals per billing type, an end for a prepaid term, dates in
order, a deposit's days. Each refusal names the field, in the language in use."""

from __future__ import annotations

from datetime import date, datetime

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.models import BillingType, Lease, PaymentSchedule, RefundState
from leases.money.words import billing_word


def _iso(value: datetime | date | None) -> str | None:
    return value.isoformat() if value is not None else None


# The decimals a unit price is quoted to at most: a month, week or day in fen; an hour (or
# card-hour) to 4 places (cloud list prices); a second to 6 (fields.money's own bound).
_PRICE_PLACES = {bt: 2 for bt in BillingType} | {
    BillingType.HOURLY: 4,
    BillingType.CARD_HOUR: 4,
    BillingType.PER_SECOND: 6,
}


def check_lease(le: Lease) -> None:
    """Rules that tie a lease's fields together."""
    for name, amount, places, what in (
        ("unit_price", le.unit_price, _PRICE_PLACES[le.billing_type],
         (_("an {type} price") if le.billing_type is BillingType.HOURLY else _("a {type} price"))
         .format(type=billing_word(le.billing_type.value))),
        ("hourly_price", le.hourly_price, 4, _("an hourly price")),
        ("deposit", le.deposit, 2, _("an amount paid (the fen)")),
    ):  # fmt: skip
        if amount is not None and amount.as_tuple().exponent < -places:  # type: ignore[operator]
            raise InputError(
                name,
                str(amount),
                _("has more than {places} decimal places, the most {what} has").format(
                    places=places, what=what
                ),
            )
    if le.billing_type.prepaid and le.end is None:
        raise InputError(
            "end",
            None,
            _("a {value} lease is prepaid and needs an end date").format(
                value=billing_word(le.billing_type.value)
            ),
        )
    if le.end is not None and le.end <= le.start:
        raise InputError(
            "end",
            fields.shown(le.end, le.billing_tz),
            _("must be after the start {shown}").format(
                shown=fields.shown(le.start, le.billing_tz)
            ),
        )
    if le.ended_at is not None and le.ended_at < le.start:
        raise InputError(
            "ended_at",
            fields.shown(le.ended_at, le.billing_tz),
            _("is before the start {shown}").format(shown=fields.shown(le.start, le.billing_tz)),
        )
    if le.payment_schedule is not PaymentSchedule.UPFRONT and le.billing_type not in (
        BillingType.MONTHLY,
        BillingType.CONTRACT,
    ):
        raise InputError(
            "payment_schedule",
            le.payment_schedule.value,
            (
                _(
                    "is for monthly and contract terms; an hourly lease is billed as it runs:"
                    " leave it upfront"
                )
                if le.billing_type is BillingType.HOURLY
                else _(
                    "is for monthly and contract terms; a {type} lease is paid whole:"
                    " leave it upfront"
                )
                if le.billing_type.prepaid
                else _(
                    "is for monthly and contract terms; a {type} lease is billed as it runs:"
                    " leave it upfront"
                )
            ).format(type=billing_word(le.billing_type.value)),
        )
    if le.deposit_refund is RefundState.REFUNDED and le.deposit is None:
        raise InputError("deposit_refund", "refunded", _("there is no deposit to refund"))
    if le.deposit_refunded_on is not None and le.deposit_refund is not RefundState.REFUNDED:
        raise InputError(
            "deposit_refunded_on",
            _iso(le.deposit_refunded_on),
            _("set only for a refunded deposit"),
        )
    if (
        le.deposit_refunded_on is not None
        and le.deposit_paid_on is not None
        and le.deposit_refunded_on < le.deposit_paid_on
    ):
        raise InputError(
            "deposit_refunded_on",
            _iso(le.deposit_refunded_on),
            _("is before the deposit was paid ({deposit_paid_on})").format(
                deposit_paid_on=_iso(le.deposit_paid_on)
            ),
        )
    if le.deposit_paid_on is None and le.deposit is None:
        return
    if le.deposit is None:
        raise InputError(
            "deposit_paid_on", _iso(le.deposit_paid_on), _("there is no deposit amount")
        )
