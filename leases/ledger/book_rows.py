"""The books' rows (leases.ledger.books): deposit refunds, invoices, prepaid balance
entries, imported bills with their lines, offers. One code path for every book: a write
checks the record (the book's check, then its rules against the rows around it, inside
the transaction), writes the row and its audit entry (`invoice.add`, with the record
after), so that `zuka undo` and `zuka audit verify` treat them as every other row."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from leases.core.errors import InputError
from leases.core.i18n import _
from leases.core.textsafe import visible
from leases.ledger import bookdates, books, invoicerules, refund_rules  # noqa: F401  (they register the books' rules)
from leases.ledger.books import BOOKS, Book, Record
from leases.ledger.resource_rows import ResourceRows

assert refund_rules.refund_rule in BOOKS["deposit_refund"].rules


def book(entity: str) -> Book:
    found = BOOKS.get(entity)
    if found is None:
        raise InputError("entity", entity, _("must be one of {join}").format(join=", ".join(BOOKS)))
    return found


class BookRows(ResourceRows):
    """The books, a layer of a Ledger (see leases.ledger.store)."""

    def book_rows(self, entity: str, where: str = "", params: Sequence[Any] = ()) -> list[Record]:
        """The rows of a book (with their ids) as stored, in id order; `where` a SQL
        condition on the table's columns."""
        spec = book(entity)
        sql = f"SELECT * FROM {spec.table}" + (f" WHERE {where}" if where else "")
        return self.rows(sql + " ORDER BY id", params)

    def book_lines(self, entity: str, row_id: int) -> list[Record]:
        """The child rows (a bill's lines) of one row, in order, without the row's id."""
        spec = book(entity)
        assert spec.lines is not None
        table, key = spec.lines
        rows = self.rows(f"SELECT * FROM {table} WHERE {key} = ? ORDER BY line_no", [row_id])
        return [{k: v for k, v in r.items() if k != key} for r in rows]

    def add_book(
        self,
        entity: str,
        rec: Mapping[str, Any],
        *,
        lines: Sequence[Mapping[str, Any]] = (),
        node: str | None = None,
    ) -> Record:
        """Write a new row (and its lines), audited as `ENTITY.add`; returns its record
        with its id. Refused, nothing written, when the record or a rule refuses it."""
        with self.transaction() as conn:
            return self._insert_book(conn, entity, rec, lines=lines, node=node)

    def edit_book(
        self, entity: str, row_id: int, changes: Mapping[str, Any], *, node: str | None = None
    ) -> Record:
        """Change some fields of a row (`ENTITY.edit`, undoable); checked as a whole."""
        spec = book(entity)
        with self.transaction() as conn:
            before = self._book_record(conn, spec, row_id)
            self.check_untouched(entity, [row_id])
            after = spec.check({**before, **changes})
            if after == before:
                return {"id": row_id, **after}
            for rule in spec.rules:
                rule(self, after, row_id)
            sets = ", ".join(f'"{k}" = ?' for k in after)
            conn.execute(f"UPDATE {spec.table} SET {sets} WHERE id = ?", [*after.values(), row_id])
            self.audit(conn, f"{entity}.edit", entity, row_id, node, before, after)
            return {"id": row_id, **after}

    def delete_book(self, entity: str, row_id: int, *, node: str | None = None) -> Record:
        """Delete a row (and its lines: the entry bundles them, so an undo puts them back)."""
        spec = book(entity)
        with self.transaction() as conn:
            before = self._book_record(conn, spec, row_id)
            self.check_untouched(entity, [row_id])
            if spec.lines is not None:
                table, key = spec.lines
                before["lines"] = self.book_lines(entity, row_id)
                conn.execute(f"DELETE FROM {table} WHERE {key} = ?", [row_id])
            conn.execute(f"DELETE FROM {spec.table} WHERE id = ?", [row_id])
            self.audit(conn, f"{entity}.delete", entity, row_id, node, before, None)
            return {"id": row_id, **before}

    def check_untouched(self, entity: str, row_ids: Sequence[int]) -> None:
        """Refuse, naming it, a row of the book that is not what its last audit entry wrote
        (changed, or added, with sqlite3 behind zuka's back): a write resting on it, or an
        edit or delete of it (whose entry, and so an undo, would carry the outside values
        onto the chain as zuka's), must wait until somebody checked it (`zuka audit
        accept`). The whole ledger's check is leases.ledger.rowaudit's."""
        spec = book(entity)
        for row_id in row_ids:
            rows = self.rows(f"SELECT * FROM {spec.table} WHERE id = ?", [row_id])
            if not rows:
                continue
            now = {k: v for k, v in rows[0].items() if k != "id"}
            if spec.lines is not None:
                now["lines_hash"], now["line_count"] = lines_digest(self.conn, spec, row_id)
            last = self.conn.execute(
                "SELECT id, after FROM audit WHERE entity = ? AND entity_id = ?"
                " ORDER BY id DESC LIMIT 1",
                [entity, row_id],
            ).fetchone()
            logged = json.loads(last[1]) if last is not None and last[1] is not None else None
            fix = _("check it, then take it as it is with zuka audit accept {entity} {id}").format(
                entity=entity, id=row_id
            )
            what = entity.replace("_", " ")
            if not isinstance(logged, dict):
                raise InputError(
                    what,
                    row_id,
                    _(
                        "is in the ledger but no audit entry wrote it: added outside zuka; {fix}"
                    ).format(fix=fix),
                )
            logged.pop("lines", None)
            plain = json.loads(json.dumps(now, ensure_ascii=False, default=str))
            differ = [k for k in plain if logged.get(k) != plain[k]]
            if differ:
                k = differ[0]
                raise InputError(
                    what,
                    row_id,
                    _(
                        "was changed outside zuka since audit entry {last} ({k} {dumps} on the"
                        " audit "
                        "log, {dumps2} in the table): nothing was written; {fix}"
                    ).format(
                        last=last[0],
                        k=k,
                        dumps=visible(json.dumps(logged.get(k), ensure_ascii=False), 40),
                        dumps2=visible(json.dumps(plain[k], ensure_ascii=False), 40),
                        fix=fix,
                    ),
                )

    def _book_record(self, conn: sqlite3.Connection, spec: Book, row_id: int) -> Record:
        rows = self.rows(f"SELECT * FROM {spec.table} WHERE id = ?", [row_id])
        if not rows:
            raise InputError(
                spec.entity,
                row_id,
                _("no {replace} of that id").format(replace=spec.entity.replace("_", " ")),
            )
        return {k: v for k, v in rows[0].items() if k != "id"}

    def _insert_book(
        self,
        conn: sqlite3.Connection,
        entity: str,
        rec: Mapping[str, Any],
        *,
        lines: Sequence[Mapping[str, Any]] = (),
        node: str | None = None,
    ) -> Record:
        spec = book(entity)
        checked_lines: list[Record] = []
        if spec.lines is not None:
            for i, line in enumerate(lines):
                try:
                    checked_lines.append(books.check_bill_line(line))
                except InputError as exc:
                    raise InputError(
                        _("line {line}: {field}").format(line=i + 1, field=exc.field),
                        exc.value,
                        exc.reason,
                    ) from None
            rec = {**rec, "line_count": len(checked_lines), "lines_hash": books.UNHASHED}
        elif lines:
            raise InputError(entity, None, _("has no lines"))
        out = spec.check(rec)
        for rule in spec.rules:
            rule(self, out, None)
        cols = ", ".join(f'"{k}"' for k in out)
        cur = conn.execute(
            f"INSERT INTO {spec.table} ({cols}) VALUES ({', '.join('?' * len(out))})",
            list(out.values()),
        )
        row_id = int(cur.lastrowid or 0)
        if spec.lines is not None:
            put_lines(conn, spec, row_id, checked_lines)
            out["lines_hash"] = lines_digest(conn, spec, row_id)[0]
            conn.execute(
                f"UPDATE {spec.table} SET lines_hash = ? WHERE id = ?", [out["lines_hash"], row_id]
            )
        self.audit(conn, f"{entity}.add", entity, row_id, node, None, out)
        return {"id": row_id, **out}

    # -- export / import: a row's lease by its node and start, its provider by name -------

    def book_exports(self) -> dict[str, list[Record]]:
        """Every book's records as an export holds them."""
        providers = dict(self.conn.execute("SELECT id, name FROM providers").fetchall())
        leases = {le.id: le for le in self.leases()}
        out: dict[str, list[Record]] = {}
        for entity, spec in BOOKS.items():
            recs = []
            for row in self.book_rows(entity):
                rec = {k: v for k, v in row.items() if k != "id"}
                if "provider_id" in rec:
                    rec["provider"] = providers.get(rec.pop("provider_id"))
                if "lease_id" in rec:
                    le = leases.get(rec.pop("lease_id"))
                    rec["node"] = None if le is None else le.node
                    rec["lease_start"] = None if le is None else le.start.isoformat()
                if spec.lines is not None:
                    rec["lines"] = self.book_lines(entity, int(row["id"]))
                    rec.pop("line_count", None)
                    rec.pop("lines_hash", None)
                recs.append(rec)
            out[spec.table] = recs
        return out

    def _import_book(self, conn: sqlite3.Connection, entity: str, rec: Mapping[str, Any]) -> None:
        """An exported book record added to this ledger, its names read back as ids."""
        row = dict(rec)
        node = row.pop("node", None)
        start = row.pop("lease_start", None)
        if "provider" in row and entity != "offer":
            row["provider_id"] = self.provider_id(conn, row.pop("provider") or None)
        if node is not None or start is not None:
            row["lease_id"] = self.lease_for(str(node), start).id
        lines = row.pop("lines", ()) or ()
        self._insert_book(
            conn, entity, row, lines=lines, node=node if isinstance(node, str) else None
        )


def lines_digest(conn: sqlite3.Connection, spec: Book, row_id: int) -> tuple[str, int]:
    """The SHA-256 of a row's lines as stored (books.lines_sql), and how many there are."""
    assert spec.lines is not None
    h = hashlib.sha256()
    n = 0
    for (raw,) in conn.execute(books.lines_sql(*spec.lines), [row_id]):
        h.update(raw)
        n += 1
    return h.hexdigest(), n


def put_lines(
    conn: sqlite3.Connection, spec: Book, row_id: int, lines: Sequence[Mapping[str, Any]]
) -> None:
    """Write a row's child lines (checked records) under its id."""
    assert spec.lines is not None
    table, key = spec.lines
    for line in lines:
        row = {key: row_id, **{k: line.get(k) for k in books.BILL_LINE_COLUMNS}}
        cols = ", ".join(f'"{k}"' for k in row)
        conn.execute(
            f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
