"""The accountant's books in the ledger (schema m017): each table's record and the rules a
record must keep whoever wrote it, pure. The rows' reads and writes, audited and
undoable, are leases.ledger.book_rows'; what the figures make of them is leases.money's.

A book's record is its table row without the id, every value as stored (amounts decimal
text, days YYYY-MM-DD, moments ISO 8601 with their offset): what the audit log holds of
it, what `zuka audit verify` compares the row with, and what an undo puts back. An
export names a row's lease by its node and start and its provider by name instead of by
id (leases.ledger.book_rows), so that it reads into another ledger.

Rules between rows (a refund never more than the deposit paid) are the domain's and run
in the write's transaction (Book.rules, filled by the module that owns the domain).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _, is_chinese, ngettext
from leases.core.models import BillingType, ProviderKind
from leases.money.amounts import money_words
from leases.money.words import billing_word

Record = dict[str, Any]
# Checks a record against the rows around it, inside the transaction that writes it:
# (the ledger, the record, the row's id or None for a new row); raises InputError.
Rules = Callable[[Any, Record, int | None], None]


@dataclass(frozen=True)
class Book:
    """One table of the books."""

    entity: str  # as the audit log names it: "invoice"
    table: str
    columns: tuple[str, ...]  # every column but id, in order
    check: Callable[[Mapping[str, Any]], Record]  # a record as it must be stored
    owner: tuple[str, str] | None = None  # ("lease", "lease_id"): the row it belongs to
    # Child rows kept with each row (a bill's lines): their table and foreign key. They
    # are hashed into the row's record (lines_hash) and bundled in a delete's entry.
    lines: tuple[str, str] | None = None
    rules: list[Rules] = field(default_factory=list, compare=False)

    @property
    def plural(self) -> str:
        return self.table


def _money(rec: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = rec.get(key)
    if value is None or value == "":
        if required:
            raise InputError(key, value, _("is required"))
        return None
    amount = fields.money(key, value)
    if amount.as_tuple().exponent < -2:  # type: ignore[operator]
        raise InputError(key, str(value), _("has more than 2 decimal places (the fen)"))
    return str(amount)


def _signed(rec: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    """An amount that may be negative (a bill's credit or discount line)."""
    value = rec.get(key)
    if value is None or value == "":
        if required:
            raise InputError(key, value, _("is required"))
        return None
    text = str(value).strip()
    negative = text.startswith(("-", "－"))
    if negative and text[1:].lstrip().startswith(("-", "+", "－", "＋")):
        raise InputError(key, text, _("is not a number: two signs"))
    amount = fields.number(key, text[1:] if negative else text)
    if amount.as_tuple().exponent < -8:  # type: ignore[operator]
        raise InputError(key, text, _("has more than 8 decimal places"))
    if abs(amount) >= Decimal("1e12"):
        raise InputError(key, text, _("is implausibly large"))
    return format(-amount if negative else amount, "f")  # 0.00000001, never 1E-8


def _day(rec: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = rec.get(key)
    if value is None or value == "":
        if required:
            raise InputError(key, value, _("is required (YYYY-MM-DD)"))
        return None
    return fields.day(key, str(value)).isoformat()


def _moment(rec: Mapping[str, Any], key: str) -> str:
    value = rec.get(key)
    if value is None or value == "":
        raise InputError(key, value, _("is required"))
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    if at.tzinfo is None:
        raise InputError(key, str(value), _("needs its UTC offset"))
    return at.isoformat()


def _text(rec: Mapping[str, Any], key: str, max_len: int, *, required: bool = False) -> str:
    value = str(rec.get(key) or "")
    out = fields.text(key, value, max_len) if value else ""
    if required and not out.strip():
        raise InputError(key, value, _("is required"))
    return out


def _id(rec: Mapping[str, Any], key: str, *, required: bool = True) -> int | None:
    value = rec.get(key)
    if value is None:
        if required:
            raise InputError(key, value, _("is required"))
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(key, value, _("is not a row id"))
    return value


def _opt_count(rec: Mapping[str, Any], key: str, maximum: int) -> int | None:
    value = rec.get(key)
    if value is None or value == "":
        return None
    return fields.count(key, value, minimum=1, maximum=maximum)


def _flag(rec: Mapping[str, Any], key: str) -> int:
    """A yes/no stored as 1 or 0; yes when not given."""
    value = rec.get(key, True)
    if value in (0, 1) and not isinstance(value, str):
        return int(value)
    return int(fields.boolean(key, str(value)))


def _currency(rec: Mapping[str, Any]) -> str:
    return fields.currency(str(rec.get("currency") or "CNY"))


def _only(rec: Mapping[str, Any], columns: Sequence[str]) -> None:
    extra = sorted(set(rec) - set(columns) - {"id"})
    if extra:
        raise InputError(extra[0], rec[extra[0]], _("is not a field of this record"))


def check_refund(rec: Mapping[str, Any]) -> Record:
    _only(rec, REFUND_COLUMNS)
    out: Record = {
        "lease_id": _id(rec, "lease_id"),
        "amount": _money(rec, "amount"),
        "refunded_on": _day(rec, "refunded_on"),
        "notes": _text(rec, "notes", 500),
    }
    if Decimal(out["amount"]) == 0:
        raise InputError("amount", rec.get("amount"), _("must be greater than zero"))
    return out


def vat_rate(value: object) -> str:
    """A VAT rate as a fraction, from '6%', '0.06' or '6': China's rates are 0, 1, 3, 5, 6,
    9 and 13 per cent; any rate from 0 to 30 % reads, others are refused."""
    text = str(value if value is not None else "").strip()
    if not text:
        raise InputError("vat_rate", value, _("is required (6%, 0.06, 13%...)"))
    percent = text.endswith(("%", "％"))
    number = fields.number("vat_rate", text[:-1] if percent else text)
    rate = number / 100 if percent or number >= 1 else number
    if not Decimal(0) <= rate <= Decimal("0.3"):
        raise InputError("vat_rate", text, _("must be a VAT rate from 0 to 30 %"))
    return str(rate.normalize() if rate else Decimal(0))


def check_invoice(rec: Mapping[str, Any]) -> Record:
    _only(rec, INVOICE_COLUMNS)
    out: Record = {
        "provider_id": _id(rec, "provider_id"),
        "lease_id": _id(rec, "lease_id", required=False),
        # As printed on a fapiao: full-width digits and spaces inside are the same number.
        "number": "".join(
            unicodedata.normalize("NFKC", _text(rec, "number", 60, required=True)).split()
        ),
        "issued_on": _day(rec, "issued_on"),
        "period_start": _day(rec, "period_start"),
        "period_end": _day(rec, "period_end"),
        "amount": _money(rec, "amount"),
        "currency": _currency(rec),
        "vat_rate": vat_rate(rec.get("vat_rate")),
        "tax_included": _flag(rec, "tax_included"),
        "kind": fields.choice("kind", str(rec.get("kind") or "special"), InvoiceKind).value,
        "notes": _text(rec, "notes", 500),
    }
    if out["period_end"] <= out["period_start"]:
        raise InputError(
            "period_end",
            out["period_end"],
            _("must be after period_start {out}").format(out=out["period_start"]),
        )
    return out


def check_balance(rec: Mapping[str, Any]) -> Record:
    _only(rec, BALANCE_COLUMNS)
    kind = fields.choice("kind", str(rec.get("kind") or ""), BalanceKind).value
    out: Record = {
        "provider_id": _id(rec, "provider_id"),
        "kind": kind,
        # A reading may be below zero (platforms let a balance go into arrears).
        "amount": _money(rec, "amount") if kind == "topup" else _signed(rec, "amount"),
        "currency": _currency(rec),
        "at": _moment(rec, "at"),
        "notes": _text(rec, "notes", 500),
    }
    if kind == "topup" and Decimal(out["amount"]) == 0:
        raise InputError("amount", rec.get("amount"), _("a top-up must be greater than zero"))
    return out


def check_bill(rec: Mapping[str, Any]) -> Record:
    _only(rec, BILL_COLUMNS)
    out: Record = {
        "provider_id": _id(rec, "provider_id"),
        "format": _text(rec, "format", 40, required=True),
        "source": _text(rec, "source", 500),
        "sha256": _hex(rec, "sha256"),
        "imported_at": _moment(rec, "imported_at"),
        "line_count": fields.count("line_count", rec.get("line_count", -1), maximum=10_000_000),
        "lines_hash": _hex(rec, "lines_hash"),
    }
    return out


def _hex(rec: Mapping[str, Any], key: str) -> str:
    value = str(rec.get(key) or "")
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InputError(key, value, _("is not a SHA-256 in hex"))
    return value


BILL_LINE_COLUMNS = (
    "line_no", "period_start", "period_end", "resource_id", "product", "description",
    "region", "kind", "amount", "list_amount", "currency",
)  # fmt: skip


def check_bill_line(rec: Mapping[str, Any]) -> Record:
    """One line of a provider's bill as stored (without its bill's id)."""
    _only(rec, (*BILL_LINE_COLUMNS, "bill_id"))
    out: Record = {
        "line_no": fields.count("line_no", rec.get("line_no", 0), minimum=1, maximum=10_000_000),
        "period_start": _moment(rec, "period_start"),
        "period_end": _moment(rec, "period_end"),
        "resource_id": _text(rec, "resource_id", 300),
        "product": _text(rec, "product", 200),
        "description": _text(rec, "description", 500),
        "region": _text(rec, "region", 100),
        "kind": fields.choice("kind", str(rec.get("kind") or "usage"), BillLineKind).value,
        "amount": _signed(rec, "amount"),
        "list_amount": _signed(rec, "list_amount", required=False),
        "currency": _currency(rec),
    }
    if out["period_end"] < out["period_start"]:
        raise InputError("period_end", out["period_end"], _("is before the line's period_start"))
    return out


# A placeholder a new bill row is written with, until its lines are in and hashed
# (leases.ledger.book_rows.lines_digest).
UNHASHED = "0" * 64


def lines_sql(table: str, key: str) -> str:
    """One canonical text per line of a row, in line order: what the lines' hash is of
    (SQLite's quote() of every column, comma-separated: a line edited, added or removed
    behind zuka's back changes it, whatever it was set to, a BLOB included). Made by
    SQLite, so that 73,000 lines hash in a few dozen milliseconds."""
    cells = " || ',' || ".join(f"quote({c})" for c in BILL_LINE_COLUMNS)
    # As bytes: no text decoding per line (the hash is of the UTF-8 text SQLite holds).
    return f"SELECT CAST({cells} || char(10) AS BLOB) FROM {table} WHERE {key} = ? ORDER BY line_no"


def check_offer(rec: Mapping[str, Any]) -> Record:
    _only(rec, OFFER_COLUMNS)
    out: Record = {
        "provider": _text(rec, "provider", 100, required=True).strip(),
        "channel": fields.choice("channel", str(rec.get("channel") or ""), ProviderKind).value,
        "gpu_model": _text(rec, "gpu_model", 100, required=True).strip(),
        "gpus": _opt_count(rec, "gpus", 1024),
        "billing_type": fields.choice(
            "billing_type", str(rec.get("billing_type") or ""), BillingType
        ).value,
        "unit_price": None,
        "currency": _currency(rec),
        "min_term": _opt_count(rec, "min_term", 10_000),
        "deposit": _money(rec, "deposit", required=False),
        "region": _text(rec, "region", 100).strip(),
        "quoted_on": _day(rec, "quoted_on"),
        "valid_until": _day(rec, "valid_until", required=False),
        "notes": _text(rec, "notes", 500),
    }
    price = fields.money("unit_price", rec.get("unit_price", ""), allow_zero=False)
    out["unit_price"] = str(price)
    if out["valid_until"] is not None and out["valid_until"] < out["quoted_on"]:
        raise InputError(
            "valid_until",
            out["valid_until"],
            _("is before the day it was quoted {out}").format(out=out["quoted_on"]),
        )
    return out


class InvoiceKind(StrEnum):
    """A fapiao's kind: a special VAT invoice (增值税专用发票, its VAT deductible), an
    ordinary one (普通发票), or another receipt."""

    SPECIAL = "special"
    ORDINARY = "ordinary"
    OTHER = "other"


class BalanceKind(StrEnum):
    """A prepaid balance's entry: money put on the account, or the balance as the provider's
    console shows it at a moment."""

    TOPUP = "topup"
    READING = "reading"


class BillLineKind(StrEnum):
    """What a bill line is: usage, a subscription (prepaid period), a credit (voucher), a
    discount, tax, a refund, or anything else."""

    USAGE = "usage"
    SUBSCRIPTION = "subscription"
    CREDIT = "credit"
    DISCOUNT = "discount"
    TAX = "tax"
    REFUND = "refund"
    OTHER = "other"


REFUND_COLUMNS = ("lease_id", "amount", "refunded_on", "notes")
INVOICE_COLUMNS = (
    "provider_id", "lease_id", "number", "issued_on", "period_start", "period_end", "amount",
    "currency", "vat_rate", "tax_included", "kind", "notes",
)  # fmt: skip
BALANCE_COLUMNS = ("provider_id", "kind", "amount", "currency", "at", "notes")
BILL_COLUMNS = (
    "provider_id", "format", "source", "sha256", "imported_at", "line_count", "lines_hash",
)  # fmt: skip
OFFER_COLUMNS = (
    "provider", "channel", "gpu_model", "gpus", "billing_type", "unit_price", "currency",
    "min_term", "deposit", "region", "quoted_on", "valid_until", "notes",
)  # fmt: skip


def _said(amount: Any, currency: str) -> str:
    """An amount as the log's sentence says it: "52000 CNY" as recorded in English (as
    ever), "52,000.00 元" in Chinese; as recorded where it is no number."""
    try:
        x = Decimal(str(amount))
    except ArithmeticError:
        x = None
    if x is None or not x.is_finite() or not is_chinese():
        return f"{amount} {currency}"
    return money_words(x, str(currency))


def describe(entity: str, rec: Mapping[str, Any]) -> str:
    """A book's record in a few words, for the audit log's reader (`zuka log`)."""
    cur = rec.get("currency") or "CNY"
    if entity == "deposit_refund":
        amount = rec.get("amount")
        return _("deposit refund {amount} on {day}").format(
            amount=_said(amount, cur) if is_chinese() else amount, day=rec.get("refunded_on")
        )
    if entity == "invoice":
        return _("invoice {number} {money}").format(
            number=rec.get("number"), money=_said(rec.get("amount"), cur)
        )
    if entity == "balance":
        what = _("top-up {money}") if rec.get("kind") == "topup" else _("balance read {money}")
        return what.format(money=_said(rec.get("amount"), cur))
    if entity == "bill":
        n = rec.get("line_count")
        return ngettext(
            "bill ({format}) {source}, {count} line",
            "bill ({format}) {source}, {count} lines",
            n if isinstance(n, int) else 2,
        ).format(format=rec.get("format"), source=rec.get("source"), count=n)
    if entity == "offer":
        return _("offer {provider} {model} {billing} {price} {currency}").format(
            provider=rec.get("provider"),
            model=rec.get("gpu_model"),
            billing=billing_word(str(rec.get("billing_type"))),
            price=rec.get("unit_price"),
            currency=cur,
        )
    return entity


def export_keys(spec: Book) -> tuple[str, ...]:
    """A book's record as an export holds it: its lease by node and start, its provider by
    name, a bill's lines in full (their count and hash are worked out again on import)."""
    keys: list[str] = []
    for column in spec.columns:
        if column == "lease_id":
            keys += ["node", "lease_start"]
        elif column == "provider_id":
            keys.append("provider")
        elif spec.lines is None or column not in ("line_count", "lines_hash"):
            keys.append(column)
    return (*keys, "lines") if spec.lines is not None else tuple(keys)


BOOKS: dict[str, Book] = {
    b.entity: b
    for b in (
        Book("deposit_refund", "deposit_refunds", REFUND_COLUMNS, check_refund,
             owner=("lease", "lease_id")),
        Book("invoice", "invoices", INVOICE_COLUMNS, check_invoice,
             owner=("provider", "provider_id")),
        Book("balance", "balance_entries", BALANCE_COLUMNS, check_balance,
             owner=("provider", "provider_id")),
        Book("bill", "bills", BILL_COLUMNS, check_bill, owner=("provider", "provider_id"),
             lines=("bill_lines", "bill_id")),
        Book("offer", "offers", OFFER_COLUMNS, check_offer),
    )
}  # fmt: skip
