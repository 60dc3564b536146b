"""Parsing and checking of single field values typed by a user or read from a file.

Every parser raises InputError naming the field and the value; none has side effects.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from leases.core import valuewords
from leases.core.errors import InputError
from leases.core.i18n import N_, _
from leases.core.secrets import refuse_key_text
from leases.core.textsafe import INVISIBLE_RANGES, REORDERING, visible

# ISO 4217 codes a lab renting GPUs in and around China meets; extend as needed.
CURRENCIES = frozenset(
    {"CNY", "USD", "HKD", "EUR", "JPY", "SGD", "GBP", "KRW", "TWD", "AUD", "CAD", "CHF"}
)
DEFAULT_TZ = "Asia/Shanghai"
# A node's name: ASCII letters and digits, or Chinese characters (the CJK Unified
# Ideographs and Extension A, as labs name machines 训练机1), and '.', '_', '@', '-'. Not the
# compatibility ideographs or full-width letters: each draws like a character allowed here
# (ａ, 﨑), and two names that print the same must not be two nodes.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff"
_NAME_RE = re.compile(f"^[A-Za-z0-9{_HAN}][A-Za-z0-9{_HAN}._@-]{{0,62}}$")
# C0 and C1 controls, DEL, and the Unicode controls that reorder or hide text: none has a
# place in a ledger value (a terminal would obey them). Tab and newline only in notes. Lone
# surrogates too: no text is made of them (they come from undecodable bytes in argv or a
# browser's JSON) and SQLite cannot store them. Nor characters that draw nothing: two
# providers 'aliyun' and 'aliyun\u2063' would print the same.
_UNSAFE = "\x7f-\x9f\ud800-\udfff" + REORDERING + INVISIBLE_RANGES
_CONTROL_RE = re.compile(f"[\x00-\x1f{_UNSAFE}]")
_CONTROL_MULTILINE_RE = re.compile(f"[\x00-\x08\x0b-\x1f{_UNSAFE}]")

E = TypeVar("E", bound=StrEnum)


def choice(field: str, value: str, enum: type[E]) -> E:
    """A value of enum: as stored (any case), or its word in Chinese or English (包月,
    公有云), whatever the language in use (leases.core.valuewords.parse)."""
    try:
        return enum(value.strip().lower())
    except ValueError:
        pass
    found = valuewords.parse(enum, value)
    if found is not None:
        return enum(found)
    raise InputError(
        field, value, _("must be one of {allowed}").format(allowed=valuewords.listed(enum))
    )


# Characters a terminal draws like another allowed in a name (一 like '-'; 丨, 'l' and 'I'
# like '1'; 'O' like '0'; 曰 like 日...): two live nodes whose names differ only by these
# would be told apart by no one reading an alert, so a name is compared by its skeleton
# (each mapped to one of its kind). Strokes and pairs a reader may take for each other in
# a terminal's font, not every similar glyph.
_LOOK_ALIKE = str.maketrans(
    {
        "一": "-", "丨": "1", "l": "1", "I": "1", "O": "0", "丶": ".", "亅": "j", "囗": "口",
        "曰": "日", "已": "己",
        "巳": "己", "戌": "戊", "戍": "戊", "士": "土", "末": "未", "入": "人", "干": "千",
        "于": "千", "八": "人", "夭": "天", "毋": "母", "炙": "灸", "汩": "汨",
    }
)  # fmt: skip


def name_skeleton(name: str) -> str:
    """name with each look-alike character as the one it is taken for."""
    return name.translate(_LOOK_ALIKE)


def valid_node_name(value: str) -> bool:
    return _NAME_RE.fullmatch(value) is not None


def node_name(value: str, field: str = "name") -> str:
    # fullmatch: `$` would let a trailing newline through.
    if not _NAME_RE.fullmatch(value):
        raise InputError(
            field,
            visible(value, 80),
            _(
                "must be 1-63 letters, digits, Chinese characters, '.', '_', '@' or '-',"
                " starting with a letter, digit or Chinese character"
            ),
        )
    return value


# A user name as the audit log may hold one: what Unix systems accept (POSIX names, a dot,
# sssd's user@domain, winbind's DOMAIN\user, a machine account's trailing $), or a uid
# without a name, and zuka's own actors ("zuka demo"): words of those letters, one space apart.
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@$\\-]*(?: [A-Za-z0-9_.@$\\-]+)*")
USER_MAX = 64


def user_name(value: str, field: str = "user") -> str:
    """A user name to look for in the audit log; one no user can have is refused."""
    if len(value) > USER_MAX or not _USER_RE.fullmatch(value):
        raise InputError(
            field,
            visible(value, 80),
            _(
                "is not a user name (at most {max} letters, digits, '_', '.', '@', '$', '\\'"
                " or '-', starting with a letter, digit or '_')"
            ).format(max=USER_MAX),
        )
    return value


def text(field: str, value: str, max_len: int = 2000, *, multiline: bool = False) -> str:
    """Free text of a record. Private key text is refused here, in every field."""
    refuse_key_text(field, value)
    if len(value) > max_len:
        raise InputError(
            field,
            visible(value, 40),
            _("is longer than {max} characters").format(max=max_len),
        )
    if (_CONTROL_MULTILINE_RE if multiline else _CONTROL_RE).search(value):
        raise InputError(field, visible(value, 80), _("contains control characters"))
    if _STACKED_RE.search(value):
        raise InputError(
            field,
            visible(value, 80),
            _("has accents on nothing or stacked over a letter: they draw over the text beside"),
        )
    return value


# Combining marks that start a value or a line, or more than three on one letter (no
# language stacks more): a terminal draws them over the column before, or the rows above
# and below.
_MARK = "\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u0610-\u061a\u064b-\u065f\u1ab0-\u1aff"
_MARK += "\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
_STACKED_RE = re.compile(f"(?:^|[\\s])[{_MARK}]|[{_MARK}]{{4,}}")


# A number as people type it: digits with an optional decimal point, or thousands grouped
# by commas in threes (52,000 and 52,000.50), with an optional sign. Nothing else: "1,98"
# (a decimal comma, stored as 198 before), "1.980,5", "1_98" (Python's digit separator),
# "5,2000", "1e3", a currency symbol, spaces inside.
# Grouped in threes from a first group that is a number of its own: 0,500 is a decimal
# comma (or a typo), never five hundred.
_NUMBER_RE = re.compile(r"[+-]?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)?(?:\.\d+)?")
# Beside ASCII, what a Chinese input method types: full-width digits, signs, comma and
# point, and the ideographic space. NFKC would also turn ², ①, ٣ or 𝟓 into digits: refused.
_TYPED = frozenset("０１２３４５６７８９＋－，．\u3000")
_SYMBOLS = ("¥", "$", "€", "£", "元", "円", "USD", "CNY", "RMB", "HKD", "EUR")


def number(field: str, value: str | int | float | Decimal) -> Decimal:
    """A decimal number typed by a person (command line, form, CSV cell, plan flag): the one
    reading of it everywhere. Full-width digits and punctuation (what a Chinese input method
    types: １９８, ５２，０００．５) read as their ASCII forms; a comma only as a thousands
    separator in groups of three; anything else is refused, naming the field, never guessed."""
    if isinstance(value, bool):
        raise InputError(field, value, _("is not a number"))
    if isinstance(value, int | float | Decimal):  # from JSON or code, not typed: as it is
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    else:
        raw = unicodedata.normalize("NFKC", str(value)).strip()
        if any(sym in raw.upper() for sym in _SYMBOLS):
            raise InputError(
                field,
                visible(str(value), 40),
                _(
                    "write the amount alone, without a currency sign (the currency is its own"
                    " field, CNY by default)"
                ),
            )
        odd = [c for c in str(value) if not c.isascii() and c not in _TYPED]
        if odd or not raw or not _NUMBER_RE.fullmatch(raw) or not any(c.isdigit() for c in raw):
            said = _("is not a number")
            if "。" in str(value):
                said = _("is not a number: a decimal is written with a point (1.98), not 。")
            elif odd:
                said = _("is not a number: write it with the digits 0-9 (or full-width ０-９)")
            elif "," in raw:
                said = _(
                    "is not a number: a comma only groups thousands in threes (52,000);"
                    " a decimal is written with a point (1.98)"
                )
            elif "_" in raw or " " in raw:
                said = _("is not a number: write the digits together (52000 or 52,000)")
            raise InputError(field, visible(str(value), 40), said)
        amount = Decimal(raw.replace(",", ""))
    if not amount.is_finite():
        raise InputError(field, visible(str(value), 40), _("is not a finite number"))
    return amount


def money(field: str, value: str | int | float | Decimal, *, allow_zero: bool = True) -> Decimal:
    """A non-negative amount with at most 6 decimal places (per-second prices are tiny)."""
    amount = number(field, value)
    if amount < 0:
        raise InputError(field, value, _("must not be negative"))
    if amount == 0 and not allow_zero:
        raise InputError(field, value, _("must be greater than zero"))
    if amount.as_tuple().exponent < -6:  # type: ignore[operator]
        raise InputError(field, value, _("has more than 6 decimal places"))
    if amount >= Decimal("1e12"):
        raise InputError(field, value, _("is implausibly large"))
    # 12000.00 is stored as 12000; 1.50 keeps its digits so it reads back the same.
    return Decimal(int(amount)) if amount == amount.to_integral_value() else amount


def currency(value: str, field: str = "currency") -> str:
    code = value.strip().upper()
    if code == "RMB":
        code = "CNY"
    if code not in CURRENCIES:
        raise InputError(
            field,
            value,
            _("unknown currency; known: {codes}").format(codes=", ".join(sorted(CURRENCIES))),
        )
    return code


def count(field: str, value: str | int, *, minimum: int = 0, maximum: int = 100_000) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InputError(field, value, _("is not a whole number")) from None
    if n < minimum:
        raise InputError(field, value, _("must be at least {minimum}").format(minimum=minimum))
    if n > maximum:
        raise InputError(field, value, _("must be at most {maximum}").format(maximum=maximum))
    return n


def timezone(value: str, field: str = "tz") -> ZoneInfo:
    try:
        return ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(
            field, value, _("unknown time zone (use an IANA name such as Asia/Shanghai)")
        ) from None


# YYYY-M-D as people type it (2026-12-1), alone or before a time; ASCII digits only.
_DAY_RE = re.compile(r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?=$|[T ])", re.ASCII)
_MONTHS = (N_("January"), N_("February"), N_("March"), N_("April"), N_("May"), N_("June"),
           N_("July"), N_("August"), N_("September"), N_("October"), N_("November"),
           N_("December"))  # fmt: skip
# How far ahead a lease's dates may be: a 3-year colo contract signed a year ahead ends
# inside it; 2036 for 2026 is a typo.
HORIZON_YEARS = 5


def _padded(field: str, value: object, raw: str) -> str:
    """raw with its date written YYYY-MM-DD (2026-12-1 -> 2026-12-01); a month or a day
    that no calendar has refused by name (2026-13-01, 2026-02-30)."""
    m = _DAY_RE.match(raw)
    if m is None:
        return raw
    year, month, mday = (int(g) for g in m.groups())
    if not 1 <= month <= 12:
        raise InputError(
            field, value, _("has month {month}: a month is 1 to 12").format(month=month)
        )
    last = calendar.monthrange(year, month)[1]
    if not 1 <= mday <= last:
        raise InputError(
            field,
            value,
            _("has day {day}: {month} {year} has {last} days").format(
                day=mday, month=_(_MONTHS[month - 1]), year=year, last=last
            ),
        )
    return f"{year:04d}-{month:02d}-{mday:02d}" + raw[m.end() :]


def day(field: str, value: str) -> date:
    raw = _padded(field, value, value.strip())
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise InputError(field, value, _("is not a valid date (use YYYY-MM-DD)")) from None


def within_horizon(field: str, value: object, at: datetime, now: datetime) -> None:
    """Refuse `at` more than HORIZON_YEARS ahead of now (a typed 2036 for 2026)."""
    limit = now.replace(year=now.year + HORIZON_YEARS, day=min(now.day, 28))
    if at > limit:
        raise InputError(
            field,
            value,
            _(
                "is more than {years} years ahead (after {limit}): a typo?"
                " zuka takes a lease's dates up to {years} years from now"
            ).format(years=HORIZON_YEARS, limit=f"{limit:%Y-%m-%d}"),
        )


def moment(field: str, value: str | datetime, tz: str = DEFAULT_TZ) -> datetime:
    """A point in time. A date or a naive time is read in the lease's billing time zone."""
    zone = timezone(tz)
    if isinstance(value, datetime):
        parsed = value
    else:
        raw = _padded(field, value, str(value).strip())
        if _FRACTION_RE.search(raw):
            raise InputError(
                field,
                value,
                _("is finer than a microsecond: give at most 6 digits after the seconds"),
            )
        try:
            if len(raw) == 10:
                parsed = datetime.combine(date.fromisoformat(raw), time())
            else:
                parsed = datetime.fromisoformat(raw.replace(" ", "T", 1))
        except ValueError:
            raise InputError(
                field,
                value,
                _("is not a valid date or time (use YYYY-MM-DD or YYYY-MM-DDTHH:MM)"),
            ) from None
    if parsed.tzinfo is None:
        parsed = _local(field, value, parsed, zone, tz)
    if not 2000 <= parsed.year <= 2200:
        raise InputError(field, value, _("year must be between 2000 and 2200"))
    return parsed.astimezone(zone)


