"""The books' rules that hold whoever writes (the CLI, `zuka import`, the API): nothing
recorded as having happened is dated in the future, and a prepaid balance entry is not
recorded twice, nor in another currency than the account's. leases.ledger.books runs them
in the write's transaction.

A day in the future is one after today anywhere on Earth (UTC+14): the rule needs no time
zone, and a command that knows the billing zone says it sooner and closer (leases.app).
A moment is in the future past the ledger's clock, with a minute's slack for clocks that
disagree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.ledger.books import BOOKS, Record

_EARTH_AHEAD = timedelta(hours=14)  # the last time zone to start a day: UTC+14
_SLACK = timedelta(minutes=1)

# Of each book: the day (YYYY-MM-DD) that says when something happened, and in words.
_DAYS = {
    "deposit_refund": ("refunded_on", N_("a refund")),
    "invoice": ("issued_on", N_("an invoice's issue day")),
    "offer": ("quoted_on", N_("the day an offer was quoted")),
}


def _now(ledger: Any) -> datetime:
    now: datetime = ledger.clock()
    return now.astimezone(UTC)


def not_a_future_day(field: str, what: str) -> Any:
    def rule(ledger: Any, rec: Record, row_id: int | None) -> None:
        latest = (_now(ledger) + _EARTH_AHEAD).date().isoformat()
        if rec[field] > latest:
            raise InputError(
                field,
                rec[field],
                _("is in the future: {what} is recorded once it happened").format(what=_(what)),
            )

    return rule


def balance_entry(ledger: Any, rec: Record, row_id: int | None) -> None:
    """A top-up or reading not in the future, and not the same as one recorded: the same
    provider, kind and moment (an export imported twice would count its top-ups twice)."""
    at = datetime.fromisoformat(str(rec["at"]))
    if at.astimezone(UTC) > _now(ledger) + _SLACK:
        raise InputError(
            "at", rec["at"], _("is in the future: record what happened, when it happened")
        )
    same = ledger.rows(
        "SELECT id, at FROM balance_entries WHERE provider_id = ? AND kind = ? AND id IS NOT ?",
        [rec["provider_id"], rec["kind"], row_id],
    )
    for row in same:
        if datetime.fromisoformat(str(row["at"])) == at:
            what = "top-up" if rec["kind"] == "topup" else "reading"
            raise InputError(
                "at",
                rec["at"],
                _(
                    "a {what} of this provider at this moment is recorded already (entry {row}):"
                    " the "
                    "same one twice? (an export imported twice)"
                ).format(what=what, row=row["id"]),
            )


def one_currency(ledger: Any, rec: Record, row_id: int | None) -> None:
    """A provider account has one currency: an entry in another than its other entries'
    would be added to them as if it were the same money (USD 100 on a CNY balance)."""
    other = ledger.rows(
        "SELECT b.id, b.currency, p.name FROM balance_entries b JOIN providers p"
        " ON p.id = b.provider_id WHERE b.provider_id = ? AND b.currency != ? AND b.id IS NOT ?"
        " ORDER BY b.id LIMIT 1",
        [rec["provider_id"], rec["currency"], row_id],
    )
    if other:
        cur, name = other[0]["currency"], other[0]["name"]
        raise InputError(
            "currency",
            rec["currency"],
            _(
                "the account of provider {name} is in {cur} (entry {other}): a provider account "
                "has one currency; record it in {cur} (--currency {cur}), converted"
            ).format(name=name, cur=cur, other=other[0]["id"]),
        )


for _entity, (_field, _what) in _DAYS.items():
    BOOKS[_entity].rules.append(not_a_future_day(_field, _what))
BOOKS["balance"].rules.extend([balance_entry, one_currency])
