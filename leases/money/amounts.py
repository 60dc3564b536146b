"""How an amount of money is written: the one home of money formatting.

An amount is rounded to the fen (0.01) half up for display (`fen`; the money maths keeps
exact Decimals), a zero shown without its sign (never "-0.00"), thousands grouped by commas,
and written per language (leases.core.i18n): Chinese writes CNY with ¥ in tables and
cells (¥1,234.50, `money`) and with 元 in sentences (1,234.50 元, `money_words`); English
writes its code (CNY 1,234.50) in both. Every other currency keeps its ISO code in both
languages, since JPY's sign is ¥ too and a table of both could not tell them apart
(USD 1,234.50). `--json` figures never change with the language (`fen_json`).
The reports, `zuka cost`, `zuka plan`, the alerts and the dashboard all write amounts here.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_UP, Context, Decimal
from typing import overload

from leases.core.i18n import is_chinese


def fen(amount: Decimal) -> Decimal:
    """An amount rounded to the fen (0.01), half up, for display. Never raises: the
    precision is widened to the amount's digits (the default 28 would make quantize fail
    on 10^27 and above); NaN and infinities come back as they are."""
    if not amount.is_finite():
        return amount
    ctx = Context(prec=max(28, amount.adjusted() + 3), Emax=MAX_EMAX, Emin=MIN_EMIN)
    return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP, context=ctx)


def fen_shown(x: Decimal) -> Decimal:
    """x to the fen; a zero without its sign (never -0.00)."""
    q = fen(x)
    return q if q else abs(q)


@overload
def fen_json(x: Decimal) -> str: ...
@overload
def fen_json(x: None) -> None: ...
def fen_json(x: Decimal | None) -> str | None:
    """Money as every `--json` of zuka's gives it: to the fen, as a string (None: null)."""
    return None if x is None else str(fen_shown(x))


@overload
def figure_json(x: Decimal, places: int = 6) -> str: ...
@overload
def figure_json(x: None, places: int = 6) -> None: ...
def figure_json(x: Decimal | None, places: int = 6) -> str | None:
    """A figure that is not money (card-hours, a share) as `--json` gives it: at most
    `places` decimals (half up), no trailing zeros, never exponent notation ("5760", not
    28 digits of a division's noise)."""
    if x is None:
        return None
    if not x.is_finite():
        return str(x)
    ctx = Context(prec=max(28, x.adjusted() + places + 2), Emax=MAX_EMAX, Emin=MIN_EMIN)
    q = x.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP, context=ctx)
    text = f"{q:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def is_yuan(currency: str) -> bool:
    """The lab's own currency: CNY (RMB is another name for it)."""
    return currency.upper() in ("CNY", "RMB")


def symbol(currency: str) -> str:
    """What an amount in `currency` is written with in a table or cell: ¥ for CNY in
    Chinese (JPY's sign is ¥ too, so a table of both could not tell them apart: other
    currencies keep their code), "CNY " in English, the code and a space for the others."""
    if is_yuan(currency):
        return "¥" if is_chinese() else "CNY "
    return f"{currency} "


def unit(currency: str) -> str:
    """A currency named on its own, as a total's label says it: 元 for CNY in Chinese,
    its code otherwise (CNY, USD)."""
    return "元" if is_yuan(currency) and is_chinese() else currency


def bare(x: Decimal | None) -> str:
    """An amount without its currency, to the fen, thousands grouped: 1,234.50 ("-" for
    none), as a column whose header names the currency shows it."""
    return "-" if x is None else f"{fen_shown(x):,}"


def money(x: Decimal | None, currency: str) -> str:
    """An amount with its currency's symbol as a table or cell shows it ("-" for none):
    ¥1,234.50 (Chinese), CNY 1,234.50 (English), USD 12.00 (both)."""
    return "-" if x is None else f"{symbol(currency)}{bare(x)}"


def money_words(x: Decimal | None, currency: str) -> str:
    """An amount as a sentence says it ("-" for none): 1,234.50 元 in Chinese for CNY, as
    table cells write it otherwise (CNY 1,234.50, USD 12.00)."""
    if x is not None and is_yuan(currency) and is_chinese():
        return f"{bare(x)} 元"
    return money(x, currency)


def whole(x: Decimal, currency: str) -> str:
    """An amount to the whole unit with its symbol, as the dashboard's header line shows a
    month's cost: ¥1,235 / CNY 1,235 (rounded half to even, as Decimal does by default)."""
    return f"{symbol(currency)}{x.quantize(Decimal(1)):,}"


def price(x: Decimal, currency: str) -> str:
    """A price as recorded: ¥3.3333, not ¥3.33 (hourly prices go to 4 places); to the fen
    when it has no more places than that (¥3.50)."""
    if x == fen(x):
        return money(x, currency)
    return f"{symbol(currency)}{x.normalize():,f}"


def price_words(x: Decimal, currency: str) -> str:
    """A price as a sentence says it: 50,000.00 元 / 3.3333 元 in Chinese for CNY (as
    money_words), as a cell writes it otherwise (CNY 50,000.00, USD 3.3333)."""
    if is_yuan(currency) and is_chinese():
        text = bare(x) if x == fen(x) else f"{x.normalize():,f}"
        return f"{text} 元"
    return price(x, currency)


def unit_price_words(x: Decimal, currency: str) -> str:
    """A recorded unit price as a sentence says it, to the places it was recorded with:
    "50,000 元" for 50000, "3.3333 元" (as price_words otherwise: "USD 12")."""
    text = f"{x.normalize():,f}" if x.is_finite() else str(x)
    if is_yuan(currency) and is_chinese():
        return f"{text} 元"
    return f"{symbol(currency)}{text}"
