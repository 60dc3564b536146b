"""A bill export as a table: its bytes decoded (UTF-8 with or without a BOM, else GB18030,
the superset of the GBK an Aliyun console export is often written in), its rows read as
CSV under bounds, and each cell read as the one kind of value a bill line holds. Every
refusal names the file's line number (the header is line 1) and the column."""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from zoneinfo import ZoneInfo

from leases.core import fields
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible

MAX_BYTES = 50 * 1024 * 1024  # a bill export over 50 MB is refused
MAX_LINES = 500_000  # and one of more data lines
MAX_CELL = 10_000  # characters of one cell (csv's own limit is 131,072)
MAX_COLUMNS = 1_000  # a header of more columns is refused (AWS CUR writes a few hundred)
# A bill line's amounts are stored to 8 decimal places (leases.ledger.books); AWS writes
# 10 (5.1612903226): rounded half-even, a change below a millionth of a cent.
PLACES = Decimal("1e-8")
# Bounds of a line's text as stored (leases.ledger.books.check_bill_line).
TEXT_BOUNDS = {"resource_id": 300, "product": 200, "description": 500, "region": 100}
# The encodings a bill is read in (a [bills.NAME] mapping's `encoding`), by Python's
# canonical codec name: never one, such as UTF-7, in which plain ASCII spells other text
# (`+AC0-` is a '-').
ENCODINGS = ("utf-8", "utf-8-sig", "gb18030", "gbk", "gb2312", "big5", "latin-1", "cp1252")
_CODECS = frozenset(codecs.lookup(e).name for e in ENCODINGS)
# A number in scientific notation, as AWS CUR writes a tiny cost (1.0E-8): read in bill
# cells only, its exponent at most 30 either way.
_SCIENTIFIC = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE]([+-]?[0-9]+)")
MAX_EXPONENT = 30
_SIGNS = ("-", "+", "－", "＋")


def encoding_problem(name: str) -> str | None:
    """Why a bill cannot be read in the encoding `name` (None: it can)."""
    try:
        known = codecs.lookup(name).name in _CODECS
    except LookupError:
        known = False
    if known:
        return None
    return _("{name} is not an encoding zuka reads bills in: {known}").format(
        name=visible(name, 40), known=", ".join(ENCODINGS)
    )


def decode(data: bytes, encoding: str | None = None) -> str:
    """The file's text: in `encoding` when given; else UTF-8 (a BOM stripped), else
    GB18030. Refused when it reads in neither."""
    if encoding:
        problem = encoding_problem(encoding)
        if problem:
            raise InputError("encoding", None, problem)
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise InputError(
                "file",
                None,
                _("does not read as {encoding} ({reason} at byte {at})").format(
                    encoding=encoding, reason=exc.reason, at=exc.start
                ),
            ) from None
        return text.removeprefix("\ufeff")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.end == len(data) and exc.reason == "unexpected end of data":
            raise InputError(
                "file",
                None,
                _(
                    "ends inside a character: it is cut short (a download or copy that did not"
                    " finish)"
                ),
            ) from None
    try:
        return data.decode("gb18030")
    except UnicodeDecodeError:
        raise InputError(
            "file", None, _("is neither UTF-8 nor GBK/GB18030 text: is it a CSV bill export?")
        ) from None


@dataclass(frozen=True)
class Row:
    """One data line of the file: its line number and its cells by column name."""

    line: int
    cells: Mapping[str, str]

    def get(self, column: str) -> str:
        return self.cells.get(column, "").strip()


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[Row, ...]

    def has(self, column: str) -> bool:
        return column in self.header