_FRACTION_RE = re.compile(r":\d\d[.,]\d{7,}")


def _local(field: str, value: object, naive: datetime, zone: ZoneInfo, tz: str) -> datetime:
    """A naive time read in zone: refused where a daylight saving change makes it not
    exist (the clocks jump over it) or happen twice (without an offset it says neither)."""
    first, second = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    off1, off2 = first.utcoffset(), second.utcoffset()
    if off1 == off2:
        return first
    shown = naive.strftime("%Y-%m-%d %H:%M")
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != naive:
        raise InputError(
            field,
            value,
            _(
                "{time} does not exist in {tz}: the clocks jump forward over it (daylight"
                " saving time begins); give a time before or after the jump"
            ).format(time=shown, tz=tz),
        )
    raise InputError(
        field,
        value,
        _(
            "{time} happens twice in {tz}: the clocks go back over it (daylight saving time"
            " ends); add the offset: {first} for the first, {second} for the second"
        ).format(time=shown, tz=tz, first=_offset(off1), second=_offset(off2)),
    )


def _offset(delta: timedelta | None) -> str:
    minutes = int((delta or timedelta()).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def shown(at: datetime, tz: str | None = None) -> str:
    """A time as tables, messages and the log print it: `2026-06-01 09:00`, with seconds
    only when they are not :00; in the zone tz (a lease's billing zone) without saying
    it, else in its own zone with the offset. `--start`, `--lease-start` and `--at`
    take it back (in tz)."""
    if tz is not None:
        at = at.astimezone(timezone(tz))
    text = at.strftime("%Y-%m-%d %H:%M:%S" if at.second else "%Y-%m-%d %H:%M")
    if tz is None and at.tzinfo is not None:
        text += " " + _offset(at.utcoffset())
    return text


_SECONDS_RE = re.compile(r"[T ]\d\d:\d\d:\d\d")


def names_start(field: str, value: str | datetime, start: datetime, tz: str) -> bool:
    """Whether `value`, as a user names a lease by its start, names `start`.

    A date names the lease starting that day; a time without seconds (as `zuka lease list`
    prints it) the one starting in that minute; a time with seconds (as `--json` prints
    it) that very moment. Without an offset it is read in the lease's billing zone `tz`.
    A value that is no date or time at all raises InputError naming `field`.
    """
    if isinstance(value, datetime):
        return start == moment(field, value, tz)
    raw = value.strip()
    if not raw:
        raise InputError(
            field, value, _("is empty (give a lease start as `zuka lease list` shows)")
        )
    raw = _padded(field, value, raw)  # 2026-12-1 names a day as 2026-12-01 does
    wanted = moment(field, raw, tz)
    here = start.astimezone(wanted.tzinfo)
    if len(raw) == 10:
        return here.date() == wanted.date()
    if _SECONDS_RE.search(raw):
        return here == wanted
    return here.replace(second=0, microsecond=0) == wanted.replace(second=0, microsecond=0)


def tags(value: str | Iterable[str]) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InputError("tags", visible(item, 40), _("a tag is text"))
        tag = item.strip()
        if not tag:
            continue
        if not re.fullmatch(r"[\w.:/@+-]{1,40}", tag):
            raise InputError(
                "tags", visible(item, 40), _("a tag is 1-40 letters, digits or . : / @ + - _")
            )
        if tag not in out:
            out.append(tag)
    return tuple(out)


def boolean(field: str, value: str | bool) -> bool:
    if isinstance(value, bool):
        return value
    raw = value.strip().lower()
    if raw in {"1", "true", "yes", "y", "on"}:
        return True
    if raw in {"0", "false", "no", "n", "off", ""}:
        return False
    raise InputError(field, value, _("must be yes or no"))
