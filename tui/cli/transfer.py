"""Handlers of `zuka export` and `zuka import`: the whole ledger as CSV or JSON, and back."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TextIO

from leases.core.errors import InputError, os_problem
from leases.core.i18n import _
from leases.ledger import rowaudit, transfer
from tui.cli import output
from tui.cli.opening import open_ledger


def export(args: argparse.Namespace, out: TextIO) -> int:
    fmt = args.format
    if fmt is None and args.output:
        fmt = _format_of(args.output)
        if fmt is None:
            raise InputError(
                "--output",
                args.output,
                _("cannot tell the format from its extension (.csv or .json): give --format"),
            )
    with open_ledger(args, readonly=True) as ledger:
        # An import takes every record as stated and chains it anew: a row changed outside
        # zuka would come out of it looking recorded.
        rowaudit.refuse(rowaudit.drifted(ledger), _("the export"))
        data = ledger.export_records()
    text = transfer.to_csv(data) if fmt == "csv" else transfer.to_json(data)
    if args.output:
        transfer.write_private(Path(args.output), text)
    else:
        out.write(text)
    return 0


def read_export(path: str, fmt: str | None) -> transfer.Export:
    """The export in a file (or stdin, "-"), in fmt; by default by the file name's
    extension, else by its first characters (see transfer.sniff)."""
    where = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:  # a file to read, not one that could not be created
        said = _("no such file: check the path") if Path(path).parent.is_dir() else None
        raise InputError(where, None, said or os_problem(exc, path)) from None
    except OSError as exc:
        raise InputError(where, None, os_problem(exc, path)) from None
    except UnicodeDecodeError:
        raise InputError(where, None, _("is not UTF-8 text, so not a zuka export")) from None
    if fmt is None:
        fmt = _format_of(path) or transfer.sniff(text)
        if fmt is None:
            raise InputError(
                where,
                None,
                _("{problem}; or give --format").format(problem=_(transfer.NOT_AN_EXPORT)),
            )
    try:
        return transfer.from_csv(text) if fmt == "csv" else transfer.from_json(text)
    except InputError as exc:
        if exc.field != "file":
            raise
        reason = exc.reason
        if fmt == "json" and path == "-":
            reason = _("{reason}; if it is CSV, add --format csv").format(reason=reason)
        raise InputError(where, exc.value, reason) from None


def _format_of(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".json": "json"}.get(suffix)


_RECORD_AT = re.compile(r"(provider|node|lease|resource|stop) \d+")


def import_(args: argparse.Namespace, out: TextIO) -> int:
    try:
        data = read_export(args.file, args.format)
        with open_ledger(args, create=True) as ledger:
            counts = ledger.import_records(data)
    except InputError as exc:
        # "lease 2: end" -> "lease 2 in FILE: end": records count from 1, as people do.
        at = _RECORD_AT.match(exc.field)
        if at is None:
            raise
        where = "stdin" if args.file == "-" else args.file
        field = _("{record} in {file}").format(record=at.group(0), file=where)
        raise InputError(field + exc.field[at.end() :], exc.value, exc.reason) from None
    summary = ", ".join(f"{n} {_kind(k)}" for k, n in counts.items())
    return output.done(args, out, counts, _("imported {summary}").format(summary=summary))


def _kind(key: str) -> str:
    """A count's key of an import (JSON keeps it) as the sentence says it."""
    words = {
        "providers": _("providers"),
        "nodes": _("nodes"),
        "leases": _("leases"),
        "resources": _("resources"),
        "stops": _("stops"),
        "deposit_refunds": _("deposit refunds"),
        "invoices": _("invoices"),
        "balance_entries": _("balance entries"),
        "bills": _("bills"),
        "offers": _("offers"),
    }
    return words.get(key, key)