def read_table(text: str) -> Table:
    """The CSV's header and rows, every row as wide as the header (a truncated file's
    last row is not); blank lines skipped."""
    if "\x00" in text:
        raise InputError("file", None, _("holds NUL bytes: not a CSV text file"))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header_cells = next(reader, None)
    except csv.Error as exc:
        raise InputError(_line(1), None, _("is not CSV ({error})").format(error=exc)) from None
    if not header_cells or not any(c.strip() for c in header_cells):
        raise InputError("file", None, _("is empty: no header row"))
    if len(header_cells) > MAX_COLUMNS:
        raise InputError(
            _line(1),
            None,
            _(
                "has {count:,} columns: more than the {most:,} a bill export has (is it a CSV"
                " bill?)"
            ).format(count=len(header_cells), most=MAX_COLUMNS),
        )
    header = tuple(c.strip().removeprefix("\ufeff") for c in header_cells)
    counts = Counter(header)
    dupes = sorted(h for h, n in counts.items() if h and n > 1)
    if dupes:
        raise InputError("line 1", visible(dupes[0], 80), "names a column twice")
    rows: list[Row] = []
    for cells in _rows(reader):
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(rows) >= MAX_LINES:
            raise InputError(
                "file",
                None,
                _("has more than {most:,} lines: split it by month").format(most=MAX_LINES),
            )
        if len(cells) != len(header):
            raise InputError(
                _line(line),
                None,
                _(
                    "has {cells} cells where the header has {header}: the file is cut short or"
                    " not this format"
                ).format(cells=len(cells), header=len(header)),
            )
        long = next((i for i, c in enumerate(cells) if len(c) > MAX_CELL), None)
        if long is not None:
            raise InputError(
                _("line {n}, column {column}").format(n=line, column=visible(header[long], 60)),
                None,
                _("is longer than {most:,} characters").format(most=MAX_CELL),
            )
        rows.append(Row(line, dict(zip(header, cells, strict=True))))
    return Table(header, tuple(rows))


def _rows(reader: Iterator[list[str]]) -> Iterator[list[str]]:
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = getattr(reader, "line_num", 0)
            raise InputError(
                _line(line), None, _("is not CSV ({error})").format(error=exc)
            ) from None
        yield cells


def where(row: Row, column: str) -> str:
    """How a refusal names a cell: 'line 7, column 应付金额'."""
    return _("line {n}, column {column}").format(n=row.line, column=visible(column, 60))


def _line(n: int) -> str:
    """How a refusal names a line: 'line 7'."""
    return _("line {n}").format(n=n)


def missing(table: Table, columns: Sequence[str], fmt: str) -> None:
    """Refuse a file that lacks columns the format needs, naming every one of them."""
    lacking = [visible(c, 80) for c in columns if not table.has(c)]
    if lacking:
        said = (
            _("has no column {column}").format(column=lacking[0])
            if len(lacking) == 1
            else _("lacks {count} columns: {columns}").format(
                count=len(lacking), columns=", ".join(lacking)
            )
        )
        raise InputError(
            "file",
            None,
            _("{said}: it is not {format} (its header begins {header})").format(
                said=said, format=fmt, header=visible(", ".join(table.header[:3]), 120)
            ),
        )


def amount(row: Row, column: str, *, required: bool = True) -> str | None:
    """A signed amount read as every typed number is (fields.number; never a float),
    or in scientific notation (2.16e4, 1.0E-8; a bill's own, not what people type), rounded
    to PLACES; None for an empty cell that may be empty. One sign at most (--5 is refused)."""
    raw = row.get(column)
    if not raw:
        if required:
            raise InputError(where(row, column), None, _("is empty: an amount is required"))
        return None
    text = raw.replace("−", "-")
    negative = text.startswith(("-", "－"))
    rest = (text[1:] if negative else text).strip()
    signed = rest.startswith(_SIGNS)
    if signed and (negative or rest[1:].lstrip().startswith(_SIGNS)):
        raise InputError(where(row, column), visible(raw, 40), _("is not a number: two signs"))
    scientific = _SCIENTIFIC.fullmatch(rest.removeprefix("+"))
    try:
        value = _scientific(scientific) if scientific else fields.number(where(row, column), rest)
    except InputError as exc:
        raise InputError(where(row, column), visible(raw, 40), exc.reason) from None
    if abs(value) >= Decimal("1e12"):
        raise InputError(where(row, column), visible(raw, 40), _("is implausibly large"))
    value = -value if negative else value
    if value.as_tuple().exponent < -8:  # type: ignore[operator]
        value = value.quantize(PLACES, rounding=ROUND_HALF_EVEN)
    return format(value, "f")  # 21600, 0.00000001: never 2.16E+4 or 1E-8


