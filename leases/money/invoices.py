"""Invoices (fapiao) on a provider's charges, pure: the VAT an invoice carries, and how much
of a month's charges the invoices cover (`zuka report`'s invoiced and uninvoiced).

VAT, as a Chinese fapiao writes it: the tax is rounded to the fen, half up (税额 on the
invoice is to the fen; 价税合计 = 金额 + 税额).
- tax included (the amount is 价税合计): tax = A x r / (1 + r) to the fen, net = A - tax.
- tax excluded (the amount is 金额): tax = A x r to the fen, total = A + tax.

An invoice covers the charges of its period [period_start, period_end) by the day they
were charged: of a provider's leases, or of one lease when it names one. A month's share of
an invoice whose period runs past the month is its total x the days of its period in the
month / the days of its period (said in the row's notes: charges are not spread evenly, so
an invoice per month reads best). Compared with the cash charged in the month (storage
in): uninvoiced = charged - invoiced, never below zero; an invoice over the charges says
by how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from leases.money.amounts import money

ZERO = Decimal(0)
FEN = Decimal("0.01")


def to_fen(x: Decimal) -> Decimal:
    """Half up to the fen: how a fapiao rounds its tax."""
    q = x.quantize(FEN, rounding=ROUND_HALF_UP)
    return q if q else abs(q)


@dataclass(frozen=True)
class Vat:
    """An invoice's figures: net of tax (金额), the tax (税额), the total (价税合计)."""

    net: Decimal
    tax: Decimal
    total: Decimal


def vat(amount: Decimal, rate: Decimal, tax_included: bool) -> Vat:
    """The VAT of an invoice of `amount` at `rate` (a fraction: 0.06), the amount with the
    tax in it or without (see the module)."""
    if tax_included:
        tax = to_fen(amount * rate / (1 + rate))
        return Vat(amount - tax, tax, amount)
    tax = to_fen(amount * rate)
    return Vat(amount, tax, amount + tax)


@dataclass(frozen=True)
class Invoice:
    """An invoice as the money maths needs it (read from the `invoices` book)."""

    id: int
    provider: str
    number: str
    issued_on: date
    period_start: date  # the first day of the charges it covers
    period_end: date  # the day after the last (exclusive)
    amount: Decimal
    vat_rate: Decimal
    tax_included: bool
    kind: str = "special"
    currency: str = "CNY"
    lease_id: int | None = None
    node: str | None = None  # its lease's node, when it names a lease
    notes: str = ""

    @property
    def vat(self) -> Vat:
        return vat(self.amount, self.vat_rate, self.tax_included)

    @property
    def days(self) -> int:
        return (self.period_end - self.period_start).days


def share(inv: Invoice, since: date, until: date) -> tuple[Decimal, bool]:
    """(the invoice's tax-included total falling in [since, until), whether it was split):
    the whole of it when its period lies inside the window, else by days (see the module)."""
    lo, hi = max(inv.period_start, since), min(inv.period_end, until)
    if hi <= lo:
        return ZERO, False
    if lo == inv.period_start and hi == inv.period_end:
        return inv.vat.total, False
    return to_fen(inv.vat.total * (hi - lo).days / inv.days), True


@dataclass(frozen=True)
class Coverage:
    """One provider's (or one lease's: `node` set) charges in a month and the invoices on
    them."""

    provider: str
    node: str | None  # None: the provider's charges of all its leases
    currency: str
    charged: Decimal  # cash charged in the month, storage in
    invoiced: Decimal  # the invoices' tax-included totals falling in the month
    numbers: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def uninvoiced(self) -> Decimal:
        return max(ZERO, to_fen(self.charged) - self.invoiced)

    @property
    def over(self) -> Decimal:
        """By how much the invoices exceed the charges (0 when they do not)."""
        return max(ZERO, self.invoiced - to_fen(self.charged))

    @property
    def remark(self) -> str:
        """What a reader should know: an invoice over the charges, a split period."""
        words = list(self.notes)
        if self.over:
            words.insert(0, f"invoiced more than charged by {money(self.over, self.currency)}")
        return "; ".join(words)


# (provider, node or None, currency) -> cash charged in the month
Charged = dict[tuple[str, str | None, str], Decimal]


def coverage(charged: Charged, invoices: Iterable[Invoice], since: date, until: date
             ) -> tuple[Coverage, ...]:  # fmt: skip
    """Per provider (and per lease that an invoice names) and currency: the month
    [since, until)'s charges and the invoices covering them. `charged` holds each
    provider's total (node None) and each named lease's node."""
    got: dict[tuple[str, str | None, str], tuple[Decimal, list[str], list[str]]] = {}
    for inv in invoices:
        part, split = share(inv, since, until)
        if not part and not (inv.period_start < until and inv.period_end > since):
            continue
        keys: Sequence[tuple[str, str | None, str]] = [(inv.provider, None, inv.currency)]
        if inv.node is not None:
            keys = [*keys, (inv.provider, inv.node, inv.currency)]
        for key in keys:
            total, numbers, notes = got.get(key, (ZERO, [], []))
            numbers.append(inv.number)
            if split:
                notes.append(
                    f"invoice {inv.number} covers {inv.period_start} to {inv.period_end} "
                    f"(exclusive): {money(part, inv.currency)} of it by days"
                )
            got[key] = (total + part, numbers, notes)
    keys_all = sorted(set(got) | {k for k, v in charged.items() if v},
                      key=lambda k: (k[0], k[2], k[1] or ""))  # fmt: skip
    out = []
    for key in keys_all:
        total, numbers, notes = got.get(key, (ZERO, [], []))
        out.append(Coverage(key[0], key[1], key[2], charged.get(key, ZERO), total,
                            tuple(numbers), tuple(notes)))  # fmt: skip
    return tuple(out)
