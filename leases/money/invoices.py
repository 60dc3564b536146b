"""Invoices (fapiao) on a provider's charges, pure: the VAT an invoice carries, and how much
of a month's charges the invoices cover (`zuka report`'s invoiced and uninvoiced).

VAT, as a Chinese fapiao writes it: the tax is rounded to the fen, half up (税额 on the
invoice is to the fen; 价税合计 = 金额 + 税额).
- tax included (the amount is 价税合计): tax = A x r / (1 + r) to the fen, net = A - tax.
- tax excluded (the amount is 金额): tax = A x r to the fen, total = A + tax.

An invoice covers the charges of its period [period_start, period_end) (the last day
covered is `period_to`): of a provider's leases, or of one lease's renewal chain when it
names one. It follows those charges (`allot`): its tax-included total is allotted to the
months of its period in proportion to what its scope was charged in each (a quarter's
instalment charged on the 1st takes all of a quarterly invoice); a period that holds no
charge zuka knows puts it in the month it was issued, said so. Compared with the cash
charged in the month (storage in): uninvoiced = charged - invoiced, never below zero; an
invoice over the charges says by how much. An invoice of one lease covers that lease's
charges only: the provider's "all leases" line counts it against them, never against
another lease's (`Coverage.named`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from leases.core.i18n import _
from leases.money.amounts import money_words

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


# The VAT rates a Chinese fapiao carries (0, 1, 3, 5, 6, 9, 13 %).
CHINA_RATES = tuple(Decimal(r) / 100 for r in (0, 1, 3, 5, 6, 9, 13))


def rate_warning(rate: Decimal) -> str | None:
    """What to say of a rate that is not one of China's (accepted: another country's, a
    foreign currency's invoice may carry it)."""
    if rate in CHINA_RATES:
        return None
    shown = f"{(rate * 100).normalize():f}"
    return _(
        "{rate} % is not one of China's VAT rates (0, 1, 3, 5, 6, 9, 13 %): check the fapiao"
    ).format(rate=shown)


@dataclass(frozen=True)
class Invoice:
    """An invoice as the money maths needs it (read from the `invoices` book)."""

    id: int
    provider: str
    number: str
    issued_on: date
    period_start: date  # the first day of the charges it covers
    period_end: date  # the day after the last (exclusive; period_to is the last day)
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

    @property
    def period_to(self) -> date:
        """The last day its period covers (as --to and a fapiao write it)."""
        return date.fromordinal(self.period_end.toordinal() - 1)


def allot(total: Decimal, charged: Sequence[tuple[str, Decimal]]) -> dict[str, Decimal]:
    """`total` allotted to the months of `charged` ((month, what the invoice's scope was
    charged in it), in order) in proportion to the charges, each to the fen, the last month
    charged taking what the rounding left; {} when nothing was charged (see the module)."""
    weights = [(m, c) for m, c in charged if c > 0]
    whole = sum((c for _m, c in weights), ZERO)
    if not weights or whole <= 0:
        return {}
    out = {m: to_fen(total * c / whole) for m, c in weights[:-1]}
    out[weights[-1][0]] = total - sum(out.values(), ZERO)
    return out


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
    # The provider's line (node None): the lines of its leases that an invoice names. Such
    # an invoice covers its lease's charges only: what it leaves uninvoiced or exceeds there
    # is not made up by another lease's charges; the provider's own invoices cover any.
    named: tuple[Coverage, ...] = ()

    def _split(self) -> tuple[Decimal, Decimal]:
        """(uninvoiced, over), each lease an invoice names on its own (see `named`)."""
        if not self.named:
            charged = to_fen(self.charged)
            return max(ZERO, charged - self.invoiced), max(ZERO, self.invoiced - charged)
        wide = self.invoiced - sum((c.invoiced for c in self.named), ZERO)
        rest = to_fen(self.charged) - sum((to_fen(c.charged) for c in self.named), ZERO)
        left = rest + sum((c.uninvoiced for c in self.named), ZERO)
        over = sum((c.over for c in self.named), ZERO)
        return max(ZERO, left - wide), over + max(ZERO, wide - left)

    @property
    def uninvoiced(self) -> Decimal:
        return self._split()[0]

    @property
    def over(self) -> Decimal:
        """By how much the invoices exceed the charges (0 when they do not)."""
        return self._split()[1]

    @property
    def remark(self) -> str:
        """What a reader should know: an invoice over the charges, a split period."""
        words = list(self.notes)
        if self.over:
            words.insert(
                0,
                _("invoiced more than charged by {amount}").format(
                    amount=money_words(self.over, self.currency)
                ),
            )
        return _("; ").join(words)


# (provider, node or None, currency) -> cash charged in the month
Charged = dict[tuple[str, str | None, str], Decimal]


def coverage(charged: Charged, shares: Iterable[tuple[Invoice, Decimal, str | None]]
             ) -> tuple[Coverage, ...]:  # fmt: skip
    """Per provider (and per lease that an invoice names) and currency: the month's charges
    and the invoices allotted to it (`shares`: each invoice meeting the month, its part in
    the month (`allot`) and a note on it or None). `charged` holds each provider's total
    (node None) and each named lease's node."""
    got: dict[tuple[str, str | None, str], tuple[Decimal, list[str], list[str]]] = {}
    for inv, part, note in shares:
        keys: Sequence[tuple[str, str | None, str]] = [(inv.provider, None, inv.currency)]
        if inv.node is not None:
            keys = [*keys, (inv.provider, inv.node, inv.currency)]
        for key in keys:
            total, numbers, notes = got.get(key, (ZERO, [], []))
            numbers.append(inv.number)
            if note:
                notes.append(note)
            got[key] = (total + part, numbers, notes)
    keys_all = sorted(set(got) | {k for k, v in charged.items() if v},
                      key=lambda k: (k[0], k[2], k[1] is None, k[1] or ""))  # fmt: skip
    lines: dict[tuple[str, str | None, str], Coverage] = {}
    for key in keys_all:
        total, numbers, notes = got.get(key, (ZERO, [], []))
        named: tuple[Coverage, ...] = ()
        if key[1] is None:
            named = tuple(c for k, c in lines.items() if (k[0], k[2]) == (key[0], key[2]))
        lines[key] = Coverage(key[0], key[1], key[2], charged.get(key, ZERO), total,
                              tuple(numbers), tuple(notes), named)  # fmt: skip
    return tuple(sorted(lines.values(), key=lambda c: (c.provider, c.currency, c.node or "")))
