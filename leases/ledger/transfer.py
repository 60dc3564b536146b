"""Export and import of a whole ledger as JSON or CSV, losslessly.

Both formats carry the same records (see leases.ledger.records). The CSV is one file: a `record`
column says which kind each row is (provider, node, lease, resource, stop), the other columns are
the union of the record keys; a cell that does not apply to a row's kind is left empty.

A name can be reused once its node is archived, so a name does not say which node a lease
or resource belongs to. Since version 2 every node, lease and resource record carries a
`node_key`, local to the export (see node_keys): import links by it, and refuses an older
export where a name stands for two nodes (see node_links).

The CSV is safe to open in Excel or WPS: a cell that a spreadsheet would read as a formula
(starting with = + - @, a tab or a line break) gets a `'` in front, and so does a cell that
starts with `'` itself, so that import takes exactly one `'` off and every value comes back
as it was. (A hand-written CSV cell that starts with `'` loses that one quote.)

write_private writes an export as the ledger is written: mode 0600, never through a link.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leases.core.errors import InputError, os_problem
from leases.core.i18n import N_, _
from leases.core.models import Node, NodeState
from leases.core.textsafe import formula_safe
from leases.ledger.books import BOOKS, export_keys
from leases.ledger.records import LEASE_KEYS, NODE_KEYS, PROVIDER_KEYS, RESOURCE_KEYS, Record

FORMAT = "zuka-ledger"
# Version 3 adds stops: a zuka that reads only 2 would drop them without a word; version 4
# the books (leases.ledger.books: deposit refunds, invoices, balances, bills, offers).
VERSION = 4
READS = (1, 2, 3, 4)  # version 1: no node_key; before 3: no stops; before 4: no books
NODE_KEY = "node_key"
# A stop (leases.ledger.stops) names its node, and its lease by the node and the lease's start,
# as a resource does; its times are UTC.
STOP_KEYS = ("node", "lease_start", "start", "end", "source", "who")
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "provider": ("providers", PROVIDER_KEYS),
    "node": ("nodes", (*NODE_KEYS, NODE_KEY)),
    "lease": ("leases", (*LEASE_KEYS, NODE_KEY)),
    "resource": ("resources", (*RESOURCE_KEYS, NODE_KEY)),
    "stop": ("stops", (*STOP_KEYS, NODE_KEY)),
} | {entity: (spec.table, export_keys(spec)) for entity, spec in BOOKS.items()}
# A bill's lines nest: bills go in a JSON export only (to_csv refuses a ledger holding one).
_NESTED = frozenset(e for e, spec in BOOKS.items() if spec.lines is not None)
_FLAT = {k: v for k, v in KINDS.items() if k not in _NESTED}
# node_key last: the columns of version 1 keep their places; the books' columns after it.
_V3 = ("provider", "node", "lease", "resource", "stop")
CSV_COLUMNS: tuple[str, ...] = (
    "record",
    *dict.fromkeys(k for kind in _V3 for k in KINDS[kind][1] if k != NODE_KEY),
    NODE_KEY,
    *dict.fromkeys(
        k
        for kind, (_plural, ks) in _FLAT.items()
        if kind not in _V3
        for k in ks
        if k not in {c for v3 in _V3 for c in KINDS[v3][1]}
    ),
)

Export = dict[str, list[Record]]


NOT_AN_EXPORT = N_(
    "is not a zuka export: neither JSON nor a zuka CSV (whose header starts with 'record')"
)


def sniff(text: str) -> str | None:
    """ "json" or "csv" by the text's start, None for neither (a zuka CSV's header starts
    with its `record` column, maybe after a byte order mark)."""
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith(("{", "[")):
        return "json"
    first = head.split("\n", 1)[0].strip()
    if first == "record" or first.startswith(("record,", '"record",')):
        return "csv"
    return None


def to_json(data: Export) -> str:
    return (
        json.dumps({"format": FORMAT, "version": VERSION, **data}, ensure_ascii=False, indent=2)
        + "\n"
    )


def from_json(text: str) -> Export:
    if sniff(text) != "json":
        raise InputError("file", None, _(NOT_AN_EXPORT))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            "file",
            None,
            _("is not valid JSON: {msg} at line {lineno}, column {colno}").format(
                msg=exc.msg, lineno=exc.lineno, colno=exc.colno
            ),
        ) from None
    except RecursionError:
        raise InputError("file", "(nested too deep)", _("is not a zuka export")) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("format", _short(doc), _("is not a {FORMAT} export").format(FORMAT=FORMAT))
    if doc.get("version") not in READS:
        raise InputError(
            "version",
            doc.get("version"),
            _("this zuka reads versions {READS} to {READS2}").format(
                READS=READS[0], READS2=READS[-1]
            ),
        )
    out: Export = {}
    for plural, keys in KINDS.values():
        rows = doc.get(plural, [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError(plural, _short(rows), _("must be a list of objects"))
        for i, row in enumerate(rows):
            extra = set(row) - set(keys)
            if extra:
                raise InputError(f"{plural[:-1]} {i + 1}", sorted(extra)[0], _("unknown field"))
        out[plural] = rows
    return out


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = ",".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
    return formula_safe(text)


def _csv_value(cell: str | None) -> str | None:
    """A cell as written by _csv_cell, back to its value (None for an empty cell)."""
    if not cell:
        return None
    return cell[1:] if cell.startswith("'") else cell


def to_csv(data: Mapping[str, Sequence[Record]]) -> str:
    for kind in _NESTED:
        plural = KINDS[kind][0]
        if data.get(plural):
            raise InputError(
                "format",
                "csv",
                _(
                    "the ledger holds {data} imported {plural}, whose lines a CSV cannot hold: "
                    "export it with --format json"
                ).format(data=len(data[plural]), plural=plural),
            )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for kind, (plural, _keys) in _FLAT.items():
        for rec in data.get(plural, ()):
            writer.writerow([kind, *(_csv_cell(rec.get(col)) for col in CSV_COLUMNS[1:])])
    return buf.getvalue()


def from_csv(text: str) -> Export:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = reader.fieldnames or []
    if "record" not in header:
        raise InputError("header", ",".join(header)[:60], _("a zuka CSV needs a 'record' column"))
    unknown = [h for h in header if h not in CSV_COLUMNS]
    if unknown:
        raise InputError("header", unknown[0], _("unknown column"))
    out: Export = {plural: [] for plural, _ in _FLAT.values()}
    for line_no, row in enumerate(reader, start=2):
        kind = (row.get("record") or "").strip()
        if kind.startswith("#") or not any((v or "").strip() for v in row.values()):
            continue  # comments and blank lines, as in the template
        if kind not in _FLAT:
            raise InputError(
                _("line {line}: {field}").format(line=line_no, field="record"),
                kind,
                _("must be one of {join}").format(join=", ".join(_FLAT)),
            )
        plural, keys = _FLAT[kind]
        stray = [k for k, v in row.items() if k not in keys and k != "record" and v]
        if stray:
            raise InputError(
                _("line {line}: {field}").format(line=line_no, field=stray[0]),
                row[stray[0]],
                _("does not apply to a {kind}").format(kind=kind),
            )
        rec: Record = {k: _csv_value(row.get(k)) for k in keys}
        if kind == "node":
            rec["tags"] = [t for t in (rec["tags"] or "").split(",") if t]
            rec["ssh_tunnels"] = [t for t in (rec["ssh_tunnels"] or "").split(",") if t]
        out[plural].append(rec)
    return out


def node_keys(nodes: Sequence[Node]) -> dict[int, str]:
    """Node id -> its key in an export: the name, and for an archived node whose name is
    shared, NAME#archived-N (N counting that name's archived nodes, oldest first; a node
    name cannot hold '#')."""
    shared: dict[str, list[Node]] = {}
    for n in nodes:
        shared.setdefault(n.name, []).append(n)
    keys: dict[int, str] = {}
    for name, group in shared.items():
        archived = sorted(
            (n for n in group if n.state is NodeState.RELEASED), key=lambda n: n.id or 0
        )
        for n in group:
            assert n.id is not None
            keys[n.id] = name
        if len(group) > 1:
            for i, n in enumerate(archived, start=1):
                assert n.id is not None
                keys[n.id] = f"{name}#archived-{i}"
    return keys


def node_links(data: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[int | None]]:
    """For "leases", "resources" and "stops": the index in data["nodes"] of the node each record
    belongs to, or None for a node not in the export (one already in the ledger, by name).
    By node_key where the record has one, else by name where that is unambiguous."""
    nodes = data.get("nodes", ())
    by_key: dict[str, int] = {}
    by_name: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        by_name.setdefault(str(n.get("name") or ""), []).append(i)
        key = n.get(NODE_KEY)
        if key in (None, ""):
            continue
        if str(key) in by_key:
            raise InputError(f"node {i + 1}: {NODE_KEY}", key, _("another node has this key too"))
        by_key[str(key)] = i
    out: dict[str, list[int | None]] = {}
    for plural in ("leases", "resources", "stops"):
        links: list[int | None] = []
        for i, rec in enumerate(data.get(plural, ())):
            where = f"{plural[:-1]} {i + 1}"
            name = str(rec.get("node") or "")
            key = rec.get(NODE_KEY)
            if key not in (None, ""):
                if str(key) not in by_key:
                    raise InputError(f"{where}: {NODE_KEY}", key, _("no node in this file has it"))
                at = by_key[str(key)]
                if str(nodes[at].get("name") or "") != name:
                    raise InputError(
                        f"{where}: node",
                        name,
                        _("its node_key {key} is the node {nodes}").format(
                            key=key, nodes=nodes[at]["name"]
                        ),
                    )
                links.append(at)
                continue
            found = by_name.get(name, [])
            if len(found) > 1:
                raise InputError(
                    f"{where}: node",
                    name,
                    _(
                        "there is more than one node named {name} in this file (an archived one"
                        " and a "
                        "live one) and the record has no {NODE_KEY} to say which: export again"
                        " with this "
                        "zuka (it writes node_key), or add the column by hand"
                    ).format(name=name, NODE_KEY=NODE_KEY),
                )
            links.append(found[0] if found else None)
        out[plural] = links
    return out


def write_private(path: Path, text: str) -> None:
    """Write text to path, mode 0600: through a temporary file renamed over it, so that a
    reader never sees half a file and an existing file's looser mode is not kept. A
    symbolic link or anything but a regular file at path is refused, never followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise InputError(str(path), None, os_problem(exc, path)) from None
    else:
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                str(path), None, _("is a link or not a regular file: refused; give another path")
            )
    folder = path.parent
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        # The file is written beside itself, then renamed: the directory must take a file.
        raise InputError(str(path), None, os_problem(exc, path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:
            # A full disk while writing: the error names the file it was for.
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
