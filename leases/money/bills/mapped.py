"""Any provider's CSV bill through a column mapping: the config's `[bills.NAME]` table
names the file's column for each of a bill line's fields (leases.config.bills reads and
checks it), and `zuka bill import FILE --format NAME` reads the file by those names.

Keys (MAPPING_KEYS): resource_id, amount, and either period_start (with period_end) or
period (a month, YYYY-MM: the whole month). period_end is inclusive when it is a date
(From 2026-11-01 To 2026-11-30 is all November, to 12-01 00:00) and exclusive when it is a
moment with a time of day (To 2026-12-01 00:00 ends as November does); without period_end
(or where its cell is empty) a line is its start's whole day when the start is a date,
else that moment. currency (a column) or currency_code
(a fixed code, CNY by default); product, description, region, kind (a column whose values
are usage, subscription, credit, discount, tax, refund or other; empty: usage),
list_amount (columns); date_format (strptime's, for the date columns; default ISO 8601);
encoding (of the file, one of table.ENCODINGS; default UTF-8, else GB18030)."""

from __future__ import annotations

from collections.abc import Mapping

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.money.bills import table
from leases.money.bills.table import Table

COLUMN_KEYS = (
    "resource_id",
    "period_start",
    "period_end",
    "period",
    "amount",
    "currency",
    "product",
    "description",
    "region",
    "kind",
    "list_amount",
)
VALUE_KEYS = ("currency_code", "date_format", "encoding")
MAPPING_KEYS = (*COLUMN_KEYS, *VALUE_KEYS)
KINDS = ("usage", "subscription", "credit", "discount", "tax", "refund", "other")


def problems(mapping: Mapping[str, object]) -> list[str]:
    """What is wrong with a mapping, each naming its key (empty: none)."""
    out = [
        _("{key}: unknown key (known: {known})").format(
            key=visible(k, 60), known=", ".join(MAPPING_KEYS)
        )
        for k in mapping
        if k not in MAPPING_KEYS
    ]
    out += [
        _("{key}: must be a string").format(key=k)
        for k, v in mapping.items()
        if k in MAPPING_KEYS and not isinstance(v, str)
    ]
    for key in ("resource_id", "amount"):
        if key not in mapping:
            out.append(_("{key}: is required (the file's column for it)").format(key=key))
    if "period_start" not in mapping and "period" not in mapping:
        out.append(_("period_start: is required (or period, a month column)"))
    encoding = mapping.get("encoding")
    if isinstance(encoding, str):
        problem = table.encoding_problem(encoding)
        if problem:
            out.append(f"encoding: {problem}")
    if "currency" in mapping and "currency_code" in mapping:
        out.append(_("currency_code: give either currency (a column) or currency_code"))
    return out


# strptime's directives that give a time of day
_TIME_DIRECTIVES = ("%H", "%I", "%M", "%S", "%X", "%c", "%T", "%R", "%p")


def _date_only(cell: str, fmt: str) -> bool:
    """Whether a date cell holds a day and no time of day."""
    if fmt:
        return not any(d in fmt for d in _TIME_DIRECTIVES)
    return ":" not in cell


def parse(
    t: Table, mapping: Mapping[str, str], name: str, *, tz: str, currency: str = "CNY"
) -> list[dict[str, object]]:
    """The lines of a file by its mapping (checked by `problems`); times without an
    offset read in tz."""
    columns = [mapping[k] for k in COLUMN_KEYS if k in mapping]
    table.missing(
        t,
        columns,
        _("a {name} bill (as its [bills.{name}] mapping says)").format(name=visible(name, 40)),
    )
    fmt = mapping.get("date_format", "")
    fixed = mapping.get("currency_code") or currency
    out: list[dict[str, object]] = []
    for row in t.rows:
        if "period_start" in mapping:
            start = table.moment(row, mapping["period_start"], tz, fmt)
            if mapping.get("period_end") and row.get(mapping["period_end"]):
                end = table.moment(row, mapping["period_end"], tz, fmt)
                if end >= start and _date_only(row.get(mapping["period_end"]), fmt):
                    end = table.next_day(end)  # inclusive: the day's end
            elif _date_only(row.get(mapping["period_start"]), fmt):
                end = table.next_day(start)
            else:
                end = start
        else:
            start, end = table.month_span(row.get(mapping["period"]), tz, row, mapping["period"])
        kind = row.get(mapping["kind"]).lower() if "kind" in mapping else ""
        if kind and kind not in KINDS:
            raise InputError(
                table.where(row, mapping["kind"]),
                visible(kind, 40),
                _("must be one of {kinds}").format(kinds=", ".join(KINDS)),
            )
        amount = table.amount(row, mapping["amount"])
        assert amount is not None
        code = row.get(mapping["currency"]) if "currency" in mapping else fixed
        out.append(
            table.line(
                row,
                start=start,
                end=end,
                amount_text=amount,
                kind=kind or "usage",
                currency=code,
                resource_id=table.text(row, mapping["resource_id"], "resource_id"),
                product=table.text(row, mapping.get("product"), "product"),
                description=table.text(row, mapping.get("description"), "description"),
                region=table.text(row, mapping.get("region"), "region"),
                list_amount=table.amount(row, mapping["list_amount"], required=False)
                if "list_amount" in mapping
                else None,
            )
        )
    return out