def _scientific(m: re.Match[str]) -> Decimal:
    exponent = m.group(2).lstrip("+-").lstrip("0")
    if len(exponent) > 2 or int(exponent or "0") > MAX_EXPONENT:
        raise InputError(
            "amount", None, _("has an exponent beyond ±{most}").format(most=MAX_EXPONENT)
        )
    return Decimal(m.group(0))


def moment(row: Row, column: str, tz: str, date_format: str = "") -> datetime:
    """A time cell: ISO 8601 (2024-05-01T00:00:00Z, 2024-05-01 00:00:00, 2024-05-01), or
    by `date_format` (strptime); a time without an offset is read in tz."""
    raw = row.get(column)
    if not raw:
        raise InputError(where(row, column), None, _("is empty: a date is required"))
    value: str | datetime = raw
    if date_format:
        try:
            value = datetime.strptime(raw, date_format)
        except ValueError:
            raise InputError(
                where(row, column),
                visible(raw, 40),
                _("does not read as {format}").format(format=visible(date_format, 40)),
            ) from None
    try:
        return fields.moment(where(row, column), value, tz)
    except InputError as exc:
        raise InputError(where(row, column), visible(raw, 40), exc.reason) from None


def text(row: Row, column: str | None, key: str) -> str:
    """A text cell made safe (control characters shown, not obeyed) and bounded."""
    if not column:
        return ""
    return visible(row.get(column), TEXT_BOUNDS[key])


LOCAL_KEYS = ("source_line", "billing")  # a line's keys that are not stored


def next_day(at: datetime) -> datetime:
    """The same wall-clock time a calendar day later in at's zone (its midnight after a
    date's midnight, over a change of clock too)."""
    zone = at.tzinfo
    naive = at.replace(tzinfo=None) + timedelta(days=1)
    return naive.replace(tzinfo=zone) if isinstance(zone, ZoneInfo) else at + timedelta(days=1)


def month_span(period: str, tz: str, row: Row, column: str) -> tuple[datetime, datetime]:
    """A billing period YYYY-MM (Aliyun's 账期) as (its first moment, the next month's)."""
    m = re.fullmatch(r"([0-9]{4})-?([0-9]{2})", period.strip())
    if m is None or not 1 <= int(m.group(2)) <= 12:
        raise InputError(where(row, column), visible(period, 40), _("is not a month YYYY-MM"))
    year, month = int(m.group(1)), int(m.group(2))
    zone = ZoneInfo(tz)
    start = datetime(year, month, 1, tzinfo=zone)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=zone)
    return start, end


def line(
    row: Row,
    *,
    start: datetime,
    end: datetime,
    amount_text: str,
    kind: str,
    currency: str,
    resource_id: str = "",
    product: str = "",
    description: str = "",
    region: str = "",
    list_amount: str | None = None,
    billing: tuple[str, str] | None = None,
) -> dict[str, object]:
    """A bill line as leases.ledger.books.check_bill_line takes it, with `source_line`
    (the file's line number, for refusals) and `billing` (the column naming the line's
    billing month, and that month YYYY-MM, where the format has one: Aliyun's 账期), both
    dropped before it is stored (LOCAL_KEYS)."""
    if end < start:
        raise InputError(
            _line(row.line),
            None,
            _("ends ({end}) before it starts ({start})").format(
                end=end.isoformat(), start=start.isoformat()
            ),
        )
    return {
        "source_line": row.line,
        "billing": billing,
        "period_start": start.isoformat(),
        "period_end": end.isoformat(),
        "resource_id": resource_id,
        "product": product,
        "description": description,
        "region": region,
        "kind": kind,
        "amount": amount_text,
        "list_amount": list_amount,
        "currency": currency,
    }
