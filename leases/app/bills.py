"""The provider's bill use cases: `zuka bill import` (a provider's export read into the
`bill` book, audited and undoable), `bill list`, `bill delete`, and `bill check` (the
month's reconciliation, leases.alerts.billfacts). Reading the file and the config is
here; parsing the text is leases.money.bills'."""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from leases.alerts.billfacts import month_check
from leases.config.sections import Config
from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger import books
from leases.ledger.store import Ledger
from leases.money import report
from leases.money.amounts import fen_json, money_words
from leases.money.bills import aliyun, awscur, mapped, table
from leases.money.bills.reconcile import APART_KINDS, Reconciliation, tolerance

PRESETS = {aliyun.NAME: aliyun, awscur.NAME: awscur}
# A bill kept in UTC read in another zone: its month is at most 14 hours (the largest
# offset from UTC, UTC+14) off the billing zone's.
MONTH_SLACK = timedelta(hours=14)


def read_file(path: Path) -> bytes:
    """The file's bytes: a regular file of at most table.MAX_BYTES (a FIFO, a device or a
    directory is refused, and so is a larger file)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError("file", str(path), _("no such file: check the path")) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError("file", str(path), _("is not a regular file"))
        if info.st_size > table.MAX_BYTES:
            raise InputError(
                "file",
                str(path),
                _("is larger than {size} MB: split the bill by month").format(
                    size=table.MAX_BYTES >> 20
                ),
            )
        chunks: list[bytes] = []
        size = 0
        while size <= table.MAX_BYTES:  # the file may grow after fstat
            chunk = os.read(fd, table.MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > table.MAX_BYTES:
            raise InputError(
                "file", str(path), _("is larger than {size} MB").format(size=table.MAX_BYTES >> 20)
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_bill(data: bytes, fmt: str | None, config: Config) -> tuple[str, list[dict[str, object]]]:
    """(the format's name, the lines as check_bill_line takes them, with source_line)."""
    mapping = config.bills.formats.get(fmt) if fmt else None
    if fmt and fmt not in PRESETS and mapping is None:
        known = ", ".join([*PRESETS, *config.bills.formats])
        raise InputError(
            "format",
            fmt,
            _(
                "is not a bill format zuka knows: {known} (or a [bills.NAME] column mapping in"
                " the config)"
            ).format(known=known),
        )
    text = table.decode(data, mapping.get("encoding") if mapping else None)
    t = table.read_table(text)
    if fmt is None:
        fmt = next((name for name, m in PRESETS.items() if m.looks_like(t)), None)
        if fmt is None:
            raise InputError(
                "format",
                None,
                _(
                    "cannot tell the file's format from its header: give --format aliyun,"
                    " aws_cur or a [bills.NAME] of the config"
                ),
            )
    if fmt == aliyun.NAME:
        lines = aliyun.parse(t, currency=config.billing.currency)
    elif fmt == awscur.NAME:
        lines = awscur.parse(t)
    else:
        assert mapping is not None
        lines = mapped.parse(
            t, mapping, fmt, tz=config.billing.tz, currency=config.billing.currency
        )
    if not lines:
        raise InputError("file", None, _("holds no bill lines (only a header)"))
    return fmt, lines


@dataclass(frozen=True)
class Imported:
    record: dict[str, Any]
    lines: int
    months: tuple[str, ...]
    total: dict[str, str]  # currency -> sum of the lines
    rows: int = 0  # the file's data rows read (an Aliyun voucher adds a line to its row)
    # (what, currency) -> sum: what is "payable" (the lines bill check compares: usage,
    # subscription, refund, other), "credits" (credits and discounts: vouchers) or "tax"
    sums: dict[tuple[str, str], Decimal] = field(default_factory=dict)

    def said(self, provider: str) -> str:
        words = {"payable": _("payable"), "credits": _("credits and vouchers"), "tax": _("tax")}
        parts = [
            _("{what} {amount}").format(what=words[what], amount=money_words(amount, code))
            for what in ("payable", "credits", "tax")
            for (w, code), amount in sorted(self.sums.items())
            if w == what and (amount or what == "payable")
        ]
        how = _(" (a voucher is a line of its own)") if self.lines > self.rows else ""
        return _(
            "imported bill {id} for {provider}: {rows} rows read, {lines} lines{how} ({format};"
            " {months}; {sums})"
        ).format(
            id=self.record["id"],
            provider=provider,
            rows=self.rows,
            lines=self.lines,
            how=how,
            format=self.record["format"],
            months=", ".join(self.months),
            sums=_(", ").join(parts),
        )


def bill_sums(lines: list[tuple[str, str, Decimal]]) -> dict[tuple[str, str], Decimal]:
    """(kind, currency, amount) of a bill's lines -> (payable/credits/tax, currency) -> sum,
    as `zuka bill check` counts them (payable before vouchers; credits apart)."""
    out: dict[tuple[str, str], Decimal] = {}
    for kind, code, amount in lines:
        what = "credits" if kind in APART_KINDS else "tax" if kind == "tax" else "payable"
        out[(what, code)] = out.get((what, code), Decimal(0)) + amount
    for _what, code in list(out):
        out.setdefault(("payable", code), Decimal(0))
    return out


def import_bill(
    ledger: Ledger,
    path: Path,
    *,
    provider: str,
    fmt: str | None,
    month: str | None,
    config: Config,
) -> Imported:
    """`zuka bill import`: all or nothing; a file already imported for the provider is
    refused, naming that import."""
    prov = ledger.provider(provider)
    data = read_file(path)
    fmt, lines = parse_bill(data, fmt, config)
    checked = []
    for i, line in enumerate(lines):
        rec = {k: v for k, v in line.items() if k not in table.LOCAL_KEYS}
        try:
            checked.append(books.check_bill_line({**rec, "line_no": i + 1}))
        except InputError as exc:
            raise InputError(
                _("line {n}, {field}").format(n=line["source_line"], field=exc.field),
                exc.value,
                exc.reason,
            ) from None
    tz = config.billing.tz
    if month is not None:
        _refuse_other_months(lines, checked, month, tz)
    _refuse_other_providers(ledger, provider, [str(r["resource_id"]).strip() for r in checked])
    digest = hashlib.sha256(data).hexdigest()
    for earlier in ledger.book_rows("bill", "provider_id = ? AND sha256 = ?", [prov.id, digest]):
        at = datetime.fromisoformat(earlier["imported_at"])
        raise InputError(
            "file",
            None,
            _(
                "was imported already for {provider}: bill {id}, on {day} (zuka bill delete"
                " {id} to import it again)"
            ).format(provider=provider, id=earlier["id"], day=f"{at:%Y-%m-%d}"),
        )
    _refuse_repeated_lines(ledger, prov.id, checked)
    rec = ledger.add_book(
        "bill",
        {
            "provider_id": prov.id,
            "format": fmt,
            "source": visible(path.name, 200),
            "sha256": digest,
            "imported_at": ledger.clock().isoformat(),
        },
        lines=checked,
    )
    months = sorted(
        {
            f"{datetime.fromisoformat(r['period_start']).astimezone(ZoneInfo(tz)):%Y-%m}"
            for r in checked
        }
    )
    total: dict[str, Decimal] = {}
    for r in checked:
        total[r["currency"]] = total.get(r["currency"], Decimal(0)) + Decimal(r["amount"])
    sums = bill_sums([(r["kind"], r["currency"], Decimal(r["amount"])) for r in checked])
    rows = len({line["source_line"] for line in lines})
    return Imported(
        rec, len(checked), tuple(months), {k: str(v) for k, v in total.items()}, rows, sums
    )


def _line_key(
    resource_id: str, start: str, end: str, product: str, description: str, kind: str, amount: str
) -> tuple[object, ...]:
    """What makes two bill lines the same charge: the same resource, period, product,
    description, kind and amount."""
    return (
        resource_id,
        datetime.fromisoformat(start),
        datetime.fromisoformat(end),
        product,
        description,
        kind,
        Decimal(amount),
    )


def _refuse_repeated_lines(
    ledger: Ledger, provider_id: int | None, checked: list[dict[str, Any]]
) -> None:
    """A bill whose lines are lines of an earlier bill of the provider (the same export
    saved again, a byte changed, so not caught by its sha256) would count those charges
    twice: refused, naming the earlier bill. Lines repeated within the file are allowed (a
    provider may split a resource's day into items)."""
    earlier: dict[tuple[object, ...], set[int]] = {}
    for row in ledger.conn.execute(
        "SELECT l.bill_id, l.resource_id, l.period_start, l.period_end, l.product,"
        " l.description, l.kind, l.amount FROM bill_lines l JOIN bills b ON b.id = l.bill_id"
        " WHERE b.provider_id = ?",
        [provider_id],
    ):
        earlier.setdefault(_line_key(*row[1:]), set()).add(row[0])
    if not earlier:
        return
    repeats: dict[int, int] = {}
    for rec in checked:
        key = _line_key(
            *(str(rec[k]) for k in ("resource_id", "period_start", "period_end", "product")),
            *(str(rec[k]) for k in ("description", "kind", "amount")),
        )
        for bill_id in earlier.get(key, ()):
            repeats[bill_id] = repeats.get(bill_id, 0) + 1
    if not repeats:
        _refuse_overlapping_lines(ledger, provider_id, checked)
        return
    bill_id, count = max(repeats.items(), key=lambda kv: (kv[1], -kv[0]))
    said = (
        _("its {count} lines are all in bill {id}: the same bill saved again?")
        if count == len(checked)
        else _(
            "{count} of its {lines} lines are in bill {id} already: their charges would count"
            " twice."
        )
    ).format(count=count, lines=len(checked), id=bill_id)
    raise InputError(
        "file", None, _("{said} zuka bill delete {id} to replace it").format(said=said, id=bill_id)
    )


def _refuse_overlapping_lines(
    ledger: Ledger, provider_id: int | None, checked: list[dict[str, Any]]
) -> None:
    """A line charging a resource for time an earlier bill of the provider already charges
    it for (the same resource, product and kind, periods that overlap: the same month
    exported again by day rather than by month) would count that time twice: refused,
    naming the earlier bill."""
    spans: dict[tuple[str, str, str], list[tuple[datetime, datetime, int]]] = {}
    for rid, product, kind, start, end, bill_id in ledger.conn.execute(
        "SELECT l.resource_id, l.product, l.kind, l.period_start, l.period_end, l.bill_id"
        " FROM bill_lines l JOIN bills b ON b.id = l.bill_id"
        " WHERE b.provider_id = ? AND l.resource_id != ''",
        [provider_id],
    ):
        spans.setdefault((rid, product, kind), []).append(
            (datetime.fromisoformat(start), datetime.fromisoformat(end), bill_id)
        )
    for rec in checked:
        key = (str(rec["resource_id"]), str(rec["product"]), str(rec["kind"]))
        if not key[0] or key not in spans:
            continue
        start = datetime.fromisoformat(str(rec["period_start"]))
        end = datetime.fromisoformat(str(rec["period_end"]))
        for a, b, bill_id in spans[key]:
            if start < b and a < end:
                raise InputError(
                    "file",
                    None,
                    _(
                        "its line for {resource} ({product}) from {start} charges time bill"
                        " {id} charges it for already (the same month exported again, by day"
                        " rather than by month?): zuka bill delete {id} to replace it"
                    ).format(
                        resource=visible(key[0], 80),
                        product=visible(key[1], 40) or key[2],
                        start=f"{start:%Y-%m-%d %H:%M}",
                        id=bill_id,
                    ),
                )


def _refuse_other_months(
    lines: list[dict[str, object]], checked: list[dict[str, Any]], month: str, tz: str
) -> None:
    """--month: every line's own billing month (Aliyun's 账期, AWS's
    bill/BillingPeriodStartDate) is `month`, and its period lies in the month, MONTH_SLACK
    either side (a prepaid order, and its voucher, may run past the month it is charged
    in)."""
    since, until = report.month_window(month, tz, datetime.max.replace(tzinfo=UTC))[0]
    named = f"{since:%Y-%m}"
    prepaid = {line["source_line"] for line in lines if line["kind"] == "subscription"}
    for line, rec in zip(lines, checked, strict=True):
        billing = line.get("billing")
        if isinstance(billing, tuple) and billing[1] != named:
            raise InputError(
                _("line {n}, column {column}").format(
                    n=line["source_line"], column=visible(billing[0], 60)
                ),
                billing[1],
                _("names another month than {month} (--month): is it the right file?").format(
                    month=named
                ),
            )
        start = datetime.fromisoformat(str(rec["period_start"]))
        end = datetime.fromisoformat(str(rec["period_end"]))
        if not since - MONTH_SLACK <= start < until + MONTH_SLACK:
            raise InputError(
                _("line {n}").format(n=line["source_line"]),
                rec["period_start"],
                _("is not in {month} (--month): is it the right file?").format(month=named),
            )
        if end > until + MONTH_SLACK and line["source_line"] not in prepaid:
            raise InputError(
                _("line {n}").format(n=line["source_line"]),
                rec["period_end"],
                _("ends after {month} (--month): is it the right file?").format(month=named),
            )


def _refuse_other_providers(ledger: Ledger, provider: str, ids: list[str]) -> None:
    """A bill none of whose resource ids is the provider's, though some are another
    provider's, was imported under the wrong --provider: refused, naming the other."""
    owner: dict[str, set[str]] = {}
    for n in ledger.nodes():
        if n.instance_id.strip() and n.provider:
            owner.setdefault(n.instance_id.strip(), set()).add(n.provider)
    nodes = {n.id: n.provider for n in ledger.nodes()}
    leases = {le.id: le.node_id for le in ledger.leases()}
    for _name, _start, res in ledger.resources():
        prov = nodes.get(leases.get(res.lease_id))
        if prov and res.native_id.strip():
            owner.setdefault(res.native_id.strip(), set()).add(prov)
    named = [owner[i] for i in ids if i in owner]
    if named and not any(provider in o for o in named):
        others = sorted(set().union(*named))
        raise InputError(
            "provider",
            provider,
            _(
                "none of the bill's resource ids is {provider}'s; they are {others}'s:"
                " is --provider right?"
            ).format(provider=provider, others=", ".join(others)),
        )


def list_bills(ledger: Ledger, tz: str) -> list[dict[str, Any]]:
    """Every imported bill: its id, provider, format, file, when (also in the billing zone
    tz), lines, the months its lines start in (tz), and its sums as bill check counts them:
    payable (before vouchers), credits and tax, per currency."""
    names = {p.id: p.name for p in ledger.providers()}
    zone = ZoneInfo(tz)
    out = []
    for r in ledger.book_rows("bill"):
        got = ledger.conn.execute(
            "SELECT kind, currency, amount, period_start FROM bill_lines WHERE bill_id = ?",
            [r["id"]],
        ).fetchall()
        sums = bill_sums([(k, c, Decimal(a)) for k, c, a, _at in got])
        months = sorted(
            {f"{datetime.fromisoformat(at).astimezone(zone):%Y-%m}" for *_rest, at in got}
        )
        out.append(
            {
                "id": r["id"],
                "provider": names.get(r["provider_id"], "?"),
                "format": r["format"],
                "source": r["source"],
                "imported_at": r["imported_at"],
                "imported_local": datetime.fromisoformat(r["imported_at"])
                .astimezone(zone)
                .isoformat(),
                "lines": r["line_count"],
                "months": months,
                "payable": {c: fen_json(a) for (w, c), a in sorted(sums.items()) if w == "payable"},
                "credits": {c: fen_json(a) for (w, c), a in sorted(sums.items()) if w == "credits"},
                "sha256": r["sha256"],
            }
        )
    return out


def delete_bill(ledger: Ledger, bill_id: int) -> dict[str, Any]:
    """`zuka bill delete ID`: the bill and its lines (`zuka undo` puts them back)."""
    return ledger.delete_book("bill", bill_id)


def check_month(
    ledger: Ledger,
    month: str,
    *,
    config: Config,
    provider: str | None = None,
    tol: str | None = None,
) -> Reconciliation:
    """`zuka bill check`: the month's reconciliation; refused when no bill covers it, or
    when a bill it rests on (one with lines in the month) is not what zuka imported (its
    lines changed outside zuka: the rest of the ledger is the caller's to check, as for
    every figure)."""
    if provider is not None:
        ledger.provider(provider)
    found = month_check(
        ledger,
        month,
        tz=config.billing.tz,
        currency=config.billing.currency,
        tol=tolerance(tol if tol is not None else config.bills.tolerance),
        provider=provider,
        untouched=True,
    )
    if found is None:
        said = (
            _("no bill from {provider} imported for {month}: zuka bill import FILE --provider NAME")
            if provider
            else _("no bill imported for {month}: zuka bill import FILE --provider NAME")
        )
        raise InputError("month", month, said.format(provider=provider, month=month))
    return found
